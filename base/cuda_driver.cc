#include "base/cuda_driver.h"

#include <dlfcn.h>

#include <atomic>

namespace hoccl::cuda {
namespace {

std::atomic<const Driver*> testDriver{nullptr};

Driver withState(Driver d, DriverState state, std::string status) {
  d.state = state;
  d.status = std::move(status);
  return d;
}

// Resolves `name` into *fn; on failure returns why (empty when resolved).
template <typename Fn>
std::string resolve(GetProcAddressFn getProc, const char* name, Fn* fn, int* result) {
  void* p = nullptr;
  int symbolStatus = -1;
  *result = getProc(name, &p, kDriverApiVersion, 0, &symbolStatus);
  if (*result != kCudaSuccess) return std::string("cuGetProcAddress(") + name + ") returned " + resultName(*result);
  if (!p || symbolStatus != 0)
    return std::string("the driver has no ") + name + " for CUDA " + std::to_string(kDriverApiVersion / 1000) + "." +
           std::to_string(kDriverApiVersion % 1000 / 10) + " (symbol status " + std::to_string(symbolStatus) + ")";
  *fn = reinterpret_cast<Fn>(p);
  return "";
}

}  // namespace

std::string resultName(int result) {
  const char* name = result == kCudaSuccess                  ? "CUDA_SUCCESS"
                     : result == kCudaErrorInvalidValue        ? "CUDA_ERROR_INVALID_VALUE"
                     : result == kCudaErrorNotInitialized      ? "CUDA_ERROR_NOT_INITIALIZED"
                     : result == kCudaErrorStubLibrary         ? "CUDA_ERROR_STUB_LIBRARY"
                     : result == kCudaErrorInsufficientDriver  ? "CUDA_ERROR_INSUFFICIENT_DRIVER"
                     : result == kCudaErrorNoDevice            ? "CUDA_ERROR_NO_DEVICE"
                     : result == 2                             ? "CUDA_ERROR_OUT_OF_MEMORY"
                     : result == 200                           ? "CUDA_ERROR_INVALID_IMAGE"
                     : result == 500                           ? "CUDA_ERROR_NOT_FOUND"
                     : result == 600                           ? "CUDA_ERROR_NOT_READY"
                     : result == 700                           ? "CUDA_ERROR_ILLEGAL_ADDRESS"
                     : result == 800                           ? "CUDA_ERROR_NOT_PERMITTED"
                     : result == 801                           ? "CUDA_ERROR_NOT_SUPPORTED"
                                                               : "CUresult";
  return std::string(name) + " (" + std::to_string(result) + ")";
}

Driver probeDriver(GetProcAddressFn getProc, const std::string& from) {
  Driver d;
  d.getProc = getProc;
  int rc = 0;
  // The stub library answers every call, cuGetProcAddress included, with
  // CUDA_ERROR_STUB_LIBRARY.
  std::string why = resolve(getProc, "cuInit", &d.api.init, &rc);
  if (rc == kCudaErrorStubLibrary)
    return withState(d, DriverState::Stub,
                     "stub library (no GPU): cuGetProcAddress in " + from + " returned " + resultName(rc));
  if (why.empty()) why = resolve(getProc, "cuDriverGetVersion", &d.api.driverGetVersion, &rc);
  if (why.empty()) why = resolve(getProc, "cuDeviceGetCount", &d.api.deviceGetCount, &rc);
  if (why.empty()) why = resolve(getProc, "cuPointerGetAttribute", &d.api.pointerGetAttribute, &rc);
  if (why.empty()) why = resolve(getProc, "cuDeviceGet", &d.api.deviceGet, &rc);
  if (why.empty()) why = resolve(getProc, "cuDeviceGetName", &d.api.deviceGetName, &rc);
  if (why.empty()) why = resolve(getProc, "cuDeviceGetPCIBusId", &d.api.deviceGetPciBusId, &rc);
  if (!why.empty()) return withState(d, DriverState::Failed, "unusable driver: " + from + ": " + why);

  rc = d.api.init(0);
  if (rc == kCudaErrorStubLibrary)
    return withState(d, DriverState::Stub, "stub library (no GPU): cuInit returned " + resultName(rc));
  if (rc == kCudaErrorNoDevice)
    return withState(d, DriverState::NoDevice, "no device: cuInit returned " + resultName(rc));
  if (rc != kCudaSuccess)
    return withState(d, DriverState::Failed, "unusable driver: cuInit returned " + resultName(rc));
  if ((rc = d.api.driverGetVersion(&d.version)) != kCudaSuccess)
    return withState(d, DriverState::Failed, "unusable driver: cuDriverGetVersion returned " + resultName(rc));
  std::string version =
      "CUDA driver " + std::to_string(d.version / 1000) + "." + std::to_string(d.version % 1000 / 10);
  if (d.version < kDriverApiVersion)
    return withState(d, DriverState::Failed, "unusable driver: " + version + " is older than the 12.0 hoccl needs");
  if ((rc = d.api.deviceGetCount(&d.devices)) != kCudaSuccess)
    return withState(d, DriverState::Failed,
                     "unusable driver: " + version + ": cuDeviceGetCount returned " + resultName(rc));
  if (d.devices <= 0) {
    d.devices = 0;
    return withState(d, DriverState::NoDevice, "no device: " + version + " counts 0 devices");
  }
  return withState(d, DriverState::Ready,
                   version + ", " + std::to_string(d.devices) + (d.devices == 1 ? " device" : " devices"));
}

Driver loadDriver(const char* path) {
  void* lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char* err = dlerror();
    return withState(Driver(), DriverState::NoDriver,
                     std::string("no driver: ") + path + " not found (" + (err ? err : "dlopen failed") + ")");
  }
  // cuGetProcAddress_v2 came with CUDA 12.0; an older driver has only the
  // unversioned one.
  void* sym = dlsym(lib, "cuGetProcAddress_v2");
  if (!sym)
    return withState(Driver(), DriverState::NoDriver,
                     std::string("no driver: ") + path + " has no cuGetProcAddress_v2 (a driver older than CUDA 12)");
  return probeDriver(reinterpret_cast<GetProcAddressFn>(sym), path);
}

const Driver& processDriver() {
  if (const Driver* d = testDriver.load(std::memory_order_acquire)) return *d;
  static const Driver driver = loadDriver("libcuda.so.1");
  return driver;
}

void setProcessDriverForTesting(const Driver* d) { testDriver.store(d, std::memory_order_release); }

MemoryKind memoryKind(const Driver& d, const void* p) {
  if (!d.usable() || !p) return MemoryKind::Host;
  unsigned type = 0;
  // Memory the driver never saw (malloc, the stack) is CUDA_ERROR_INVALID_VALUE.
  int rc = d.api.pointerGetAttribute(&type, kPointerAttributeMemoryType, reinterpret_cast<uintptr_t>(p));
  if (rc != kCudaSuccess) return MemoryKind::Host;
  return type == kMemoryTypeDevice || type == kMemoryTypeUnified ? MemoryKind::Device : MemoryKind::Host;
}

}  // namespace hoccl::cuda
