// The interpreter kernels for uint64 elements: hocclInterp_u64_{sum,prod,max,min,avg}.
#include "src/exec/cuda/kernels_interp.cuh"

HOCCL_INTERP_KERNELS(u64, uint64_t)
