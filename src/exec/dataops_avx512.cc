// The avx512 instance of the reduce kernels (dataops_kernels.h), compiled with:
// -mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx2 -mfma -mf16c.
#if !defined(__AVX512F__) || !defined(__AVX512BW__) || !defined(__AVX512VL__) || \
    !defined(__AVX512DQ__) || !defined(__AVX2__) || !defined(__F16C__)
#error "dataops_avx512.cc needs -mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx2 -mfma -mf16c"
#endif
#define HOCCL_KERNEL_VEC_BYTES 64
#define HOCCL_KERNEL_F16C 2
#include "src/exec/dataops_kernels.h"

HOCCL_DATAOPS_INSTANCE(dataOpsAvx512, Isa::Avx512)
