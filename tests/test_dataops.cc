// Tests for src/exec/dataops: every ISA this CPU has x every type x every op
// against a per-element reference written here, bit identity across ISAs and
// across operand orders (special values: NaN, infinities, signed zeros), the
// fp16/bf16/fp8 conversions, integer avg and the ISA selection.
#include <gtest/gtest.h>
#include <immintrin.h>

#include <cfloat>
#include <cmath>
#include <cstdlib>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "src/exec/dataops.h"
#include "src/exec/dataops_kernels.h"
#include "tests/support/float_specials.h"

using namespace hoccl;

namespace {

const size_t kSizes[] = {0, 1, 7, 31, 33, 1000, 4099};
const DType kTypes[] = {DType::Int8,    DType::Uint8,   DType::Int32,   DType::Uint32,
                        DType::Int64,   DType::Uint64,  DType::Float16, DType::Float32,
                        DType::Float64, DType::Bfloat16, DType::Float8e4m3,
                        DType::Float8e5m2};
const RedOp kOps[] = {RedOp::Sum, RedOp::Prod, RedOp::Max, RedOp::Min, RedOp::Avg};

std::vector<const DataOps*> tables() {
  std::vector<const DataOps*> v;
  for (Isa isa : {Isa::Scalar, Isa::Avx2, Isa::Avx512})
    if (const DataOps* t = dataOpsFor(isa)) v.push_back(t);
  return v;
}

template <class T> T ld(const void* p, size_t i) { T v; std::memcpy(&v, static_cast<const char*>(p) + i * sizeof(T), sizeof v); return v; }
template <class T> void st(void* p, size_t i, T v) { std::memcpy(static_cast<char*>(p) + i * sizeof(T), &v, sizeof v); }
template <class To, class From> To bits(From f) { To t; std::memcpy(&t, &f, sizeof t); return t; }

// ---- Reference conversions, written independently of the library --------
double refHalfToDouble(uint16_t h) {
  int e = (h >> 10) & 31, m = h & 1023;
  double v = e == 0 ? std::ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : std::ldexp(1024 + m, e - 25);
  return (h & 0x8000) ? -v : v;
}
// Nearest half by bisection over the (monotonic) positive halves; the value
// after 0x7bff is taken as 65536 (= inf), as IEEE rounding with an unbounded
// exponent does. Ties go to the even pattern.
uint16_t refDoubleToHalf(double d) {
  uint16_t sign = std::signbit(d) ? 0x8000 : 0;
  double x = std::fabs(d);
  auto val = [](uint32_t h) { return h >= 0x7c00 ? 65536.0 : refHalfToDouble(static_cast<uint16_t>(h)); };
  if (x >= 65536.0) return sign | 0x7c00;
  uint32_t lo = 0, hi = 0x7c00;  // val(lo) <= x < val(hi)
  while (hi - lo > 1) { uint32_t mid = (lo + hi) / 2; (val(mid) <= x ? lo : hi) = mid; }
  double d1 = x - val(lo), d2 = val(hi) - x;
  uint32_t h = d1 < d2 ? lo : d2 < d1 ? hi : ((lo & 1) ? hi : lo);
  return static_cast<uint16_t>(sign | h);
}
uint16_t refFloatToHalf(float f) {
  uint32_t u = bits<uint32_t>(f);
  if (std::isnan(f)) return static_cast<uint16_t>(((u >> 16) & 0x8000) | 0x7e00 | ((u >> 13) & 0x3ff));
  return refDoubleToHalf(static_cast<double>(f));
}
uint16_t refFloatToBf16(float f) {
  uint32_t u = bits<uint32_t>(f);
  if (std::isnan(f)) return static_cast<uint16_t>((u >> 16) | 0x40);
  uint32_t t = (u >> 16) & 0x7fff, sign = (u >> 16) & 0x8000;
  double x = std::fabs(static_cast<double>(f));
  double lo = bits<float>(t << 16);
  double hi = t + 1 >= 0x7f80 ? std::ldexp(1.0, 128) : bits<float>((t + 1) << 16);
  if (t >= 0x7f80) return static_cast<uint16_t>(u >> 16);  // inf
  double d1 = x - lo, d2 = hi - x;
  uint32_t r = d1 < d2 ? t : d2 < d1 ? t + 1 : ((t & 1) ? t + 1 : t);
  return static_cast<uint16_t>(sign | r);
}
float refBf16ToFloat(uint16_t b) { return bits<float>(static_cast<uint32_t>(b) << 16); }

// fp8 from the OCP definitions: E4M3 (bias 7, no inf, S.1111.111 NaN, max
// 448) and E5M2 (bias 15, IEEE-like inf/NaN, max 57344).
bool isE5m2(DType t) { return t == DType::Float8e5m2; }
bool refFp8IsNan(uint8_t x, bool e5m2) { return e5m2 ? (x & 0x7f) > 0x7c : (x & 0x7f) == 0x7f; }
double refFp8ToDouble(uint8_t x, bool e5m2) {
  const int man = e5m2 ? 2 : 3, bias = e5m2 ? 15 : 7;
  const int e = (x & 0x7f) >> man, m = x & ((1 << man) - 1);
  double v;
  if (refFp8IsNan(x, e5m2)) v = NAN;
  else if (e5m2 && e == 31) v = INFINITY;
  else if (e == 0) v = std::ldexp(m, 1 - bias - man);
  else v = std::ldexp((1 << man) + m, e - bias - man);
  return (x & 0x80) ? -v : v;
}
// By exhaustion: the nearest finite fp8 of x's sign, ties to the even code;
// at or beyond the largest finite value (inf included), that value
// (CUDA's __NV_SATFINITE). Not for NaN.
uint8_t refDoubleToFp8(double x, bool e5m2) {
  const uint8_t sign = std::signbit(x) ? 0x80 : 0;
  const double ax = std::fabs(x), maxFinite = e5m2 ? 57344.0 : 448.0;
  if (ax >= maxFinite) return static_cast<uint8_t>(sign | (e5m2 ? 0x7b : 0x7e));
  int best = -1;
  double bestD = INFINITY;
  for (int c = 0; c < 128; ++c) {
    double v = refFp8ToDouble(static_cast<uint8_t>(c), e5m2);
    if (!std::isfinite(v)) continue;
    double d = std::fabs(ax - v);
    if (d < bestD || (d == bestD && (c & 1) == 0)) { best = c; bestD = d; }
  }
  return static_cast<uint8_t>(sign | best);
}
// NCCL's fp8 reduce (sm_90): to half, __hadd/__hmul/__hmax/__hmin, back to
// fp8 with satfinite; a NaN result is the canonical 0x7f. Computed here
// exactly in double, rounded to half once, then to fp8.
uint8_t refFp8Op(RedOp op, uint8_t a, uint8_t b, bool e5m2) {
  double x = refFp8ToDouble(a, e5m2), y = refFp8ToDouble(b, e5m2), r;
  if (op == RedOp::Max || op == RedOp::Min) {
    bool max = op == RedOp::Max;
    if (std::isnan(x)) r = y;
    else if (std::isnan(y)) r = x;
    else if (x == 0 && y == 0) r = (max ? (std::signbit(x) && std::signbit(y)) : (std::signbit(x) || std::signbit(y))) ? -0.0 : 0.0;
    else r = max ? std::max(x, y) : std::min(x, y);
  } else {
    r = op == RedOp::Prod ? x * y : x + y;  // exact in double for any two fp8 values
  }
  if (std::isnan(r)) return 0x7f;
  return refDoubleToFp8(refHalfToDouble(refDoubleToHalf(r)), e5m2);
}
uint8_t refFp8Avg(uint8_t a, int n, bool e5m2) {
  double x = refFp8ToDouble(a, e5m2);
  return std::isnan(x) ? 0x7f : refDoubleToFp8(x / n, e5m2);
}

// ---- Reference reduce / avg, one element ----------------------------------
// The NaN a GPU produces: sign clear, exponent and mantissa all ones.
template <class T> T canonicalNan() {
  using U = std::conditional_t<sizeof(T) == 8, uint64_t, uint32_t>;
  return bits<T>(static_cast<U>(~U{0} >> 1));
}
template <class T> T canonical(T r) { return std::isnan(r) ? canonicalNan<T>() : r; }

// Floats as NCCL computes them on the GPU: fmaxf/fminf (a NaN operand gives
// the other one, +0 > -0) and the GPU's add and multiply, whose NaN results
// are all the canonical NaN.
template <class T> T refOp(RedOp op, T a, T b) {
  if constexpr (std::is_integral_v<T>) {  // wrap: arithmetic modulo 2^64, then truncate
    if (op == RedOp::Max) return a > b ? a : b;
    if (op == RedOp::Min) return a < b ? a : b;
    uint64_t ua = static_cast<uint64_t>(a), ub = static_cast<uint64_t>(b);
    return static_cast<T>(op == RedOp::Prod ? ua * ub : ua + ub);
  } else if (op == RedOp::Max || op == RedOp::Min) {
    const bool max = op == RedOp::Max;
    if (std::isnan(a)) return canonical(b);
    if (std::isnan(b)) return a;
    if (a == b) return std::signbit(a) == max ? b : a;  // max keeps +0, min -0
    return (a > b) == max ? a : b;
  } else {
    return canonical(op == RedOp::Prod ? a * b : a + b);
  }
}
template <class T> T refAvg(T x, int n) {  // integers: exact quotient truncated toward zero
  if constexpr (std::is_integral_v<T>) return static_cast<T>(static_cast<__int128>(x) / n);
  else return canonical(x / static_cast<T>(n));
}

// Writes element i of the reference (reduce when nranks == 0, else avg of a).
void refElem(DType t, RedOp op, const void* a, const void* b, void* out, size_t i, int nranks) {
  auto run = [&](auto tag) {
    using T = decltype(tag);
    st<T>(out, i, nranks ? refAvg(ld<T>(a, i), nranks) : refOp(op, ld<T>(a, i), ld<T>(b, i)));
  };
  switch (t) {
    case DType::Int8: return run(int8_t{});
    case DType::Uint8: return run(uint8_t{});
    case DType::Int32: return run(int32_t{});
    case DType::Uint32: return run(uint32_t{});
    case DType::Int64: return run(int64_t{});
    case DType::Uint64: return run(uint64_t{});
    case DType::Float32: return run(float{});
    case DType::Float64: return run(double{});
    case DType::Float16: case DType::Bfloat16: {
      bool h = t == DType::Float16;
      auto toF = [&](uint16_t x) { return h ? static_cast<float>(refHalfToDouble(x)) : refBf16ToFloat(x); };
      float fa = toF(ld<uint16_t>(a, i));
      float r = nranks ? refAvg(fa, nranks) : refOp(op, fa, toF(ld<uint16_t>(b, i)));
      st<uint16_t>(out, i, h ? refFloatToHalf(r) : refFloatToBf16(r));
      return;
    }
    case DType::Float8e4m3: case DType::Float8e5m2: {
      uint8_t x = ld<uint8_t>(a, i);
      st<uint8_t>(out, i, nranks ? refFp8Avg(x, nranks, isE5m2(t)) : refFp8Op(op, x, ld<uint8_t>(b, i), isE5m2(t)));
      return;
    }
  }
}

// Random bytes; for the floating types, mostly "nice" values (so that the ops
// do real arithmetic) mixed with arbitrary bit patterns (NaN, inf, subnormal).
void fillRandom(DType t, void* p, size_t n, std::mt19937_64& rng) {
  size_t es = dtypeSize(t);
  for (size_t i = 0; i < n; ++i) {
    uint64_t r = rng();
    bool raw = (r & 7) == 0;
    double v = static_cast<double>(static_cast<int64_t>(r >> 20) % 2000001 - 1000000) / 997.0;
    switch (raw ? DType::Int8 : t) {
      case DType::Float32: st<float>(p, i, static_cast<float>(v)); break;
      case DType::Float64: st<double>(p, i, v * 1e3); break;
      case DType::Float16: st<uint16_t>(p, i, refFloatToHalf(static_cast<float>(v / 20))); break;
      case DType::Bfloat16: st<uint16_t>(p, i, refFloatToBf16(static_cast<float>(v))); break;
      default: std::memcpy(static_cast<char*>(p) + i * es, &r, es);
    }
  }
}

// A NaN of type t (if floating) with a random sign and non-zero payload.
void putNan(DType t, unsigned char* p, uint64_t r) {
  r |= 1;
  if (t == DType::Float16) st<uint16_t>(p, 0, static_cast<uint16_t>(0x7c00 | (r & 0x83ff)));
  if (t == DType::Bfloat16) st<uint16_t>(p, 0, static_cast<uint16_t>(0x7f80 | (r & 0x807f)));
  if (t == DType::Float32) st<uint32_t>(p, 0, static_cast<uint32_t>(0x7f800000u | (r & 0x807fffffu)));
  if (t == DType::Float64) st<uint64_t>(p, 0, 0x7ff0000000000000ull | (r & 0x800fffffffffffffull));
  if (t == DType::Float8e4m3) *p = static_cast<unsigned char>(0x7f | (r & 0x80));
  if (t == DType::Float8e5m2) *p = static_cast<unsigned char>(0x7c | (r & 0x83));
}

// A buffer with canaries around it and a deliberately odd start address.
struct Buf {
  static constexpr size_t kPad = 64, kMis = 3;
  std::vector<unsigned char> mem;
  size_t bytes;
  explicit Buf(size_t b) : mem(b + 2 * kPad + kMis, 0xA5), bytes(b) {}
  void* p() { return mem.data() + kPad + kMis; }
  bool canariesOk() const {
    for (size_t i = 0; i < mem.size(); ++i)
      if ((i < kPad + kMis || i >= kPad + kMis + bytes) && mem[i] != 0xA5) return false;
    return true;
  }
};

// Runs reduce (nranks == 0) or avgFinish on one table; mode 0: separate
// output, 1: out == a, 2: out == b (reduce only). Returns the output bytes.
std::vector<unsigned char> runOne(const DataOps& ops, DType t, RedOp op, const std::vector<unsigned char>& a,
                                  const std::vector<unsigned char>& b, size_t n, int mode, int nranks) {
  size_t bytes = n * dtypeSize(t);
  Buf ba(bytes), bb(bytes), bo(bytes);
  if (bytes) std::memcpy(ba.p(), a.data(), bytes);
  if (bytes) std::memcpy(bb.p(), b.data(), bytes);
  void* out = mode == 1 ? ba.p() : mode == 2 ? bb.p() : bo.p();
  if (nranks) ops.avgFinish[static_cast<int>(t)](out, ba.p(), n, nranks);
  else ops.reduce[static_cast<int>(t)][static_cast<int>(op)](out, ba.p(), bb.p(), n);
  EXPECT_TRUE(ba.canariesOk() && bb.canariesOk() && bo.canariesOk());
  const unsigned char* o = static_cast<const unsigned char*>(out);
  return std::vector<unsigned char>(o, o + bytes);
}

void checkAgainstReference(DType t, RedOp op, int nranks) {
  std::mt19937_64 rng(1234 + static_cast<int>(t) * 7 + static_cast<int>(op));
  for (size_t n : kSizes) {
    size_t bytes = n * dtypeSize(t);
    std::vector<unsigned char> a(bytes + 1), b(bytes + 1), ref(bytes + 1);
    fillRandom(t, a.data(), n, rng);
    fillRandom(t, b.data(), n, rng);
    for (size_t i = 0; i < n; ++i) refElem(t, op, a.data(), b.data(), ref.data(), i, nranks);
    for (const DataOps* ops : tables()) {
      for (int mode = 0; mode < (nranks ? 2 : 3); ++mode) {
        auto got = runOne(*ops, t, op, a, b, n, mode, nranks);
        for (size_t i = 0; i < n; ++i) {
          // Bit for bit, NaNs included: every NaN result is the canonical one.
          bool ok = !std::memcmp(&got[i * dtypeSize(t)], &ref[i * dtypeSize(t)], dtypeSize(t));
          if (!ok) {
            ADD_FAILURE() << isaName(ops->isa) << " " << dtypeName(t) << " " << redOpName(op) << " nranks=" << nranks
                          << " n=" << n << " mode=" << mode << " mismatch at " << i;
            return;
          }
        }
      }
    }
  }
}

}  // namespace

