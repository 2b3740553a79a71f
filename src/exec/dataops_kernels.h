// Private to src/exec: the per-ISA table constructors, the fp16/bf16 bit
// conversions shared by every translation unit, and the reduce kernels.
//
// The kernels are written once with GCC vector extensions and compiled three
// times (dataops_scalar.cc, dataops_avx2.cc, dataops_avx512.cc), each with its
// own target flags and vector width. Everything below lives in an anonymous
// namespace so that every translation unit keeps its own copy: a shared
// (COMDAT) template instance could otherwise be taken by the linker from the
// AVX-512 object and run on a CPU without AVX-512.
//
// Bit-identical results across ISAs: every kernel is element-wise (no
// reassociation, no fused multiply-add, no reciprocal), every element (tails
// included) goes through the same vector code, and the software fp16
// conversion reproduces the F16C instructions bit for bit (NaN included).
//
// Bit-identical results across operand orders (ranks of a recursive-doubling
// all-reduce each compute received (op) own, so a rank and its partner
// combine the same two values in opposite orders): every floating op is
// commutative bit for bit, with the values CUDA gives NCCL (fmaxf/fminf,
// __hmax/__hmin, the GPU's add and multiply; docs/datatypes.md):
//  - a NaN result is the canonical NaN, sign clear, exponent and mantissa
//    all ones (float 0x7fffffff, double 0x7fff...f, half/bf16 0x7fff, fp8
//    0x7f), whatever NaNs went in: x86 would return the first operand's
//    payload;
//  - max/min: a NaN operand gives the other one (two NaNs: the canonical
//    NaN), and +0 counts as greater than -0.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <utility>
#include <type_traits>

#include "src/exec/dataops.h"

