// Device kernels, compiled by nvcc into the fatbin that libhoccl embeds
// (cmake/Cuda.cmake). Entry points are extern "C" so the loader finds them
// by plain name: here two simple data kernels; the device-plan
// interpreter's, one per type and op, are kernels_<type>.cu.
#include <cstddef>
#include <cstdint>

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
