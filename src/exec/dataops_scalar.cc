// The scalar instance of the reduce kernels (dataops_kernels.h), compiled with:
// baseline x86-64 (SSE2), no extra flags.
#define HOCCL_KERNEL_VEC_BYTES 16
#define HOCCL_KERNEL_F16C 0
#include "src/exec/dataops_kernels.h"

HOCCL_DATAOPS_INSTANCE(dataOpsScalar, Isa::Scalar)