namespace hoccl {

const DataOps& dataOpsScalar();
const DataOps& dataOpsAvx2();   // only call when the CPU supports AVX2+FMA+F16C
const DataOps& dataOpsAvx512(); // only call when the CPU supports AVX-512 F/BW/VL/DQ

// Resolves a HOCCL_ISA value ("scalar", "avx2", "avx512"; case-insensitive)
// against the best supported ISA: a null, empty, unknown or unsupported
// request gives `best`.
Isa resolveIsaRequest(const char* request, Isa best);
// Overrides HOCCL_ISA for later dataOps() calls (clamped to what the CPU
// supports); clearForcedIsa() returns to the environment's choice.
void setForcedIsa(Isa isa);
void clearForcedIsa();

namespace {
namespace fpbits {

// Works for uint32_t/float scalars and for GCC vectors of them alike: scalar
// operands broadcast, comparisons give bool or a lane mask, `?:` selects.
template <class U>
inline U splat(uint32_t k) { return U{} + k; }

// Half bits (in the low 16 bits of each lane) to float. NaNs are quieted and
// keep their payload, as VCVTPH2PS does.
template <class U, class F>
inline F halfBitsToFloat(U h) {
  U a = h & 0x7fffu;
  U sign = (h & 0x8000u) << 16;
  U sh = a << 13;
  U normal = sh + 0x38000000u;  // exponent 15-bias -> 127-bias
  U quiet = (a > 0x7c00u) ? splat<U>(0x00400000u) : splat<U>(0);
  U infNan = (sh + 0x70000000u) | quiet;
  // Subnormal: a * 2^-24, done exactly (2^23 + a, minus 2^23, scaled by 2^-24).
  F m = __builtin_bit_cast(F, a | 0x4b000000u) - 8388608.0f;
  U sub = __builtin_bit_cast(U, m * 0x1p-24f);
  U r = (a >= 0x7c00u) ? infNan : ((a >= 0x0400u) ? normal : sub);
  return __builtin_bit_cast(F, r | sign);
}

// Float to half bits (low 16 bits of each lane), round to nearest even;
// overflow gives inf, NaN gives a quiet NaN with the top payload bits, as
// VCVTPS2PH with imm 0 does.
template <class U, class F>
inline U floatToHalfBits(F f) {
  U u = __builtin_bit_cast(U, f);
  U sign = (u >> 16) & 0x8000u;
  U a = u & 0x7fffffffu;
  U nan = ((a >> 13) & 0x3ffu) | 0x7e00u;
  U normal = (a - 0x38000000u + 0xfffu + ((a >> 13) & 1u)) >> 13;
  // Below 2^-14: adding 0.5 leaves an ulp of 2^-24, so the float adder does
  // the round-to-nearest-even for us (exact for every input, including
  // float subnormals, which all round to zero).
  U sub = __builtin_bit_cast(U, __builtin_bit_cast(F, a) + 0.5f) - 0x3f000000u;
  U r = (a > 0x7f800000u) ? nan
        : ((a >= 0x477ff000u) ? splat<U>(0x7c00u)  // >= 65520 rounds to inf
                              : ((a >= 0x38800000u) ? normal : sub));
  return r | sign;
}

template <class U, class F>
inline F bf16BitsToFloat(U b) { return __builtin_bit_cast(F, b << 16); }

template <class U, class F>
inline U floatToBf16Bits(F f) {
  U u = __builtin_bit_cast(U, f);
  U rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  U nan = (u >> 16) | 0x40u;
  return ((u & 0x7fffffffu) > 0x7f800000u) ? nan : rounded;
}

// ---- fp8 (OCP E4M3 / E5M2), one element at a time -------------------------
// The rules are those of CUDA's __nv_cvt_float_to_fp8 with __NV_SATFINITE and
// __nv_cvt_fp8_to_halfraw (cuda_fp8.hpp), which NCCL's fp8 reductions use
// through the __nv_fp8_e4m3 / __nv_fp8_e5m2 constructors (docs/datatypes.md).
struct E4m3 {
  static constexpr int kMan = 3;                  // mantissa bits
  static constexpr int kBias = 7;
  static constexpr uint32_t kMaxFinite = 0x7eu;   // 448
  static constexpr float kSubnormalUlp = 0x1p-9f; // 2^(1 - bias - kMan)
};
struct E5m2 {
  static constexpr int kMan = 2;
  static constexpr int kBias = 15;
  static constexpr uint32_t kMaxFinite = 0x7bu;   // 57344
  static constexpr float kSubnormalUlp = 0x1p-16f;
};

template <class Fmt>
inline bool fp8IsNan(uint32_t x) {
  const uint32_t a = x & 0x7fu;
  return Fmt::kMan == 3 ? a == 0x7fu : a > 0x7cu;
}

// Exact; every NaN becomes the canonical quiet NaN (positive, all payload
// bits set), as CUDA's fp8 -> half conversion gives 0x7fff.
template <class Fmt>
inline float fp8ToFloat(uint8_t x) {
  if (fp8IsNan<Fmt>(x)) return __builtin_bit_cast(float, 0x7fffe000u);
  const uint32_t a = x & 0x7fu, sign = static_cast<uint32_t>(x & 0x80u) << 24;
  const uint32_t e = a >> Fmt::kMan, m = a & ((1u << Fmt::kMan) - 1);
  uint32_t r;
  if (Fmt::kMan == 2 && e == 31) {
    r = 0x7f800000u;  // E5M2 infinity (E4M3 has none)
  } else if (e != 0) {
    r = ((e - Fmt::kBias + 127) << 23) | (m << (23 - Fmt::kMan));
  } else {
    r = __builtin_bit_cast(uint32_t, static_cast<float>(m) * Fmt::kSubnormalUlp);
  }
  return __builtin_bit_cast(float, r | sign);
}

// Round to nearest even; beyond the largest finite value (infinity
// included) saturate to it; NaN stays NaN (E4M3: S.1111.111; E5M2:
// S.11111.1x with x the float's second payload bit); the sign is kept.
template <class Fmt>
inline uint8_t floatToFp8(float f) {
  const uint32_t u = __builtin_bit_cast(uint32_t, f);
  const uint32_t sign = (u >> 24) & 0x80u, a = u & 0x7fffffffu;
  if (a > 0x7f800000u)
    return static_cast<uint8_t>(sign | (Fmt::kMan == 3 ? 0x7fu : (0x7eu | ((a >> 21) & 1u))));
  if (a < 0x00800000u) return static_cast<uint8_t>(sign);  // float subnormals are far below fp8's
  const int e = static_cast<int>(a >> 23) - 127;
  const int minNormal = 1 - Fmt::kBias;
  const uint64_t sig = (a & 0x7fffffu) | 0x800000u;  // 1.m as an integer, 24 bits
  // Keep kMan fraction bits (normal) or fewer (subnormal); the kept integer
  // is the fp8 code without its sign: for normals the implicit 1 lands in
  // the exponent field's lowest bit, so adding the biased exponent minus one
  // there gives the code, and a carry out of the mantissa moves the exponent.
  const int shift = 23 - Fmt::kMan + (e < minNormal ? minNormal - e : 0);
  if (shift > 25) return static_cast<uint8_t>(sign);  // below half the smallest subnormal
  uint64_t q = sig >> shift;
  const uint64_t rem = sig & ((uint64_t{1} << shift) - 1), halfUlp = uint64_t{1} << (shift - 1);
  if (rem > halfUlp || (rem == halfUlp && (q & 1u))) ++q;
  if (e >= minNormal) q += static_cast<uint64_t>(e - minNormal) << Fmt::kMan;
  if (q > Fmt::kMaxFinite) q = Fmt::kMaxFinite;  // satfinite (infinity included)
  return static_cast<uint8_t>(sign | q);
}

}  // namespace fpbits
}  // namespace
}  // namespace hoccl

