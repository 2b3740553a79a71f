// One adapter per NCCL net ABI version over net_plugin.h, and the exported
// ncclNetPlugin_v8 ... v12 constants NCCL looks up (newest first).
#include <climits>

#include "plugin/common/nccl_log.h"
#include "plugin/net/net_plugin.h"

#define HOCCL_EXPORT extern "C" __attribute__((visibility("default")))

namespace hoccl {
namespace ncclplugin {
namespace {

// The name NCCL matches NCCL_NET against (case-insensitively).
constexpr const char* kNetName = "hoccl";

template <class Props>
ncclResult_t fillCommon(int dev, Props* out, DeviceProps* p) {
  ncclResult_t r = netProperties(dev, p);
  if (r != ncclSuccess) return r;
  *out = Props();
  out->name = const_cast<char*>(p->name);
  out->pciPath = const_cast<char*>(p->pciPath);
  out->guid = p->guid;
  out->ptrSupport = p->ptrSupport;
  out->regIsGlobal = 0;
  out->speed = p->speedMbps;
  out->port = p->port;
  out->latency = 0;  // NCCL's default
  out->maxComms = p->maxComms;
  out->maxRecvs = p->maxRecvs;
  out->netDeviceType = NCCL_NET_DEVICE_HOST;
  out->netDeviceVersion = NCCL_NET_DEVICE_INVALID_VERSION;
  return ncclSuccess;
}

// v9 and later: flush, the virtual-device list and the size limits.
template <class Props>
ncclResult_t fillSized(int dev, Props* out, DeviceProps* p) {
  ncclResult_t r = fillCommon(dev, out, p);
  if (r != ncclSuccess) return r;
  out->forceFlush = 0;
  out->vProps.ndevs = 1;
  out->vProps.devs[0] = dev;
  out->maxP2pBytes = p->maxP2pBytes;
  out->maxCollBytes = p->maxP2pBytes;
  return ncclSuccess;
}

ncclResult_t props8(int dev, ncclNetProperties_v8_t* out) {
  DeviceProps p;
  return fillCommon(dev, out, &p);
}
ncclResult_t props9(int dev, ncclNetProperties_v9_t* out) {
  DeviceProps p;
  return fillSized(dev, out, &p);
}
ncclResult_t props11(int dev, ncclNetProperties_v11_t* out) {
  DeviceProps p;
  ncclResult_t r = fillSized(dev, out, &p);
  if (r == ncclSuccess) out->maxMultiRequestSize = 1;
  return r;
}
ncclResult_t props12(int dev, ncclNetProperties_v12_t* out) {
  DeviceProps p;
  ncclResult_t r = fillSized(dev, out, &p);
  if (r != ncclSuccess) return r;
  out->maxMultiRequestSize = 1;
  out->railId = NCCL_NET_ID_UNDEF;  // TCP knows no rails or planes
  out->planeId = NCCL_NET_ID_UNDEF;
  return ncclSuccess;
}

// ---- versions without a context (v8-v10) ----

ncclResult_t init8(ncclDebugLogger_t log) { return netInitProcess(log, "v8"); }
ncclResult_t init9(ncclDebugLogger_t log) { return netInitProcess(log, "v9"); }
ncclResult_t init10(ncclDebugLogger_t log, ncclProfilerCallback_t) { return netInitProcess(log, "v10"); }

ncclResult_t listenProcess(int dev, void* handle, void** listenComm) {
  return netListen(processContext(), dev, handle, listenComm);
}
ncclResult_t connectProcess(int dev, void* handle, void** sendComm, ncclNetDeviceHandle_t**) {
  return netConnect(processContext(), dev, handle, sendComm);
}
ncclResult_t connect10(int dev, ncclNetCommConfig_t*, void* handle, void** sendComm, ncclNetDeviceHandle_t**) {
  return netConnect(processContext(), dev, handle, sendComm);
}
ncclResult_t accept(void* listenComm, void** recvComm, ncclNetDeviceHandle_t**) { return netAccept(listenComm, recvComm); }

ncclResult_t isend8(void* sendComm, void* data, int size, int tag, void* mhandle, void** request) {
  if (size < 0) {
    *request = nullptr;
    PLOG_WARN("NET/hoccl: isend of %d bytes", size);
    return ncclInternalError;
  }
  return netIsend(sendComm, data, static_cast<size_t>(size), tag, mhandle, request);
}
ncclResult_t irecv8(void* recvComm, int n, void** data, int* sizes, int* tags, void** mhandles, void** request) {
  size_t wide[NCCL_NET_MAX_REQUESTS];
  if (n < 1 || n > NCCL_NET_MAX_REQUESTS) {
    *request = nullptr;
    PLOG_WARN("NET/hoccl: irecv of %d buffers", n);
    return ncclInternalError;
  }
  for (int i = 0; i < n; ++i) wide[i] = sizes[i] < 0 ? 0 : static_cast<size_t>(sizes[i]);
  return netIrecv(recvComm, n, data, wide, tags, mhandles, request);
}
ncclResult_t isend9(void* sendComm, void* data, size_t size, int tag, void* mhandle, void** request) {
  return netIsend(sendComm, data, size, tag, mhandle, request);
}
ncclResult_t irecv9(void* recvComm, int n, void** data, size_t* sizes, int* tags, void** mhandles, void** request) {
  return netIrecv(recvComm, n, data, sizes, tags, mhandles, request);
}

// ---- v10 and later: profiler handles (ignored) ----

ncclResult_t isend10(void* sendComm, void* data, size_t size, int tag, void* mhandle, void*, void** request) {
  return netIsend(sendComm, data, size, tag, mhandle, request);
}
ncclResult_t irecv10(void* recvComm, int n, void** data, size_t* sizes, int* tags, void** mhandles, void**,
                     void** request) {
  return netIrecv(recvComm, n, data, sizes, tags, mhandles, request);
}

// ---- v11 and later: a context per communicator ----

ncclResult_t init11(void** ctx, uint64_t commId, ncclNetCommConfig_t* config, ncclDebugLogger_t log,
                    ncclProfilerCallback_t) {
  return netInit(ctx, commId, config, log, "v11");
}
ncclResult_t init12(void** ctx, uint64_t commId, ncclNetCommConfig_t* config, ncclDebugLogger_t log,
                    ncclProfilerCallback_t) {
  return netInit(ctx, commId, config, log, "v12");
}
ncclResult_t connect11(void* ctx, int dev, void* handle, void** sendComm, ncclNetDeviceHandle_t**) {
  return netConnect(ctx, dev, handle, sendComm);
}
ncclResult_t setNetAttr(void* ctx, ncclNetAttr_t* attr) { return netSetAttr(ctx, attr); }

}  // namespace
}  // namespace ncclplugin
}  // namespace hoccl

