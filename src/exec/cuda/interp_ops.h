// Element types and reductions of the device-plan interpreter (interp.h),
// written once for g++ and nvcc. Each op is one element at a time and
// computes exactly what the host's DataOps kernels compute
// (src/exec/dataops_kernels.h), so results compare bit for bit:
//  - integers wrap (the arithmetic runs in the unsigned type);
//  - float and double ops are commutative bit for bit, with CUDA's values
//    (fmaxf/fminf, __hmax/__hmin, the GPU's add and multiply): any NaN
//    result is the canonical NaN (sign clear, exponent and mantissa all
//    ones, as the GPU itself produces), max/min drop a NaN operand for the
//    other one and take +0 as greater than -0 -- written out here, not left
//    to fmaxf, so that the host runs the same code;
//  - fp16 and bf16 are widened to float, combined in float and rounded
//    back to nearest even, with the same bit formulas as the host's
//    software conversion (which reproduces F16C, NaN included);
//  - avg is a sum on the way, then each output element divided by the
//    number of ranks as DataOps' avgFinish divides it: integers in 64 bits
//    (signed or unsigned), truncating toward zero, as NCCL; floats in their
//    own precision, fp16 and bf16 through float, a NaN made canonical
//    (avgDivide).
// No fused multiply-add anywhere: nvcc compiles the kernels with
// -fmad=false (cmake/Cuda.cmake).
#pragma once

#include <cstdint>
#include <cstring>

#include "base/hd.h"

