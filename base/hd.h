// HOCCL_HD marks functions that both g++ and nvcc compile (the device plan's
// layout, a device connection's memory, the interpreter): __host__
// __device__ under nvcc, nothing under g++.
// HOCCL_UNROLL before a loop of a constant, small trip count asks both
// compilers to unroll it (on a GPU, a loop over a local array that is not
// unrolled puts the array in local memory: a stack frame ptxas rejects).
#pragma once

#if defined(__CUDACC__)
#define HOCCL_HD __host__ __device__
#define HOCCL_UNROLL _Pragma("unroll")
#else
#define HOCCL_HD
#define HOCCL_UNROLL _Pragma("GCC unroll 16")
#endif
