// Device kernels, compiled by nvcc into the fatbin that libhoccl embeds
// (cmake/Cuda.cmake). Entry points are extern "C" so the loader finds them
// by plain name: two simple data kernels, and the device-plan interpreter
// (interp.h) for float sum, the first of its instances. None has run on a
// GPU yet; the interpreter is tested on the host (tests/test_cuda_interp.cc).
#include <cuda/atomic>

#include <cstddef>
#include <cstdint>

#include "src/exec/cuda/interp.h"

namespace {

__device__ __forceinline__ float4 add4(float4 a, float4 b) {
  return make_float4(a.x + b.x, a.y + b.y, a.z + b.z, a.w + b.w);
}

}  // namespace

// out[i] = a[i] + b[i] for n floats, 16 bytes per thread per iteration; the
// tail of fewer than 4 floats is done by the first threads. The pointers
// must be 16-byte aligned (cuMemAlloc's are).
extern "C" __global__ void __launch_bounds__(512) hocclSumFloat(const float* __restrict__ a,
                                                                const float* __restrict__ b,
                                                                float* __restrict__ out, size_t n) {
  const size_t n4 = n / 4;
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  const size_t first = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const float4* a4 = reinterpret_cast<const float4*>(a);
  const float4* b4 = reinterpret_cast<const float4*>(b);
  float4* out4 = reinterpret_cast<float4*>(out);
  for (size_t i = first; i < n4; i += stride) out4[i] = add4(a4[i], b4[i]);
  for (size_t i = n4 * 4 + first; i < n; i += stride) out[i] = a[i] + b[i];
}

// A copy of n bytes, 16 at a time where both pointers are 16-byte aligned
// and bytewise otherwise (and for the tail).
extern "C" __global__ void __launch_bounds__(512) hocclCopy(const void* __restrict__ src, void* __restrict__ dst,
                                                            size_t bytes) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  const size_t first = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const auto* s = static_cast<const unsigned char*>(src);
  auto* d = static_cast<unsigned char*>(dst);
  size_t vectorBytes = 0;
  if (((reinterpret_cast<size_t>(s) | reinterpret_cast<size_t>(d)) & 15) == 0) {
    vectorBytes = bytes & ~static_cast<size_t>(15);
    const uint4* s16 = reinterpret_cast<const uint4*>(s);
    uint4* d16 = reinterpret_cast<uint4*>(d);
    for (size_t i = first; i < vectorBytes / 16; i += stride) d16[i] = s16[i];
  }
  for (size_t i = vectorBytes + first; i < bytes; i += stride) d[i] = s[i];
}

namespace {

// interp.h's lane policy for a CTA: the channel's lanes are the block's
// threads; counters are system-scope atomics (peers and the host read them
// through mapped memory).
struct CtaLanes {
  uint64_t* words;  // __shared__, 4 words
  __device__ uint32_t lane() const { return threadIdx.x; }
  __device__ uint32_t lanes() const { return blockDim.x; }
  __device__ void sync() const { __syncthreads(); }
  __device__ uint64_t* shared() const { return words; }
  __device__ static uint64_t load(const uint64_t* p) {
    return cuda::atomic_ref<uint64_t, cuda::thread_scope_system>(*const_cast<uint64_t*>(p))
        .load(cuda::memory_order_acquire);
  }
  __device__ static uint64_t loadRelaxed(const uint64_t* p) {
    return cuda::atomic_ref<uint64_t, cuda::thread_scope_system>(*const_cast<uint64_t*>(p))
        .load(cuda::memory_order_relaxed);
  }
  // After the block's barrier: the release makes every lane's data writes
  // (ordered before it by the barrier) visible before the counter.
  __device__ static void store(uint64_t* p, uint64_t v) {
    cuda::atomic_ref<uint64_t, cuda::thread_scope_system>(*p).store(v, cuda::memory_order_release);
  }
  __device__ static uint32_t load32(const uint32_t* p) {
    return cuda::atomic_ref<uint32_t, cuda::thread_scope_system>(*const_cast<uint32_t*>(p))
        .load(cuda::memory_order_acquire);
  }
  // Fenced on both sides: acquire and release.
  __device__ static bool cas32(uint32_t* p, uint32_t expected, uint32_t v) {
    __threadfence_system();
    const bool won = atomicCAS_system(p, expected, v) == expected;
    __threadfence_system();
    return won;
  }
  __device__ static uint64_t nowNs() {
    uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
  }
  __device__ static void relax() { __nanosleep(64); }
};

}  // namespace

// One CTA per channel of one rank's plan (gridDim.x = the plan's channels,
// all resident at once: channels wait on each other's steps). The outcome
// is in args.control (code 0: every channel completed). One block per SM
// is all it needs, which lets ptxas use the registers it wants (with the
// default occupancy target it capped them at 32 and spilled on sm_90).
extern "C" __global__ void __launch_bounds__(512, 1) hocclInterpFloatSum(hoccl::cuda::InterpArgs args) {
  __shared__ uint64_t words[4];
  CtaLanes lanes{words};
  hoccl::cuda::runChannel<float, hoccl::cuda::Op<hoccl::cuda::OpKind::Sum, float>>(args, blockIdx.x, lanes);
}
