// The interpreter kernels for uint8 elements: hocclInterp_u8_{sum,prod,max,min,avg}.
#include "src/exec/cuda/kernels_interp.cuh"

HOCCL_INTERP_KERNELS(u8, uint8_t)
