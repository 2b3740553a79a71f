// The interpreter kernels for int8 elements: hocclInterp_i8_{sum,prod,max,min,avg}.
#include "src/exec/cuda/kernels_interp.cuh"

HOCCL_INTERP_KERNELS(i8, int8_t)