TEST(DataOps, NamesAndSizes) {
  const char* names[] = {"int8", "uint8", "int32", "uint32", "int64", "uint64",
                         "half", "float", "double", "bfloat16", "f8e4m3", "f8e5m2"};
  const size_t sizes[] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2, 1, 1};
  static_assert(sizeof(names) / sizeof(names[0]) == kNumDTypes);
  for (int i = 0; i < kNumDTypes; ++i) {
    EXPECT_STREQ(dtypeName(static_cast<DType>(i)), names[i]);
    EXPECT_EQ(dtypeSize(static_cast<DType>(i)), sizes[i]);
  }
  EXPECT_STREQ(redOpName(RedOp::Avg), "avg");
  EXPECT_STREQ(redOpName(RedOp::Prod), "prod");
  EXPECT_STREQ(isaName(Isa::Avx512), "avx512");
  EXPECT_STREQ(isaName(Isa::Scalar), "scalar");
}

TEST(DataOps, IsaSelection) {
  Isa best = bestSupportedIsa();
  EXPECT_NE(dataOpsFor(Isa::Scalar), nullptr);
  for (Isa isa : {Isa::Scalar, Isa::Avx2, Isa::Avx512}) {
    const DataOps* t = dataOpsFor(isa);
    EXPECT_EQ(t != nullptr, static_cast<int>(isa) <= static_cast<int>(best));
    if (t) {
      EXPECT_EQ(t->isa, isa);
    }
  }
  EXPECT_EQ(resolveIsaRequest(nullptr, Isa::Avx512), Isa::Avx512);
  EXPECT_EQ(resolveIsaRequest("", Isa::Avx2), Isa::Avx2);
  EXPECT_EQ(resolveIsaRequest("bogus", Isa::Avx2), Isa::Avx2);
  EXPECT_EQ(resolveIsaRequest("scalar", Isa::Avx512), Isa::Scalar);
  EXPECT_EQ(resolveIsaRequest("AVX2", Isa::Avx512), Isa::Avx2);
  EXPECT_EQ(resolveIsaRequest("avx512", Isa::Avx2), Isa::Avx2);
  EXPECT_EQ(resolveIsaRequest("avx2", Isa::Scalar), Isa::Scalar);
  EXPECT_EQ(dataOps().isa, resolveIsaRequest(std::getenv("HOCCL_ISA"), best));
  setForcedIsa(Isa::Scalar);
  EXPECT_EQ(dataOps().isa, Isa::Scalar);
  setForcedIsa(Isa::Avx512);
  EXPECT_EQ(dataOps().isa, best);
  clearForcedIsa();
  EXPECT_LE(static_cast<int>(dataOps().isa), static_cast<int>(best));
}