#ifdef HOCCL_KERNEL_VEC_BYTES
// ---------------------------------------------------------------------------
// Kernels: only in the three ISA translation units, which define
// HOCCL_KERNEL_VEC_BYTES (16, 32 or 64) and HOCCL_KERNEL_F16C (0: software
// fp16 conversion, 1: F16C ymm, 2: AVX-512 zmm).
#if HOCCL_KERNEL_F16C
#include <immintrin.h>
#endif

namespace hoccl {
namespace {

constexpr size_t kVB = HOCCL_KERNEL_VEC_BYTES;

template <class T, size_t B = kVB>
struct VecOf {
  typedef T type __attribute__((vector_size(B)));
};
using VF = VecOf<float>::type;
using VU32 = VecOf<uint32_t>::type;

template <class V>
inline V loadu(const char* p) {
  V v;
  __builtin_memcpy(&v, p, sizeof v);
  return v;
}
template <class V>
inline void storeu(char* p, V v) { __builtin_memcpy(p, &v, sizeof v); }

// ---- Element-wise operations on vectors of T ------------------------------
// Integers go through the unsigned type so that overflow wraps.
template <class V, class T>
using UnsignedVec = typename VecOf<std::make_unsigned_t<T>, sizeof(V)>::type;

// Any NaN lane becomes the canonical NaN (see the top of this file). Its
// bits are the largest signed integer of the lane's width, which is also
// the mask type of a comparison of V.
template <class V>
inline V canonicalNan(V r) {
  using M = decltype(r != r);
  using Lane = std::decay_t<decltype(std::declval<M>()[0])>;
  return (r != r) ? (V)(M{} + std::numeric_limits<Lane>::max()) : r;
}

// Sum and product: integers wrap (computed unsigned, so no overflow UB),
// floats canonicalise a NaN result, so that neither the operand order nor
// the compiler's choice of it (it swaps commutative operands, differently
// per ISA) shows in the bits. Fn is std::plus<> or std::multiplies<>,
// inlined like the operator it names.
template <class T, class Fn>
struct OpArith {
  template <class V>
  static V apply(V a, V b) {
    if constexpr (std::is_integral_v<T>) {
      using UV = UnsignedVec<V, T>;
      return (V)Fn{}((UV)a, (UV)b);
    } else {
      return canonicalNan(Fn{}(a, b));
    }
  }
};
template <class T>
using OpSum = OpArith<T, std::plus<>>;
template <class T>
using OpProd = OpArith<T, std::multiplies<>>;

// Max and min. For floats, the select (a > b) ? a : b (x86's maxps; minps
// for <) gives b when the operands are unordered or equal, so it is taken
// both ways round: x = max(a, b) is NaN exactly where b is, y = max(b, a)
// where a is, and where neither is NaN they differ only for +0 against -0.
// A NaN side is replaced by the identity of the bitwise op that joins the
// two -- all ones for max's AND, zero for min's OR -- so the other side
// passes through, and AND gives +0 from +0 and -0, OR gives -0. Where both
// are NaN the result is the canonical NaN. Ten plain instructions (no
// blend: SSE2 has none), no branch, the same on every ISA.
template <class T, bool kMax>
struct OpMaxMin {
  template <class V>
  static V apply(V a, V b) {
    if constexpr (std::is_integral_v<T>) {
      return (kMax ? a > b : a < b) ? a : b;
    } else {
      using M = decltype(a > b);
      const V x = kMax ? ((a > b) ? a : b) : ((a < b) ? a : b);
      const V y = kMax ? ((b > a) ? b : a) : ((b < a) ? b : a);
      using UM = UnsignedVec<M, std::decay_t<decltype(std::declval<M>()[0])>>;
      const UM nx = (UM)(x != x), ny = (UM)(y != y), both = nx & ny;
      constexpr int kTop = 8 * sizeof(x[0]) - 1;
      // Two NaNs: max's all ones loses its sign bit, min's zero gains the
      // others; either way the canonical NaN.
      return kMax ? (V)((((UM)x | nx) & ((UM)y | ny)) ^ (both << kTop))
                  : (V)((((UM)x & ~nx) | ((UM)y & ~ny)) | (both >> 1));
    }
  }
};
template <class T>
using OpMax = OpMaxMin<T, true>;
template <class T>
using OpMin = OpMaxMin<T, false>;

// ---- Lane policies ------------------------------------------------------------
// A policy loads kLanes elements (kLanes * kElem bytes) into a value V, applies
// an op or the avg division to it, and stores it back.
template <class T>
struct PlainLanes {
  using V = typename VecOf<T>::type;
  static constexpr size_t kElem = sizeof(T);
  static constexpr size_t kLanes = kVB / sizeof(T);
  static V load(const char* p) { return loadu<V>(p); }
  static void store(char* p, V v) { storeu(p, v); }
  template <class Op>
  static V op(V a, V b) { return Op::apply(a, b); }
  template <class E>
  static V div(V a, E d) { return canonicalNan(a / d); }  // floats only
};

// 16-bit floats converted with integer arithmetic (bf16 everywhere, fp16 in
// the scalar build): one vector of 32-bit lanes holds two elements per lane,
// which become two float vectors (even and odd elements) with plain shifts and
// masks, so no lane-crossing widening or narrowing is needed.
template <class Conv>
struct PairLanes {
  struct V { VF even, odd; };
  static constexpr size_t kElem = 2;
  static constexpr size_t kLanes = kVB / 2;
  static V load(const char* p) {
    VU32 u = loadu<VU32>(p);
    return {Conv::toFloat(u & 0xffffu), Conv::toFloat(u >> 16)};
  }
  static void store(char* p, V v) {
    storeu(p, Conv::fromFloat(v.even) | (Conv::fromFloat(v.odd) << 16));
  }
  template <class Op>
  static V op(V a, V b) { return {Op::apply(a.even, b.even), Op::apply(a.odd, b.odd)}; }
  static V div(V a, float d) { return {canonicalNan(a.even / d), canonicalNan(a.odd / d)}; }
};
struct Bf16Conv {
  static VF toFloat(VU32 u) { return fpbits::bf16BitsToFloat<VU32, VF>(u); }
  static VU32 fromFloat(VF f) { return fpbits::floatToBf16Bits<VU32, VF>(f); }
};
struct HalfConv {
  static VF toFloat(VU32 u) { return fpbits::halfBitsToFloat<VU32, VF>(u); }
  static VU32 fromFloat(VF f) { return fpbits::floatToHalfBits<VU32, VF>(f); }
};
using Bf16Lanes = PairLanes<Bf16Conv>;

#if HOCCL_KERNEL_F16C
// fp16 through the F16C / AVX-512F conversion instructions (imm 0: round to
// nearest even, whatever MXCSR says).
struct F16cLanes : PlainLanes<float> {
  static constexpr size_t kElem = 2;
#if HOCCL_KERNEL_F16C == 2
  static V load(const char* p) {
    // The maskz forms with a full mask: the plain ones trip GCC 12's
    // -Wmaybe-uninitialized on _mm512_undefined_*().
    return (V)_mm512_maskz_cvtph_ps(static_cast<__mmask16>(0xffff),
                                    _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
  static void store(char* p, V v) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p),
                        _mm512_maskz_cvtps_ph(static_cast<__mmask16>(0xffff), (__m512)v,
                                              _MM_FROUND_TO_NEAREST_INT));
  }
#else
  static V load(const char* p) {
    return (V)_mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  static void store(char* p, V v) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p),
                     _mm256_cvtps_ph((__m256)v, _MM_FROUND_TO_NEAREST_INT));
  }
