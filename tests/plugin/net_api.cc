#include "tests/plugin/net_api.h"

#include <climits>
#include <cstring>
#include <type_traits>

namespace pluginharness {
namespace {

template <int V>
struct NetStruct;
template <> struct NetStruct<8> { using T = ncclNet_v8_t; using P = ncclNetProperties_v8_t; };
template <> struct NetStruct<9> { using T = ncclNet_v9_t; using P = ncclNetProperties_v9_t; };
template <> struct NetStruct<10> { using T = ncclNet_v10_t; using P = ncclNetProperties_v9_t; };
template <> struct NetStruct<11> { using T = ncclNet_v11_t; using P = ncclNetProperties_v11_t; };
template <> struct NetStruct<12> { using T = ncclNet_v12_t; using P = ncclNetProperties_v12_t; };

template <int V>
class NetApiOf : public NetApi {
  using T = typename NetStruct<V>::T;
  using P = typename NetStruct<V>::P;

 public:
  explicit NetApiOf(const void* sym) : n_(static_cast<const T*>(sym)) {}

  int version() const override { return V; }
  const char* name() const override { return n_->name; }
  bool perCommContext() const override { return V >= 11; }

  std::string structProblems() const override {
    std::string bad;
    auto need = [&](const void* p, const char* what) {
      if (!p) bad += std::string(bad.empty() ? "" : ", ") + what + " is NULL";
    };
    need(n_->name, "name");
    need(reinterpret_cast<const void*>(n_->init), "init");
    need(reinterpret_cast<const void*>(n_->devices), "devices");
    need(reinterpret_cast<const void*>(n_->getProperties), "getProperties");
    need(reinterpret_cast<const void*>(n_->listen), "listen");
    need(reinterpret_cast<const void*>(n_->connect), "connect");
    need(reinterpret_cast<const void*>(n_->accept), "accept");
    need(reinterpret_cast<const void*>(n_->regMr), "regMr");
    need(reinterpret_cast<const void*>(n_->deregMr), "deregMr");
    need(reinterpret_cast<const void*>(n_->isend), "isend");
    need(reinterpret_cast<const void*>(n_->irecv), "irecv");
    need(reinterpret_cast<const void*>(n_->iflush), "iflush");
    need(reinterpret_cast<const void*>(n_->test), "test");
    need(reinterpret_cast<const void*>(n_->closeSend), "closeSend");
    need(reinterpret_cast<const void*>(n_->closeRecv), "closeRecv");
    need(reinterpret_cast<const void*>(n_->closeListen), "closeListen");
    if constexpr (V >= 11) need(reinterpret_cast<const void*>(n_->finalize), "finalize");
    return bad;
  }

  ncclResult_t init(void** ctx, uint64_t commId, ncclDebugLogger_t log) override {
    *ctx = nullptr;
    if constexpr (V >= 11) {
      ncclNetCommConfig_t config{NCCL_NET_TRAFFIC_CLASS_UNDEF};
      return n_->init(ctx, commId, &config, log, nullptr);
    } else if constexpr (V == 10) {
      return n_->init(log, nullptr);
    } else {
      return n_->init(log);
    }
  }

  ncclResult_t finalize(void* ctx) override {
    if constexpr (V >= 11) return n_->finalize(ctx);
    else return ncclSuccess;
  }

  ncclResult_t devices(int* n) override { return n_->devices(n); }

  ncclResult_t properties(int dev, AnyProps* a) override {
    P p;
    memset(&p, 0xa5, sizeof p);  // a field left unset shows up as garbage
    ncclResult_t r = n_->getProperties(dev, &p);
    if (r != ncclSuccess) return r;
    *a = AnyProps();
    a->name = p.name;
    a->pciPath = p.pciPath;
    a->guid = p.guid;
    a->ptrSupport = p.ptrSupport;
    a->regIsGlobal = p.regIsGlobal;
    a->speed = p.speed;
    a->port = p.port;
    a->latency = p.latency;
    a->maxComms = p.maxComms;
    a->maxRecvs = p.maxRecvs;
    a->netDeviceType = p.netDeviceType;
    a->netDeviceVersion = p.netDeviceVersion;
    if constexpr (V >= 9) {
      a->forceFlush = p.forceFlush;
      a->hasSizes = true;
      a->vNdevs = p.vProps.ndevs;
      a->vDev0 = p.vProps.devs[0];
      a->maxP2pBytes = p.maxP2pBytes;
      a->maxCollBytes = p.maxCollBytes;
    }
    if constexpr (V >= 11) {
      a->hasMultiRequest = true;
      a->maxMultiRequestSize = p.maxMultiRequestSize;
    }
    if constexpr (V >= 12) {
      a->hasRail = true;
      a->railId = p.railId;
      a->planeId = p.planeId;
    }
    return ncclSuccess;
  }

