// The fake libcuda of fake_cuda.h.
#include "tests/support/fake_cuda.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "algorithms/schedule.h"
#include "base/cuda_device_api.h"
#include "src/exec/cuda/device_executor.h"
#include "src/exec/cuda/image.h"
#include "src/exec/cuda/interp_host.h"
#include "src/exec/cuda/kernel_names.h"
#include "src/exec/dataops.h"
#include "tests/support/fake_cuda_ipc.h"
#include "tests/support/fake_cuda_stream.h"
#include "tests/support/fake_cuda_vmm.h"

namespace hoccl::fakecuda {
namespace {

using cuda::CuHandle;
using cuda::DevPtr;
constexpr int kOk = cuda::kCudaSuccess;
constexpr int kInvalid = cuda::kCudaErrorInvalidValue;
constexpr int kNotFound = 500;

struct Function {
  DType dtype;
  RedOp op;
};

}  // namespace

struct FakeCuda::State {
  std::set<std::string> missing;
  cuda::Driver driver;
  std::mutex mu;
  std::map<uintptr_t, size_t> device, mapped;  // base -> bytes
  std::map<uintptr_t, size_t> registered;      // cuMemHostRegister'ed ranges
  std::map<Stream*, std::unique_ptr<Stream>> streams;
  std::unique_ptr<Stream> defaultStream;  // made on first use (a test that forks has no thread of it)
  std::map<Stream*, std::vector<std::shared_ptr<Gate>>> gates;
  std::map<std::string, Function> functions;
  int context = 0, module = 0;
  std::atomic<int> moduleLoads{0}, launches{0}, lanes{2}, multiprocessors{8}, lastGrid{0};
  std::atomic<uint32_t> lastFlags{0};
  std::map<Stream*, int> capture;  // streams being captured (global mode): their CUstreamCaptureStatus
  std::atomic<int> devices{1};
  std::atomic<int> firstDevice{0};               // the GPU that ordinal 0 names (setFirstDevice)
  std::map<uintptr_t, int> deviceOf;             // allocations placed on a GPU other than 0 (allocOn)
  std::set<std::pair<int, int>> noPeerAccess;    // (device, peer) pairs cuDeviceCanAccessPeer refuses
  std::atomic<int> peerEnables{0};              // cuCtxEnablePeerAccess calls
  std::atomic<bool> corruptCopies{false};        // cuMemcpyDtoDAsync damages what it writes
  std::vector<unsigned char> image = std::vector<unsigned char>(64, 0xfb);  // when the build embeds none
};

namespace {

FakeCuda::State* g = nullptr;
thread_local CuHandle currentCtx = nullptr;
thread_local int captureMode = cuda::kCaptureModeGlobal;  // cuThreadExchangeStreamCaptureMode's

// Stream capture as the driver polices it (the fake runs captured work at
// once, as one replay of the graph would): while any stream is captured in
// the global mode, a thread that has not relaxed its mode may not allocate
// or load modules; the call fails and invalidates the capture.
constexpr int kCaptureUnsupported = 900;  // CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED
constexpr int kCapturedEvent = 907;       // CUDA_ERROR_CAPTURED_EVENT
bool unsafeNow() {
  if (captureMode == cuda::kCaptureModeRelaxed) return false;
  std::lock_guard<std::mutex> l(g->mu);
  bool any = false;
  for (auto& [stream, status] : g->capture)
    if (status == cuda::kCaptureStatusActive) {
      status = cuda::kCaptureStatusInvalidated;
      any = true;
    }
  return any;
}
int captureOf(CuHandle s) {
  std::lock_guard<std::mutex> l(g->mu);
  auto it = g->capture.find(static_cast<Stream*>(s));
  return it == g->capture.end() ? cuda::kCaptureStatusNone : it->second;
}

Stream* streamOf(CuHandle s) {
  std::lock_guard<std::mutex> l(g->mu);
  if (!s) {
    if (!g->defaultStream) g->defaultStream = std::make_unique<Stream>();
    return g->defaultStream.get();
  }
  auto it = g->streams.find(static_cast<Stream*>(s));
  return it == g->streams.end() ? nullptr : it->second.get();
}

bool inTable(const std::map<uintptr_t, size_t>& t, uintptr_t p) {
  auto it = t.upper_bound(p);
  if (it == t.begin()) return false;
  --it;
  return p < it->first + std::max<size_t>(it->second, 1);
}

void* allocIn(std::map<uintptr_t, size_t>* table, size_t bytes) {
  const size_t n = (std::max<size_t>(bytes, 1) + 63) & ~size_t(63);
  void* p = std::aligned_alloc(64, n);
  std::memset(p, 0xA5, n);
  std::lock_guard<std::mutex> l(g->mu);
  (*table)[reinterpret_cast<uintptr_t>(p)] = bytes;
  return p;
}

int freeIn(std::map<uintptr_t, size_t>* table, void* p) {
  {
    std::lock_guard<std::mutex> l(g->mu);
    if (!table->erase(reinterpret_cast<uintptr_t>(p))) return kInvalid;
    g->deviceOf.erase(reinterpret_cast<uintptr_t>(p));
  }
  if (!ipc::freeShared(p)) std::free(p);
  return kOk;
}

// ---- Entry points -----------------------------------------------------------
int init(unsigned) { return kOk; }
int driverGetVersion(int* v) {
  *v = 12040;
  return kOk;
}
int deviceGetCount(int* n) {
  *n = g->devices.load();
  return kOk;
}
bool isDevice(int d) { return d >= 0 && d < g->devices.load(); }
int deviceGet(int* d, int ordinal) {
  *d = ordinal;
  return isDevice(ordinal) ? kOk : kInvalid;
}
int deviceGetAttribute(int* value, int attribute, int device) {
  if (!value || !isDevice(device)) return kInvalid;
  if (attribute == cuda::kDeviceAttributeFabricSupported) {
    *value = vmm::fabric() != vmm::Fabric::Unsupported;
    return kOk;
  }
  if (attribute != cuda::kDeviceAttributeMultiprocessors) return kInvalid;  // what hoccl asks for
  *value = g->multiprocessors.load();
  return kOk;
}
int deviceGetName(char* name, int len, int device) {  // also the PCI bus id: one per device
  snprintf(name, len, "Fake GPU %d (host threads)", device + g->firstDevice.load());
  return kOk;
}
int pointerGetAttribute(void* data, int attribute, uint64_t ptr) {
  bool device, mapped;
  {
    std::lock_guard<std::mutex> l(g->mu);
    device = inTable(g->device, ptr);
    mapped = inTable(g->mapped, ptr);
  }
  device = device || vmm::mapped(uintptr_t(ptr));
  if (!device && !mapped) return kInvalid;  // as the driver answers for malloc'ed memory
  switch (attribute) {
    case cuda::kPointerAttributeMemoryType:
      *static_cast<unsigned*>(data) = device ? cuda::kMemoryTypeDevice : cuda::kMemoryTypeHost;
      return kOk;
    case cuda::kPointerAttributeDeviceOrdinal: {
      std::lock_guard<std::mutex> l(g->mu);
      auto base = g->device.upper_bound(uintptr_t(ptr));  // the allocation holding ptr
      auto it = base == g->device.begin() ? g->deviceOf.end() : g->deviceOf.find(std::prev(base)->first);
      *static_cast<int*>(data) = it == g->deviceOf.end() ? 0 : it->second;
      return kOk;
    }
    case cuda::kPointerAttributeContext: *static_cast<CuHandle*>(data) = &g->context; return kOk;
    default: return kInvalid;
  }
}
int ctxGetCurrent(CuHandle* c) {
  *c = currentCtx;
  return kOk;
}
int ctxSetCurrent(CuHandle c) {
  currentCtx = c;
  return kOk;
}
int primaryCtxRetain(CuHandle* c, int device) {
  *c = &g->context;  // one context stands for every device's
  return isDevice(device) ? kOk : kInvalid;
}
int primaryCtxRelease(int) { return kOk; }
int moduleLoadData(CuHandle* m, const void* image) {
  if (!image) return kInvalid;
  if (unsafeNow()) return kCaptureUnsupported;
  if (currentCtx != &g->context) return 201;  // CUDA_ERROR_INVALID_CONTEXT: the executor must make it current
  ++g->moduleLoads;
  *m = &g->module;
  return kOk;
}
int moduleUnload(CuHandle) { return kOk; }
int moduleGetFunction(CuHandle* fn, CuHandle m, const char* name) {
  if (m != &g->module) return kInvalid;
  std::lock_guard<std::mutex> l(g->mu);
  auto it = g->functions.find(name);
  if (it == g->functions.end()) return kNotFound;
  *fn = &it->second;
  return kOk;
}

int launchKernel(CuHandle fn, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned, unsigned, unsigned,
                 CuHandle stream, void** params, void** extra) {
  Stream* s = streamOf(stream);
  if (!fn || !s || !params || extra || gy != 1 || gz != 1 || bx == 0) return kInvalid;
  const Function f = *static_cast<const Function*>(fn);
  const cuda::InterpArgs a = *static_cast<const cuda::InterpArgs*>(params[0]);  // copied now, as the driver does
  const int lanes = std::min<int>(int(bx), g->lanes.load());
  ++g->launches;
  g->lastGrid = int(gx);
  g->lastFlags = a.flags;
  s->push([f, a, gx, lanes] { cuda::runLaunchOnHost(f.dtype, f.op, a, gx, lanes); });
  return kOk;
}
int memAlloc(DevPtr* p, size_t bytes) {
  if (unsafeNow()) return kCaptureUnsupported;
  void* shared = bytes >= ipc::kSharedMin ? ipc::allocShared(bytes) : nullptr;  // cuIpcGetMemHandle can name it
  if (shared) {
    std::lock_guard<std::mutex> l(g->mu);
    g->device[reinterpret_cast<uintptr_t>(shared)] = bytes;
  }
  *p = reinterpret_cast<DevPtr>(shared ? shared : allocIn(&g->device, bytes));
  return kOk;
}
int memFree(DevPtr p) { return freeIn(&g->device, reinterpret_cast<void*>(p)); }
// Copied at once, as a real driver stages pageable memory before it returns;
// the copy into device memory itself runs in stream order.
int memcpyHtoDAsync(DevPtr dst, const void* src, size_t bytes, CuHandle stream) {
  Stream* s = streamOf(stream);
  if (!s) return kInvalid;
  auto staged = std::make_shared<std::vector<unsigned char>>(static_cast<const unsigned char*>(src),
                                                             static_cast<const unsigned char*>(src) + bytes);
  s->push([dst, staged] {
    // Late on purpose: a caller that launches before it synchronizes the
    // copy's stream reads what was there before.
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    if (!staged->empty())  // an empty vector's data() may be null, which memcpy must not get
      std::memcpy(reinterpret_cast<void*>(dst), staged->data(), staged->size());
  });
  return kOk;
}
int streamCreate(CuHandle* stream, unsigned) {
  auto s = std::make_unique<Stream>();
  Stream* p = s.get();
  std::lock_guard<std::mutex> l(g->mu);
  g->streams[p] = std::move(s);
  *stream = p;
  return kOk;
}
int streamDestroy(CuHandle stream) {
  std::unique_ptr<Stream> gone;
  {
    std::lock_guard<std::mutex> l(g->mu);
    auto it = g->streams.find(static_cast<Stream*>(stream));
    if (it == g->streams.end()) return kInvalid;
    gone = std::move(it->second);
    g->streams.erase(it);
  }
  gone->waitIdle(1e9);  // the driver lets queued work finish
  return kOk;
}
int memcpyDtoDAsync(DevPtr dst, DevPtr src, size_t bytes, CuHandle stream) {
  Stream* s = streamOf(stream);
  if (!s) return kInvalid;
  const bool corrupt = g->corruptCopies;
  s->push([dst, src, bytes, corrupt] {
    std::memmove(reinterpret_cast<void*>(dst), reinterpret_cast<const void*>(src), bytes);
    for (size_t i = 4093; corrupt && i < bytes; i += 4096) reinterpret_cast<unsigned char*>(dst)[i] = 0;  // lost
  });
  return kOk;
}
int memcpyDtoHAsync(void* dst, DevPtr src, size_t bytes, CuHandle stream) {
  Stream* s = streamOf(stream);
  if (!s) return kInvalid;
  s->push([dst, src, bytes] { std::memcpy(dst, reinterpret_cast<const void*>(src), bytes); });
  return kOk;
}
int memsetD8Async(DevPtr dst, unsigned char v, size_t bytes, CuHandle stream) {
  Stream* s = streamOf(stream);
  if (!s) return kInvalid;
  s->push([dst, v, bytes] { std::memset(reinterpret_cast<void*>(dst), v, bytes); });
  return kOk;
}
int memHostAlloc(void** p, size_t bytes, unsigned) {
  if (unsafeNow()) return kCaptureUnsupported;
  *p = allocIn(&g->mapped, bytes);
  return kOk;
}
int memHostGetDevicePointer(DevPtr* d, void* p, unsigned) {
  std::lock_guard<std::mutex> l(g->mu);
  const auto at = reinterpret_cast<uintptr_t>(p);
  if (!inTable(g->mapped, at) && !inTable(g->registered, at)) return kInvalid;
  *d = reinterpret_cast<DevPtr>(p);
  return kOk;
}
int memFreeHost(void* p) { return freeIn(&g->mapped, p); }
// Registered memory is host memory whose device address is itself (as
// mapped memory); the pages must exist and not be registered yet.
int memHostRegister(void* p, size_t bytes, unsigned flags) {
  constexpr int kAlreadyRegistered = 712;  // CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED
  if (!p || !bytes || flags != cuda::kHostRegisterPortableMapped) return kInvalid;
  std::lock_guard<std::mutex> l(g->mu);
  if (inTable(g->registered, reinterpret_cast<uintptr_t>(p))) return kAlreadyRegistered;
  g->registered[reinterpret_cast<uintptr_t>(p)] = bytes;
  std::memset(p, 0, 1);  // faults here, not in a kernel, if the pages are not there
  return kOk;
}
int memHostUnregister(void* p) {
  constexpr int kNotRegistered = 713;  // CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED
  std::lock_guard<std::mutex> l(g->mu);
  return g->registered.erase(reinterpret_cast<uintptr_t>(p)) ? kOk : kNotRegistered;
}
int streamQuery(CuHandle stream) {
  Stream* s = streamOf(stream);
  return !s ? kInvalid : s->idle() ? kOk : cuda::kCudaErrorNotReady;
}
int streamSynchronize(CuHandle stream) {
  Stream* s = streamOf(stream);
  if (!s) return kInvalid;
  s->waitIdle(1e9);
  return kOk;
}
int eventCreate(CuHandle* e, unsigned) {
  *e = new Event();
  return kOk;
}
int eventDestroy(CuHandle e) {
  delete static_cast<Event*>(e);
  return kOk;
}
int recordEvent(CuHandle e, CuHandle stream, bool external) {
  Stream* s = streamOf(stream);
  if (!s) return kInvalid;
  const bool capturing = captureOf(stream) == cuda::kCaptureStatusActive;
  if (external && !capturing) return kInvalid;  // the flag is for capture only
  auto* ev = static_cast<Event*>(e);
  uint64_t gen;
  {
    std::lock_guard<std::mutex> l(ev->mu);
    gen = ++ev->recorded;
    ev->captured = capturing && !external;
  }
  s->push([ev, gen] {
    std::lock_guard<std::mutex> l(ev->mu);
    ev->completed = std::max(ev->completed, gen);
    ev->cv.notify_all();
  });
  return kOk;
}
int eventRecord(CuHandle e, CuHandle stream) { return recordEvent(e, stream, false); }
int eventRecordWithFlags(CuHandle e, CuHandle stream, unsigned flags) {
  if (flags & ~cuda::kEventRecordExternal) return kInvalid;
  return recordEvent(e, stream, flags == cuda::kEventRecordExternal);
}
int eventQuery(CuHandle e) {
  auto* ev = static_cast<Event*>(e);
  std::lock_guard<std::mutex> l(ev->mu);
  if (ev->captured) return kCapturedEvent;
  return ev->completed >= ev->recorded ? kOk : cuda::kCudaErrorNotReady;
}
int streamWaitEvent(CuHandle stream, CuHandle e, unsigned flags) {
  Stream* s = streamOf(stream);
  if (!s || (flags & ~cuda::kEventWaitExternal)) return kInvalid;
  const bool capturing = captureOf(stream) == cuda::kCaptureStatusActive;
  if (flags == cuda::kEventWaitExternal && !capturing) return kInvalid;
  auto* ev = static_cast<Event*>(e);
  uint64_t gen;
  {
    std::lock_guard<std::mutex> l(ev->mu);
    // An event recorded inside a capture is a node of that graph: waiting
    // on it from outside is refused.
    if (ev->captured && !capturing) return kCapturedEvent;
    gen = ev->recorded;
  }
  s->push([ev, gen] {
    std::unique_lock<std::mutex> l(ev->mu);
    ev->cv.wait(l, [&] { return ev->completed >= gen; });
  });
  return kOk;
}
int streamIsCapturing(CuHandle stream, int* status) {
  if (!streamOf(stream)) return kInvalid;
  *status = captureOf(stream);
  return kOk;
}
int deviceCanAccessPeer(int* can, int device, int peer) {
  if (!isDevice(device) || !isDevice(peer) || device == peer) return kInvalid;
  std::lock_guard<std::mutex> l(g->mu);
  *can = g->noPeerAccess.count({device, peer}) ? 0 : 1;
  return kOk;
}
int ctxEnablePeerAccess(CuHandle, unsigned flags) {
  if (flags) return kInvalid;
  ++g->peerEnables;
  return kOk;
}
int threadExchangeStreamCaptureMode(int* mode) {
  if (*mode < cuda::kCaptureModeGlobal || *mode > cuda::kCaptureModeRelaxed) return kInvalid;
  std::swap(*mode, captureMode);
  return kOk;
}

const std::map<std::string, void*>& entryPoints() {
  static const std::map<std::string, void*> table = {
      {"cuInit", reinterpret_cast<void*>(&init)},
      {"cuDriverGetVersion", reinterpret_cast<void*>(&driverGetVersion)},
      {"cuDeviceGetCount", reinterpret_cast<void*>(&deviceGetCount)},
      {"cuPointerGetAttribute", reinterpret_cast<void*>(&pointerGetAttribute)},
      {"cuDeviceGet", reinterpret_cast<void*>(&deviceGet)},
      {"cuDeviceGetName", reinterpret_cast<void*>(&deviceGetName)},
      {"cuDeviceGetAttribute", reinterpret_cast<void*>(&deviceGetAttribute)},
      {"cuDeviceGetPCIBusId", reinterpret_cast<void*>(&deviceGetName)},
      {"cuCtxGetCurrent", reinterpret_cast<void*>(&ctxGetCurrent)},
      {"cuCtxSetCurrent", reinterpret_cast<void*>(&ctxSetCurrent)},
      {"cuDevicePrimaryCtxRetain", reinterpret_cast<void*>(&primaryCtxRetain)},
      {"cuDevicePrimaryCtxRelease", reinterpret_cast<void*>(&primaryCtxRelease)},
      {"cuModuleLoadData", reinterpret_cast<void*>(&moduleLoadData)},
      {"cuModuleUnload", reinterpret_cast<void*>(&moduleUnload)},
      {"cuModuleGetFunction", reinterpret_cast<void*>(&moduleGetFunction)},
      {"cuLaunchKernel", reinterpret_cast<void*>(&launchKernel)},
      {"cuMemAlloc", reinterpret_cast<void*>(&memAlloc)},
      {"cuMemFree", reinterpret_cast<void*>(&memFree)},
      {"cuMemcpyHtoDAsync", reinterpret_cast<void*>(&memcpyHtoDAsync)},
      {"cuStreamCreate", reinterpret_cast<void*>(&streamCreate)},
      {"cuStreamDestroy", reinterpret_cast<void*>(&streamDestroy)},
      {"cuMemsetD8Async", reinterpret_cast<void*>(&memsetD8Async)},
      {"cuMemcpyDtoDAsync", reinterpret_cast<void*>(&memcpyDtoDAsync)},
      {"cuMemcpyDtoHAsync", reinterpret_cast<void*>(&memcpyDtoHAsync)},
      {"cuMemHostAlloc", reinterpret_cast<void*>(&memHostAlloc)},
      {"cuMemHostGetDevicePointer", reinterpret_cast<void*>(&memHostGetDevicePointer)},
      {"cuMemFreeHost", reinterpret_cast<void*>(&memFreeHost)},
      {"cuMemHostRegister", reinterpret_cast<void*>(&memHostRegister)},
      {"cuMemHostUnregister", reinterpret_cast<void*>(&memHostUnregister)},
      {"cuStreamQuery", reinterpret_cast<void*>(&streamQuery)},
      {"cuStreamSynchronize", reinterpret_cast<void*>(&streamSynchronize)},
      {"cuEventCreate", reinterpret_cast<void*>(&eventCreate)},
      {"cuEventDestroy", reinterpret_cast<void*>(&eventDestroy)},
      {"cuEventRecord", reinterpret_cast<void*>(&eventRecord)},
      {"cuEventQuery", reinterpret_cast<void*>(&eventQuery)},
      {"cuStreamWaitEvent", reinterpret_cast<void*>(&streamWaitEvent)},
      {"cuEventRecordWithFlags", reinterpret_cast<void*>(&eventRecordWithFlags)},
      {"cuStreamIsCapturing", reinterpret_cast<void*>(&streamIsCapturing)},
      {"cuThreadExchangeStreamCaptureMode", reinterpret_cast<void*>(&threadExchangeStreamCaptureMode)},
      {"cuDeviceCanAccessPeer", reinterpret_cast<void*>(&deviceCanAccessPeer)},
      {"cuCtxEnablePeerAccess", reinterpret_cast<void*>(&ctxEnablePeerAccess)},
  };
  return table;
}

int getProc(const char* symbol, void** fn, int, uint64_t, int* status) {
  *fn = nullptr;
  *status = 1;  // CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND
  if (g->missing.count(symbol)) return kOk;
  auto it = entryPoints().find(symbol);
  if (it != entryPoints().end()) {
    *fn = it->second;
  } else {
    auto v = vmm::entryPoints().find(symbol);
    auto i = ipc::entryPoints().find(symbol);
    if (v != vmm::entryPoints().end()) *fn = v->second;
    else if (i != ipc::entryPoints().end()) *fn = i->second;
    else return kNotFound;
  }
  *status = 0;
  return kOk;
}

}  // namespace

FakeCuda::FakeCuda(std::set<std::string> missing) : state_(std::make_unique<State>()) {
  g = state_.get();
  g->missing = std::move(missing);
  for (int t = 0; t < kNumDTypes; ++t)
    for (int op = 0; op <= int(RedOp::PreMulSum); ++op) {
      const std::string name = cuda::interpKernelName(DType(t), RedOp(op));
      if (!name.empty()) g->functions[name] = Function{DType(t), RedOp(op)};
    }
  g->driver = cuda::probeDriver(&getProc, "fake libcuda");
  cuda::setProcessDriverForTesting(&g->driver);
  if (!cuda::kernelImage().data) cuda::setKernelImageForTesting(g->image.data());
}

FakeCuda::~FakeCuda() {
  {
    std::lock_guard<std::mutex> l(g->mu);
    for (auto& [s, gs] : g->gates)
      for (auto& gate : gs) {
        std::lock_guard<std::mutex> gl(gate->mu);
        gate->open = true;
        gate->cv.notify_all();
      }
  }
  for (auto& [p, s] : g->streams) s->waitIdle(60);
  if (g->defaultStream) g->defaultStream->waitIdle(60);
  cuda::setProcessDriverForTesting(nullptr);
  cuda::setKernelImageForTesting(nullptr);
  g->streams.clear();
  g->defaultStream.reset();
  // What is left was leaked (an executor given up while its launch ran):
  // freed as cuMemFree would, blocks of kSharedMin and more being memfd
  // mappings, not malloc'ed (std::free of one crashed the process).
  for (auto& [p, n] : g->device)
    if (!ipc::freeShared(reinterpret_cast<void*>(p))) std::free(reinterpret_cast<void*>(p));
  for (auto& [p, n] : g->mapped) std::free(reinterpret_cast<void*>(p));
  vmm::reset();
  vmm::setFabric(vmm::Fabric::Unsupported);
  g = nullptr;
}

const cuda::Driver& FakeCuda::driver() const { return state_->driver; }

void* FakeCuda::alloc(size_t bytes) { return allocIn(&state_->device, bytes); }
void* FakeCuda::allocOn(int device, size_t bytes) {
  void* p = allocIn(&state_->device, bytes);
  std::lock_guard<std::mutex> l(state_->mu);
  state_->deviceOf[reinterpret_cast<uintptr_t>(p)] = device;
  return p;
}
void FakeCuda::setDevices(int n) {
  state_->devices = n;
  vmm::setDevices(n);
}
void FakeCuda::setFirstDevice(int first) { state_->firstDevice = first; }
int FakeCuda::deviceLive() const {
  std::lock_guard<std::mutex> l(state_->mu);
  return int(state_->device.size());
}
int FakeCuda::hostLive() const {
  std::lock_guard<std::mutex> l(state_->mu);
  return int(state_->mapped.size() + state_->registered.size());
}
void FakeCuda::refusePeerAccess(int device, int peer) {
  std::lock_guard<std::mutex> l(state_->mu);
  state_->noPeerAccess.insert({device, peer});
}
int FakeCuda::peerEnables() const { return state_->peerEnables.load(); }
void FakeCuda::corruptDeviceCopies(bool on) { state_->corruptCopies = on; }
void FakeCuda::free(void* p) { freeIn(&state_->device, p); }

void* FakeCuda::createStream() {
  auto s = std::make_unique<Stream>();
  Stream* p = s.get();
  std::lock_guard<std::mutex> l(state_->mu);
  state_->streams[p] = std::move(s);
  return p;
}

bool FakeCuda::sync(void* stream, double sec) {
  Stream* s = streamOf(stream);
  return s && s->waitIdle(sec);
}

bool FakeCuda::busy(void* stream) { return streamQuery(stream) == cuda::kCudaErrorNotReady; }

void FakeCuda::hold(void* stream) {
  auto gate = std::make_shared<Gate>();
  {
    std::lock_guard<std::mutex> l(state_->mu);
    state_->gates[static_cast<Stream*>(stream)].push_back(gate);
  }
  streamOf(stream)->push([gate] {
    std::unique_lock<std::mutex> l(gate->mu);
    gate->cv.wait(l, [&] { return gate->open; });
  });
}

void FakeCuda::release(void* stream) {
  std::lock_guard<std::mutex> l(state_->mu);
  for (auto& gate : state_->gates[static_cast<Stream*>(stream)]) {
    std::lock_guard<std::mutex> gl(gate->mu);
    gate->open = true;
    gate->cv.notify_all();
  }
  state_->gates.erase(static_cast<Stream*>(stream));
}

int FakeCuda::moduleLoads() const { return state_->moduleLoads.load(); }
int FakeCuda::launches() const { return state_->launches.load(); }
void FakeCuda::setLanes(int lanes) { state_->lanes = lanes; }
void FakeCuda::setMultiprocessors(int n) { state_->multiprocessors = n; }
int FakeCuda::lastGrid() const { return state_->lastGrid.load(); }
uint32_t FakeCuda::lastFlags() const { return state_->lastFlags.load(); }
int FakeCuda::vmmLive() const { return vmm::live(); }
void FakeCuda::setCapture(void* stream, int status) {
  std::lock_guard<std::mutex> l(state_->mu);
  if (status == cuda::kCaptureStatusNone) state_->capture.erase(static_cast<Stream*>(stream));
  else state_->capture[static_cast<Stream*>(stream)] = status;
}
int FakeCuda::captureStatus(void* stream) const { return captureOf(stream); }

}  // namespace hoccl::fakecuda
