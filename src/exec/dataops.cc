// Data type helpers, fp16/bf16 conversions and the run-time choice of the
// reduce kernels' instruction set (see dataops_kernels.h for the kernels).
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif
#include "src/exec/dataops.h"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <type_traits>

#include "base/config.h"
#include "src/exec/dataops_kernels.h"

namespace hoccl {

const char* dtypeName(DType t) {
  switch (t) {
    case DType::Int8: return "int8";
    case DType::Uint8: return "uint8";
    case DType::Int32: return "int32";
    case DType::Uint32: return "uint32";
    case DType::Int64: return "int64";
    case DType::Uint64: return "uint64";
    case DType::Float16: return "half";
    case DType::Float32: return "float";
    case DType::Float64: return "double";
    case DType::Bfloat16: return "bfloat16";
    case DType::Float8e4m3: return "f8e4m3";
    case DType::Float8e5m2: return "f8e5m2";
  }
  return "unknown";
}

const char* redOpName(RedOp op) {
  switch (op) {
    case RedOp::Sum: return "sum";
    case RedOp::Prod: return "prod";
    case RedOp::Max: return "max";
    case RedOp::Min: return "min";
    case RedOp::Avg: return "avg";
    case RedOp::PreMulSum: return "premulsum";
  }
  return "unknown";
}

const char* isaName(Isa isa) {
  switch (isa) {
    case Isa::Scalar: return "scalar";
    case Isa::Avx2: return "avx2";
    case Isa::Avx512: return "avx512";
  }
  return "unknown";
}

float halfToFloat(uint16_t h) { return fpbits::halfBitsToFloat<uint32_t, float>(h); }
uint16_t floatToHalf(float f) {
  return static_cast<uint16_t>(fpbits::floatToHalfBits<uint32_t, float>(f));
}
float bf16ToFloat(uint16_t b) { return fpbits::bf16BitsToFloat<uint32_t, float>(b); }
uint16_t floatToBf16(float f) {
  return static_cast<uint16_t>(fpbits::floatToBf16Bits<uint32_t, float>(f));
}

float fp8e4m3ToFloat(uint8_t x) { return fpbits::fp8ToFloat<fpbits::E4m3>(x); }
float fp8e5m2ToFloat(uint8_t x) { return fpbits::fp8ToFloat<fpbits::E5m2>(x); }
uint8_t floatToFp8e4m3(float f) { return fpbits::floatToFp8<fpbits::E4m3>(f); }
uint8_t floatToFp8e5m2(float f) { return fpbits::floatToFp8<fpbits::E5m2>(f); }

namespace {

// Integers multiply as unsigned, so they wrap without undefined behaviour.
template <typename T>
void scaleInts(void* out, const void* in, size_t n, const void* scalar) {
  using U = std::make_unsigned_t<T>;
  U s;
  memcpy(&s, scalar, sizeof s);
  const T* src = static_cast<const T*>(in);
  T* dst = static_cast<T*>(out);
  for (size_t i = 0; i < n; ++i) dst[i] = static_cast<T>(static_cast<U>(static_cast<U>(src[i]) * s));
}

template <typename T>
void scaleFloats(void* out, const void* in, size_t n, const void* scalar) {
  T s;
  memcpy(&s, scalar, sizeof s);
  const T* src = static_cast<const T*>(in);
  T* dst = static_cast<T*>(out);
  for (size_t i = 0; i < n; ++i) dst[i] = src[i] * s;
}

// 8- and 16-bit floats: the product of two of them is exact in fp32, so
// one rounding to the type gives the correctly rounded product.
template <typename Bits, float (*toFloat)(Bits), Bits (*fromFloat)(float)>
void scaleNarrow(void* out, const void* in, size_t n, const void* scalar) {
  Bits sb;
  memcpy(&sb, scalar, sizeof sb);
  const float s = toFloat(sb);
  const Bits* src = static_cast<const Bits*>(in);
  Bits* dst = static_cast<Bits*>(out);
  for (size_t i = 0; i < n; ++i) dst[i] = fromFloat(toFloat(src[i]) * s);
}

}  // namespace

void scaleElements(DType t, void* out, const void* in, size_t n, const void* scalar) {
  switch (t) {
    case DType::Int8: return scaleInts<int8_t>(out, in, n, scalar);
    case DType::Uint8: return scaleInts<uint8_t>(out, in, n, scalar);
    case DType::Int32: return scaleInts<int32_t>(out, in, n, scalar);
    case DType::Uint32: return scaleInts<uint32_t>(out, in, n, scalar);
    case DType::Int64: return scaleInts<int64_t>(out, in, n, scalar);
    case DType::Uint64: return scaleInts<uint64_t>(out, in, n, scalar);
    case DType::Float16: return scaleNarrow<uint16_t, halfToFloat, floatToHalf>(out, in, n, scalar);
    case DType::Float32: return scaleFloats<float>(out, in, n, scalar);
    case DType::Float64: return scaleFloats<double>(out, in, n, scalar);
    case DType::Bfloat16: return scaleNarrow<uint16_t, bf16ToFloat, floatToBf16>(out, in, n, scalar);
    case DType::Float8e4m3: return scaleNarrow<uint8_t, fp8e4m3ToFloat, floatToFp8e4m3>(out, in, n, scalar);
    case DType::Float8e5m2: return scaleNarrow<uint8_t, fp8e5m2ToFloat, floatToFp8e5m2>(out, in, n, scalar);
  }
}

void copyBytes(void* dst, const void* src, size_t bytes) {
  if (bytes != 0 && dst != src) std::memcpy(dst, src, bytes);
}

namespace {

#if defined(__x86_64__) || defined(__i386__)
// F16C from CPUID leaf 1 (ECX bit 29): clang before 15 does not know
// __builtin_cpu_supports("f16c"). The OS check for the ymm state is in
// the "avx2" test above it.
bool cpuHasF16c() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  return __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C);
}
#endif