TEST(DataOps, CopyBytes) {
  std::vector<char> a(1000), b(1000, 0);
  for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<char>(i * 7);
  copyBytes(b.data(), a.data(), a.size());
  EXPECT_EQ(a, b);
  copyBytes(b.data(), b.data(), b.size());
  copyBytes(nullptr, nullptr, 0);
}

TEST(DataOps, ReduceMatchesReference) {
  for (DType t : kTypes)
    for (RedOp op : kOps) checkAgainstReference(t, op, 0);
}

TEST(DataOps, AvgFinishMatchesReference) {
  for (DType t : kTypes)
    for (int nranks : {1, 2, 3, 7, 8, 1000}) checkAgainstReference(t, RedOp::Avg, nranks);
}

// Arbitrary bit patterns (NaNs with payloads, both operands NaN, infinities,
// subnormals) must give the same bytes on every ISA.
TEST(DataOps, BitIdenticalAcrossIsas) {
  auto ts = tables();
  std::mt19937_64 rng(99);
  for (DType t : kTypes) {
    size_t n = 4099, bytes = n * dtypeSize(t);
    std::vector<unsigned char> a(bytes), b(bytes);
    for (auto& x : a) x = static_cast<unsigned char>(rng());
    for (size_t i = 0; i < bytes; ++i) b[i] = (i % 5 == 0) ? a[i] : static_cast<unsigned char>(rng());
    for (size_t i = 0; i < n; i += 3) {  // both operands NaN, different payloads and signs
      putNan(t, &a[i * dtypeSize(t)], rng());
      putNan(t, &b[i * dtypeSize(t)], rng());
    }
    for (RedOp op : kOps) {
      for (int nranks : {0, 3}) {
        auto base = runOne(*ts[0], t, op, a, b, n, 0, nranks);
        for (size_t k = 1; k < ts.size(); ++k) {
          auto got = runOne(*ts[k], t, op, a, b, n, 0, nranks);
          size_t i = 0;
          while (i < bytes && got[i] == base[i]) ++i;
          EXPECT_EQ(i, bytes) << isaName(ts[k]->isa) << " vs " << isaName(ts[0]->isa) << " " << dtypeName(t) << " "
                              << (nranks ? "avgFinish" : redOpName(op)) << ": first difference at element " << i / dtypeSize(t);
        }
      }
    }
  }
}

