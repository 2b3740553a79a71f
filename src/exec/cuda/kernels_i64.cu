// The interpreter kernels for int64 elements: hocclInterp_i64_{sum,prod,max,min,avg}.
#include "src/exec/cuda/kernels_interp.cuh"

HOCCL_INTERP_KERNELS(i64, int64_t)
