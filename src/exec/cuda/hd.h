// HOCCL_HD marks functions that both g++ and nvcc compile (the device plan's
// layout, the interpreter): __host__ __device__ under nvcc, nothing under g++.
#pragma once

#if defined(__CUDACC__)
#define HOCCL_HD __host__ __device__
#else
#define HOCCL_HD
#endif
