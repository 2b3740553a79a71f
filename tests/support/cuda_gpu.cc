#include "tests/support/cuda_gpu.h"

#include <cstring>
#include <mutex>

#include "base/cuda_device_api.h"
#include "base/cuda_driver.h"
#include "src/exec/cuda/image.h"

namespace hoccl::gputest {
namespace {

constexpr const char* kNoGpu = "no usable GPU: ";

// Resolves every entry point of GpuApi; "" or which one is missing.
std::string resolveApi(cuda::GetProcAddressFn getProc, GpuApi* api) {
  std::string missing;
  auto get = [&](const char* name, auto* fn) { cuda::resolveInto(getProc, name, fn, &missing); };
  get("cuDevicePrimaryCtxRetain", &api->devicePrimaryCtxRetain);
  get("cuCtxSetCurrent", &api->ctxSetCurrent);
  get("cuCtxSynchronize", &api->ctxSynchronize);
  get("cuDeviceGetAttribute", &api->deviceGetAttribute);
  get("cuModuleLoadData", &api->moduleLoadData);
  get("cuModuleGetFunction", &api->moduleGetFunction);
  get("cuOccupancyMaxActiveBlocksPerMultiprocessor", &api->occupancyMaxActiveBlocksPerMultiprocessor);
  get("cuMemAlloc", &api->memAlloc);
  get("cuMemFree", &api->memFree);
  get("cuMemHostAlloc", &api->memHostAlloc);
  get("cuMemHostGetDevicePointer", &api->memHostGetDevicePointer);
  get("cuMemFreeHost", &api->memFreeHost);
  get("cuMemcpyHtoD", &api->memcpyHtoD);
  get("cuMemcpyDtoH", &api->memcpyDtoH);
  get("cuMemsetD8", &api->memsetD8);
  get("cuStreamCreate", &api->streamCreate);
  get("cuStreamSynchronize", &api->streamSynchronize);
  get("cuStreamQuery", &api->streamQuery);
  get("cuLaunchKernel", &api->launchKernel);
  get("cuGetErrorName", &api->getErrorName);
  get("cuStreamBeginCapture", &api->streamBeginCapture);
  get("cuStreamEndCapture", &api->streamEndCapture);
  get("cuGraphInstantiateWithFlags", &api->graphInstantiateWithFlags);
  get("cuGraphLaunch", &api->graphLaunch);
  get("cuGraphExecDestroy", &api->graphExecDestroy);
  get("cuGraphDestroy", &api->graphDestroy);
  return missing.empty() ? "" : "the driver has no " + missing;
}

// Opens device 0; "" or why not (a failure: the driver is Ready).
std::string openDevice(const cuda::Driver& d, Gpu* g) {
  if (!d.getProc) return "the driver has no cuGetProcAddress";
  std::string why = resolveApi(d.getProc, &g->cu);
  if (!why.empty()) return why;
  int device = 0;
  if (!(why = g->check(d.api.deviceGet(&device, 0), "cuDeviceGet(0)")).empty()) return why;
  if (!(why = g->check(g->cu.devicePrimaryCtxRetain(&g->context, device), "cuDevicePrimaryCtxRetain")).empty())
    return why;
  if (!(why = g->check(g->cu.ctxSetCurrent(g->context), "cuCtxSetCurrent")).empty()) return why;
  int major = 0, minor = 0, concurrent = 0;
  if (!(why = g->check(g->cu.deviceGetAttribute(&g->sms, kAttrMultiprocessors, device), "SM count")).empty() ||
      !(why = g->check(g->cu.deviceGetAttribute(&major, kAttrCcMajor, device), "compute capability")).empty() ||
      !(why = g->check(g->cu.deviceGetAttribute(&minor, kAttrCcMinor, device), "compute capability")).empty() ||
      !(why = g->check(g->cu.deviceGetAttribute(&concurrent, kAttrConcurrentKernels, device), "concurrency")).empty())
    return why;
  g->cc = major * 10 + minor;
  g->concurrentKernels = concurrent != 0;
  const cuda::KernelImage image = cuda::kernelImage();
  if (!(why = g->check(g->cu.moduleLoadData(&g->module, image.data), "cuModuleLoadData(embedded fatbin)")).empty())
    return why + " (the image holds " + image.archs + "; this GPU is sm_" + std::to_string(g->cc) + ")";
  for (int i = 0; i < Gpu::kStreams; ++i) {
    Handle s = nullptr;
    if (!(why = g->check(g->cu.streamCreate(&s, kStreamNonBlocking), "cuStreamCreate")).empty()) return why;
    g->streams.push_back(s);
  }
  return "";
}

}  // namespace

std::string Gpu::errorName(int rc) const {
  const char* name = nullptr;
  if (cu.getErrorName && cu.getErrorName(rc, &name) == cuda::kCudaSuccess && name)
    return std::string(name) + " (" + std::to_string(rc) + ")";
  return cuda::resultName(rc);
}

std::string Gpu::check(int rc, const char* what) const {
  return rc == cuda::kCudaSuccess ? "" : std::string(what) + ": " + errorName(rc);
}

Handle Gpu::function(const char* name, std::string* why) const {
  Handle fn = nullptr;
  *why = check(cu.moduleGetFunction(&fn, module, name), name);
  return why->empty() ? fn : nullptr;
}

bool isSkipReason(const std::string& why) { return why.rfind(kNoGpu, 0) == 0; }

Gpu* openGpu(std::string* why) {
  const cuda::Driver& d = cuda::processDriver();
  if (!d.usable()) {
    *why = kNoGpu + d.status;
    return nullptr;
  }
  if (!cuda::kernelImage().data) {
    *why = std::string(kNoGpu) + "this build embeds no kernels (configure with -DHOCCL_CUDA=ON)";
    return nullptr;
  }
  static Gpu gpu;
  static std::string failed;
  static std::once_flag once;
  std::call_once(once, [&] { failed = openDevice(d, &gpu); });
  *why = failed;
  if (!failed.empty()) return nullptr;
  *why = gpu.check(gpu.cu.ctxSetCurrent(gpu.context), "cuCtxSetCurrent");
  return why->empty() ? &gpu : nullptr;
}

Arena::~Arena() {
  // A test that stopped half-way may leave kernels running on this memory;
  // they end (every wait is bounded) before it is freed.
  if (!device_.empty() || !host_.empty()) g_.cu.ctxSynchronize();
  for (DevPtr p : device_) g_.cu.memFree(p);
  for (void* p : host_) g_.cu.memFreeHost(p);
}

DevPtr Arena::alloc(size_t bytes) {
  DevPtr p = 0;
  if (!ok()) return 0;
  fail(g_.check(g_.cu.memAlloc(&p, bytes ? bytes : 1), "cuMemAlloc"));
  if (!ok()) return 0;
  device_.push_back(p);
  fail(g_.check(g_.cu.memsetD8(p, 0, bytes ? bytes : 1), "cuMemsetD8"));
  return p;
}

void* Arena::mapped(size_t bytes, DevPtr* device) {
  void* p = nullptr;
  *device = 0;
  if (!ok()) return nullptr;
  fail(g_.check(g_.cu.memHostAlloc(&p, bytes, kHostAllocPortableMapped), "cuMemHostAlloc(DEVICEMAP)"));
  if (!ok()) return nullptr;
  host_.push_back(p);
  std::memset(p, 0, bytes);
  fail(g_.check(g_.cu.memHostGetDevicePointer(device, p, 0), "cuMemHostGetDevicePointer"));
  return p;
}

void Arena::upload(DevPtr dst, const void* src, size_t bytes) {
  if (ok() && bytes) fail(g_.check(g_.cu.memcpyHtoD(dst, src, bytes), "cuMemcpyHtoD"));
}

void Arena::download(void* dst, DevPtr src, size_t bytes) {
  if (ok() && bytes) fail(g_.check(g_.cu.memcpyDtoH(dst, src, bytes), "cuMemcpyDtoH"));
}

void Arena::sync() {
  if (ok()) fail(g_.check(g_.cu.ctxSynchronize(), "cuCtxSynchronize"));
}

}  // namespace hoccl::gputest