namespace {

// NCCL's result of a (op) b for elements given as their bits.
uint64_t refSpecial(DType t, RedOp op, uint64_t a, uint64_t b) {
  switch (t) {
    case DType::Float32:
      return bits<uint32_t>(refOp(op, bits<float>(static_cast<uint32_t>(a)), bits<float>(static_cast<uint32_t>(b))));
    case DType::Float64: return bits<uint64_t>(refOp(op, bits<double>(a), bits<double>(b)));
    case DType::Float16:
      return refFloatToHalf(refOp(op, static_cast<float>(refHalfToDouble(static_cast<uint16_t>(a))),
                                  static_cast<float>(refHalfToDouble(static_cast<uint16_t>(b)))));
    case DType::Bfloat16:
      return refFloatToBf16(refOp(op, refBf16ToFloat(static_cast<uint16_t>(a)), refBf16ToFloat(static_cast<uint16_t>(b))));
    case DType::Float8e4m3: case DType::Float8e5m2:
      return refFp8Op(op, static_cast<uint8_t>(a), static_cast<uint8_t>(b), isE5m2(t));
    default: return 0;
  }
}

}  // namespace

// Ranks that combine the same two values in opposite orders (a recursive
// doubling exchange: each computes received (op) own) must end with the
// same bits, and with NCCL's: every pair of special values (every pair of
// codes for fp8), both orders, every op, every ISA, as whole vectors and
// one element at a time (the tail's path).
TEST(DataOps, SpecialValuesCommuteBitForBitWithNcclResults) {
  struct Format { DType t; int e, m; };  // e == 0: every code (fp8)
  const Format formats[] = {{DType::Float16, 5, 10}, {DType::Bfloat16, 8, 7}, {DType::Float32, 8, 23},
                            {DType::Float64, 11, 52}, {DType::Float8e4m3, 0, 0}, {DType::Float8e5m2, 0, 0}};
  for (const Format& f : formats) {
    std::vector<uint64_t> vals;
    if (f.e) vals = testutil::floatSpecialBits(f.e, f.m);
    else for (uint64_t c = 0; c < 256; ++c) vals.push_back(c);
    const size_t es = dtypeSize(f.t), n = vals.size() * vals.size();
    std::vector<unsigned char> a(n * es), b(n * es);
    for (size_t k = 0; k < n; ++k) {  // little-endian: the low bytes of the bits are the element
      std::memcpy(&a[k * es], &vals[k / vals.size()], es);
      std::memcpy(&b[k * es], &vals[k % vals.size()], es);
    }
    for (RedOp op : {RedOp::Sum, RedOp::Prod, RedOp::Max, RedOp::Min}) {
      for (const DataOps* ops : tables()) {
        const ReduceFn fn = ops->reduce[static_cast<int>(f.t)][static_cast<int>(op)];
        const auto ab = runOne(*ops, f.t, op, a, b, n, 0, 0), ba = runOne(*ops, f.t, op, b, a, n, 0, 0);
        int bad = 0;
        for (size_t k = 0; k < n; ++k) {
          uint64_t x = 0, y = 0, gotAb = 0, gotBa = 0, oneAb = 0, oneBa = 0;
          std::memcpy(&x, &a[k * es], es);
          std::memcpy(&y, &b[k * es], es);
          std::memcpy(&gotAb, &ab[k * es], es);
          std::memcpy(&gotBa, &ba[k * es], es);
          fn(&oneAb, &x, &y, 1);
          fn(&oneBa, &y, &x, 1);
          const uint64_t want = refSpecial(f.t, op, x, y);
          if ((gotAb != want || gotBa != want || oneAb != want || oneBa != want) && ++bad <= 4)
            ADD_FAILURE() << isaName(ops->isa) << " " << dtypeName(f.t) << " " << redOpName(op) << std::hex
                          << ": a=0x" << x << " b=0x" << y << " want 0x" << want << ", got 0x" << gotAb
                          << " (a op b), 0x" << gotBa << " (b op a), 0x" << oneAb << " / 0x" << oneBa
                          << " (one element)";
        }
        EXPECT_EQ(bad, 0) << isaName(ops->isa) << " " << dtypeName(f.t) << " " << redOpName(op);
      }
    }
  }
}

