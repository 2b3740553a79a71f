#include "src/check/values.h"

#include <cmath>
#include <cstring>

namespace checkvals {
namespace {

// Test-local fp16/bf16 conversions (the library's are internal).
float halfBitsToFloat(uint16_t h) {
  uint32_t sign = (h >> 15) & 1, exp = (h >> 10) & 0x1f, man = h & 0x3ff;
  float v;
  if (exp == 0) v = std::ldexp(static_cast<float>(man), -24);
  else if (exp == 31) v = man ? NAN : INFINITY;
  else v = std::ldexp(static_cast<float>(man | 0x400), static_cast<int>(exp) - 25);
  return sign ? -v : v;
}

uint16_t floatToHalfBits(float f) {
  // Exact for the values tests store (small integers, their quotients
  // rounded by the library are only read back).
  uint32_t sign = std::signbit(f) ? 0x8000 : 0;
  f = std::fabs(f);
  if (f == 0) return static_cast<uint16_t>(sign);
  int e;
  float m = std::frexp(f, &e);  // f = m * 2^e, m in [0.5, 1)
  int exp = e + 14;
  if (exp <= 0) return static_cast<uint16_t>(sign | static_cast<uint32_t>(std::lrint(std::ldexp(f, 24))));
  uint32_t man = static_cast<uint32_t>(std::lrint(std::ldexp(m, 11))) - 0x400;
  if (man == 0x400) { man = 0; ++exp; }
  if (exp >= 31) return static_cast<uint16_t>(sign | 0x7c00);
  return static_cast<uint16_t>(sign | (static_cast<uint32_t>(exp) << 10) | man);
}

float bf16BitsToFloat(uint16_t b) {
  uint32_t u = static_cast<uint32_t>(b) << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

uint16_t floatToBf16Bits(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  u += 0x7fff + ((u >> 16) & 1);
  return static_cast<uint16_t>(u >> 16);
}

// Test-local fp8 (OCP E4M3 / E5M2) conversions. Decoding is exact; encoding
// rounds to nearest even and saturates to the largest finite value, as
// NCCL's fp8 does (the values stored here are exact anyway).
bool isFp8(hocclDataType_t t) { return t == hocclFloat8e4m3 || t == hocclFloat8e5m2; }
int fp8Man(hocclDataType_t t) { return t == hocclFloat8e5m2 ? 2 : 3; }
int fp8Bias(hocclDataType_t t) { return t == hocclFloat8e5m2 ? 15 : 7; }
double fp8MaxFinite(hocclDataType_t t) { return t == hocclFloat8e5m2 ? 57344.0 : 448.0; }

double fp8BitsToDouble(hocclDataType_t t, uint8_t x) {
  const int man = fp8Man(t), bias = fp8Bias(t);
  const int e = (x & 0x7f) >> man, m = x & ((1 << man) - 1);
  double v;
  if (t == hocclFloat8e5m2 && e == 31) v = m ? NAN : INFINITY;
  else if (t == hocclFloat8e4m3 && (x & 0x7f) == 0x7f) v = NAN;
  else if (e == 0) v = std::ldexp(m, 1 - bias - man);
  else v = std::ldexp((1 << man) + m, e - bias - man);
  return (x & 0x80) ? -v : v;
}

uint8_t doubleToFp8Bits(hocclDataType_t t, double v) {
  const int man = fp8Man(t), bias = fp8Bias(t);
  const uint8_t sign = std::signbit(v) ? 0x80 : 0;
  const uint8_t maxCode = t == hocclFloat8e5m2 ? 0x7b : 0x7e;
  if (std::isnan(v)) return 0x7f;
  double a = std::fabs(v);
  if (a >= fp8MaxFinite(t)) return static_cast<uint8_t>(sign | maxCode);
  int e;
  std::frexp(a, &e);  // a = f * 2^e, f in [0.5, 1)
  const int minNormal = 1 - bias;  // exponent of the smallest normal, 2^minNormal
  if (a == 0 || e - 1 < minNormal) {  // subnormal: a multiple of 2^(minNormal - man)
    long q = std::lrint(std::ldexp(a, man - minNormal));  // a carry into the normals is the right code
    return static_cast<uint8_t>(sign | q);
  }
  long q = std::lrint(std::ldexp(a, man - (e - 1)));  // 1.m scaled: [2^man, 2^(man+1)]
  long code = (static_cast<long>(e - 1 + bias) << man) + (q - (1L << man));
  if (code > maxCode) code = maxCode;
  return static_cast<uint8_t>(sign | code);
}

bool isFloat(hocclDataType_t t) {
  return t == hocclFloat16 || t == hocclFloat32 || t == hocclFloat64 || t == hocclBfloat16 || isFp8(t);
}

// The value v becomes once stored in type t (fp8 only; others are exact here).
double rounded(hocclDataType_t t, double v) { return isFp8(t) ? fp8BitsToDouble(t, doubleToFp8Bits(t, v)) : v; }

// Wraps an integer value into type t (two's complement), returned as double.
double wrapInt(hocclDataType_t t, uint64_t v) {
  switch (t) {
    case hocclInt8: return static_cast<int8_t>(v);
    case hocclUint8: return static_cast<uint8_t>(v);
    case hocclInt32: return static_cast<int32_t>(v);
    case hocclUint32: return static_cast<uint32_t>(v);
    case hocclInt64: return static_cast<double>(static_cast<int64_t>(v));
    case hocclUint64: return static_cast<double>(v);
    default: return static_cast<double>(v);
  }
}

}  // namespace

size_t typeSize(hocclDataType_t t) {
  switch (t) {
    case hocclInt8: case hocclUint8: case hocclFloat8e4m3: case hocclFloat8e5m2: return 1;
    case hocclFloat16: case hocclBfloat16: return 2;
    case hocclInt32: case hocclUint32: case hocclFloat32: return 4;
    default: return 8;
  }
}

const char* typeName(hocclDataType_t t) {
  // nccl-tests' names.
  static const char* names[] = {"int8", "uint8", "int32", "uint32", "int64", "uint64",
                                "half", "float", "double", "bfloat16", "f8e4m3", "f8e5m2"};
  static_assert(sizeof(names) / sizeof(names[0]) == hocclNumTypes);
  return names[t];
}

const char* opName(hocclRedOp_t op) {
  static const char* names[] = {"sum", "prod", "max", "min", "avg"};
  return names[op];
}

double inputValue(hocclDataType_t t, hocclRedOp_t op, int rank, uint64_t i) {
  // fp8 holds the integers exactly only up to 16 (E4M3) or 8 (E5M2): a sum
  // takes 1 or 2 from one rank in four, so that up to 16 ranks stay exact.
  if (isFp8(t) && (op == hocclSum || op == hocclAvg))
    return (static_cast<uint64_t>(rank) + i) % 4 == 0 ? static_cast<double>(1 + i % 2) : 0.0;
  switch (op) {
    // Powers of two stay exact; the second term's period (7) does not divide
    // the block sizes, so a block delivered to the wrong rank shows.
    case hocclProd:
      return ((static_cast<uint64_t>(rank) + i) % 4 == 0 || i % 7 == static_cast<uint64_t>(rank) % 7) ? 2 : 1;
    case hocclMax:
    case hocclMin: return static_cast<double>((static_cast<uint64_t>(rank) * 3 + i) % 11);
    default: return static_cast<double>((static_cast<uint64_t>(rank) + i) % 3);
  }
}

double expectedReduce(hocclDataType_t t, hocclRedOp_t op, int nranks, uint64_t i) {
  if (isFloat(t)) {
    double acc = rounded(t, inputValue(t, op, 0, i));
    for (int r = 1; r < nranks; ++r) {
      double x = rounded(t, inputValue(t, op, r, i));
      acc = op == hocclProd ? acc * x : op == hocclMax ? std::max(acc, x) : op == hocclMin ? std::min(acc, x) : acc + x;
    }
    if (t == hocclFloat16 && std::fabs(acc) > 65504) acc = acc > 0 ? INFINITY : -INFINITY;
    // fp8 saturates (products of factors >= 1 only grow, so once is enough)
    // and an fp8 avg is the sum divided, rounded once.
    if (isFp8(t)) return rounded(t, op == hocclAvg ? acc / nranks : acc);
    return op == hocclAvg ? acc / nranks : acc;
  }
  uint64_t acc = static_cast<uint64_t>(inputValue(t, op, 0, i));
  for (int r = 1; r < nranks; ++r) {
    uint64_t x = static_cast<uint64_t>(inputValue(t, op, r, i));
    if (op == hocclProd) acc *= x;
    else if (op == hocclMax) acc = std::max(acc, x);
    else if (op == hocclMin) acc = std::min(acc, x);
    else acc += x;
  }
  double w = wrapInt(t, acc);
  if (op == hocclAvg) w = std::trunc(w / nranks);
  return w;
}

double gatherValue(hocclDataType_t t, int rank, uint64_t i) {
  // fp8: 97 distinct finite values (codes 0..96), exact by construction.
  if (isFp8(t)) return fp8BitsToDouble(t, static_cast<uint8_t>((static_cast<uint64_t>(rank) * 131 + i) % 97));
  return static_cast<double>((static_cast<uint64_t>(rank) * 131 + i) % 97);
}

void store(void* buf, hocclDataType_t t, uint64_t idx, double v) {
  switch (t) {
    case hocclInt8: static_cast<int8_t*>(buf)[idx] = static_cast<int8_t>(v); break;
    case hocclUint8: static_cast<uint8_t*>(buf)[idx] = static_cast<uint8_t>(v); break;
    case hocclInt32: static_cast<int32_t*>(buf)[idx] = static_cast<int32_t>(v); break;
    case hocclUint32: static_cast<uint32_t*>(buf)[idx] = static_cast<uint32_t>(v); break;
    case hocclInt64: static_cast<int64_t*>(buf)[idx] = static_cast<int64_t>(v); break;
    case hocclUint64: static_cast<uint64_t*>(buf)[idx] = static_cast<uint64_t>(v); break;
    case hocclFloat16: static_cast<uint16_t*>(buf)[idx] = floatToHalfBits(static_cast<float>(v)); break;
    case hocclFloat32: static_cast<float*>(buf)[idx] = static_cast<float>(v); break;
    case hocclFloat64: static_cast<double*>(buf)[idx] = v; break;
    case hocclBfloat16: static_cast<uint16_t*>(buf)[idx] = floatToBf16Bits(static_cast<float>(v)); break;
    case hocclFloat8e4m3: case hocclFloat8e5m2: static_cast<uint8_t*>(buf)[idx] = doubleToFp8Bits(t, v); break;
    default: break;
  }
}

double load(const void* buf, hocclDataType_t t, uint64_t idx) {
  switch (t) {
    case hocclInt8: return static_cast<const int8_t*>(buf)[idx];
    case hocclUint8: return static_cast<const uint8_t*>(buf)[idx];
    case hocclInt32: return static_cast<const int32_t*>(buf)[idx];
    case hocclUint32: return static_cast<const uint32_t*>(buf)[idx];
    case hocclInt64: return static_cast<double>(static_cast<const int64_t*>(buf)[idx]);
    case hocclUint64: return static_cast<double>(static_cast<const uint64_t*>(buf)[idx]);
    case hocclFloat16: return halfBitsToFloat(static_cast<const uint16_t*>(buf)[idx]);
    case hocclFloat32: return static_cast<const float*>(buf)[idx];
    case hocclFloat64: return static_cast<const double*>(buf)[idx];
    case hocclBfloat16: return bf16BitsToFloat(static_cast<const uint16_t*>(buf)[idx]);
    case hocclFloat8e4m3: case hocclFloat8e5m2: return fp8BitsToDouble(t, static_cast<const uint8_t*>(buf)[idx]);
    default: return NAN;
  }
}

bool matches(hocclDataType_t t, hocclRedOp_t op, double got, double want) {
  if (op == hocclAvg && isFloat(t) && !isFp8(t)) {  // fp8's expected avg is already rounded
    double tol = (t == hocclFloat16) ? 1e-3 : (t == hocclBfloat16) ? 8e-3 : (t == hocclFloat32) ? 1e-6 : 1e-12;
    return std::fabs(got - want) <= tol * std::max(1.0, std::fabs(want));
  }
  if (std::isinf(want)) return got == want;
  return got == want;
}

void fillReduceInput(void* buf, hocclDataType_t t, hocclRedOp_t op, int rank, uint64_t first, uint64_t n) {
  for (uint64_t i = 0; i < n; ++i) store(buf, t, i, inputValue(t, op, rank, first + i));
}

uint64_t countReduceErrors(const void* buf, hocclDataType_t t, hocclRedOp_t op, int nranks, uint64_t first,
                           uint64_t n, std::string* firstError) {
  uint64_t wrong = 0;
  for (uint64_t i = 0; i < n; ++i) {
    double want = expectedReduce(t, op, nranks, first + i);
    double got = load(buf, t, i);
    if (!matches(t, op, got, want)) {
      if (wrong == 0 && firstError)
        *firstError = "element " + std::to_string(first + i) + ": got " + std::to_string(got) + ", want " +
                      std::to_string(want);
      ++wrong;
    }
  }
  return wrong;
}

}  // namespace checkvals
