#include "perf/common/device_mem.h"

#include <dlfcn.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <mutex>

namespace bench {

// The driver entry points used, by their exported (versioned) names.
struct DeviceMemory::Api {
  int (*init)(unsigned);
  int (*deviceGetCount)(int*);
  int (*deviceGet)(int*, int);
  int (*deviceGetName)(char*, int, int);
  int (*deviceGetPciBusId)(char*, int, int);
  int (*primaryCtxRetain)(void**, int);
  int (*primaryCtxRelease)(int);
  int (*ctxSetCurrent)(void*);
  int (*streamCreate)(void**, unsigned);
  int (*streamDestroy)(void*);
  int (*streamSynchronize)(void*);
  int (*streamQuery)(void*);
  int (*memAlloc)(unsigned long long*, size_t);
  int (*memFree)(unsigned long long);
  int (*memcpyHtoDAsync)(unsigned long long, const void*, size_t, void*);
  int (*memcpyDtoHAsync)(void*, unsigned long long, size_t, void*);
  int (*memcpyDtoDAsync)(unsigned long long, unsigned long long, size_t, void*);
  int (*getErrorName)(int, const char**);
};

namespace {

constexpr unsigned kStreamNonBlocking = 1;

template <class F>
bool resolve(void* lib, const char* name, F* fn, std::string* missing) {
  *fn = reinterpret_cast<F>(dlsym(lib, name));
  if (!*fn) *missing += std::string(missing->empty() ? "" : ", ") + name;
  return *fn != nullptr;
}

}  // namespace

void askForDeviceQueues() { setenv("CUDA_DEVICE_MAX_CONNECTIONS", "32", 0); }

namespace {

// Loaded once per process; null with the reason in *why.
const DeviceMemory::Api* loadApi(std::string* why) {
  static std::once_flag once;
  static DeviceMemory::Api api;
  static const DeviceMemory::Api* loaded = nullptr;
  static std::string reason;
  std::call_once(once, [] {
    askForDeviceQueues();  // too late if the driver has started already
    void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
      reason = std::string("no CUDA driver: ") + dlerror();
      return;
    }
    std::string missing;
    resolve(lib, "cuInit", &api.init, &missing);
    resolve(lib, "cuDeviceGetCount", &api.deviceGetCount, &missing);
    resolve(lib, "cuDeviceGet", &api.deviceGet, &missing);
    resolve(lib, "cuDeviceGetName", &api.deviceGetName, &missing);
    resolve(lib, "cuDeviceGetPCIBusId", &api.deviceGetPciBusId, &missing);
    resolve(lib, "cuDevicePrimaryCtxRetain", &api.primaryCtxRetain, &missing);
    resolve(lib, "cuDevicePrimaryCtxRelease_v2", &api.primaryCtxRelease, &missing);
    resolve(lib, "cuCtxSetCurrent", &api.ctxSetCurrent, &missing);
    resolve(lib, "cuStreamCreate", &api.streamCreate, &missing);
    resolve(lib, "cuStreamDestroy_v2", &api.streamDestroy, &missing);
    resolve(lib, "cuStreamSynchronize", &api.streamSynchronize, &missing);
    resolve(lib, "cuStreamQuery", &api.streamQuery, &missing);
    resolve(lib, "cuMemAlloc_v2", &api.memAlloc, &missing);
    resolve(lib, "cuMemFree_v2", &api.memFree, &missing);
    resolve(lib, "cuMemcpyHtoDAsync_v2", &api.memcpyHtoDAsync, &missing);
    resolve(lib, "cuMemcpyDtoHAsync_v2", &api.memcpyDtoHAsync, &missing);
    resolve(lib, "cuMemcpyDtoDAsync_v2", &api.memcpyDtoDAsync, &missing);
    resolve(lib, "cuGetErrorName", &api.getErrorName, &missing);
    if (!missing.empty()) {
      reason = "the CUDA driver lacks " + missing;
      return;
    }
    int rc = api.init(0);
    if (rc != 0) {
      const char* name = nullptr;
      api.getErrorName(rc, &name);
      reason = std::string("cuInit failed: ") + (name ? name : "error") + " (" + std::to_string(rc) + ")";
      return;
    }
    loaded = &api;
  });
  if (!loaded) *why = reason;
  return loaded;
}

}  // namespace