#endif
};
using Fp16Lanes = F16cLanes;
#else
using Fp16Lanes = PairLanes<HalfConv>;
#endif

// ---- Loops --------------------------------------------------------------------
// Four values per iteration, then one at a time, then the last partial one
// through zero-padded stack buffers, so that every element of every size goes
// through exactly the same vector code. All loads of a step happen before its
// stores, which keeps out == a and out == b correct.
template <class L, class Op>
void reduceKernel(void* out, const void* a, const void* b, size_t n) {
  constexpr size_t W = L::kLanes;
  constexpr size_t S = W * L::kElem;
  char* o = static_cast<char*>(out);
  const char* pa = static_cast<const char*>(a);
  const char* pb = static_cast<const char*>(b);
  size_t i = 0;
  for (; i + 4 * W <= n; i += 4 * W) {
    const size_t off = i * L::kElem;
    auto a0 = L::load(pa + off), a1 = L::load(pa + off + S);
    auto a2 = L::load(pa + off + 2 * S), a3 = L::load(pa + off + 3 * S);
    auto b0 = L::load(pb + off), b1 = L::load(pb + off + S);
    auto b2 = L::load(pb + off + 2 * S), b3 = L::load(pb + off + 3 * S);
    L::store(o + off, L::template op<Op>(a0, b0));
    L::store(o + off + S, L::template op<Op>(a1, b1));
    L::store(o + off + 2 * S, L::template op<Op>(a2, b2));
    L::store(o + off + 3 * S, L::template op<Op>(a3, b3));
  }
  for (; i + W <= n; i += W) {
    const size_t off = i * L::kElem;
    L::store(o + off, L::template op<Op>(L::load(pa + off), L::load(pb + off)));
  }
  if (i < n) {
    const size_t off = i * L::kElem, bytes = (n - i) * L::kElem;
    alignas(64) char ta[S] = {}, tb[S] = {}, to[S];
    __builtin_memcpy(ta, pa + off, bytes);
    __builtin_memcpy(tb, pb + off, bytes);
    L::store(to, L::template op<Op>(L::load(ta), L::load(tb)));
    __builtin_memcpy(o + off, to, bytes);
  }
}

