// A GPU for the tests labelled `gpu` (test_cuda_gpu*.cc): the driver API
// entry points they need beyond cuda::DriverApi, resolved by version through
// the same cuGetProcAddress_v2 (Driver::getProc), device 0's primary context
// and the kernels embedded in libhoccl loaded from their fatbin. No CUDA
// header is needed: the few types are declared here as the driver defines
// them (handles are pointers, device addresses 64-bit integers).
//
// Where processDriver() is not Ready (no driver, the toolkit's stub, no
// device) or the build embeds no kernels, there is no GPU and the tests skip
// saying why; anything failing after that is a test failure.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace hoccl::gputest {

using DevPtr = uint64_t;  // CUdeviceptr
using Handle = void*;     // CUcontext, CUmodule, CUfunction, CUstream

// CUdevice_attribute and flag values used.
constexpr int kAttrMultiprocessors = 16;   // CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT
constexpr int kAttrConcurrentKernels = 31; // CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS
constexpr int kAttrCcMajor = 75, kAttrCcMinor = 76;
constexpr unsigned kStreamNonBlocking = 1;       // CU_STREAM_NON_BLOCKING
constexpr unsigned kHostAllocPortableMapped = 3; // CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP
constexpr int kCudaErrorNotReady = 600;          // CUDA_ERROR_NOT_READY
constexpr int kCaptureModeGlobal = 0;            // CU_STREAM_CAPTURE_MODE_GLOBAL

struct GpuApi {
  int (*devicePrimaryCtxRetain)(Handle* ctx, int device);
  int (*ctxSetCurrent)(Handle ctx);
  int (*ctxSynchronize)();
  int (*deviceGetAttribute)(int* value, int attribute, int device);
  int (*moduleLoadData)(Handle* module, const void* image);
  int (*moduleGetFunction)(Handle* fn, Handle module, const char* name);
  int (*occupancyMaxActiveBlocksPerMultiprocessor)(int* blocks, Handle fn, int blockSize, size_t dynamicSmem);
  int (*memAlloc)(DevPtr* p, size_t bytes);
  int (*memFree)(DevPtr p);
  int (*memHostAlloc)(void** p, size_t bytes, unsigned flags);
  int (*memHostGetDevicePointer)(DevPtr* d, void* p, unsigned flags);
  int (*memFreeHost)(void* p);
  int (*memcpyHtoD)(DevPtr dst, const void* src, size_t bytes);
  int (*memcpyDtoH)(void* dst, DevPtr src, size_t bytes);
  int (*memsetD8)(DevPtr dst, unsigned char value, size_t bytes);
  int (*streamCreate)(Handle* stream, unsigned flags);
  int (*streamSynchronize)(Handle stream);
  int (*streamQuery)(Handle stream);  // CUDA_SUCCESS when done, kCudaErrorNotReady while running
  int (*launchKernel)(Handle fn, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                      unsigned sharedBytes, Handle stream, void** params, void** extra);
  int (*getErrorName)(int result, const char** name);
  // CUDA graphs (cuStreamBeginCapture is the 12.0 API's, with a mode).
  int (*streamBeginCapture)(Handle stream, int mode);
  int (*streamEndCapture)(Handle stream, Handle* graph);
  int (*graphInstantiateWithFlags)(Handle* exec, Handle graph, unsigned long long flags);
  int (*graphLaunch)(Handle exec, Handle stream);
  int (*graphExecDestroy)(Handle exec);
  int (*graphDestroy)(Handle graph);
};

struct Gpu {
  GpuApi cu{};
  Handle context = nullptr;
  Handle module = nullptr;
  int sms = 0;
  int cc = 0;  // compute capability: 90 for sm_90
  bool concurrentKernels = false;
  std::vector<Handle> streams;  // kStreams non-blocking streams: one per rank of a run
  static constexpr int kStreams = 4;

  // "CUDA_ERROR_INVALID_VALUE (1)".
  std::string errorName(int rc) const;
  // "" when rc is CUDA_SUCCESS, else "what: <error name>".
  std::string check(int rc, const char* what) const;
  // A kernel of the embedded image; null with *why when it does not resolve.
  Handle function(const char* name, std::string* why) const;
};

// The process's GPU, opened once (context made current on the calling
// thread each time). Null with *why: "no usable GPU: <driver status>" (or
// "no kernels in this build ...") when the tests must skip; anything else
// in *why is a failure.
Gpu* openGpu(std::string* why);
bool isSkipReason(const std::string& why);

// The device memory (and mapped host memory) of one test, freed together.
// The first error sticks and later calls do nothing.
class Arena {
 public:
  explicit Arena(const Gpu& g) : g_(g) {}
  ~Arena();
  Arena(const Arena&) = delete;
  Arena& operator=(const Arena&) = delete;
  DevPtr alloc(size_t bytes);                     // zeroed device memory (0 on error)
  void* mapped(size_t bytes, DevPtr* device);     // zeroed, pinned and mapped host memory
  void upload(DevPtr dst, const void* src, size_t bytes);
  void download(void* dst, DevPtr src, size_t bytes);
  void sync();  // cuCtxSynchronize: every copy and launch before it is complete
  const std::string& error() const { return error_; }
  bool ok() const { return error_.empty(); }
  void fail(const std::string& why) {
    if (error_.empty()) error_ = why;
  }

 private:
  const Gpu& g_;
  std::vector<DevPtr> device_;
  std::vector<void*> host_;
  std::string error_;
};

}  // namespace hoccl::gputest

// In a test body: `Gpu* g` for the process's GPU, or the test skips (no
// GPU) or fails (a GPU that cannot run the kernels).
#define HOCCL_GPU_OR_SKIP(g)                                                   \
  std::string g##Why;                                                          \
  ::hoccl::gputest::Gpu* g = ::hoccl::gputest::openGpu(&g##Why);               \
  if (!g && ::hoccl::gputest::isSkipReason(g##Why)) GTEST_SKIP() << g##Why;    \
  ASSERT_NE(g, nullptr) << g##Why

// Fails the test unless the driver call returns CUDA_SUCCESS.
#define HOCCL_CU(g, call) ASSERT_EQ((g)->check((call), #call), "")