std::string DeviceMemory::check(int rc, const char* what) const {
  if (rc == 0) return "";
  const char* name = nullptr;
  if (api_->getErrorName(rc, &name) != 0 || !name) name = "error";
  return std::string(what) + ": " + name + " (" + std::to_string(rc) + ")";
}

std::unique_ptr<DeviceMemory> DeviceMemory::open(int ordinal, std::string* error) {
  const Api* api = loadApi(error);
  if (!api) return nullptr;
  int count = 0;
  if (api->deviceGetCount(&count) != 0 || count < 1) {
    *error = "no CUDA device";
    return nullptr;
  }
  std::unique_ptr<DeviceMemory> m(new DeviceMemory());
  m->api_ = api;
  m->ordinal_ = ordinal % count;
  std::string e = m->check(api->deviceGet(&m->device_, m->ordinal_), "cuDeviceGet");
  if (e.empty()) e = m->check(api->primaryCtxRetain(&m->ctx_, m->device_), "cuDevicePrimaryCtxRetain");
  if (e.empty()) e = m->check(api->ctxSetCurrent(m->ctx_), "cuCtxSetCurrent");
  if (e.empty()) e = m->check(api->streamCreate(&m->stream_, kStreamNonBlocking), "cuStreamCreate");
  if (!e.empty()) {
    *error = e;
    return nullptr;
  }
  char name[128] = {0}, bus[32] = {0};
  api->deviceGetName(name, sizeof name - 1, m->device_);
  api->deviceGetPciBusId(bus, sizeof bus - 1, m->device_);
  m->name_ = std::string(name) + " [" + bus + "]";
  return m;
}

DeviceMemory::~DeviceMemory() {
  if (!api_) return;
  api_->ctxSetCurrent(ctx_);
  if (stream_) api_->streamSynchronize(stream_);
  for (unsigned long long p : allocations_) api_->memFree(p);
  if (stream_) api_->streamDestroy(stream_);
  if (ctx_) api_->primaryCtxRelease(device_);
}

std::string DeviceMemory::alloc(size_t bytes, void** p) {
  unsigned long long d = 0;
  std::string e = check(api_->memAlloc(&d, bytes ? bytes : 1), "cuMemAlloc");
  if (!e.empty()) return e + " of " + std::to_string(bytes) + " bytes";
  allocations_.push_back(d);
  *p = reinterpret_cast<void*>(d);
  return "";
}

std::string DeviceMemory::toDevice(void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return "";
  std::string e = check(api_->memcpyHtoDAsync(reinterpret_cast<unsigned long long>(dst), src, bytes, stream_),
                        "cuMemcpyHtoDAsync");
  return e.empty() ? sync() : e;
}

std::string DeviceMemory::toHost(void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return "";
  std::string e = check(api_->memcpyDtoHAsync(dst, reinterpret_cast<unsigned long long>(src), bytes, stream_),
                        "cuMemcpyDtoHAsync");
  return e.empty() ? sync() : e;
}

std::string DeviceMemory::copyRate(size_t bytes, int iters, double* gbs) {
  *gbs = 0;
  unsigned long long from = 0, to = 0;
  std::string e = check(api_->memAlloc(&from, bytes), "cuMemAlloc");
  if (e.empty()) e = check(api_->memAlloc(&to, bytes), "cuMemAlloc");
  auto copy = [&] { return check(api_->memcpyDtoDAsync(to, from, bytes, stream_), "cuMemcpyDtoDAsync"); };
  if (e.empty()) e = copy();  // the first one, untimed
  if (e.empty()) e = sync();
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < iters && e.empty(); ++i) e = copy();
  if (e.empty()) e = sync();
  const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (e.empty() && sec > 0) *gbs = double(bytes) * iters / sec / 1e9;
  if (from) api_->memFree(from);
  if (to) api_->memFree(to);
  return e;
}

std::string DeviceMemory::sync() { return check(api_->streamSynchronize(stream_), "cuStreamSynchronize"); }

std::string DeviceMemory::query(bool* done) {
  constexpr int kNotReady = 600;  // CUDA_ERROR_NOT_READY
  const int rc = api_->streamQuery(stream_);
  *done = rc == 0;
  return rc == kNotReady ? "" : check(rc, "cuStreamQuery");
}

}  // namespace bench
