// The entry-point names of the interpreter kernels (kernels*.cu): one
// extern "C" kernel per (type, op) the device path runs, named
// "hocclInterp_<type>_<op>", e.g. hocclInterp_f32_sum, hocclInterp_bf16_max.
// The device executor looks kernels up by these names in the embedded
// image, and the test driver (a fake libcuda) dispatches on them, so both
// sides spell them from here. Avg has its own kernels (a sum on the way,
// the division at the end, as DataOps' finish()); fp8 and PreMulSum have
// none (nullptr).
#pragma once

#include <string>

#include "src/exec/dataops.h"

namespace hoccl::cuda {

// "f32", "bf16", ...; nullptr for the types no kernel is built for (fp8).
inline const char* kernelTypeName(DType t) {
  switch (t) {
    case DType::Int8: return "i8";
    case DType::Uint8: return "u8";
    case DType::Int32: return "i32";
    case DType::Uint32: return "u32";
    case DType::Int64: return "i64";
    case DType::Uint64: return "u64";
    case DType::Float16: return "f16";
    case DType::Float32: return "f32";
    case DType::Float64: return "f64";
    case DType::Bfloat16: return "bf16";
    default: return nullptr;
  }
}

// redOpName's "sum", "prod", "max", "min", "avg"; nullptr for PreMulSum.
inline const char* kernelOpName(RedOp op) { return op == RedOp::PreMulSum ? nullptr : redOpName(op); }

// "hocclInterp_f32_sum"; "" when no kernel exists for the pair.
inline std::string interpKernelName(DType t, RedOp op) {
  const char* tn = kernelTypeName(t);
  const char* on = kernelOpName(op);
  if (!tn || !on) return std::string();
  return std::string("hocclInterp_") + tn + "_" + on;
}

}  // namespace hoccl::cuda
