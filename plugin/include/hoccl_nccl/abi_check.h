// NCCL's plugin ABI as plain numbers, checked against hoccl's declarations
// (common.h, net.h, tuner.h) at compile time. net.h and tuner.h include this
// file at their end, so the plugins, the harness and every other user fail
// to build when a declaration drifts from NCCL's layout.
//
// The numbers are facts read off NCCL's published headers, not computed from
// ours: NVIDIA/nccl src/include/plugin/net/net_v8.h .. net_v12.h,
// src/include/plugin/tuner/tuner_v3.h .. tuner_v6.h,
// src/include/nccl_device/net_device.h, src/include/nccl_common.h,
// src/include/plugin/nccl_tuner.h and nccl.h. Net v8-v11 and tuner v3-v5
// read the same in v2.28.9-1 and v2.30.7-1; net v12 and tuner v6 first
// appear in 2.30. Offsets are for LP64 with natural alignment (x86_64 SysV;
// aarch64 lays these structs out the same way).
//
// For every exported struct version (and every struct passed through it):
//   HOCCL_ABI_SIZE(T, bytes)
//   HOCCL_ABI_FIELD(T, member, offset, bytes, type)      data members
//   HOCCL_ABI_FN(T, member, offset, function-pointer type)  entry points
// NCCL names some structs per version where the layout did not change
// (ncclNetProperties_v10_t is v9's, ...); such a version is listed again
// against the hoccl type it maps to, with NCCL's name in a comment.
//
// Not a pragma-once header: each part runs once, after the header that
// declares its types.

#if !defined(__LP64__) || !(defined(__x86_64__) || defined(__aarch64__))
#error "hoccl_nccl/abi_check.h holds NCCL's layouts for LP64 x86_64/aarch64 only; add this target's numbers"
#endif

#ifndef HOCCL_NCCL_ABI_MACROS
#define HOCCL_NCCL_ABI_MACROS
#include <stddef.h>
#include <stdint.h>
#ifdef __cplusplus
#include <type_traits>
#define HOCCL_ABI_ASSERT(cond, msg) static_assert(cond, msg)
#define HOCCL_ABI_TYPE_IS(T, f, type)                                                           \
  HOCCL_ABI_ASSERT((std::is_same<decltype(T::f), type>::value), #T "." #f " is not " #type \
                   " as in NCCL")