// Floating avg: divide in the type's own precision (fp16/bf16 through fp32).
template <class L, class E>
void avgFloatKernel(void* out, const void* in, size_t n, int nranks) {
  constexpr size_t W = L::kLanes;
  constexpr size_t S = W * L::kElem;
  const E d = static_cast<E>(nranks < 1 ? 1 : nranks);
  char* o = static_cast<char*>(out);
  const char* p = static_cast<const char*>(in);
  size_t i = 0;
  for (; i + 2 * W <= n; i += 2 * W) {
    const size_t off = i * L::kElem;
    auto v0 = L::load(p + off), v1 = L::load(p + off + S);
    L::store(o + off, L::div(v0, d));
    L::store(o + off + S, L::div(v1, d));
  }
  for (; i + W <= n; i += W) {
    const size_t off = i * L::kElem;
    L::store(o + off, L::div(L::load(p + off), d));
  }
  if (i < n) {
    const size_t off = i * L::kElem, bytes = (n - i) * L::kElem;
    alignas(64) char t[S] = {}, to[S];
    __builtin_memcpy(t, p + off, bytes);
    L::store(to, L::div(L::load(t), d));
    __builtin_memcpy(o + off, to, bytes);
  }
}

// Integer avg: the wrapped sum divided by nranks, truncating toward zero. The
// division happens in 64 bits (signed or unsigned), where it cannot overflow
// for nranks >= 1 (INT64_MIN / 1 included).
template <class T>
void avgIntKernel(void* out, const void* in, size_t n, int nranks) {
  using W = std::conditional_t<std::is_signed_v<T>, int64_t, uint64_t>;
  const W d = static_cast<W>(nranks < 1 ? 1 : nranks);
  char* o = static_cast<char*>(out);
  const char* p = static_cast<const char*>(in);
  for (size_t i = 0; i < n; ++i) {
    T x;
    __builtin_memcpy(&x, p + i * sizeof(T), sizeof(T));
    T r = static_cast<T>(static_cast<W>(x) / d);
    __builtin_memcpy(o + i * sizeof(T), &r, sizeof(T));
  }
}

