// NCCL's net plugin ABI, versions 8 to 12 (see common.h for what these
// declarations are). One exported constant per version:
//   const ncclNet_vN_t ncclNetPlugin_vN;
#pragma once

#include "hoccl_nccl/common.h"

#ifdef __cplusplus
extern "C" {
#endif

#define NCCL_NET_HANDLE_MAXSIZE 128
#define NCCL_PTR_HOST 0x1
#define NCCL_PTR_CUDA 0x2
#define NCCL_PTR_DMABUF 0x4
#define NCCL_NET_MAX_REQUESTS 32
#define NCCL_MAX_NET_SIZE_BYTES (1ull << 40)  // bound for maxP2pBytes / maxCollBytes
#define NCCL_NET_OPTIONAL_RECV_COMPLETION 0x1
#define NCCL_NET_ID_UNDEF -1
#define NCCL_NET_DEVICE_INVALID_VERSION 0x0
#define NCCL_NET_TRAFFIC_CLASS_UNDEF -1

typedef enum {
  NCCL_NET_DEVICE_HOST = 0,
  NCCL_NET_DEVICE_UNPACK = 1,
} ncclNetDeviceType;

// Identical in v7 to v12.
typedef struct {
  ncclNetDeviceType netDeviceType;
  int netDeviceVersion;
  void* handle;
  size_t size;
  int needsProxyProgress;
} ncclNetDeviceHandle_t;

// ---- properties -----------------------------------------------------------

typedef struct {
  char* name;
  char* pciPath;
  uint64_t guid;
  int ptrSupport;
  int regIsGlobal;
  int speed;  // Mbit/s
  int port;
  float latency;  // us, 0 = NCCL's default
  int maxComms;
  int maxRecvs;
  ncclNetDeviceType netDeviceType;
  int netDeviceVersion;
} ncclNetProperties_v8_t;

typedef struct {
  int ndevs;
  int devs[4];
} ncclNetVDeviceProps_v9_t;  // also v10, v11

typedef struct {
  char* name;
  char* pciPath;
  uint64_t guid;
  int ptrSupport;
  int regIsGlobal;
  int forceFlush;
  int speed;
  int port;
  float latency;
  int maxComms;
  int maxRecvs;
  ncclNetDeviceType netDeviceType;
  int netDeviceVersion;
  ncclNetVDeviceProps_v9_t vProps;
  size_t maxP2pBytes;
  size_t maxCollBytes;
} ncclNetProperties_v9_t;  // also v10

typedef struct {
  char* name;
  char* pciPath;
  uint64_t guid;
  int ptrSupport;
  int regIsGlobal;
  int forceFlush;
  int speed;
  int port;
  float latency;
  int maxComms;
  int maxRecvs;
  ncclNetDeviceType netDeviceType;
  int netDeviceVersion;
  ncclNetVDeviceProps_v9_t vProps;
  size_t maxP2pBytes;
  size_t maxCollBytes;
  int maxMultiRequestSize;
} ncclNetProperties_v11_t;

typedef struct {
  int ndevs;
  int devs[8];
} ncclNetVDeviceProps_v12_t;

typedef struct {
  char* name;
  char* pciPath;
  uint64_t guid;
  int ptrSupport;
  int regIsGlobal;
  int forceFlush;
  int speed;
  int port;
  float latency;
  int maxComms;
  int maxRecvs;
  ncclNetDeviceType netDeviceType;
  int netDeviceVersion;
  ncclNetVDeviceProps_v12_t vProps;
  size_t maxP2pBytes;
  size_t maxCollBytes;
  int maxMultiRequestSize;
  int16_t railId;
  int16_t planeId;
} ncclNetProperties_v12_t;

typedef struct {
  int trafficClass;  // -1: unset
} ncclNetCommConfig_t;  // v10, v11, v12

typedef struct {
  int32_t maxConcurrentPeers;
  int32_t minConcurrentPeers;
  int32_t maxFlowsPerPeer;
  int32_t minFlowsPerPeer;
} ncclNetCommAttr_t;

typedef struct {
  ncclNetCommAttr_t sendCommAttr;
  ncclNetCommAttr_t recvCommAttr;
  uint32_t op;     // bit mask of 1 << ncclFunc_t
  uint32_t algo;   // bit mask of 1 << NCCL_ALGO_*
  uint32_t proto;  // bit mask of 1 << NCCL_PROTO_*
} ncclNetAttr_t;   // v11, v12

// ---- function tables --------------------------------------------------------

typedef struct {
  const char* name;
  ncclResult_t (*init)(ncclDebugLogger_t logFunction);
  ncclResult_t (*devices)(int* ndev);
  ncclResult_t (*getProperties)(int dev, ncclNetProperties_v8_t* props);
  ncclResult_t (*listen)(int dev, void* handle, void** listenComm);
  ncclResult_t (*connect)(int dev, void* handle, void** sendComm, ncclNetDeviceHandle_t** sendDevComm);
  ncclResult_t (*accept)(void* listenComm, void** recvComm, ncclNetDeviceHandle_t** recvDevComm);
  ncclResult_t (*regMr)(void* comm, void* data, size_t size, int type, void** mhandle);
  ncclResult_t (*regMrDmaBuf)(void* comm, void* data, size_t size, int type, uint64_t offset, int fd,
                              void** mhandle);
  ncclResult_t (*deregMr)(void* comm, void* mhandle);
  ncclResult_t (*isend)(void* sendComm, void* data, int size, int tag, void* mhandle, void** request);
  ncclResult_t (*irecv)(void* recvComm, int n, void** data, int* sizes, int* tags, void** mhandles,
                        void** request);
  ncclResult_t (*iflush)(void* recvComm, int n, void** data, int* sizes, void** mhandles, void** request);
  ncclResult_t (*test)(void* request, int* done, int* sizes);
  ncclResult_t (*closeSend)(void* sendComm);
  ncclResult_t (*closeRecv)(void* recvComm);
  ncclResult_t (*closeListen)(void* listenComm);
  ncclResult_t (*getDeviceMr)(void* comm, void* mhandle, void** dptr_mhandle);
  ncclResult_t (*irecvConsumed)(void* recvComm, int n, void* request);
} ncclNet_v8_t;

typedef struct {
  const char* name;
  ncclResult_t (*init)(ncclDebugLogger_t logFunction);
  ncclResult_t (*devices)(int* ndev);
  ncclResult_t (*getProperties)(int dev, ncclNetProperties_v9_t* props);
  ncclResult_t (*listen)(int dev, void* handle, void** listenComm);
  ncclResult_t (*connect)(int dev, void* handle, void** sendComm, ncclNetDeviceHandle_t** sendDevComm);
  ncclResult_t (*accept)(void* listenComm, void** recvComm, ncclNetDeviceHandle_t** recvDevComm);
  ncclResult_t (*regMr)(void* comm, void* data, size_t size, int type, void** mhandle);
  ncclResult_t (*regMrDmaBuf)(void* comm, void* data, size_t size, int type, uint64_t offset, int fd,
                              void** mhandle);
  ncclResult_t (*deregMr)(void* comm, void* mhandle);
  ncclResult_t (*isend)(void* sendComm, void* data, size_t size, int tag, void* mhandle, void** request);
  ncclResult_t (*irecv)(void* recvComm, int n, void** data, size_t* sizes, int* tags, void** mhandles,
                        void** request);
  ncclResult_t (*iflush)(void* recvComm, int n, void** data, int* sizes, void** mhandles, void** request);
  ncclResult_t (*test)(void* request, int* done, int* sizes);
  ncclResult_t (*closeSend)(void* sendComm);
  ncclResult_t (*closeRecv)(void* recvComm);
  ncclResult_t (*closeListen)(void* listenComm);
  ncclResult_t (*getDeviceMr)(void* comm, void* mhandle, void** dptr_mhandle);
  ncclResult_t (*irecvConsumed)(void* recvComm, int n, void* request);
  ncclResult_t (*makeVDevice)(int* d, ncclNetVDeviceProps_v9_t* props);
} ncclNet_v9_t;

typedef struct {
  const char* name;
  ncclResult_t (*init)(ncclDebugLogger_t logFunction, ncclProfilerCallback_t profFunction);
  ncclResult_t (*devices)(int* ndev);
  ncclResult_t (*getProperties)(int dev, ncclNetProperties_v9_t* props);
  ncclResult_t (*listen)(int dev, void* handle, void** listenComm);
  ncclResult_t (*connect)(int dev, ncclNetCommConfig_t* config, void* handle, void** sendComm,
                          ncclNetDeviceHandle_t** sendDevComm);
  ncclResult_t (*accept)(void* listenComm, void** recvComm, ncclNetDeviceHandle_t** recvDevComm);
  ncclResult_t (*regMr)(void* comm, void* data, size_t size, int type, void** mhandle);
  ncclResult_t (*regMrDmaBuf)(void* comm, void* data, size_t size, int type, uint64_t offset, int fd,
                              void** mhandle);
  ncclResult_t (*deregMr)(void* comm, void* mhandle);
  ncclResult_t (*isend)(void* sendComm, void* data, size_t size, int tag, void* mhandle, void* phandle,
                        void** request);
  ncclResult_t (*irecv)(void* recvComm, int n, void** data, size_t* sizes, int* tags, void** mhandles,
                        void** phandles, void** request);
  ncclResult_t (*iflush)(void* recvComm, int n, void** data, int* sizes, void** mhandles, void** request);
  ncclResult_t (*test)(void* request, int* done, int* sizes);
  ncclResult_t (*closeSend)(void* sendComm);
  ncclResult_t (*closeRecv)(void* recvComm);
  ncclResult_t (*closeListen)(void* listenComm);
  ncclResult_t (*getDeviceMr)(void* comm, void* mhandle, void** dptr_mhandle);
  ncclResult_t (*irecvConsumed)(void* recvComm, int n, void* request);
  ncclResult_t (*makeVDevice)(int* d, ncclNetVDeviceProps_v9_t* props);
} ncclNet_v10_t;

// v11 and v12 differ only in the properties and virtual-device types.
#define HOCCL_NCCL_NET_V11_V12_MEMBERS(PROPS, VPROPS)                                                       \
  const char* name;                                                                                        \
  ncclResult_t (*init)(void** ctx, uint64_t commId, ncclNetCommConfig_t* config,                           \
                       ncclDebugLogger_t logFunction, ncclProfilerCallback_t profFunction);                \
  ncclResult_t (*devices)(int* ndev);                                                                      \
  ncclResult_t (*getProperties)(int dev, PROPS* props);                                                    \
  ncclResult_t (*listen)(void* ctx, int dev, void* handle, void** listenComm);                             \
  ncclResult_t (*connect)(void* ctx, int dev, void* handle, void** sendComm,                               \
                          ncclNetDeviceHandle_t** sendDevComm);                                            \
  ncclResult_t (*accept)(void* listenComm, void** recvComm, ncclNetDeviceHandle_t** recvDevComm);          \
  ncclResult_t (*regMr)(void* comm, void* data, size_t size, int type, void** mhandle);                     \
  ncclResult_t (*regMrDmaBuf)(void* comm, void* data, size_t size, int type, uint64_t offset, int fd,      \
                              void** mhandle);                                                             \
  ncclResult_t (*deregMr)(void* comm, void* mhandle);                                                      \
  ncclResult_t (*isend)(void* sendComm, void* data, size_t size, int tag, void* mhandle, void* phandle,    \
                        void** request);                                                                   \
  ncclResult_t (*irecv)(void* recvComm, int n, void** data, size_t* sizes, int* tags, void** mhandles,     \
                        void** phandles, void** request);                                                  \
  ncclResult_t (*iflush)(void* recvComm, int n, void** data, int* sizes, void** mhandles, void** request); \
  ncclResult_t (*test)(void* request, int* done, int* sizes);                                              \
  ncclResult_t (*closeSend)(void* sendComm);                                                               \
  ncclResult_t (*closeRecv)(void* recvComm);                                                               \
  ncclResult_t (*closeListen)(void* listenComm);                                                           \
  ncclResult_t (*getDeviceMr)(void* comm, void* mhandle, void** dptr_mhandle);                             \
  ncclResult_t (*irecvConsumed)(void* recvComm, int n, void* request);                                     \
  ncclResult_t (*makeVDevice)(int* d, VPROPS* props);                                                      \
  ncclResult_t (*finalize)(void* ctx);                                                                     \
  ncclResult_t (*setNetAttr)(void* ctx, ncclNetAttr_t* netAttr);

typedef struct {
  HOCCL_NCCL_NET_V11_V12_MEMBERS(ncclNetProperties_v11_t, ncclNetVDeviceProps_v9_t)
} ncclNet_v11_t;

typedef struct {
  HOCCL_NCCL_NET_V11_V12_MEMBERS(ncclNetProperties_v12_t, ncclNetVDeviceProps_v12_t)
} ncclNet_v12_t;

#ifdef __cplusplus
}
#endif

// The layouts above, checked against NCCL's numbers.
#define HOCCL_NCCL_NET_DECLARED 1
#include "hoccl_nccl/abi_check.h"