Isa detectIsa() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  // libgcc's checks include the OS (XCR0) enabling the ymm / zmm state.
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && cpuHasF16c();
  if (!avx2) return Isa::Scalar;
  const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
  return avx512 ? Isa::Avx512 : Isa::Avx2;
#else
  return Isa::Scalar;
#endif
}

bool equalsIgnoreCase(const char* a, const char* b) {
  for (; *a && *b; ++a, ++b) {
    char x = *a, y = *b;
    if (x >= 'A' && x <= 'Z') x = static_cast<char>(x - 'A' + 'a');
    if (y >= 'A' && y <= 'Z') y = static_cast<char>(y - 'A' + 'a');
    if (x != y) return false;
  }
  return *a == *b;
}

std::atomic<const DataOps*> gForced{nullptr};

}  // namespace

Isa bestSupportedIsa() {
  static const Isa best = detectIsa();
  return best;
}

Isa resolveIsaRequest(const char* request, Isa best) {
  if (request == nullptr) return best;
  Isa want;
  if (equalsIgnoreCase(request, "scalar")) {
    want = Isa::Scalar;
  } else if (equalsIgnoreCase(request, "avx2")) {
    want = Isa::Avx2;
  } else if (equalsIgnoreCase(request, "avx512")) {
    want = Isa::Avx512;
  } else {
    return best;
  }
  return static_cast<uint8_t>(want) <= static_cast<uint8_t>(best) ? want : best;
}

const DataOps* dataOpsFor(Isa isa) {
  const Isa best = bestSupportedIsa();
  if (static_cast<uint8_t>(isa) > static_cast<uint8_t>(best)) return nullptr;
  switch (isa) {
    case Isa::Scalar: return &dataOpsScalar();
    case Isa::Avx2: return &dataOpsAvx2();
    case Isa::Avx512: return &dataOpsAvx512();
  }
  return nullptr;
}

void setForcedIsa(Isa isa) {
  gForced.store(dataOpsFor(resolveIsaRequest(isaName(isa), bestSupportedIsa())),
                std::memory_order_release);
}

void clearForcedIsa() { gForced.store(nullptr, std::memory_order_release); }

const DataOps& dataOps() {
  if (const DataOps* forced = gForced.load(std::memory_order_acquire)) return *forced;
  static const DataOps* const chosen =
      dataOpsFor(resolveIsaRequest(processSettings()->values().isa.c_str(), bestSupportedIsa()));
  return *chosen;
}

}  // namespace hoccl
