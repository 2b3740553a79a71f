// One view of every net ABI version the harness drives, so the checks are
// written once: a version's struct is wrapped by NetApiOf<V>, which calls
// the plugin exactly as NCCL's core (or its compatibility shim) would.
#pragma once

#include <memory>
#include <string>

#include "hoccl_nccl/net.h"

namespace pluginharness {

// Every field any version reports; `has*` say which this version has.
struct AnyProps {
  const char* name = nullptr;
  const char* pciPath = nullptr;
  uint64_t guid = 0;
  int ptrSupport = 0, regIsGlobal = 0, forceFlush = 0, speed = 0, port = 0;
  float latency = 0;
  int maxComms = 0, maxRecvs = 0;
  int netDeviceType = -1, netDeviceVersion = -1;
  bool hasSizes = false;  // v9+
  int vNdevs = 0, vDev0 = -1;
  size_t maxP2pBytes = 0, maxCollBytes = 0;
  bool hasMultiRequest = false;  // v11+
  int maxMultiRequestSize = 0;
  bool hasRail = false;  // v12
  int railId = 0, planeId = 0;
};

class NetApi {
 public:
  virtual ~NetApi() = default;
  virtual int version() const = 0;
  virtual const char* name() const = 0;
  virtual bool perCommContext() const = 0;  // v11+
  // What is wrong with the struct itself (missing mandatory members), or "".
  virtual std::string structProblems() const = 0;
  // v8-v10: the process-wide init; *ctx stays nullptr.
  virtual ncclResult_t init(void** ctx, uint64_t commId, ncclDebugLogger_t log) = 0;
  virtual ncclResult_t finalize(void* ctx) = 0;  // v8-v10: nothing to call
  virtual ncclResult_t devices(int* n) = 0;
  virtual ncclResult_t properties(int dev, AnyProps* p) = 0;
  virtual ncclResult_t listen(void* ctx, int dev, void* handle, void** lc) = 0;
  virtual ncclResult_t connect(void* ctx, int dev, void* handle, void** sc) = 0;
  virtual ncclResult_t accept(void* lc, void** rc) = 0;
  virtual ncclResult_t regMr(void* comm, void* data, size_t size, int type, void** mh) = 0;
  virtual ncclResult_t deregMr(void* comm, void* mh) = 0;
  virtual ncclResult_t isend(void* sc, void* data, size_t size, int tag, void* mh, void** req) = 0;
  // `hint` is written to *req before the call, as NCCL does for the
  // optional-completion hint (v9+; older shims clear it).
  virtual ncclResult_t irecv(void* rc, int n, void** data, size_t* sizes, int* tags, void** mhs, void** req,
                             void* hint) = 0;
  virtual ncclResult_t iflush(void* rc, int n, void** data, int* sizes, void** mhs, void** req) = 0;
  virtual ncclResult_t test(void* req, int* done, int* sizes) = 0;
  virtual ncclResult_t closeSend(void* sc) = 0;
  virtual ncclResult_t closeRecv(void* rc) = 0;
  virtual ncclResult_t closeListen(void* lc) = 0;
};

// The struct at `symbol` read as version `version` (8 to 12).
std::unique_ptr<NetApi> makeNetApi(int version, const void* symbol);

}  // namespace pluginharness