TEST(DataOps, IntegerAvgExtremes) {
  struct C8 { int8_t a, b; int n; int8_t want; };
  const C8 c8[] = {{INT8_MIN, 0, 1, INT8_MIN}, {INT8_MIN, 0, 3, -42}, {INT8_MAX, 1, 1, INT8_MIN},  // wraps
                   {INT8_MIN, -1, 2, 63}, {-1, 0, 2, 0}, {-7, 0, 2, -3}, {-100, -100, 4, 14}, {INT8_MIN, 0, 1000, 0}};
  struct C64 { int64_t a, b; int n; int64_t want; };
  const C64 c64[] = {{INT64_MIN, 0, 1, INT64_MIN}, {INT64_MIN, 0, 2, INT64_MIN / 2}, {INT64_MIN, 0, 3, INT64_MIN / 3},
                     {INT64_MAX, 1, 7, INT64_MIN / 7}, {INT64_MIN, -1, 2, INT64_MAX / 2}, {-5, 0, 2, -2}, {-1, -1, 3, 0}};
  for (const DataOps* ops : tables()) {
    for (const auto& c : c8) {
      int8_t s;
      ops->reduce[0][static_cast<int>(RedOp::Avg)](&s, &c.a, &c.b, 1);
      ops->avgFinish[0](&s, &s, 1, c.n);
      EXPECT_EQ(s, c.want) << int(c.a) << "+" << int(c.b) << " / " << c.n;
    }
    for (const auto& c : c64) {
      int64_t s;
      ops->reduce[4][static_cast<int>(RedOp::Avg)](&s, &c.a, &c.b, 1);
      ops->avgFinish[4](&s, &s, 1, c.n);
      EXPECT_EQ(s, c.want) << c.a << "+" << c.b << " / " << c.n;
    }
    uint64_t u[2] = {UINT64_MAX, 2}, r;
    ops->reduce[5][0](&r, &u[0], &u[1], 1);
    EXPECT_EQ(r, uint64_t{1});
    ops->avgFinish[5](u, u, 1, 3);
    EXPECT_EQ(u[0], UINT64_MAX / 3);
  }
}