// fp8, as NCCL reduces it on sm_90 (src/device/reduce_kernel.h): both
// operands to half (exact), the op in half (__hadd, __hmul, __hmax, __hmin),
// back to fp8 with __NV_SATFINITE. Here the op runs in fp32 and is rounded to
// half once, which gives the correctly rounded half result: fp32 carries
// 24 >= 2 * 11 + 2 bits, so the double rounding is innocuous. One element at
// a time on every ISA (no fp8 vector code yet); the compiler may vectorise it.
enum class Fp8Op { Sum, Prod, Max, Min };

// __hmax / __hmin: a NaN operand gives the other operand (two NaNs: NaN), and
// +0 counts as greater than -0.
template <Fp8Op K>
inline float fp8Apply(float x, float y) {
  if constexpr (K == Fp8Op::Sum) {
    return x + y;
  } else if constexpr (K == Fp8Op::Prod) {
    return x * y;
  } else {
    if (x != x) return y;
    if (y != y) return x;
    if (x == y) return (__builtin_signbit(x) != 0) == (K == Fp8Op::Max) ? y : x;
    return (K == Fp8Op::Max) == (x > y) ? x : y;
  }
}

template <class Fmt>
inline uint8_t fp8FromOpResult(float r) {
  if (r != r) return 0x7fu;  // the GPU's canonical NaN, whatever the CPU's default NaN
  const float h = fpbits::halfBitsToFloat<uint32_t, float>(fpbits::floatToHalfBits<uint32_t, float>(r));
  return fpbits::floatToFp8<Fmt>(h);
}

template <class Fmt, Fp8Op K>
void reduceFp8Kernel(void* out, const void* a, const void* b, size_t n) {
  unsigned char* o = static_cast<unsigned char*>(out);
  const unsigned char* pa = static_cast<const unsigned char*>(a);
  const unsigned char* pb = static_cast<const unsigned char*>(b);
  for (size_t i = 0; i < n; ++i) {
    const float x = fpbits::fp8ToFloat<Fmt>(pa[i]), y = fpbits::fp8ToFloat<Fmt>(pb[i]);
    o[i] = fp8FromOpResult<Fmt>(fp8Apply<K>(x, y));
  }
}

// fp8 avg: the sum divided by nranks in fp32, rounded to fp8 once (NaN
// canonical). NCCL instead multiplies every input by fp8(1/nranks) before
// summing (docs/datatypes.md).
template <class Fmt>
void avgFp8Kernel(void* out, const void* in, size_t n, int nranks) {
  const float d = static_cast<float>(nranks < 1 ? 1 : nranks);
  unsigned char* o = static_cast<unsigned char*>(out);
  const unsigned char* p = static_cast<const unsigned char*>(in);
  for (size_t i = 0; i < n; ++i) {
    const float q = fpbits::fp8ToFloat<Fmt>(p[i]) / d;
    o[i] = q != q ? static_cast<uint8_t>(0x7fu) : fpbits::floatToFp8<Fmt>(q);
  }
}

