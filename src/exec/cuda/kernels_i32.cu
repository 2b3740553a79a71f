// The interpreter kernels for int32 elements: hocclInterp_i32_{sum,prod,max,min,avg}.
#include "src/exec/cuda/kernels_interp.cuh"

HOCCL_INTERP_KERNELS(i32, int32_t)
