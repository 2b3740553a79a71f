// The interpreter kernels for bf16 elements: hocclInterp_bf16_{sum,prod,max,min,avg}.
#include "src/exec/cuda/kernels_interp.cuh"

HOCCL_INTERP_KERNELS(bf16, hoccl::cuda::Bf16)
