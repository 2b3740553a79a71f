#include "perf/common/values.h"

#include <cmath>
#include <cstring>

namespace benchvals {
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

bool isFloat(hocclDataType_t t) {
  return t == hocclFloat16 || t == hocclFloat32 || t == hocclFloat64 || t == hocclBfloat16;
}

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
    case hocclInt8: case hocclUint8: return 1;
    case hocclFloat16: case hocclBfloat16: return 2;
    case hocclInt32: case hocclUint32: case hocclFloat32: return 4;
    default: return 8;
  }
}

const char* typeName(hocclDataType_t t) {
  static const char* names[] = {"int8", "uint8", "int32", "uint32", "int64", "uint64", "half", "float", "double", "bfloat16"};
  return names[t];
}

const char* opName(hocclRedOp_t op) {
  static const char* names[] = {"sum", "prod", "max", "min", "avg"};
  return names[op];
}

double inputValue(hocclDataType_t t, hocclRedOp_t op, int rank, uint64_t i) {
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
    double acc = inputValue(t, op, 0, i);
    for (int r = 1; r < nranks; ++r) {
      double x = inputValue(t, op, r, i);
      acc = op == hocclProd ? acc * x : op == hocclMax ? std::max(acc, x) : op == hocclMin ? std::min(acc, x) : acc + x;
    }
    if (t == hocclFloat16 && std::fabs(acc) > 65504) acc = acc > 0 ? INFINITY : -INFINITY;
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
    default: return NAN;
  }
}

bool matches(hocclDataType_t t, hocclRedOp_t op, double got, double want) {
  if (op == hocclAvg && isFloat(t)) {
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

}  // namespace benchvals