  ncclResult_t listen(void* ctx, int dev, void* handle, void** lc) override {
    if constexpr (V >= 11) return n_->listen(ctx, dev, handle, lc);
    else return n_->listen(dev, handle, lc);
  }

  ncclResult_t connect(void* ctx, int dev, void* handle, void** sc) override {
    ncclNetDeviceHandle_t* devHandle = nullptr;  // host transfers: no offload requested
    if constexpr (V >= 11) {
      return n_->connect(ctx, dev, handle, sc, &devHandle);
    } else if constexpr (V == 10) {
      ncclNetCommConfig_t config{NCCL_NET_TRAFFIC_CLASS_UNDEF};
      return n_->connect(dev, &config, handle, sc, &devHandle);
    } else {
      return n_->connect(dev, handle, sc, &devHandle);
    }
  }

  ncclResult_t accept(void* lc, void** rc) override {
    ncclNetDeviceHandle_t* devHandle = nullptr;
    return n_->accept(lc, rc, &devHandle);
  }

  ncclResult_t regMr(void* comm, void* data, size_t size, int type, void** mh) override {
    return n_->regMr(comm, data, size, type, mh);
  }
  ncclResult_t deregMr(void* comm, void* mh) override { return n_->deregMr(comm, mh); }

  ncclResult_t isend(void* sc, void* data, size_t size, int tag, void* mh, void** req) override {
    if constexpr (V == 8) {
      if (size > INT_MAX) return ncclInvalidArgument;
      return n_->isend(sc, data, static_cast<int>(size), tag, mh, req);
    } else if constexpr (V == 9) {
      return n_->isend(sc, data, size, tag, mh, req);
    } else {
      return n_->isend(sc, data, size, tag, mh, nullptr, req);
    }
  }

  ncclResult_t irecv(void* rc, int n, void** data, size_t* sizes, int* tags, void** mhs, void** req,
                     void* hint) override {
    if constexpr (V == 8) {
      int narrow[NCCL_NET_MAX_REQUESTS];
      for (int i = 0; i < n; ++i) narrow[i] = static_cast<int>(sizes[i]);
      *req = nullptr;
      return n_->irecv(rc, n, data, narrow, tags, mhs, req);
    } else if constexpr (V == 9) {
      *req = hint;
      return n_->irecv(rc, n, data, sizes, tags, mhs, req);
    } else {
      void* phandles[NCCL_NET_MAX_REQUESTS] = {};
      *req = hint;
      return n_->irecv(rc, n, data, sizes, tags, mhs, phandles, req);
    }
  }

  ncclResult_t iflush(void* rc, int n, void** data, int* sizes, void** mhs, void** req) override {
    return n_->iflush(rc, n, data, sizes, mhs, req);
  }
  ncclResult_t test(void* req, int* done, int* sizes) override { return n_->test(req, done, sizes); }
  ncclResult_t closeSend(void* sc) override { return n_->closeSend(sc); }
  ncclResult_t closeRecv(void* rc) override { return n_->closeRecv(rc); }
  ncclResult_t closeListen(void* lc) override { return n_->closeListen(lc); }

 private:
  const T* n_;
};

}  // namespace

std::unique_ptr<NetApi> makeNetApi(int version, const void* symbol) {
  switch (version) {
    case 8: return std::make_unique<NetApiOf<8>>(symbol);
    case 9: return std::make_unique<NetApiOf<9>>(symbol);
    case 10: return std::make_unique<NetApiOf<10>>(symbol);
    case 11: return std::make_unique<NetApiOf<11>>(symbol);
    case 12: return std::make_unique<NetApiOf<12>>(symbol);
    default: return nullptr;
  }
}

}  // namespace pluginharness
