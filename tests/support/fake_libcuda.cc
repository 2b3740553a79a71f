// The fake libcuda (fake_cuda.h) as a stand-alone libcuda.so.1, so that any
// program, the perf tools included, runs the device path on the host:
//
//   LD_LIBRARY_PATH=build/tests/fakecuda build/perf/all_reduce_perf --buffers device
//
// It exports cuGetProcAddress_v2, which hoccl resolves the driver through,
// and the plain entry points the perf tools open by name (device_mem.cc).
// The fake starts at the first call and lives until the process exits; its
// kernels are the host-compiled interpreter, so timings are the host's,
// not a GPU's. Across processes of one host, VMM memory is shared as memfds
// (fake_cuda_vmm.h), as between fork()ed ranks.
#include <cstdint>
#include <cstdio>

#include "tests/support/fake_cuda.h"

namespace {

using hoccl::cuda::GetProcAddressFn;

const hoccl::cuda::Driver& fake() {
  // Never destroyed: the process's threads may use it until exit.
  static hoccl::fakecuda::FakeCuda* f = new hoccl::fakecuda::FakeCuda();
  return f->driver();
}

template <class F>
F entry(const char* name) {
  void* fn = nullptr;
  int status = 0;
  fake().getProc(name, &fn, 12000, 0, &status);
  return reinterpret_cast<F>(fn);
}

constexpr int kNotFound = 500;  // CUDA_ERROR_NOT_FOUND

}  // namespace

#define HOCCL_FAKE_EXPORT extern "C" __attribute__((visibility("default")))

HOCCL_FAKE_EXPORT int cuGetProcAddress_v2(const char* symbol, void** fn, int version, uint64_t flags, int* status) {
  return fake().getProc(symbol, fn, version, flags, status);
}

// The entry points a program opens by name, each forwarded to the fake's.
#define HOCCL_FAKE_FORWARD(exported, name, params, args)                   \
  HOCCL_FAKE_EXPORT int exported params {                                  \
    auto f = entry<int(*) params>(name);                                   \
    return f ? f args : kNotFound;                                         \
  }

HOCCL_FAKE_FORWARD(cuInit, "cuInit", (unsigned flags), (flags))
HOCCL_FAKE_FORWARD(cuDriverGetVersion, "cuDriverGetVersion", (int* v), (v))
HOCCL_FAKE_FORWARD(cuDeviceGetCount, "cuDeviceGetCount", (int* n), (n))
HOCCL_FAKE_FORWARD(cuDeviceGet, "cuDeviceGet", (int* d, int ordinal), (d, ordinal))
HOCCL_FAKE_FORWARD(cuDeviceGetName, "cuDeviceGetName", (char* name, int len, int d), (name, len, d))
HOCCL_FAKE_FORWARD(cuDeviceGetPCIBusId, "cuDeviceGetPCIBusId", (char* bus, int len, int d), (bus, len, d))
HOCCL_FAKE_FORWARD(cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain", (void** c, int d), (c, d))
HOCCL_FAKE_FORWARD(cuDevicePrimaryCtxRelease_v2, "cuDevicePrimaryCtxRelease", (int d), (d))
HOCCL_FAKE_FORWARD(cuCtxSetCurrent, "cuCtxSetCurrent", (void* c), (c))
HOCCL_FAKE_FORWARD(cuStreamCreate, "cuStreamCreate", (void** s, unsigned flags), (s, flags))
HOCCL_FAKE_FORWARD(cuStreamDestroy_v2, "cuStreamDestroy", (void* s), (s))
HOCCL_FAKE_FORWARD(cuStreamSynchronize, "cuStreamSynchronize", (void* s), (s))
HOCCL_FAKE_FORWARD(cuStreamQuery, "cuStreamQuery", (void* s), (s))
HOCCL_FAKE_FORWARD(cuMemAlloc_v2, "cuMemAlloc", (unsigned long long* p, size_t bytes), (p, bytes))
HOCCL_FAKE_FORWARD(cuMemFree_v2, "cuMemFree", (unsigned long long p), (p))
HOCCL_FAKE_FORWARD(cuMemcpyHtoDAsync_v2, "cuMemcpyHtoDAsync",
                   (unsigned long long dst, const void* src, size_t bytes, void* s), (dst, src, bytes, s))
HOCCL_FAKE_FORWARD(cuMemcpyDtoHAsync_v2, "cuMemcpyDtoHAsync",
                   (void* dst, unsigned long long src, size_t bytes, void* s), (dst, src, bytes, s))
HOCCL_FAKE_FORWARD(cuMemcpyDtoDAsync_v2, "cuMemcpyDtoDAsync",
                   (unsigned long long dst, unsigned long long src, size_t bytes, void* s), (dst, src, bytes, s))

HOCCL_FAKE_EXPORT int cuGetErrorName(int rc, const char** name) {
  static thread_local char buf[32];
  snprintf(buf, sizeof buf, "CUDA_ERROR_%d", rc);
  *name = rc == 0 ? "CUDA_SUCCESS" : buf;
  return 0;
}
