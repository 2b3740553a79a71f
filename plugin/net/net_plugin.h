// The NCCL net plugin's one implementation; net_versions.cc adapts it to
// each ABI version NCCL knows (v8 to v12).
//
// A process-wide engine owns one hoccl network transport (HOCCL_NET, see
// transports.cc) and its progress thread. NCCL v11+ calls init once per
// communicator: each call gets its own context (commId, traffic class, the
// hints of setNetAttr, the comms it opened) holding a reference on the
// engine; the last finalize stops the engine, so nothing runs when NCCL
// dlcloses the library. Older versions call init once per process and never
// finalize: their context lives until the library is unloaded, and the
// library's destructor stops the engine then.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "hoccl_nccl/net.h"

namespace hoccl {
namespace ncclplugin {

// Everything any version's properties struct reports.
struct DeviceProps {
  const char* name = nullptr;     // owned by the engine
  const char* pciPath = nullptr;  // nullptr: virtual device
  uint64_t guid = 0;
  int ptrSupport = NCCL_PTR_HOST;
  int speedMbps = 0;
  int port = 0;
  int maxComms = 0;
  int maxRecvs = 1;
  size_t maxP2pBytes = 0;  // in (0, NCCL_MAX_NET_SIZE_BYTES]
  int dev = 0;
};

// The context of the versions without one (v8-v10).
void* processContext();

ncclResult_t netInit(void** ctx, uint64_t commId, const ncclNetCommConfig_t* config, ncclDebugLogger_t log,
                     const char* abi);
ncclResult_t netInitProcess(ncclDebugLogger_t log, const char* abi);  // v8-v10
ncclResult_t netFinalize(void* ctx);
ncclResult_t netDevices(int* ndev);
ncclResult_t netProperties(int dev, DeviceProps* props);
ncclResult_t netListen(void* ctx, int dev, void* handle, void** listenComm);
ncclResult_t netConnect(void* ctx, int dev, void* handle, void** sendComm);
ncclResult_t netAccept(void* listenComm, void** recvComm);
ncclResult_t netRegMr(void* comm, void* data, size_t size, int type, void** mhandle);
ncclResult_t netRegMrDmaBuf(void* comm, void* data, size_t size, int type, uint64_t offset, int fd, void** mhandle);
ncclResult_t netDeregMr(void* comm, void* mhandle);
ncclResult_t netIsend(void* sendComm, void* data, size_t size, int tag, void* mhandle, void** request);
ncclResult_t netIrecv(void* recvComm, int n, void** data, const size_t* sizes, int* tags, void** mhandles,
                      void** request);
ncclResult_t netIflush(void* recvComm, int n, void** data, int* sizes, void** mhandles, void** request);
ncclResult_t netTest(void* request, int* done, int* sizes);
ncclResult_t netCloseSend(void* sendComm);
ncclResult_t netCloseRecv(void* recvComm);
ncclResult_t netCloseListen(void* listenComm);
ncclResult_t netSetAttr(void* ctx, const ncclNetAttr_t* attr);

}  // namespace ncclplugin
}  // namespace hoccl