namespace hoccl::cuda {

HOCCL_HD inline uint32_t floatBits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}
HOCCL_HD inline float bitsFloat(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

// fp16 bits to float: NaNs quieted with their payload kept.
HOCCL_HD inline float halfToFloatBits(uint16_t h) {
  const uint32_t a = h & 0x7fffu, sign = uint32_t(h & 0x8000u) << 16;
  uint32_t r;
  if (a >= 0x7c00u) {
    r = ((a << 13) + 0x70000000u) | (a > 0x7c00u ? 0x00400000u : 0u);
  } else if (a >= 0x0400u) {
    r = (a << 13) + 0x38000000u;
  } else {  // subnormal: a * 2^-24, exact
    r = floatBits((bitsFloat(a | 0x4b000000u) - 8388608.0f) * 0x1p-24f);
  }
  return bitsFloat(r | sign);
}

// Float to fp16 bits, round to nearest even; overflow gives inf, NaN a
// quiet NaN keeping the top payload bits.
HOCCL_HD inline uint16_t floatToHalfBits(float f) {
  const uint32_t u = floatBits(f), sign = (u >> 16) & 0x8000u, a = u & 0x7fffffffu;
  uint32_t r;
  if (a > 0x7f800000u) {
    r = ((a >> 13) & 0x3ffu) | 0x7e00u;
  } else if (a >= 0x477ff000u) {
    r = 0x7c00u;  // >= 65520 rounds to inf
  } else if (a >= 0x38800000u) {
    r = (a - 0x38000000u + 0xfffu + ((a >> 13) & 1u)) >> 13;
  } else {  // below 2^-14: the float adder rounds at an ulp of 2^-24
    r = floatBits(bitsFloat(a) + 0.5f) - 0x3f000000u;
  }
  return uint16_t(r | sign);
}

HOCCL_HD inline float bf16ToFloatBits(uint16_t b) { return bitsFloat(uint32_t(b) << 16); }

HOCCL_HD inline uint16_t floatToBf16Bits(float f) {
  const uint32_t u = floatBits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x40u);
  return uint16_t((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

// Storage types of the 16-bit floats (distinct from uint16_t, which would
// mean an integer).
struct Half {
  uint16_t bits;
};
struct Bf16 {
  uint16_t bits;
};

// The unsigned type of an element's size: copies move bits, never values.
template <int N>
struct BitsOf;
template <>
struct BitsOf<1> { using type = uint8_t; };
template <>
struct BitsOf<2> { using type = uint16_t; };
template <>
struct BitsOf<4> { using type = uint32_t; };
template <>
struct BitsOf<8> { using type = uint64_t; };

template <class T>
struct IsInt {
  static constexpr bool value = false;
};
template <> struct IsInt<int8_t> { static constexpr bool value = true; };
template <> struct IsInt<uint8_t> { static constexpr bool value = true; };
template <> struct IsInt<int32_t> { static constexpr bool value = true; };
template <> struct IsInt<uint32_t> { static constexpr bool value = true; };
template <> struct IsInt<int64_t> { static constexpr bool value = true; };
template <> struct IsInt<uint64_t> { static constexpr bool value = true; };

enum class OpKind { Sum, Prod, Max, Min, Avg };  // Avg: Sum, then avgDivide

// x if it is not a NaN, else the canonical NaN of its type: the bits of
// the largest signed integer of its width.
template <class T>
HOCCL_HD inline T canonicalNan(T x) {
  if (x == x) return x;
  using U = typename BitsOf<int(sizeof(T))>::type;
  const U bits = U(~U(0)) >> 1;
  T r;
  memcpy(&r, &bits, sizeof r);
  return r;
}

template <class T>
HOCCL_HD inline bool signBit(T x) {
  using U = typename BitsOf<int(sizeof(T))>::type;
  U u;
  memcpy(&u, &x, sizeof u);
  return (u >> (8 * sizeof(U) - 1)) != 0;
}

// The op on a type the hardware computes in (integers, float, double).
template <OpKind K, class T>
HOCCL_HD inline T applyNative(T a, T b) {
  if constexpr (K == OpKind::Max || K == OpKind::Min) {
    constexpr bool kMax = K == OpKind::Max;
    if constexpr (IsInt<T>::value) {
      return (kMax ? a > b : a < b) ? a : b;
    } else {
      // a is kept when it wins outright, when b is NaN, or when they
      // compare equal and it is the one to keep (max: b is -0, min: a is
      // -0); both NaN leave a NaN b, made canonical.
      const bool tie = a == b && signBit(kMax ? b : a);
      const bool takeA = (kMax ? a > b : a < b) || b != b || tie;
      return canonicalNan(takeA ? a : b);
    }
  } else if constexpr (IsInt<T>::value) {
    using U = typename BitsOf<int(sizeof(T))>::type;
    const U x = U(a), y = U(b);
    return T(U(K == OpKind::Prod ? U(x * y) : U(x + y)));
  } else {
    return canonicalNan(K == OpKind::Prod ? T(a * b) : T(a + b));
  }
}

// The type an integer avg divides in, of the element's signedness: DataOps
// divides in 64 bits; for elements of up to 32 bits a 32-bit division
// gives the same quotient (both truncate, nothing overflows for
// nranks >= 1) and is far cheaper on a GPU.
template <class T>
struct AvgWide;
template <> struct AvgWide<int8_t> { using type = int32_t; };
template <> struct AvgWide<uint8_t> { using type = uint32_t; };
template <> struct AvgWide<int32_t> { using type = int32_t; };
template <> struct AvgWide<uint32_t> { using type = uint32_t; };
template <> struct AvgWide<int64_t> { using type = int64_t; };
template <> struct AvgWide<uint64_t> { using type = uint64_t; };

// x / nranks, nranks >= 1, as avgFinish computes it.
template <class T>
HOCCL_HD inline T avgDivideNative(T x, uint32_t nranks) {
  if constexpr (IsInt<T>::value) {
    using W = typename AvgWide<T>::type;
    return T(W(x) / W(nranks));
  } else {
    return canonicalNan(T(x / T(nranks)));
  }
}

// Op<K, T>::apply(received, local): the reduction of one element;
// Op<K, T>::avgDivide(x, nranks): avg's division of a reduced element.
template <OpKind K, class T>
struct Op {
  static constexpr OpKind kKind = K;
  HOCCL_HD static T apply(T a, T b) { return applyNative<K, T>(a, b); }
  HOCCL_HD static T avgDivide(T x, uint32_t nranks) { return avgDivideNative<T>(x, nranks); }
};
template <OpKind K>
struct Op<K, Half> {
  static constexpr OpKind kKind = K;
  HOCCL_HD static Half apply(Half a, Half b) {
    return Half{floatToHalfBits(applyNative<K, float>(halfToFloatBits(a.bits), halfToFloatBits(b.bits)))};
  }
  HOCCL_HD static Half avgDivide(Half x, uint32_t nranks) {
    return Half{floatToHalfBits(canonicalNan(halfToFloatBits(x.bits) / float(nranks)))};
  }
};
template <OpKind K>
struct Op<K, Bf16> {
  static constexpr OpKind kKind = K;
  HOCCL_HD static Bf16 apply(Bf16 a, Bf16 b) {
    return Bf16{floatToBf16Bits(applyNative<K, float>(bf16ToFloatBits(a.bits), bf16ToFloatBits(b.bits)))};
  }
  HOCCL_HD static Bf16 avgDivide(Bf16 x, uint32_t nranks) {
    return Bf16{floatToBf16Bits(canonicalNan(bf16ToFloatBits(x.bits) / float(nranks)))};
  }
};

}  // namespace hoccl::cuda
