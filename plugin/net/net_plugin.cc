#include "plugin/net/net_plugin.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <memory>
#include <mutex>
#include <vector>

#include "plugin/common/nccl_log.h"
#include "plugin/net/transports.h"
#include "base/config.h"

namespace hoccl {
namespace ncclplugin {
namespace {

struct Engine {
  std::string transportName;  // what HOCCL_NET chose, and why
  std::unique_ptr<NetTransport> net;
  std::vector<NetProperties> props;  // per device, read once: NCCL keeps the name pointers
};

struct Context {
  uint64_t commId = 0;
  int trafficClass = NCCL_NET_TRAFFIC_CLASS_UNDEF;
  const char* abi = "";
  bool process = false;  // v8-v10: lives until the library is unloaded
  ncclNetAttr_t attr{};  // last setNetAttr hint
  std::atomic<int> openComms{0};
};

// What NCCL holds for a listen, send or receive comm.
struct PluginComm {
  Context* ctx = nullptr;
  void* inner = nullptr;  // the transport's comm
  bool isSend = false;
  int dev = 0;
  int maxRecvs = 1;
  std::atomic<int> registrations{0};
};

struct Registration {
  PluginComm* comm;
  void* inner;
  const char* base;
  size_t size;
};

// The engine is shared by every context; contexts are counted so the last
// finalize stops it (see net_plugin.h).
std::mutex engineMutex;
Engine* engine = nullptr;
int engineRefs = 0;
Context* processCtx = nullptr;

ncclResult_t toNccl(const Status& st) {
  if (st.ok()) return ncclSuccess;
  switch (st.code()) {
    case hocclRemoteError: return ncclRemoteError;
    case hocclInvalidUsage: return ncclInvalidUsage;
    case hocclInvalidArgument: return ncclInternalError;  // NCCL misused the API (plugin README's rule)
    case hocclSystemError: return ncclSystemError;
    default: return ncclInternalError;
  }
}

// Logs a failure once, at the boundary, and returns NCCL's code for it.
ncclResult_t fail(const Status& st, const char* what) {
  PLOG_WARN("NET/hoccl: %s: %s", what, st.message().c_str());
  return toNccl(st);
}

// engineMutex held.
ncclResult_t acquireEngine(const char* abi) {
  if (engine) {
    ++engineRefs;
    return ncclSuccess;
  }
  std::shared_ptr<const SettingsSnapshot> settings = processSettings();
  if (!settings->error().empty()) return fail(errorf(hocclInvalidUsage, "%s", settings->error().c_str()), "init");
  auto e = std::make_unique<Engine>();
  Status st = createPluginTransport(settings->values(), &e->net, &e->transportName);
  if (!st.ok()) return fail(st, "init");
  int n = e->net->devices();
  if (n <= 0) return fail(errorf(hocclSystemError, "transport %s has no device", e->net->name()), "init");
  e->props.resize(n);
  for (int d = 0; d < n; ++d) {
    st = e->net->getProperties(d, &e->props[d]);
    if (!st.ok()) return fail(st, "init: device properties");
  }
  PLOG_INFO(NCCL_INIT | NCCL_NET, "NET/hoccl: %s, %d device(s), first %s, %d Mbit/s, %d grouped receives (%s)",
            e->transportName.c_str(), n, e->props[0].name.c_str(), e->props[0].speedMbps, e->props[0].maxRecvs, abi);
  engine = e.release();
  engineRefs = 1;
  return ncclSuccess;
}

// engineMutex held.
void releaseEngine() {
  if (--engineRefs > 0) return;
  delete engine;  // joins the transport's progress thread
  engine = nullptr;
  engineRefs = 0;
}

// Stops whatever still runs when the library is unloaded (v8-v10 never
// finalize; a v11+ caller may not either).
struct UnloadGuard {
  ~UnloadGuard() {
    std::lock_guard<std::mutex> lock(engineMutex);
    delete processCtx;
    processCtx = nullptr;
    delete engine;
    engine = nullptr;
    engineRefs = 0;
  }
} unloadGuard;

NetTransport* net() { return engine ? engine->net.get() : nullptr; }

ncclResult_t notInitialized(const char* what) {
  PLOG_WARN("NET/hoccl: %s before init", what);
  return ncclInternalError;
}

}  // namespace

void* processContext() { return processCtx; }

ncclResult_t netInit(void** ctx, uint64_t commId, const ncclNetCommConfig_t* config, ncclDebugLogger_t log,
                     const char* abi) {
  useNcclLogger(log);
  *ctx = nullptr;
  std::lock_guard<std::mutex> lock(engineMutex);
  ncclResult_t r = acquireEngine(abi);
  if (r != ncclSuccess) return r;
  auto* c = new Context();
  c->commId = commId;
  c->trafficClass = config ? config->trafficClass : NCCL_NET_TRAFFIC_CLASS_UNDEF;
  c->abi = abi;
  PLOG_INFO(NCCL_INIT | NCCL_NET, "NET/hoccl: init comm %#llx (%s), traffic class %d, %d context(s)",
            static_cast<unsigned long long>(commId), abi, c->trafficClass, engineRefs);
  *ctx = c;
  return ncclSuccess;
}

ncclResult_t netInitProcess(ncclDebugLogger_t log, const char* abi) {
  useNcclLogger(log);
  std::lock_guard<std::mutex> lock(engineMutex);
  if (processCtx) return ncclSuccess;
  ncclResult_t r = acquireEngine(abi);
  if (r != ncclSuccess) return r;
  processCtx = new Context();
  processCtx->abi = abi;
  processCtx->process = true;
  return ncclSuccess;
}

ncclResult_t netFinalize(void* ctxp) {
  auto* c = static_cast<Context*>(ctxp);
  if (!c || c->process) return ncclSuccess;
  std::lock_guard<std::mutex> lock(engineMutex);
  if (int open = c->openComms.load())
    PLOG_WARN("NET/hoccl: comm %#llx finalized with %d connection(s) still open; the engine closes them",
              static_cast<unsigned long long>(c->commId), open);
  PLOG_INFO(NCCL_INIT | NCCL_NET, "NET/hoccl: finalize comm %#llx, %d context(s) left",
            static_cast<unsigned long long>(c->commId), engineRefs - 1);
  delete c;
  releaseEngine();
  return ncclSuccess;
}

ncclResult_t netDevices(int* ndev) {
  std::lock_guard<std::mutex> lock(engineMutex);
  if (!engine) return notInitialized("devices");
  *ndev = static_cast<int>(engine->props.size());
  return ncclSuccess;
}

ncclResult_t netProperties(int dev, DeviceProps* out) {
  std::lock_guard<std::mutex> lock(engineMutex);
  if (!engine) return notInitialized("getProperties");
  if (dev < 0 || dev >= static_cast<int>(engine->props.size())) {
    PLOG_WARN("NET/hoccl: getProperties of device %d (%zu devices)", dev, engine->props.size());
    return ncclInternalError;
  }
  const NetProperties& p = engine->props[dev];
  *out = DeviceProps();
  out->name = p.name.empty() ? engine->net->name() : p.name.c_str();
  out->pciPath = p.pciPath.empty() ? nullptr : p.pciPath.c_str();
  out->guid = p.guid ? p.guid : static_cast<uint64_t>(dev);
  out->ptrSupport = p.ptrSupport & (NCCL_PTR_HOST | NCCL_PTR_CUDA | NCCL_PTR_DMABUF);
  out->speedMbps = p.speedMbps;
  out->port = p.port;
  out->maxComms = p.maxComms;
  out->maxRecvs = std::clamp(p.maxRecvs, 1, NCCL_NET_MAX_REQUESTS);
  size_t maxBytes = p.maxP2pBytes;
  if (maxBytes == 0 || maxBytes > NCCL_MAX_NET_SIZE_BYTES) maxBytes = NCCL_MAX_NET_SIZE_BYTES;
  out->maxP2pBytes = maxBytes;
  out->dev = dev;
  return ncclSuccess;
}

ncclResult_t netListen(void* ctxp, int dev, void* handle, void** listenComm) {
  *listenComm = nullptr;
  auto* c = static_cast<Context*>(ctxp);
  if (!c || !net()) return notInitialized("listen");
  auto pc = std::make_unique<PluginComm>();
  Status st = net()->listen(dev, handle, &pc->inner);
  if (!st.ok()) return fail(st, "listen");
  pc->ctx = c;
  pc->dev = dev;
  ++c->openComms;
  *listenComm = pc.release();
  return ncclSuccess;
}

ncclResult_t netConnect(void* ctxp, int dev, void* handle, void** sendComm) {
  *sendComm = nullptr;
  auto* c = static_cast<Context*>(ctxp);
  if (!c || !net()) return notInitialized("connect");
  void* inner = nullptr;
  Status st = net()->connect(dev, handle, &inner);
  if (!st.ok()) return fail(st, "connect");
  if (!inner) return ncclSuccess;  // not yet: NCCL calls again with the same handle
  auto* pc = new PluginComm();
  pc->ctx = c;
  pc->inner = inner;
  pc->isSend = true;
  pc->dev = dev;
  ++c->openComms;
  *sendComm = pc;
  return ncclSuccess;
}

ncclResult_t netAccept(void* listenComm, void** recvComm) {
  *recvComm = nullptr;
  auto* lc = static_cast<PluginComm*>(listenComm);
  if (!net()) return notInitialized("accept");
  void* inner = nullptr;
  Status st = net()->accept(lc->inner, &inner);
  if (!st.ok()) return fail(st, "accept");
  if (!inner) return ncclSuccess;
  auto* pc = new PluginComm();
  pc->ctx = lc->ctx;
  pc->inner = inner;
  pc->dev = lc->dev;
  {
    std::lock_guard<std::mutex> lock(engineMutex);
    pc->maxRecvs = std::clamp(engine->props[lc->dev].maxRecvs, 1, NCCL_NET_MAX_REQUESTS);
  }
  ++lc->ctx->openComms;
  *recvComm = pc;
  return ncclSuccess;
}

namespace {
// The memory types device `dev` advertised (getProperties).
int advertised(int dev) {
  std::lock_guard<std::mutex> lock(engineMutex);
  if (!engine || dev < 0 || dev >= static_cast<int>(engine->props.size())) return 0;
  return engine->props[dev].ptrSupport;
}

ncclResult_t keepRegistration(PluginComm* pc, void* inner, void* data, size_t size, void** mhandle) {
  *mhandle = new Registration{pc, inner, static_cast<const char*>(data), size};
  ++pc->registrations;
  return ncclSuccess;
}
}  // namespace

ncclResult_t netRegMr(void* comm, void* data, size_t size, int type, void** mhandle) {
  *mhandle = nullptr;
  auto* pc = static_cast<PluginComm*>(comm);
  if (type != NCCL_PTR_HOST && !(type == NCCL_PTR_CUDA && (advertised(pc->dev) & NCCL_PTR_CUDA))) {
    // NCCL probes GPUDirect this way; a refusal only means "no GDR".
    PLOG_INFO(NCCL_NET | NCCL_REG, "NET/hoccl: memory type %#x not supported by device %d (it offers %#x)", type,
              pc->dev, advertised(pc->dev));
    return ncclInternalError;
  }
  void* inner = nullptr;
  Status st = net()->regMr(pc->inner, data, size, type, &inner);
  if (!st.ok()) return fail(st, "regMr");
  return keepRegistration(pc, inner, data, size, mhandle);
}

ncclResult_t netRegMrDmaBuf(void* comm, void* data, size_t size, int type, uint64_t offset, int fd,
                            void** mhandle) {
  *mhandle = nullptr;
  auto* pc = static_cast<PluginComm*>(comm);
  if (!(advertised(pc->dev) & NCCL_PTR_DMABUF)) {
    PLOG_WARN("NET/hoccl: regMrDmaBuf (type %#x) on device %d, which did not advertise DMA-BUF", type, pc->dev);
    return ncclInternalError;
  }
  if (type == NCCL_PTR_HOST) return netRegMr(comm, data, size, type, mhandle);  // NCCL passes fd -1 then
  void* inner = nullptr;
  Status st = net()->regMrDmaBuf(pc->inner, data, size, type, offset, fd, &inner);
  if (!st.ok()) return fail(st, "regMrDmaBuf");
  return keepRegistration(pc, inner, data, size, mhandle);
}

ncclResult_t netDeregMr(void* comm, void* mhandle) {
  auto* r = static_cast<Registration*>(mhandle);
  if (!r) return ncclSuccess;
  Status st = net()->deregMr(static_cast<PluginComm*>(comm)->inner, r->inner);
  --r->comm->registrations;
  delete r;
  return st.ok() ? ncclSuccess : fail(st, "deregMr");
}

namespace {
// NCCL passes the registration a buffer belongs to; a buffer outside it is
// a caller bug that would otherwise surface as corrupt data on a GPU.
bool inside(const Registration* r, const void* data, size_t size) {
  if (!r || size == 0) return true;
  const char* p = static_cast<const char*>(data);
  return p >= r->base && p + size <= r->base + r->size;
}
}  // namespace

ncclResult_t netIsend(void* sendComm, void* data, size_t size, int tag, void* mhandle, void** request) {
  *request = nullptr;
  auto* pc = static_cast<PluginComm*>(sendComm);
  auto* r = static_cast<Registration*>(mhandle);
  if (!inside(r, data, size)) {
    PLOG_WARN("NET/hoccl: isend of %zu bytes at %p outside its registration [%p, +%zu)", size, data, r->base, r->size);
    return ncclInternalError;
  }
  Status st = net()->isend(pc->inner, data, size, tag, r ? r->inner : nullptr, request);
  return st.ok() ? ncclSuccess : fail(st, "isend");
}

ncclResult_t netIrecv(void* recvComm, int n, void** data, const size_t* sizes, int* tags, void** mhandles,
                      void** request) {
  *request = nullptr;  // also clears NCCL's optional-completion hint: hoccl always completes receives
  auto* pc = static_cast<PluginComm*>(recvComm);
  if (n < 1 || n > pc->maxRecvs) {
    PLOG_WARN("NET/hoccl: irecv of %d buffers (maxRecvs is %d)", n, pc->maxRecvs);
    return ncclInternalError;
  }
  void* inner[NCCL_NET_MAX_REQUESTS];
  size_t caps[NCCL_NET_MAX_REQUESTS];
  for (int i = 0; i < n; ++i) {
    auto* r = mhandles ? static_cast<Registration*>(mhandles[i]) : nullptr;
    if (!inside(r, data[i], sizes[i])) {
      PLOG_WARN("NET/hoccl: irecv buffer %d (%zu bytes at %p) outside its registration", i, sizes[i], data[i]);
      return ncclInternalError;
    }
    inner[i] = r ? r->inner : nullptr;
    caps[i] = sizes[i];
  }
  Status st = net()->irecv(pc->inner, n, data, caps, tags, inner, request);
  return st.ok() ? ncclSuccess : fail(st, "irecv");
}

ncclResult_t netIflush(void* recvComm, int n, void** data, int* sizes, void** mhandles, void** request) {
  *request = nullptr;
  auto* pc = static_cast<PluginComm*>(recvComm);
  if (n < 1 || n > pc->maxRecvs) {
    PLOG_WARN("NET/hoccl: iflush of %d buffers (maxRecvs is %d)", n, pc->maxRecvs);
    return ncclInternalError;
  }
  void* inner[NCCL_NET_MAX_REQUESTS];
  for (int i = 0; i < n; ++i) {
    auto* r = mhandles ? static_cast<Registration*>(mhandles[i]) : nullptr;
    inner[i] = r ? r->inner : nullptr;
  }
  // Host memory: nothing to flush, *request stays nullptr (NCCL's "done").
  Status st = net()->iflush(pc->inner, n, data, sizes, inner, request);
  return st.ok() ? ncclSuccess : fail(st, "iflush");
}

ncclResult_t netTest(void* request, int* done, int* sizes) {
  *done = 0;
  if (!net()) return notInitialized("test");
  Status st = net()->test(request, done, sizes);
  return st.ok() ? ncclSuccess : fail(st, "test");
}

namespace {
ncclResult_t closeComm(void* comm, const char* what, Status (NetTransport::*close)(void*)) {
  auto* pc = static_cast<PluginComm*>(comm);
  if (!pc) return ncclSuccess;
  if (int regs = pc->registrations.load())
    PLOG_INFO(NCCL_NET | NCCL_REG, "NET/hoccl: %s with %d registration(s) not deregistered", what, regs);
  Status st = net() ? (net()->*close)(pc->inner) : Status();
  --pc->ctx->openComms;
  delete pc;
  return st.ok() ? ncclSuccess : fail(st, what);
}
}  // namespace

ncclResult_t netCloseSend(void* sendComm) { return closeComm(sendComm, "closeSend", &NetTransport::closeSend); }
ncclResult_t netCloseRecv(void* recvComm) { return closeComm(recvComm, "closeRecv", &NetTransport::closeRecv); }
ncclResult_t netCloseListen(void* listenComm) {
  return closeComm(listenComm, "closeListen", &NetTransport::closeListen);
}

ncclResult_t netSetAttr(void* ctxp, const ncclNetAttr_t* attr) {
  auto* c = static_cast<Context*>(ctxp);
  if (!c || !attr) return ncclSuccess;
  c->attr = *attr;
  PLOG_INFO(NCCL_NET, "NET/hoccl: comm %#llx hints: send peers %d-%d, recv peers %d-%d, op %#x algo %#x proto %#x",
            static_cast<unsigned long long>(c->commId), attr->sendCommAttr.minConcurrentPeers,
            attr->sendCommAttr.maxConcurrentPeers, attr->recvCommAttr.minConcurrentPeers,
            attr->recvCommAttr.maxConcurrentPeers, attr->op, attr->algo, attr->proto);
  return ncclSuccess;
}

}  // namespace ncclplugin
}  // namespace hoccl