TEST(DataOps, HalfConversionExhaustive) {
  for (uint32_t h = 0; h < 65536; ++h) {
    float f = halfToFloat(static_cast<uint16_t>(h));
    bool nan = (h & 0x7fff) > 0x7c00;
    if (nan) {
      ASSERT_EQ(bits<uint32_t>(f), ((h & 0x8000) << 16) | 0x7fc00000 | ((h & 0x3ff) << 13)) << h;
      ASSERT_EQ(floatToHalf(f), h | 0x200) << h;
    } else {
      ASSERT_EQ(static_cast<double>(f), refHalfToDouble(static_cast<uint16_t>(h))) << h;
      ASSERT_EQ(std::signbit(f), (h & 0x8000) != 0) << h;
      ASSERT_EQ(floatToHalf(f), h) << h;
    }
  }
}

TEST(DataOps, HalfRoundingCases) {
  auto f = [](uint32_t u) { return bits<float>(u); };
  EXPECT_EQ(floatToHalf(1.0f + 0x1p-11f), 0x3c00);       // tie -> even (down)
  EXPECT_EQ(floatToHalf(1.0f + 3 * 0x1p-11f), 0x3c02);   // tie -> even (up)
  EXPECT_EQ(floatToHalf(1.0f + 0x1p-11f + 0x1p-20f), 0x3c01);
  EXPECT_EQ(floatToHalf(65504.0f), 0x7bff);
  EXPECT_EQ(floatToHalf(65519.99f), 0x7bff);
  EXPECT_EQ(floatToHalf(65520.0f), 0x7c00);              // tie -> even = overflow
  EXPECT_EQ(floatToHalf(-1e10f), 0xfc00);
  EXPECT_EQ(floatToHalf(INFINITY), 0x7c00);
  EXPECT_EQ(floatToHalf(0x1p-24f), 0x0001);
  EXPECT_EQ(floatToHalf(0x1p-25f), 0x0000);              // tie -> even zero
  EXPECT_EQ(floatToHalf(3 * 0x1p-25f), 0x0002);
  EXPECT_EQ(floatToHalf(0x1p-14f - 0x1p-25f), 0x0400);   // into the normals
  EXPECT_EQ(floatToHalf(-0.0f), 0x8000);
  EXPECT_EQ(floatToHalf(f(0x00000001)), 0x0000);         // float subnormal
  EXPECT_EQ(floatToHalf(f(0x7f800001)), 0x7e00);         // sNaN -> quiet
  EXPECT_EQ(floatToHalf(f(0xffc02000)), 0xfe01);
  std::mt19937_64 rng(5);
  for (uint32_t hi = 0; hi < 65536; ++hi)
    for (uint32_t lo : {0u, 1u, 0xfffu, 0x1000u, 0x1001u, 0x2000u, 0xffffu, static_cast<uint32_t>(rng() & 0xffff)}) {
      float x = f((hi << 16) | lo);
      ASSERT_EQ(floatToHalf(x), refFloatToHalf(x)) << std::hex << ((hi << 16) | lo);
    }
}

__attribute__((target("f16c"))) static uint16_t hwToHalf(float f) { return _cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT); }
__attribute__((target("f16c"))) static float hwFromHalf(uint16_t h) { return _cvtsh_ss(h); }

TEST(DataOps, SoftwareHalfMatchesF16C) {
  if (!__builtin_cpu_supports("f16c")) GTEST_SKIP() << "no F16C";
  for (uint32_t h = 0; h < 65536; ++h)
    ASSERT_EQ(bits<uint32_t>(halfToFloat(static_cast<uint16_t>(h))), bits<uint32_t>(hwFromHalf(static_cast<uint16_t>(h)))) << h;
  std::mt19937 rng(7);
  for (uint64_t u = 0; u < (1ull << 32); u += 4099 + (rng() & 255)) {
    float x = bits<float>(static_cast<uint32_t>(u));
    ASSERT_EQ(floatToHalf(x), hwToHalf(x)) << std::hex << u;
  }
}

TEST(DataOps, Bf16Conversion) {
  for (uint32_t b = 0; b < 65536; ++b) {
    float f = bf16ToFloat(static_cast<uint16_t>(b));
    ASSERT_EQ(bits<uint32_t>(f), b << 16);
    ASSERT_EQ(floatToBf16(f), (b & 0x7fff) > 0x7f80 ? (b | 0x40) : b) << b;
  }
  EXPECT_EQ(floatToBf16(bits<float>(0x3f808000)), 0x3f80);  // tie -> even (down)
  EXPECT_EQ(floatToBf16(bits<float>(0x3f818000)), 0x3f82);  // tie -> even (up)
  EXPECT_EQ(floatToBf16(bits<float>(0x7f7fffff)), 0x7f80);  // overflow -> inf
  EXPECT_EQ(floatToBf16(bits<float>(0x00018000)), 0x0002);  // subnormal tie
  EXPECT_EQ(floatToBf16(bits<float>(0xff800001)), 0xffc0);  // sNaN -> quiet
  std::mt19937 rng(8);
  for (uint64_t u = 0; u < (1ull << 32); u += 4099 + (rng() & 255)) {
    float x = bits<float>(static_cast<uint32_t>(u));
    ASSERT_EQ(floatToBf16(x), refFloatToBf16(x)) << std::hex << u;
  }
}