// ---- Table ------------------------------------------------------------------
template <class L, class T>
constexpr void fillReduce(DataOps& t, DType dt) {
  auto& row = t.reduce[static_cast<int>(dt)];
  row[static_cast<int>(RedOp::Sum)] = &reduceKernel<L, OpSum<T>>;
  row[static_cast<int>(RedOp::Prod)] = &reduceKernel<L, OpProd<T>>;
  row[static_cast<int>(RedOp::Max)] = &reduceKernel<L, OpMax<T>>;
  row[static_cast<int>(RedOp::Min)] = &reduceKernel<L, OpMin<T>>;
  row[static_cast<int>(RedOp::Avg)] = &reduceKernel<L, OpSum<T>>;  // divided later
}

template <class T>
constexpr void fillInt(DataOps& t, DType dt) {
  fillReduce<PlainLanes<T>, T>(t, dt);
  t.avgFinish[static_cast<int>(dt)] = &avgIntKernel<T>;
}

template <class Fmt>
constexpr void fillFp8(DataOps& t, DType dt) {
  auto& row = t.reduce[static_cast<int>(dt)];
  row[static_cast<int>(RedOp::Sum)] = &reduceFp8Kernel<Fmt, Fp8Op::Sum>;
  row[static_cast<int>(RedOp::Prod)] = &reduceFp8Kernel<Fmt, Fp8Op::Prod>;
  row[static_cast<int>(RedOp::Max)] = &reduceFp8Kernel<Fmt, Fp8Op::Max>;
  row[static_cast<int>(RedOp::Min)] = &reduceFp8Kernel<Fmt, Fp8Op::Min>;
  row[static_cast<int>(RedOp::Avg)] = &reduceFp8Kernel<Fmt, Fp8Op::Sum>;  // divided later
  t.avgFinish[static_cast<int>(dt)] = &avgFp8Kernel<Fmt>;
}

constexpr DataOps makeDataOps(Isa isa) {
  DataOps t{};
  t.isa = isa;
  fillInt<int8_t>(t, DType::Int8);
  fillInt<uint8_t>(t, DType::Uint8);
  fillInt<int32_t>(t, DType::Int32);
  fillInt<uint32_t>(t, DType::Uint32);
  fillInt<int64_t>(t, DType::Int64);
  fillInt<uint64_t>(t, DType::Uint64);
  fillReduce<PlainLanes<float>, float>(t, DType::Float32);
  t.avgFinish[static_cast<int>(DType::Float32)] = &avgFloatKernel<PlainLanes<float>, float>;
  fillReduce<PlainLanes<double>, double>(t, DType::Float64);
  t.avgFinish[static_cast<int>(DType::Float64)] = &avgFloatKernel<PlainLanes<double>, double>;
  fillReduce<Fp16Lanes, float>(t, DType::Float16);
  t.avgFinish[static_cast<int>(DType::Float16)] = &avgFloatKernel<Fp16Lanes, float>;
  fillReduce<Bf16Lanes, float>(t, DType::Bfloat16);
  t.avgFinish[static_cast<int>(DType::Bfloat16)] = &avgFloatKernel<Bf16Lanes, float>;
  fillFp8<fpbits::E4m3>(t, DType::Float8e4m3);
  fillFp8<fpbits::E5m2>(t, DType::Float8e5m2);
  return t;
}

}  // namespace
}  // namespace hoccl

// The one line each ISA's file has after including this header: the
// accessor dataops.cc calls for that ISA's table.
#define HOCCL_DATAOPS_INSTANCE(accessor, isa)                 \
  namespace hoccl {                                           \
  const DataOps& accessor() {                                 \
    static constexpr DataOps table = makeDataOps(isa);        \
    return table;                                             \
  }                                                           \
  }
#endif  // HOCCL_KERNEL_VEC_BYTES