using namespace hoccl::ncclplugin;

// Members NCCL may find NULL: getDeviceMr and irecvConsumed (host plugin, no
// device offload), makeVDevice (no NIC fusion: a stub returning an error
// would make NCCL fail instead of skipping fusion).

HOCCL_EXPORT const ncclNet_v8_t ncclNetPlugin_v8 = {
    .name = kNetName,
    .init = init8,
    .devices = netDevices,
    .getProperties = props8,
    .listen = listenProcess,
    .connect = connectProcess,
    .accept = accept,
    .regMr = netRegMr,
    .regMrDmaBuf = netRegMrDmaBuf,
    .deregMr = netDeregMr,
    .isend = isend8,
    .irecv = irecv8,
    .iflush = netIflush,
    .test = netTest,
    .closeSend = netCloseSend,
    .closeRecv = netCloseRecv,
    .closeListen = netCloseListen,
    .getDeviceMr = nullptr,
    .irecvConsumed = nullptr,
};

HOCCL_EXPORT const ncclNet_v9_t ncclNetPlugin_v9 = {
    .name = kNetName,
    .init = init9,
    .devices = netDevices,
    .getProperties = props9,
    .listen = listenProcess,
    .connect = connectProcess,
    .accept = accept,
    .regMr = netRegMr,
    .regMrDmaBuf = netRegMrDmaBuf,
    .deregMr = netDeregMr,
    .isend = isend9,
    .irecv = irecv9,
    .iflush = netIflush,
    .test = netTest,
    .closeSend = netCloseSend,
    .closeRecv = netCloseRecv,
    .closeListen = netCloseListen,
    .getDeviceMr = nullptr,
    .irecvConsumed = nullptr,
    .makeVDevice = nullptr,
};

HOCCL_EXPORT const ncclNet_v10_t ncclNetPlugin_v10 = {
    .name = kNetName,
    .init = init10,
    .devices = netDevices,
    .getProperties = props9,
    .listen = listenProcess,
    .connect = connect10,
    .accept = accept,
    .regMr = netRegMr,
    .regMrDmaBuf = netRegMrDmaBuf,
    .deregMr = netDeregMr,
    .isend = isend10,
    .irecv = irecv10,
    .iflush = netIflush,
    .test = netTest,
    .closeSend = netCloseSend,
    .closeRecv = netCloseRecv,
    .closeListen = netCloseListen,
    .getDeviceMr = nullptr,
    .irecvConsumed = nullptr,
    .makeVDevice = nullptr,
};

HOCCL_EXPORT const ncclNet_v11_t ncclNetPlugin_v11 = {
    .name = kNetName,
    .init = init11,
    .devices = netDevices,
    .getProperties = props11,
    .listen = netListen,
    .connect = connect11,
    .accept = accept,
    .regMr = netRegMr,
    .regMrDmaBuf = netRegMrDmaBuf,
    .deregMr = netDeregMr,
    .isend = isend10,
    .irecv = irecv10,
    .iflush = netIflush,
    .test = netTest,
    .closeSend = netCloseSend,
    .closeRecv = netCloseRecv,
    .closeListen = netCloseListen,
    .getDeviceMr = nullptr,
    .irecvConsumed = nullptr,
    .makeVDevice = nullptr,
    .finalize = netFinalize,
    .setNetAttr = setNetAttr,
};

HOCCL_EXPORT const ncclNet_v12_t ncclNetPlugin_v12 = {
    .name = kNetName,
    .init = init12,
    .devices = netDevices,
    .getProperties = props12,
    .listen = netListen,
    .connect = connect11,
    .accept = accept,
    .regMr = netRegMr,
    .regMrDmaBuf = netRegMrDmaBuf,
    .deregMr = netDeregMr,
    .isend = isend10,
    .irecv = irecv10,
    .iflush = netIflush,
    .test = netTest,
    .closeSend = netCloseSend,
    .closeRecv = netCloseRecv,
    .closeListen = netCloseListen,
    .getDeviceMr = nullptr,
    .irecvConsumed = nullptr,
    .makeVDevice = nullptr,
    .finalize = netFinalize,
    .setNetAttr = setNetAttr,
};