// Reductions whose fp32 result must be rounded back: overflow, ties, subnormals.
TEST(DataOps, HalfAndBf16ReduceSpecialCases) {
  struct C { DType t; RedOp op; uint16_t a, b, want; };
  const C cases[] = {
      {DType::Float16, RedOp::Sum, 0x7bff, 0x7bff, 0x7c00},   // 65504 + 65504 -> inf
      {DType::Float16, RedOp::Sum, 0x3c00, 0x1000, 0x3c00},   // 1 + 2^-11: tie -> even
      {DType::Float16, RedOp::Sum, 0x3c01, 0x1000, 0x3c02},   // 1+2^-10 + 2^-11: tie -> even
      {DType::Float16, RedOp::Sum, 0x0001, 0x0001, 0x0002},   // subnormals
      {DType::Float16, RedOp::Prod, 0x0200, 0x3800, 0x0100},  // subnormal * 0.5
      {DType::Float16, RedOp::Prod, 0x0001, 0x3800, 0x0000},  // 2^-25: tie -> even 0
      {DType::Float16, RedOp::Prod, 0x7c00, 0x0000, 0x7fff},  // inf * 0 -> the canonical NaN
      {DType::Float16, RedOp::Sum, 0x7d00, 0x3c00, 0x7fff},   // sNaN + 1 -> the canonical NaN
      {DType::Float16, RedOp::Max, 0x3c00, 0xbc00, 0x3c00},
      {DType::Float16, RedOp::Min, 0x0000, 0x8000, 0x8000},   // __hmin: -0 < +0
      {DType::Float16, RedOp::Max, 0x8000, 0x0000, 0x0000},   // __hmax: +0 > -0
      {DType::Float16, RedOp::Max, 0x7e01, 0xbc00, 0xbc00},   // __hmax: a NaN gives the other
      {DType::Bfloat16, RedOp::Sum, 0x7f7f, 0x7f7f, 0x7f80},  // overflow -> inf
      {DType::Bfloat16, RedOp::Sum, 0x3f80, 0x3b80, 0x3f80},  // 1 + 2^-8: tie -> even
      {DType::Bfloat16, RedOp::Sum, 0x3f81, 0x3b80, 0x3f82},
      {DType::Bfloat16, RedOp::Sum, 0x7f81, 0x3f80, 0x7fff},  // sNaN + 1 -> the canonical NaN
  };
  for (const DataOps* ops : tables())
    for (const C& c : cases) {
      uint16_t out = 0;
      ops->reduce[static_cast<int>(c.t)][static_cast<int>(c.op)](&out, &c.a, &c.b, 1);
      EXPECT_EQ(out, c.want) << isaName(ops->isa) << " " << dtypeName(c.t) << std::hex << " " << c.a << " " << c.b;
    }
}

TEST(DataOps, LargeFloatSum) {
  const size_t n = (16u << 20) / 4;
  std::vector<float> a(n), b(n), out(n);
  for (size_t i = 0; i < n; ++i) { a[i] = static_cast<float>(i % 1000); b[i] = 0.5f * static_cast<float>(i % 77); }
  for (const DataOps* ops : tables()) {
    ops->reduce[static_cast<int>(DType::Float32)][0](out.data(), a.data(), b.data(), n);
    for (size_t i = 0; i < n; i += 997) ASSERT_EQ(out[i], a[i] + b[i]) << i;
    ASSERT_EQ(out[n - 1], a[n - 1] + b[n - 1]);
  }
}

// ---- fp8 ---------------------------------------------------------------------

// All 256 codes of each format: decoding is exact (NaN canonical), and every
// finite code survives the round trip through float bit for bit.
TEST(DataOps, Fp8ConversionExhaustive) {
  for (bool e5m2 : {false, true}) {
    auto toF = e5m2 ? fp8e5m2ToFloat : fp8e4m3ToFloat;
    auto fromF = e5m2 ? floatToFp8e5m2 : floatToFp8e4m3;
    int nans = 0;
    for (uint32_t c = 0; c < 256; ++c) {
      const uint8_t x = static_cast<uint8_t>(c);
      const float f = toF(x);
      if (refFp8IsNan(x, e5m2)) {
        ++nans;
        ASSERT_EQ(bits<uint32_t>(f), 0x7fffe000u) << c;  // CUDA's fp8 -> half gives 0x7fff
        continue;
      }
      ASSERT_EQ(static_cast<double>(f), refFp8ToDouble(x, e5m2)) << e5m2 << " " << c;
      ASSERT_EQ(std::signbit(f), (c & 0x80) != 0) << c;
      // satfinite: an E5M2 infinity comes back as the largest finite value
      ASSERT_EQ(fromF(f), std::isinf(f) ? ((c & 0x80) | 0x7b) : x) << e5m2 << " " << c;
    }
    EXPECT_EQ(nans, e5m2 ? 6 : 2);
  }
}

