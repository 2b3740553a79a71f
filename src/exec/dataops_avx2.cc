// The avx2 instance of the reduce kernels (dataops_kernels.h), compiled with:
// -mavx2 -mfma -mf16c.
#if !defined(__AVX2__) || !defined(__FMA__) || !defined(__F16C__)
#error "dataops_avx2.cc must be compiled with -mavx2 -mfma -mf16c"
#endif
#define HOCCL_KERNEL_VEC_BYTES 32
#define HOCCL_KERNEL_F16C 1
#include "src/exec/dataops_kernels.h"

HOCCL_DATAOPS_INSTANCE(dataOpsAvx2, Isa::Avx2)
