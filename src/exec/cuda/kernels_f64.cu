// The interpreter kernels for double elements: hocclInterp_f64_{sum,prod,max,min,avg}.
#include "src/exec/cuda/kernels_interp.cuh"

HOCCL_INTERP_KERNELS(f64, double)