// float -> fp8 on the values where rounding is decided: every midpoint
// between neighbouring codes and the floats next to it, zero, the smallest
// subnormal's half, the overflow region, infinities, NaNs, float subnormals,
// and a sweep over all float exponents; against the exhaustive reference.
TEST(DataOps, Fp8RoundingTrickyFloats) {
  for (bool e5m2 : {false, true}) {
    auto fromF = e5m2 ? floatToFp8e5m2 : floatToFp8e4m3;
    std::vector<float> xs = {0.0f, -0.0f, INFINITY, -INFINITY, 1e30f, -1e30f, FLT_MAX, bits<float>(1u),
                             bits<float>(0x80000001u), bits<float>(0x007fffffu), 0x1p-126f};
    std::vector<double> vals;
    for (int c = 0; c < 128; ++c)
      if (std::isfinite(refFp8ToDouble(static_cast<uint8_t>(c), e5m2))) vals.push_back(refFp8ToDouble(static_cast<uint8_t>(c), e5m2));
    vals.push_back(e5m2 ? 65536.0 : 512.0);  // where the next binade would start
    for (size_t k = 0; k + 1 < vals.size(); ++k) {
      float mid = static_cast<float>((vals[k] + vals[k + 1]) / 2);  // exact in float
      for (float x : {static_cast<float>(vals[k]), mid, std::nextafter(mid, 0.0f), std::nextafter(mid, INFINITY)}) {
        xs.push_back(x);
        xs.push_back(-x);
      }
    }
    std::mt19937 rng(11);
    for (uint32_t e = 0; e < 256; ++e)
      for (int j = 0; j < 64; ++j) xs.push_back(bits<float>((e << 23) | (rng() & 0x807fffffu)));
    for (float x : xs) {
      if (std::isnan(x)) continue;
      ASSERT_EQ(fromF(x), refDoubleToFp8(x, e5m2)) << e5m2 << " " << std::hexfloat << x;
    }
    // Hand-checked points of the rules (OCP formats, CUDA's satfinite):
    if (!e5m2) {
      EXPECT_EQ(fromF(464.0f), 0x7e);                   // tie beyond 448: even, and saturated anyway
      EXPECT_EQ(fromF(1e9f), 0x7e);                     // saturates, never NaN
      EXPECT_EQ(fromF(-INFINITY), 0xfe);
      EXPECT_EQ(fromF(0x1p-10f), 0x00);                 // half the smallest subnormal: tie to zero
      EXPECT_EQ(fromF(-0x1p-10f), 0x80);
      EXPECT_EQ(fromF(3 * 0x1p-10f), 0x02);             // 1.5 ulp: tie to even (2)
      EXPECT_EQ(fromF(1.0625f), 0x38);                  // 1 + 1/16: tie to even (1.0)
      EXPECT_EQ(fromF(1.1875f), 0x3a);                  // 1 + 3/16: tie to even (1.25)
      EXPECT_EQ(fromF(bits<float>(0xffc00000u)), 0xff); // NaN keeps its sign
    } else {
      EXPECT_EQ(fromF(61440.0f), 0x7b);                 // tie would go to inf: saturates
      EXPECT_EQ(fromF(INFINITY), 0x7b);
      EXPECT_EQ(fromF(0x1p-17f), 0x00);
      EXPECT_EQ(fromF(1.125f), 0x3c);                   // 1 + 1/8: tie to even (1.0)
      EXPECT_EQ(fromF(bits<float>(0x7fc00000u)), 0x7e); // quiet NaN, second payload bit 0
      EXPECT_EQ(fromF(bits<float>(0xffe00000u)), 0xff); // second payload bit 1, sign kept
    }
  }
}

// Every pair of codes, every op, every ISA: as NCCL computes it (through
// half, satfinite), against the reference that works in double.
TEST(DataOps, Fp8ReduceExhaustivePairs) {
  std::vector<unsigned char> a(65536), b(65536), got(65536);
  for (uint32_t i = 0; i < 65536; ++i) { a[i] = static_cast<unsigned char>(i >> 8); b[i] = static_cast<unsigned char>(i); }
  for (DType t : {DType::Float8e4m3, DType::Float8e5m2}) {
    for (RedOp op : {RedOp::Sum, RedOp::Prod, RedOp::Max, RedOp::Min}) {
      std::vector<unsigned char> want(65536);
      for (uint32_t i = 0; i < 65536; ++i) want[i] = refFp8Op(op, a[i], b[i], isE5m2(t));
      for (const DataOps* ops : tables()) {
        ops->reduce[static_cast<int>(t)][static_cast<int>(op)](got.data(), a.data(), b.data(), got.size());
        for (uint32_t i = 0; i < 65536; ++i)
          ASSERT_EQ(got[i], want[i]) << isaName(ops->isa) << " " << dtypeName(t) << " " << redOpName(op) << std::hex
                                     << " a=" << int(a[i]) << " b=" << int(b[i]);
      }
    }
  }
}

// The consequences of NCCL's rules that a user would notice.
TEST(DataOps, Fp8ReduceSpecialCases) {
  struct C { DType t; RedOp op; uint8_t a, b, want; };
  const C cases[] = {
      {DType::Float8e4m3, RedOp::Sum, 0x7e, 0x7e, 0x7e},   // 448 + 448 saturates to 448
      {DType::Float8e4m3, RedOp::Sum, 0x7f, 0x38, 0x7f},   // NaN + 1 = NaN
      {DType::Float8e4m3, RedOp::Max, 0x7f, 0x38, 0x38},   // __hmax: NaN loses
      {DType::Float8e4m3, RedOp::Min, 0x00, 0x80, 0x80},   // __hmin: -0 < +0
      {DType::Float8e4m3, RedOp::Max, 0x80, 0x00, 0x00},
      {DType::Float8e4m3, RedOp::Prod, 0x01, 0x01, 0x00},  // 2^-18 underflows to 0
      {DType::Float8e5m2, RedOp::Sum, 0x7c, 0x3c, 0x7b},   // inf + 1: inf in half, saturated
      {DType::Float8e5m2, RedOp::Max, 0x7c, 0x3c, 0x7b},   // even max turns inf into 57344
      {DType::Float8e5m2, RedOp::Sum, 0x7c, 0xfc, 0x7f},   // inf - inf = NaN, canonical
      {DType::Float8e5m2, RedOp::Sum, 0xfd, 0x3c, 0x7f},   // any NaN comes out canonical
      {DType::Float8e5m2, RedOp::Sum, 0x7b, 0x7b, 0x7b},
  };
  for (const DataOps* ops : tables())
    for (const C& c : cases) {
      uint8_t out = 0;
      ops->reduce[static_cast<int>(c.t)][static_cast<int>(c.op)](&out, &c.a, &c.b, 1);
      EXPECT_EQ(out, c.want) << isaName(ops->isa) << " " << dtypeName(c.t) << " " << redOpName(c.op) << std::hex
                             << " " << int(c.a) << " " << int(c.b);
    }
}
