// The interpreter kernels for fp16 elements: hocclInterp_f16_{sum,prod,max,min,avg}.
#include "src/exec/cuda/kernels_interp.cuh"

HOCCL_INTERP_KERNELS(f16, hoccl::cuda::Half)
