// The device-plan interpreter (interp.h) as CUDA kernels: the lane policy
// of a CTA, and the macro that defines one type's kernels, one per op, named
// as kernel_names.h spells them ("hocclInterp_<type>_<op>"). Each type's
// kernels are their own kernels_<type>.cu, so that nvcc compiles the types
// apart (cmake/Cuda.cmake).
#pragma once

#include <cuda/atomic>

#include <cstdint>

#include "src/exec/cuda/interp.h"

namespace hoccl::cuda {

// interp.h's lane policy for a CTA: the channel's lanes are the block's
// threads. Counters are atomics of GPU scope when every peer runs on this
// GPU (kArgOneGpu), else of system scope (peers on other GPUs); the control
// record, which the host reads through mapped memory, always system scope.
struct CtaLanes {
  uint64_t* words;  // __shared__, 4 words
  bool oneGpu;      // InterpArgs::flags & kArgOneGpu
  __device__ uint32_t lane() const { return threadIdx.x; }
  __device__ uint32_t lanes() const { return blockDim.x; }
  __device__ void sync() const { __syncthreads(); }
  __device__ uint64_t* shared() const { return words; }
  template <::cuda::thread_scope S>
  __device__ static ::cuda::atomic_ref<uint64_t, S> ref(const uint64_t* p) {
    return ::cuda::atomic_ref<uint64_t, S>(*const_cast<uint64_t*>(p));
  }
  __device__ uint64_t load(const uint64_t* p) const {
    return oneGpu ? ref<::cuda::thread_scope_device>(p).load(::cuda::memory_order_acquire)
                  : ref<::cuda::thread_scope_system>(p).load(::cuda::memory_order_acquire);
  }
  __device__ uint64_t loadRelaxed(const uint64_t* p) const {
    return oneGpu ? ref<::cuda::thread_scope_device>(p).load(::cuda::memory_order_relaxed)
                  : ref<::cuda::thread_scope_system>(p).load(::cuda::memory_order_relaxed);
  }
  // After the block's barrier: the release makes every lane's data writes
  // (ordered before it by the barrier) visible before the counter.
  __device__ void store(uint64_t* p, uint64_t v) const {
    if (oneGpu) ref<::cuda::thread_scope_device>(p).store(v, ::cuda::memory_order_release);
    else ref<::cuda::thread_scope_system>(p).store(v, ::cuda::memory_order_release);
  }
  // The launch's own steps-done counters: its CTAs are all on this GPU.
  __device__ static uint64_t fetchAdd(uint64_t* p, uint64_t v) {
    return ref<::cuda::thread_scope_device>(p).fetch_add(v, ::cuda::memory_order_acq_rel);
  }
  __device__ static void storeRelaxed(uint64_t* p, uint64_t v) {
    ref<::cuda::thread_scope_device>(p).store(v, ::cuda::memory_order_relaxed);
  }
  __device__ static uint32_t load32(const uint32_t* p) {
    return ::cuda::atomic_ref<uint32_t, ::cuda::thread_scope_system>(*const_cast<uint32_t*>(p))
        .load(::cuda::memory_order_acquire);
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
  static constexpr uint32_t kPollShift = kDevPollShift;
};

// The body of every interpreter kernel: this CTA runs channel blockIdx.x.
template <class T, OpKind K>
__device__ __forceinline__ void runInterpCta(const InterpArgs& args) {
  __shared__ uint64_t words[4];
  CtaLanes lanes{words, (args.flags & kArgOneGpu) != 0};
  runChannel<T, Op<K, T>>(args, blockIdx.x, lanes);
}

}  // namespace hoccl::cuda

// One CTA per channel of one rank's plan (gridDim.x = the plan's channels,
// all resident at once: channels wait on each other's steps). The outcome
// is in args.control (code 0: every channel completed). One block per SM
// is all it needs, which lets ptxas use the registers it wants (with the
// default occupancy target it capped them at 32 and spilled on sm_90).
#define HOCCL_INTERP_KERNEL(tname, T, oname, kind)                                                         \
  extern "C" __global__ void __launch_bounds__(512, 1) hocclInterp_##tname##_##oname(hoccl::cuda::InterpArgs args) { \
    hoccl::cuda::runInterpCta<T, hoccl::cuda::OpKind::kind>(args);                                         \
  }

// The kernels of element type T, kernel_names.h's type name `tname`.
#define HOCCL_INTERP_KERNELS(tname, T)    \
  HOCCL_INTERP_KERNEL(tname, T, sum, Sum)   \
  HOCCL_INTERP_KERNEL(tname, T, prod, Prod) \
  HOCCL_INTERP_KERNEL(tname, T, max, Max)   \
  HOCCL_INTERP_KERNEL(tname, T, min, Min)   \
  HOCCL_INTERP_KERNEL(tname, T, avg, Avg)