#else
#define HOCCL_ABI_ASSERT(cond, msg) _Static_assert(cond, msg)
#define HOCCL_ABI_TYPE_IS(T, f, type) HOCCL_ABI_ASSERT(1, "")
#endif
#define HOCCL_ABI_SIZE(T, size) HOCCL_ABI_ASSERT(sizeof(T) == (size), "sizeof(" #T ") is not " #size " as in NCCL")
#define HOCCL_ABI_FIELD(T, f, off, size, type)                                                       \
  HOCCL_ABI_ASSERT(offsetof(T, f) == (off), #T "." #f " is not at offset " #off " as in NCCL");      \
  HOCCL_ABI_ASSERT(sizeof(((T*)0)->f) == (size), #T "." #f " is not " #size " bytes as in NCCL"); \
  HOCCL_ABI_TYPE_IS(T, f, type)
#define HOCCL_ABI_FN(T, f, off, ...) HOCCL_ABI_FIELD(T, f, off, 8, __VA_ARGS__)
#endif

// ---- values that cross the ABI (common.h) ----------------------------------
#if defined(HOCCL_NCCL_COMMON_DECLARED) && !defined(HOCCL_NCCL_COMMON_ABI_CHECKED)
#define HOCCL_NCCL_COMMON_ABI_CHECKED
// nccl.h. Checked against NCCL's own enums too when nccl.h came first
// (tests/plugin/abi_nccl_h.cc).
HOCCL_ABI_ASSERT(sizeof(ncclResult_t) == 4, "ncclResult_t is an int-sized enum in NCCL");
HOCCL_ABI_ASSERT(ncclSuccess == 0 && ncclUnhandledCudaError == 1 && ncclSystemError == 2 &&
                     ncclInternalError == 3 && ncclInvalidArgument == 4 && ncclInvalidUsage == 5 &&
                     ncclRemoteError == 6 && ncclInProgress == 7,
                 "ncclResult_t values differ from NCCL's");
HOCCL_ABI_ASSERT(ncclInt8 == 0 && ncclUint8 == 1 && ncclInt32 == 2 && ncclUint32 == 3 && ncclInt64 == 4 &&
                     ncclUint64 == 5 && ncclFloat16 == 6 && ncclFloat32 == 7 && ncclFloat64 == 8 &&
                     ncclBfloat16 == 9 && ncclFloat8e4m3 == 10 && ncclFloat8e5m2 == 11,
                 "ncclDataType_t values differ from NCCL's");
HOCCL_ABI_ASSERT(ncclSum == 0 && ncclProd == 1 && ncclMax == 2 && ncclMin == 3 && ncclAvg == 4,
                 "ncclRedOp_t values differ from NCCL's");
// nccl_common.h
HOCCL_ABI_ASSERT(sizeof(ncclDebugLogLevel) == 4 && sizeof(ncclFunc_t) == 4, "enums are int-sized in NCCL");
HOCCL_ABI_ASSERT(NCCL_LOG_NONE == 0 && NCCL_LOG_VERSION == 1 && NCCL_LOG_WARN == 2 && NCCL_LOG_INFO == 3 &&
                     NCCL_LOG_ABORT == 4 && NCCL_LOG_TRACE == 5,
                 "ncclDebugLogLevel values differ from NCCL's");
HOCCL_ABI_ASSERT(NCCL_INIT == 0x1 && NCCL_COLL == 0x2 && NCCL_NET == 0x10 && NCCL_TUNING == 0x40,
                 "ncclDebugLogSubSys values differ from NCCL's");
HOCCL_ABI_ASSERT(ncclFuncBroadcast == 0 && ncclFuncReduce == 1 && ncclFuncAllGather == 2 &&
                     ncclFuncReduceScatter == 3 && ncclFuncAllReduce == 4 && ncclFuncSendRecv == 5 &&
                     ncclFuncSend == 6 && ncclFuncRecv == 7,
                 "ncclFunc_t values differ from NCCL's");
#ifdef __cplusplus
HOCCL_ABI_ASSERT((std::is_same<ncclDebugLogger_t, void (*)(ncclDebugLogLevel, unsigned long, const char*, int,
                                                            const char*, ...)>::value),
                 "ncclDebugLogger_t differs from NCCL's");
HOCCL_ABI_ASSERT((std::is_same<ncclProfilerCallback_t, ncclResult_t (*)(void**, int, void*, int64_t, void*)>::value),
                 "ncclProfilerCallback_t differs from NCCL's");
#endif
#endif

// ---- net v8 .. v12 (net.h) --------------------------------------------------
#if defined(HOCCL_NCCL_NET_DECLARED) && !defined(HOCCL_NCCL_NET_ABI_CHECKED)
#define HOCCL_NCCL_NET_ABI_CHECKED
HOCCL_ABI_ASSERT(NCCL_NET_HANDLE_MAXSIZE == 128 && NCCL_PTR_HOST == 0x1 && NCCL_PTR_CUDA == 0x2 &&
                     NCCL_PTR_DMABUF == 0x4 && NCCL_NET_MAX_REQUESTS == 32 &&
                     NCCL_NET_OPTIONAL_RECV_COMPLETION == 0x1,
                 "net constants differ from NCCL's");
HOCCL_ABI_ASSERT(sizeof(ncclNetDeviceType) == 4 && NCCL_NET_DEVICE_HOST == 0 && NCCL_NET_DEVICE_UNPACK == 1,
                 "ncclNetDeviceType differs from NCCL's");

HOCCL_ABI_SIZE(ncclNetDeviceHandle_t, 32);
HOCCL_ABI_FIELD(ncclNetDeviceHandle_t, netDeviceType, 0, 4, ncclNetDeviceType);
HOCCL_ABI_FIELD(ncclNetDeviceHandle_t, netDeviceVersion, 4, 4, int);
HOCCL_ABI_FIELD(ncclNetDeviceHandle_t, handle, 8, 8, void*);
HOCCL_ABI_FIELD(ncclNetDeviceHandle_t, size, 16, 8, size_t);
HOCCL_ABI_FIELD(ncclNetDeviceHandle_t, needsProxyProgress, 24, 4, int);

HOCCL_ABI_SIZE(ncclNetProperties_v8_t, 64);
HOCCL_ABI_FIELD(ncclNetProperties_v8_t, name, 0, 8, char*);
HOCCL_ABI_FIELD(ncclNetProperties_v8_t, pciPath, 8, 8, char*);
HOCCL_ABI_FIELD(ncclNetProperties_v8_t, guid, 16, 8, uint64_t);
HOCCL_ABI_FIELD(ncclNetProperties_v8_t, ptrSupport, 24, 4, int);
HOCCL_ABI_FIELD(ncclNetProperties_v8_t, regIsGlobal, 28, 4, int);
HOCCL_ABI_FIELD(ncclNetProperties_v8_t, speed, 32, 4, int);
HOCCL_ABI_FIELD(ncclNetProperties_v8_t, port, 36, 4, int);
HOCCL_ABI_FIELD(ncclNetProperties_v8_t, latency, 40, 4, float);
HOCCL_ABI_FIELD(ncclNetProperties_v8_t, maxComms, 44, 4, int);
HOCCL_ABI_FIELD(ncclNetProperties_v8_t, maxRecvs, 48, 4, int);
HOCCL_ABI_FIELD(ncclNetProperties_v8_t, netDeviceType, 52, 4, ncclNetDeviceType);
HOCCL_ABI_FIELD(ncclNetProperties_v8_t, netDeviceVersion, 56, 4, int);

HOCCL_ABI_SIZE(ncclNetProperties_v9_t, 104);
HOCCL_ABI_FIELD(ncclNetProperties_v9_t, name, 0, 8, char*);
HOCCL_ABI_FIELD(ncclNetProperties_v9_t, pciPath, 8, 8, char*);
HOCCL_ABI_FIELD(ncclNetProperties_v9_t, guid, 16, 8, uint64_t);
HOCCL_ABI_FIELD(ncclNetProperties_v9_t, ptrSupport, 24, 4, int);
HOCCL_ABI_FIELD(ncclNetProperties_v9_t, regIsGlobal, 28, 4, int);
HOCCL_ABI_FIELD(ncclNetProperties_v9_t, forceFlush, 32, 4, int);
HOCCL_ABI_FIELD(ncclNetProperties_v9_t, speed, 36, 4, int);
HOCCL_ABI_FIELD(ncclNetProperties_v9_t, port, 40, 4, int);
HOCCL_ABI_FIELD(ncclNetProperties_v9_t, latency, 44, 4, float);
HOCCL_ABI_FIELD(ncclNetProperties_v9_t, maxComms, 48, 4, int);
HOCCL_ABI_FIELD(ncclNetProperties_v9_t, maxRecvs, 52, 4, int);
HOCCL_ABI_FIELD(ncclNetProperties_v9_t, netDeviceType, 56, 4, ncclNetDeviceType);
HOCCL_ABI_FIELD(ncclNetProperties_v9_t, netDeviceVersion, 60, 4, int);
HOCCL_ABI_FIELD(ncclNetProperties_v9_t, vProps, 64, 20, ncclNetVDeviceProps_v9_t);
HOCCL_ABI_FIELD(ncclNetProperties_v9_t, maxP2pBytes, 88, 8, size_t);
HOCCL_ABI_FIELD(ncclNetProperties_v9_t, maxCollBytes, 96, 8, size_t);

HOCCL_ABI_SIZE(ncclNetProperties_v9_t, 104);  // NCCL: ncclNetProperties_v10_t
HOCCL_ABI_FIELD(ncclNetProperties_v9_t, name, 0, 8, char*);
HOCCL_ABI_FIELD(ncclNetProperties_v9_t, pciPath, 8, 8, char*);
HOCCL_ABI_FIELD(ncclNetProperties_v9_t, guid, 16, 8, uint64_t);
HOCCL_ABI_FIELD(ncclNetProperties_v9_t, ptrSupport, 24, 4, int);
HOCCL_ABI_FIELD(ncclNetProperties_v9_t, regIsGlobal, 28, 4, int);
HOCCL_ABI_FIELD(ncclNetProperties_v9_t, forceFlush, 32, 4, int);
HOCCL_ABI_FIELD(ncclNetProperties_v9_t, speed, 36, 4, int);
HOCCL_ABI_FIELD(ncclNetProperties_v9_t, port, 40, 4, int);
HOCCL_ABI_FIELD(ncclNetProperties_v9_t, latency, 44, 4, float);
HOCCL_ABI_FIELD(ncclNetProperties_v9_t, maxComms, 48, 4, int);
HOCCL_ABI_FIELD(ncclNetProperties_v9_t, maxRecvs, 52, 4, int);
HOCCL_ABI_FIELD(ncclNetProperties_v9_t, netDeviceType, 56, 4, ncclNetDeviceType);
HOCCL_ABI_FIELD(ncclNetProperties_v9_t, netDeviceVersion, 60, 4, int);
HOCCL_ABI_FIELD(ncclNetProperties_v9_t, vProps, 64, 20, ncclNetVDeviceProps_v9_t);
HOCCL_ABI_FIELD(ncclNetProperties_v9_t, maxP2pBytes, 88, 8, size_t);
HOCCL_ABI_FIELD(ncclNetProperties_v9_t, maxCollBytes, 96, 8, size_t);

HOCCL_ABI_SIZE(ncclNetProperties_v11_t, 112);
HOCCL_ABI_FIELD(ncclNetProperties_v11_t, name, 0, 8, char*);
HOCCL_ABI_FIELD(ncclNetProperties_v11_t, pciPath, 8, 8, char*);
HOCCL_ABI_FIELD(ncclNetProperties_v11_t, guid, 16, 8, uint64_t);
HOCCL_ABI_FIELD(ncclNetProperties_v11_t, ptrSupport, 24, 4, int);
HOCCL_ABI_FIELD(ncclNetProperties_v11_t, regIsGlobal, 28, 4, int);
HOCCL_ABI_FIELD(ncclNetProperties_v11_t, forceFlush, 32, 4, int);
HOCCL_ABI_FIELD(ncclNetProperties_v11_t, speed, 36, 4, int);
HOCCL_ABI_FIELD(ncclNetProperties_v11_t, port, 40, 4, int);
HOCCL_ABI_FIELD(ncclNetProperties_v11_t, latency, 44, 4, float);
HOCCL_ABI_FIELD(ncclNetProperties_v11_t, maxComms, 48, 4, int);
HOCCL_ABI_FIELD(ncclNetProperties_v11_t, maxRecvs, 52, 4, int);
HOCCL_ABI_FIELD(ncclNetProperties_v11_t, netDeviceType, 56, 4, ncclNetDeviceType);
HOCCL_ABI_FIELD(ncclNetProperties_v11_t, netDeviceVersion, 60, 4, int);
HOCCL_ABI_FIELD(ncclNetProperties_v11_t, vProps, 64, 20, ncclNetVDeviceProps_v9_t);
HOCCL_ABI_FIELD(ncclNetProperties_v11_t, maxP2pBytes, 88, 8, size_t);
HOCCL_ABI_FIELD(ncclNetProperties_v11_t, maxCollBytes, 96, 8, size_t);
HOCCL_ABI_FIELD(ncclNetProperties_v11_t, maxMultiRequestSize, 104, 4, int);

HOCCL_ABI_SIZE(ncclNetProperties_v12_t, 128);
HOCCL_ABI_FIELD(ncclNetProperties_v12_t, name, 0, 8, char*);
HOCCL_ABI_FIELD(ncclNetProperties_v12_t, pciPath, 8, 8, char*);
HOCCL_ABI_FIELD(ncclNetProperties_v12_t, guid, 16, 8, uint64_t);
HOCCL_ABI_FIELD(ncclNetProperties_v12_t, ptrSupport, 24, 4, int);
HOCCL_ABI_FIELD(ncclNetProperties_v12_t, regIsGlobal, 28, 4, int);
HOCCL_ABI_FIELD(ncclNetProperties_v12_t, forceFlush, 32, 4, int);
HOCCL_ABI_FIELD(ncclNetProperties_v12_t, speed, 36, 4, int);
HOCCL_ABI_FIELD(ncclNetProperties_v12_t, port, 40, 4, int);
HOCCL_ABI_FIELD(ncclNetProperties_v12_t, latency, 44, 4, float);
HOCCL_ABI_FIELD(ncclNetProperties_v12_t, maxComms, 48, 4, int);
HOCCL_ABI_FIELD(ncclNetProperties_v12_t, maxRecvs, 52, 4, int);
HOCCL_ABI_FIELD(ncclNetProperties_v12_t, netDeviceType, 56, 4, ncclNetDeviceType);
HOCCL_ABI_FIELD(ncclNetProperties_v12_t, netDeviceVersion, 60, 4, int);
HOCCL_ABI_FIELD(ncclNetProperties_v12_t, vProps, 64, 36, ncclNetVDeviceProps_v12_t);
HOCCL_ABI_FIELD(ncclNetProperties_v12_t, maxP2pBytes, 104, 8, size_t);
HOCCL_ABI_FIELD(ncclNetProperties_v12_t, maxCollBytes, 112, 8, size_t);
HOCCL_ABI_FIELD(ncclNetProperties_v12_t, maxMultiRequestSize, 120, 4, int);
HOCCL_ABI_FIELD(ncclNetProperties_v12_t, railId, 124, 2, int16_t);
HOCCL_ABI_FIELD(ncclNetProperties_v12_t, planeId, 126, 2, int16_t);

HOCCL_ABI_SIZE(ncclNetVDeviceProps_v9_t, 20);
HOCCL_ABI_FIELD(ncclNetVDeviceProps_v9_t, ndevs, 0, 4, int);
HOCCL_ABI_FIELD(ncclNetVDeviceProps_v9_t, devs, 4, 16, int[4]);

HOCCL_ABI_SIZE(ncclNetVDeviceProps_v9_t, 20);  // NCCL: ncclNetVDeviceProps_v10_t
HOCCL_ABI_FIELD(ncclNetVDeviceProps_v9_t, ndevs, 0, 4, int);
HOCCL_ABI_FIELD(ncclNetVDeviceProps_v9_t, devs, 4, 16, int[4]);

HOCCL_ABI_SIZE(ncclNetVDeviceProps_v9_t, 20);  // NCCL: ncclNetVDeviceProps_v11_t
HOCCL_ABI_FIELD(ncclNetVDeviceProps_v9_t, ndevs, 0, 4, int);
HOCCL_ABI_FIELD(ncclNetVDeviceProps_v9_t, devs, 4, 16, int[4]);

HOCCL_ABI_SIZE(ncclNetVDeviceProps_v12_t, 36);
HOCCL_ABI_FIELD(ncclNetVDeviceProps_v12_t, ndevs, 0, 4, int);
HOCCL_ABI_FIELD(ncclNetVDeviceProps_v12_t, devs, 4, 32, int[8]);

HOCCL_ABI_SIZE(ncclNetCommConfig_t, 4);  // NCCL: ncclNetCommConfig_v10_t
HOCCL_ABI_FIELD(ncclNetCommConfig_t, trafficClass, 0, 4, int);

HOCCL_ABI_SIZE(ncclNetCommConfig_t, 4);  // NCCL: ncclNetCommConfig_v12_t
HOCCL_ABI_FIELD(ncclNetCommConfig_t, trafficClass, 0, 4, int);

HOCCL_ABI_SIZE(ncclNetCommAttr_t, 16);  // NCCL: ncclNetCommAttr_v11_t
HOCCL_ABI_FIELD(ncclNetCommAttr_t, maxConcurrentPeers, 0, 4, int32_t);
HOCCL_ABI_FIELD(ncclNetCommAttr_t, minConcurrentPeers, 4, 4, int32_t);
HOCCL_ABI_FIELD(ncclNetCommAttr_t, maxFlowsPerPeer, 8, 4, int32_t);
HOCCL_ABI_FIELD(ncclNetCommAttr_t, minFlowsPerPeer, 12, 4, int32_t);

HOCCL_ABI_SIZE(ncclNetCommAttr_t, 16);  // NCCL: ncclNetCommAttr_v12_t
HOCCL_ABI_FIELD(ncclNetCommAttr_t, maxConcurrentPeers, 0, 4, int32_t);
HOCCL_ABI_FIELD(ncclNetCommAttr_t, minConcurrentPeers, 4, 4, int32_t);
HOCCL_ABI_FIELD(ncclNetCommAttr_t, maxFlowsPerPeer, 8, 4, int32_t);
HOCCL_ABI_FIELD(ncclNetCommAttr_t, minFlowsPerPeer, 12, 4, int32_t);

HOCCL_ABI_SIZE(ncclNetAttr_t, 44);  // NCCL: ncclNetAttr_v11_t
HOCCL_ABI_FIELD(ncclNetAttr_t, sendCommAttr, 0, 16, ncclNetCommAttr_t);
HOCCL_ABI_FIELD(ncclNetAttr_t, recvCommAttr, 16, 16, ncclNetCommAttr_t);
HOCCL_ABI_FIELD(ncclNetAttr_t, op, 32, 4, uint32_t);
HOCCL_ABI_FIELD(ncclNetAttr_t, algo, 36, 4, uint32_t);
HOCCL_ABI_FIELD(ncclNetAttr_t, proto, 40, 4, uint32_t);

HOCCL_ABI_SIZE(ncclNetAttr_t, 44);  // NCCL: ncclNetAttr_v12_t
HOCCL_ABI_FIELD(ncclNetAttr_t, sendCommAttr, 0, 16, ncclNetCommAttr_t);
HOCCL_ABI_FIELD(ncclNetAttr_t, recvCommAttr, 16, 16, ncclNetCommAttr_t);
HOCCL_ABI_FIELD(ncclNetAttr_t, op, 32, 4, uint32_t);
HOCCL_ABI_FIELD(ncclNetAttr_t, algo, 36, 4, uint32_t);
HOCCL_ABI_FIELD(ncclNetAttr_t, proto, 40, 4, uint32_t);

HOCCL_ABI_SIZE(ncclNet_v8_t, 152);
HOCCL_ABI_FIELD(ncclNet_v8_t, name, 0, 8, const char*);
HOCCL_ABI_FN(ncclNet_v8_t, init, 8, ncclResult_t (*)(ncclDebugLogger_t));
HOCCL_ABI_FN(ncclNet_v8_t, devices, 16, ncclResult_t (*)(int*));
HOCCL_ABI_FN(ncclNet_v8_t, getProperties, 24, ncclResult_t (*)(int, ncclNetProperties_v8_t*));
HOCCL_ABI_FN(ncclNet_v8_t, listen, 32, ncclResult_t (*)(int, void*, void**));
HOCCL_ABI_FN(ncclNet_v8_t, connect, 40, ncclResult_t (*)(int, void*, void**, ncclNetDeviceHandle_t**));
HOCCL_ABI_FN(ncclNet_v8_t, accept, 48, ncclResult_t (*)(void*, void**, ncclNetDeviceHandle_t**));
HOCCL_ABI_FN(ncclNet_v8_t, regMr, 56, ncclResult_t (*)(void*, void*, size_t, int, void**));
HOCCL_ABI_FN(ncclNet_v8_t, regMrDmaBuf, 64, ncclResult_t (*)(void*, void*, size_t, int, uint64_t, int, void**));
HOCCL_ABI_FN(ncclNet_v8_t, deregMr, 72, ncclResult_t (*)(void*, void*));
HOCCL_ABI_FN(ncclNet_v8_t, isend, 80, ncclResult_t (*)(void*, void*, int, int, void*, void**));
HOCCL_ABI_FN(ncclNet_v8_t, irecv, 88, ncclResult_t (*)(void*, int, void**, int*, int*, void**, void**));
HOCCL_ABI_FN(ncclNet_v8_t, iflush, 96, ncclResult_t (*)(void*, int, void**, int*, void**, void**));
HOCCL_ABI_FN(ncclNet_v8_t, test, 104, ncclResult_t (*)(void*, int*, int*));
HOCCL_ABI_FN(ncclNet_v8_t, closeSend, 112, ncclResult_t (*)(void*));
HOCCL_ABI_FN(ncclNet_v8_t, closeRecv, 120, ncclResult_t (*)(void*));
HOCCL_ABI_FN(ncclNet_v8_t, closeListen, 128, ncclResult_t (*)(void*));
HOCCL_ABI_FN(ncclNet_v8_t, getDeviceMr, 136, ncclResult_t (*)(void*, void*, void**));
HOCCL_ABI_FN(ncclNet_v8_t, irecvConsumed, 144, ncclResult_t (*)(void*, int, void*));

HOCCL_ABI_SIZE(ncclNet_v9_t, 160);
HOCCL_ABI_FIELD(ncclNet_v9_t, name, 0, 8, const char*);
HOCCL_ABI_FN(ncclNet_v9_t, init, 8, ncclResult_t (*)(ncclDebugLogger_t));
HOCCL_ABI_FN(ncclNet_v9_t, devices, 16, ncclResult_t (*)(int*));
HOCCL_ABI_FN(ncclNet_v9_t, getProperties, 24, ncclResult_t (*)(int, ncclNetProperties_v9_t*));
HOCCL_ABI_FN(ncclNet_v9_t, listen, 32, ncclResult_t (*)(int, void*, void**));
HOCCL_ABI_FN(ncclNet_v9_t, connect, 40, ncclResult_t (*)(int, void*, void**, ncclNetDeviceHandle_t**));
HOCCL_ABI_FN(ncclNet_v9_t, accept, 48, ncclResult_t (*)(void*, void**, ncclNetDeviceHandle_t**));
HOCCL_ABI_FN(ncclNet_v9_t, regMr, 56, ncclResult_t (*)(void*, void*, size_t, int, void**));
HOCCL_ABI_FN(ncclNet_v9_t, regMrDmaBuf, 64, ncclResult_t (*)(void*, void*, size_t, int, uint64_t, int, void**));
HOCCL_ABI_FN(ncclNet_v9_t, deregMr, 72, ncclResult_t (*)(void*, void*));
HOCCL_ABI_FN(ncclNet_v9_t, isend, 80, ncclResult_t (*)(void*, void*, size_t, int, void*, void**));
HOCCL_ABI_FN(ncclNet_v9_t, irecv, 88, ncclResult_t (*)(void*, int, void**, size_t*, int*, void**, void**));
HOCCL_ABI_FN(ncclNet_v9_t, iflush, 96, ncclResult_t (*)(void*, int, void**, int*, void**, void**));
HOCCL_ABI_FN(ncclNet_v9_t, test, 104, ncclResult_t (*)(void*, int*, int*));
HOCCL_ABI_FN(ncclNet_v9_t, closeSend, 112, ncclResult_t (*)(void*));
HOCCL_ABI_FN(ncclNet_v9_t, closeRecv, 120, ncclResult_t (*)(void*));
HOCCL_ABI_FN(ncclNet_v9_t, closeListen, 128, ncclResult_t (*)(void*));
HOCCL_ABI_FN(ncclNet_v9_t, getDeviceMr, 136, ncclResult_t (*)(void*, void*, void**));
HOCCL_ABI_FN(ncclNet_v9_t, irecvConsumed, 144, ncclResult_t (*)(void*, int, void*));
HOCCL_ABI_FN(ncclNet_v9_t, makeVDevice, 152, ncclResult_t (*)(int*, ncclNetVDeviceProps_v9_t*));

HOCCL_ABI_SIZE(ncclNet_v10_t, 160);
HOCCL_ABI_FIELD(ncclNet_v10_t, name, 0, 8, const char*);
HOCCL_ABI_FN(ncclNet_v10_t, init, 8, ncclResult_t (*)(ncclDebugLogger_t, ncclProfilerCallback_t));
HOCCL_ABI_FN(ncclNet_v10_t, devices, 16, ncclResult_t (*)(int*));
HOCCL_ABI_FN(ncclNet_v10_t, getProperties, 24, ncclResult_t (*)(int, ncclNetProperties_v9_t*));
HOCCL_ABI_FN(ncclNet_v10_t, listen, 32, ncclResult_t (*)(int, void*, void**));
HOCCL_ABI_FN(ncclNet_v10_t, connect, 40, ncclResult_t (*)(int, ncclNetCommConfig_t*, void*, void**, ncclNetDeviceHandle_t**));
HOCCL_ABI_FN(ncclNet_v10_t, accept, 48, ncclResult_t (*)(void*, void**, ncclNetDeviceHandle_t**));
HOCCL_ABI_FN(ncclNet_v10_t, regMr, 56, ncclResult_t (*)(void*, void*, size_t, int, void**));
HOCCL_ABI_FN(ncclNet_v10_t, regMrDmaBuf, 64, ncclResult_t (*)(void*, void*, size_t, int, uint64_t, int, void**));
HOCCL_ABI_FN(ncclNet_v10_t, deregMr, 72, ncclResult_t (*)(void*, void*));
HOCCL_ABI_FN(ncclNet_v10_t, isend, 80, ncclResult_t (*)(void*, void*, size_t, int, void*, void*, void**));
HOCCL_ABI_FN(ncclNet_v10_t, irecv, 88, ncclResult_t (*)(void*, int, void**, size_t*, int*, void**, void**, void**));
HOCCL_ABI_FN(ncclNet_v10_t, iflush, 96, ncclResult_t (*)(void*, int, void**, int*, void**, void**));
HOCCL_ABI_FN(ncclNet_v10_t, test, 104, ncclResult_t (*)(void*, int*, int*));
HOCCL_ABI_FN(ncclNet_v10_t, closeSend, 112, ncclResult_t (*)(void*));
HOCCL_ABI_FN(ncclNet_v10_t, closeRecv, 120, ncclResult_t (*)(void*));
HOCCL_ABI_FN(ncclNet_v10_t, closeListen, 128, ncclResult_t (*)(void*));
HOCCL_ABI_FN(ncclNet_v10_t, getDeviceMr, 136, ncclResult_t (*)(void*, void*, void**));
HOCCL_ABI_FN(ncclNet_v10_t, irecvConsumed, 144, ncclResult_t (*)(void*, int, void*));
HOCCL_ABI_FN(ncclNet_v10_t, makeVDevice, 152, ncclResult_t (*)(int*, ncclNetVDeviceProps_v9_t*));

HOCCL_ABI_SIZE(ncclNet_v11_t, 176);
HOCCL_ABI_FIELD(ncclNet_v11_t, name, 0, 8, const char*);
HOCCL_ABI_FN(ncclNet_v11_t, init, 8, ncclResult_t (*)(void**, uint64_t, ncclNetCommConfig_t*, ncclDebugLogger_t, ncclProfilerCallback_t));
HOCCL_ABI_FN(ncclNet_v11_t, devices, 16, ncclResult_t (*)(int*));
HOCCL_ABI_FN(ncclNet_v11_t, getProperties, 24, ncclResult_t (*)(int, ncclNetProperties_v11_t*));
HOCCL_ABI_FN(ncclNet_v11_t, listen, 32, ncclResult_t (*)(void*, int, void*, void**));
HOCCL_ABI_FN(ncclNet_v11_t, connect, 40, ncclResult_t (*)(void*, int, void*, void**, ncclNetDeviceHandle_t**));
HOCCL_ABI_FN(ncclNet_v11_t, accept, 48, ncclResult_t (*)(void*, void**, ncclNetDeviceHandle_t**));
HOCCL_ABI_FN(ncclNet_v11_t, regMr, 56, ncclResult_t (*)(void*, void*, size_t, int, void**));
HOCCL_ABI_FN(ncclNet_v11_t, regMrDmaBuf, 64, ncclResult_t (*)(void*, void*, size_t, int, uint64_t, int, void**));
HOCCL_ABI_FN(ncclNet_v11_t, deregMr, 72, ncclResult_t (*)(void*, void*));
HOCCL_ABI_FN(ncclNet_v11_t, isend, 80, ncclResult_t (*)(void*, void*, size_t, int, void*, void*, void**));
HOCCL_ABI_FN(ncclNet_v11_t, irecv, 88, ncclResult_t (*)(void*, int, void**, size_t*, int*, void**, void**, void**));
HOCCL_ABI_FN(ncclNet_v11_t, iflush, 96, ncclResult_t (*)(void*, int, void**, int*, void**, void**));
HOCCL_ABI_FN(ncclNet_v11_t, test, 104, ncclResult_t (*)(void*, int*, int*));
HOCCL_ABI_FN(ncclNet_v11_t, closeSend, 112, ncclResult_t (*)(void*));
HOCCL_ABI_FN(ncclNet_v11_t, closeRecv, 120, ncclResult_t (*)(void*));
HOCCL_ABI_FN(ncclNet_v11_t, closeListen, 128, ncclResult_t (*)(void*));
HOCCL_ABI_FN(ncclNet_v11_t, getDeviceMr, 136, ncclResult_t (*)(void*, void*, void**));
HOCCL_ABI_FN(ncclNet_v11_t, irecvConsumed, 144, ncclResult_t (*)(void*, int, void*));
HOCCL_ABI_FN(ncclNet_v11_t, makeVDevice, 152, ncclResult_t (*)(int*, ncclNetVDeviceProps_v9_t*));
HOCCL_ABI_FN(ncclNet_v11_t, finalize, 160, ncclResult_t (*)(void*));
HOCCL_ABI_FN(ncclNet_v11_t, setNetAttr, 168, ncclResult_t (*)(void*, ncclNetAttr_t*));

HOCCL_ABI_SIZE(ncclNet_v12_t, 176);
HOCCL_ABI_FIELD(ncclNet_v12_t, name, 0, 8, const char*);
HOCCL_ABI_FN(ncclNet_v12_t, init, 8, ncclResult_t (*)(void**, uint64_t, ncclNetCommConfig_t*, ncclDebugLogger_t, ncclProfilerCallback_t));
HOCCL_ABI_FN(ncclNet_v12_t, devices, 16, ncclResult_t (*)(int*));
HOCCL_ABI_FN(ncclNet_v12_t, getProperties, 24, ncclResult_t (*)(int, ncclNetProperties_v12_t*));
HOCCL_ABI_FN(ncclNet_v12_t, listen, 32, ncclResult_t (*)(void*, int, void*, void**));
HOCCL_ABI_FN(ncclNet_v12_t, connect, 40, ncclResult_t (*)(void*, int, void*, void**, ncclNetDeviceHandle_t**));
HOCCL_ABI_FN(ncclNet_v12_t, accept, 48, ncclResult_t (*)(void*, void**, ncclNetDeviceHandle_t**));
HOCCL_ABI_FN(ncclNet_v12_t, regMr, 56, ncclResult_t (*)(void*, void*, size_t, int, void**));
HOCCL_ABI_FN(ncclNet_v12_t, regMrDmaBuf, 64, ncclResult_t (*)(void*, void*, size_t, int, uint64_t, int, void**));
HOCCL_ABI_FN(ncclNet_v12_t, deregMr, 72, ncclResult_t (*)(void*, void*));
HOCCL_ABI_FN(ncclNet_v12_t, isend, 80, ncclResult_t (*)(void*, void*, size_t, int, void*, void*, void**));
HOCCL_ABI_FN(ncclNet_v12_t, irecv, 88, ncclResult_t (*)(void*, int, void**, size_t*, int*, void**, void**, void**));
HOCCL_ABI_FN(ncclNet_v12_t, iflush, 96, ncclResult_t (*)(void*, int, void**, int*, void**, void**));
HOCCL_ABI_FN(ncclNet_v12_t, test, 104, ncclResult_t (*)(void*, int*, int*));
HOCCL_ABI_FN(ncclNet_v12_t, closeSend, 112, ncclResult_t (*)(void*));
HOCCL_ABI_FN(ncclNet_v12_t, closeRecv, 120, ncclResult_t (*)(void*));
HOCCL_ABI_FN(ncclNet_v12_t, closeListen, 128, ncclResult_t (*)(void*));
HOCCL_ABI_FN(ncclNet_v12_t, getDeviceMr, 136, ncclResult_t (*)(void*, void*, void**));
HOCCL_ABI_FN(ncclNet_v12_t, irecvConsumed, 144, ncclResult_t (*)(void*, int, void*));
HOCCL_ABI_FN(ncclNet_v12_t, makeVDevice, 152, ncclResult_t (*)(int*, ncclNetVDeviceProps_v12_t*));
HOCCL_ABI_FN(ncclNet_v12_t, finalize, 160, ncclResult_t (*)(void*));
HOCCL_ABI_FN(ncclNet_v12_t, setNetAttr, 168, ncclResult_t (*)(void*, ncclNetAttr_t*));
#endif

// ---- tuner v3 .. v6 (tuner.h) -----------------------------------------------
#if defined(HOCCL_NCCL_TUNER_DECLARED) && !defined(HOCCL_NCCL_TUNER_ABI_CHECKED)
#define HOCCL_NCCL_TUNER_ABI_CHECKED
HOCCL_ABI_ASSERT(NCCL_NUM_ALGORITHMS == 7 && NCCL_ALGO_TREE == 0 && NCCL_ALGO_RING == 1 &&
                     NCCL_ALGO_COLLNET_DIRECT == 2 && NCCL_ALGO_COLLNET_CHAIN == 3 && NCCL_ALGO_NVLS == 4 &&
                     NCCL_ALGO_NVLS_TREE == 5 && NCCL_ALGO_PAT == 6,
                 "algorithm indices differ from NCCL's");
HOCCL_ABI_ASSERT(NCCL_NUM_PROTOCOLS == 3 && NCCL_PROTO_LL == 0 && NCCL_PROTO_LL128 == 1 && NCCL_PROTO_SIMPLE == 2,
                 "protocol indices differ from NCCL's");
HOCCL_ABI_ASSERT(NCCL_NUM_HW_LINKS == 3 && NCCL_NUM_COMPCAPS == 4 && NCCL_NUM_TUNING_SCALES == 3,
                 "tuner constant dimensions differ from NCCL's");
// v6 passes the same two structs (NCCL: ncclNvlDomainInfo_v6_t and
// ncclTunerConstants_v6_t are typedefs of the v5 ones).

HOCCL_ABI_SIZE(ncclNvlDomainInfo_v5_t, 12);
HOCCL_ABI_FIELD(ncclNvlDomainInfo_v5_t, nNvlDomains, 0, 4, int);
HOCCL_ABI_FIELD(ncclNvlDomainInfo_v5_t, minRanksPerNvlDomain, 4, 4, int);
HOCCL_ABI_FIELD(ncclNvlDomainInfo_v5_t, maxRanksPerNvlDomain, 8, 4, int);

HOCCL_ABI_SIZE(ncclTunerConstants_v5_t, 1152);
HOCCL_ABI_FIELD(ncclTunerConstants_v5_t, baseLatencies, 0, 168, double[7][3]);
HOCCL_ABI_FIELD(ncclTunerConstants_v5_t, hwLatencies, 168, 504, double[3][7][3]);
HOCCL_ABI_FIELD(ncclTunerConstants_v5_t, llMaxBws, 672, 96, double[4][3]);
HOCCL_ABI_FIELD(ncclTunerConstants_v5_t, perChMaxRingLL128Bws, 768, 96, double[4][3]);
HOCCL_ABI_FIELD(ncclTunerConstants_v5_t, perChMaxTreeLL128Bws, 864, 96, double[4][3]);
HOCCL_ABI_FIELD(ncclTunerConstants_v5_t, perChMaxTreeBws, 960, 96, double[4][3]);
HOCCL_ABI_FIELD(ncclTunerConstants_v5_t, perChMaxNVLSTreeBws, 1056, 96, double[4][3]);

HOCCL_ABI_SIZE(ncclTuner_v3_t, 32);
HOCCL_ABI_FIELD(ncclTuner_v3_t, name, 0, 8, const char*);
HOCCL_ABI_FN(ncclTuner_v3_t, init, 8, ncclResult_t (*)(size_t, size_t, ncclDebugLogger_t, void**));
HOCCL_ABI_FN(ncclTuner_v3_t, getCollInfo, 16, ncclResult_t (*)(void*, ncclFunc_t, size_t, int, float**, int, int, int*));
HOCCL_ABI_FN(ncclTuner_v3_t, destroy, 24, ncclResult_t (*)(void*));

HOCCL_ABI_SIZE(ncclTuner_v4_t, 32);
HOCCL_ABI_FIELD(ncclTuner_v4_t, name, 0, 8, const char*);
HOCCL_ABI_FN(ncclTuner_v4_t, init, 8, ncclResult_t (*)(size_t, size_t, ncclDebugLogger_t, void**));
HOCCL_ABI_FN(ncclTuner_v4_t, getCollInfo, 16, ncclResult_t (*)(void*, ncclFunc_t, size_t, int, float**, int, int, int, int*));
HOCCL_ABI_FN(ncclTuner_v4_t, destroy, 24, ncclResult_t (*)(void*));

HOCCL_ABI_SIZE(ncclTuner_v5_t, 32);
HOCCL_ABI_FIELD(ncclTuner_v5_t, name, 0, 8, const char*);
HOCCL_ABI_FN(ncclTuner_v5_t, init, 8, ncclResult_t (*)(void**, uint64_t, size_t, size_t, ncclDebugLogger_t, ncclNvlDomainInfo_v5_t*, ncclTunerConstants_v5_t*));
HOCCL_ABI_FN(ncclTuner_v5_t, getCollInfo, 16, ncclResult_t (*)(void*, ncclFunc_t, size_t, int, float**, int, int, int, int*));
HOCCL_ABI_FN(ncclTuner_v5_t, finalize, 24, ncclResult_t (*)(void*));

HOCCL_ABI_SIZE(ncclTuner_v6_t, 40);
HOCCL_ABI_FIELD(ncclTuner_v6_t, name, 0, 8, const char*);
HOCCL_ABI_FN(ncclTuner_v6_t, init, 8, ncclResult_t (*)(void**, uint64_t, size_t, size_t, ncclDebugLogger_t, ncclNvlDomainInfo_v5_t*, ncclTunerConstants_v5_t*));
HOCCL_ABI_FN(ncclTuner_v6_t, getCollInfo, 16, ncclResult_t (*)(void*, ncclFunc_t, size_t, int, float**, int, int, int, int*));
HOCCL_ABI_FN(ncclTuner_v6_t, finalize, 24, ncclResult_t (*)(void*));
HOCCL_ABI_FN(ncclTuner_v6_t, getChunkSize, 32, ncclResult_t (*)(void*, ncclFunc_t, size_t, int, int, int, size_t*));
#endif
