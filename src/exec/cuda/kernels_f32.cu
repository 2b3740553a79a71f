// The interpreter kernels for float elements: hocclInterp_f32_{sum,prod,max,min,avg}.
#include "src/exec/cuda/kernels_interp.cuh"

HOCCL_INTERP_KERNELS(f32, float)
