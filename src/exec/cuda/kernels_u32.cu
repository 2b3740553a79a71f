// The interpreter kernels for uint32 elements: hocclInterp_u32_{sum,prod,max,min,avg}.
#include "src/exec/cuda/kernels_interp.cuh"

HOCCL_INTERP_KERNELS(u32, uint32_t)
