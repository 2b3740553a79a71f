// Host data operations: element-wise reduce and copy for every hoccl data type
// and reduction, with the instruction set chosen at run time (scalar, AVX2,
// AVX-512). The library is never built with -march=native; each ISA variant
// is compiled in its own translation unit with its own target flags and the
// best one the CPU supports is picked once.
#pragma once

#include <cstddef>
#include <cstdint>

namespace hoccl {

// Numbering matches hocclDataType_t / ncclDataType_t.
enum class DType : uint8_t {
  Int8 = 0, Uint8 = 1, Int32 = 2, Uint32 = 3, Int64 = 4, Uint64 = 5,
  Float16 = 6, Float32 = 7, Float64 = 8, Bfloat16 = 9,
  Float8e4m3 = 10, Float8e5m2 = 11,
};
constexpr int kNumDTypes = 12;

// Numbering matches hocclRedOp_t / ncclRedOp_t for the built-in ops.
// PreMulSum (a user's hocclRedOpCreatePreMulSum op) sums inputs that were
// first multiplied by the rank's scalar: between ranks it is a sum, but it
// travels as its own value so a rank using it and one using sum disagree.
enum class RedOp : uint8_t { Sum = 0, Prod = 1, Max = 2, Min = 3, Avg = 4, PreMulSum = 5 };
constexpr int kNumRedOps = 5;  // the reduce table's ops (PreMulSum uses Sum's)

inline size_t dtypeSize(DType t) {  // on every call's path: inline
  switch (t) {
    case DType::Int8: case DType::Uint8: case DType::Float8e4m3: case DType::Float8e5m2: return 1;
    case DType::Float16: case DType::Bfloat16: return 2;
    case DType::Int32: case DType::Uint32: case DType::Float32: return 4;
    case DType::Int64: case DType::Uint64: case DType::Float64: return 8;
  }
  return 0;
}
const char* dtypeName(DType t);  // nccl-tests spelling: int8 ... half float double bfloat16 f8e4m3 f8e5m2
const char* redOpName(RedOp op); // sum prod max min avg

enum class Isa : uint8_t { Scalar = 0, Avx2 = 1, Avx512 = 2 };
const char* isaName(Isa isa);

// out[i] = a[i] (op) b[i] for i < n. `out` may equal `a` or `b` (in place);
// other overlaps are not allowed. For Avg this performs a sum: the division
// is a separate pass (avgFinish) applied once the reduction is complete.
using ReduceFn = void (*)(void* out, const void* a, const void* b, size_t n);
// out[i] = a[i] / nranks as NCCL defines avg: integers divide the (wrapped)
// sum, truncating toward zero; floating types divide in their own precision
// (fp16/bf16 through fp32, rounded to nearest even).
using AvgFinishFn = void (*)(void* out, const void* in, size_t n, int nranks);

struct DataOps {
  Isa isa;
  ReduceFn reduce[kNumDTypes][kNumRedOps];
  AvgFinishFn avgFinish[kNumDTypes];
};

// The table for the best ISA this CPU supports, unless HOCCL_ISA (or
// setForcedIsa) asks for a lower one. Thread-safe; cheap after the first call.
const DataOps& dataOps();
// The table for one ISA, or nullptr if the CPU (or the build) lacks it.
const DataOps* dataOpsFor(Isa isa);
Isa bestSupportedIsa();

// out[i] = in[i] * scalar, with *scalar of type t: integers wrap, floating
// types multiply in their own precision (fp16, bf16 and fp8 in fp32, exact,
// rounded once to the type; fp8 saturating as its sums do). `out` may equal
// `in`. PreMulSum's local step.
void scaleElements(DType t, void* out, const void* in, size_t n, const void* scalar);

// Copy that the compiler may not elide; plain memcpy is already vectorised by
// libc, so copies go through it.
void copyBytes(void* dst, const void* src, size_t bytes);

// fp16 / bf16 conversions, round to nearest even, NaN preserved (quiet).
float halfToFloat(uint16_t h);
uint16_t floatToHalf(float f);
float bf16ToFloat(uint16_t b);
uint16_t floatToBf16(float f);

// fp8 (OCP E4M3 / E5M2) conversions with the rules of CUDA's
// __nv_cvt_float_to_fp8(x, __NV_SATFINITE, ...), which NCCL's fp8 reductions
// use: round to nearest even, anything beyond the largest finite value
// (infinities included) saturates to it, NaN stays NaN (E4M3: S.1111.111;
// E5M2: S.11111.1x, x the float's second payload bit), sign kept. To float:
// exact; NaN gives the canonical quiet NaN 0x7fffe000 (sign dropped), as
// CUDA's __nv_cvt_fp8_to_halfraw does.
float fp8e4m3ToFloat(uint8_t x);
float fp8e5m2ToFloat(uint8_t x);
uint8_t floatToFp8e4m3(float f);
uint8_t floatToFp8e5m2(float f);

}  // namespace hoccl
