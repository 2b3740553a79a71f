// The driver entry points the device path needs beyond cuda::DriverApi
// (the device executor and the device transports below it), resolved by
// version through the driver's cuGetProcAddress_v2 (Driver::getProc), so a
// fake resolver in the tests drives the whole device path on the host. No
// CUDA header: handles are pointers and device addresses 64-bit integers,
// as the driver defines them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "base/cuda_driver.h"
#include "base/error.h"

namespace hoccl::cuda {

using DevPtr = uint64_t;  // CUdeviceptr
using CuHandle = void*;   // CUcontext, CUmodule, CUfunction, CUstream, CUevent

// CUresult and flag values the executor names.
constexpr int kCudaErrorNotReady = 600;              // CUDA_ERROR_NOT_READY
constexpr int kPointerAttributeContext = 1;          // CU_POINTER_ATTRIBUTE_CONTEXT
constexpr int kPointerAttributeDeviceOrdinal = 9;    // CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL
constexpr unsigned kHostAllocPortableMapped = 3;     // CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP
constexpr unsigned kHostRegisterPortableMapped = 3;  // CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP
constexpr unsigned kEventDisableTiming = 2;          // CU_EVENT_DISABLE_TIMING
constexpr unsigned kStreamNonBlocking = 1;           // CU_STREAM_NON_BLOCKING
constexpr int kDeviceAttributeMultiprocessors = 16;  // CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT
// Stream capture (CUDA graphs): CUstreamCaptureStatus, CUstreamCaptureMode,
// and the flags that make an event record or wait a node of the graph that
// acts on an event outside it.
constexpr int kCaptureStatusNone = 0, kCaptureStatusActive = 1, kCaptureStatusInvalidated = 2;
constexpr int kCaptureModeGlobal = 0, kCaptureModeThreadLocal = 1, kCaptureModeRelaxed = 2;
constexpr unsigned kEventRecordExternal = 1;  // CU_EVENT_RECORD_EXTERNAL
constexpr unsigned kEventWaitExternal = 1;    // CU_EVENT_WAIT_EXTERNAL

// CUDA's virtual memory management (VMM) types and values, as cuda.h
// declares them (CUmemAllocationProp_v1, CUmemLocation_v1, CUmemAccessDesc_v1):
// device connections between processes export their memory with them.
using MemHandle = uint64_t;  // CUmemGenericAllocationHandle
constexpr int kMemHandleTypePosixFd = 1;          // CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR
constexpr int kMemHandleTypeFabric = 8;           // CU_MEM_HANDLE_TYPE_FABRIC
constexpr int kMemAllocationTypePinned = 1;       // CU_MEM_ALLOCATION_TYPE_PINNED
constexpr int kMemLocationTypeDevice = 1;         // CU_MEM_LOCATION_TYPE_DEVICE
constexpr int kMemAccessReadWrite = 3;            // CU_MEM_ACCESS_FLAGS_PROT_READWRITE
constexpr int kMemAllocGranularityMinimum = 0;    // CU_MEM_ALLOC_GRANULARITY_MINIMUM
constexpr int kDeviceAttributeVmmSupported = 102;  // CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED
constexpr int kDeviceAttributeFabricSupported = 128;  // CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_FABRIC_SUPPORTED
constexpr size_t kFabricHandleBytes = 64;            // sizeof(CUmemFabricHandle)

struct MemLocation {
  int type;  // kMemLocationTypeDevice
  int id;    // the device ordinal
};
struct MemAllocationProp {
  int type;                  // kMemAllocationTypePinned
  int requestedHandleTypes;  // kMemHandleType* bits
  MemLocation location;
  void* win32HandleMetaData;  // null off Windows
  struct {
    unsigned char compressionType;
    unsigned char gpuDirectRDMACapable;
    unsigned short usage;
    unsigned char reserved[4];
  } allocFlags;
};
static_assert(sizeof(MemAllocationProp) == 32, "CUmemAllocationProp_v1's layout");
struct MemAccessDesc {
  MemLocation location;
  int flags;  // kMemAccessReadWrite
};
static_assert(sizeof(MemAccessDesc) == 12, "CUmemAccessDesc_v1's layout");

// The VMM entry points: optional (a driver without them still runs ranks
// that are threads of one process). All resolved or none (usable()).
struct VmmApi {
  int (*memGetAllocationGranularity)(size_t* granularity, const MemAllocationProp* prop, int option) = nullptr;
  int (*memCreate)(MemHandle* handle, size_t size, const MemAllocationProp* prop, unsigned long long flags) = nullptr;
  int (*memExportToShareableHandle)(void* shareable, MemHandle handle, int handleType,
                                    unsigned long long flags) = nullptr;
  int (*memImportFromShareableHandle)(MemHandle* handle, void* osHandle, int handleType) = nullptr;
  int (*memAddressReserve)(DevPtr* p, size_t size, size_t alignment, DevPtr addr, unsigned long long flags) = nullptr;
  int (*memMap)(DevPtr p, size_t size, size_t offset, MemHandle handle, unsigned long long flags) = nullptr;
  int (*memSetAccess)(DevPtr p, size_t size, const MemAccessDesc* desc, size_t count) = nullptr;
  int (*memUnmap)(DevPtr p, size_t size) = nullptr;
  int (*memRelease)(MemHandle handle) = nullptr;
  int (*memAddressFree)(DevPtr p, size_t size) = nullptr;
  bool usable() const { return memCreate != nullptr; }
};

// Legacy CUDA IPC (CUipcMemHandle, 64 opaque bytes passed by value), for
// ranks in other processes where VMM's POSIX fds are not wanted
// (HOCCL_DEVICE_IPC=legacy) or not available. Optional, all or nothing.
struct IpcMemHandle {
  unsigned char reserved[64];
};
constexpr unsigned kIpcLazyEnablePeerAccess = 1;  // CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS
struct LegacyIpcApi {
  int (*ipcGetMemHandle)(IpcMemHandle* handle, DevPtr p) = nullptr;
  int (*ipcOpenMemHandle)(DevPtr* p, IpcMemHandle handle, unsigned flags) = nullptr;
  int (*ipcCloseMemHandle)(DevPtr p) = nullptr;
  bool usable() const { return ipcOpenMemHandle != nullptr; }
};

constexpr int kMemRangeHandleTypeDmaBufFd = 1;  // CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD

struct DeviceApi {
  int (*ctxGetCurrent)(CuHandle* ctx) = nullptr;
  int (*ctxSetCurrent)(CuHandle ctx) = nullptr;
  int (*devicePrimaryCtxRetain)(CuHandle* ctx, int device) = nullptr;
  int (*devicePrimaryCtxRelease)(int device) = nullptr;
  int (*deviceGetAttribute)(int* value, int attribute, int device) = nullptr;
  int (*moduleLoadData)(CuHandle* module, const void* image) = nullptr;
  int (*moduleUnload)(CuHandle module) = nullptr;
  int (*moduleGetFunction)(CuHandle* fn, CuHandle module, const char* name) = nullptr;
  int (*launchKernel)(CuHandle fn, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                      unsigned sharedBytes, CuHandle stream, void** params, void** extra) = nullptr;
  int (*memAlloc)(DevPtr* p, size_t bytes) = nullptr;
  int (*memFree)(DevPtr p) = nullptr;
  int (*memcpyHtoDAsync)(DevPtr dst, const void* src, size_t bytes, CuHandle stream) = nullptr;
  int (*memcpyDtoDAsync)(DevPtr dst, DevPtr src, size_t bytes, CuHandle stream) = nullptr;
  int (*memcpyDtoHAsync)(void* dst, DevPtr src, size_t bytes, CuHandle stream) = nullptr;
  int (*memsetD8Async)(DevPtr dst, unsigned char value, size_t bytes, CuHandle stream) = nullptr;
  int (*memHostAlloc)(void** p, size_t bytes, unsigned flags) = nullptr;
  int (*memHostGetDevicePointer)(DevPtr* d, void* p, unsigned flags) = nullptr;
  int (*memFreeHost)(void* p) = nullptr;
  int (*memHostRegister)(void* p, size_t bytes, unsigned flags) = nullptr;
  int (*memHostUnregister)(void* p) = nullptr;
  int (*streamCreate)(CuHandle* stream, unsigned flags) = nullptr;
  int (*streamDestroy)(CuHandle stream) = nullptr;
  int (*streamQuery)(CuHandle stream) = nullptr;
  int (*streamSynchronize)(CuHandle stream) = nullptr;
  int (*eventCreate)(CuHandle* event, unsigned flags) = nullptr;
  int (*eventDestroy)(CuHandle event) = nullptr;
  int (*eventRecord)(CuHandle event, CuHandle stream) = nullptr;
  int (*eventQuery)(CuHandle event) = nullptr;
  int (*streamWaitEvent)(CuHandle stream, CuHandle event, unsigned flags) = nullptr;
  int (*eventRecordWithFlags)(CuHandle event, CuHandle stream, unsigned flags) = nullptr;
  int (*streamIsCapturing)(CuHandle stream, int* status) = nullptr;
  int (*threadExchangeStreamCaptureMode)(int* mode) = nullptr;
  int (*deviceCanAccessPeer)(int* can, int device, int peerDevice) = nullptr;
  int (*ctxEnablePeerAccess)(CuHandle peerCtx, unsigned flags) = nullptr;
  // Optional (CUDA 11.7 and later): a device range as a dma-buf fd
  // (handleType kMemRangeHandleTypeDmaBufFd, *handle an int), what a NIC
  // registers for GPUDirect RDMA. Null where the driver lacks it.
  int (*memGetHandleForAddressRange)(void* handle, DevPtr p, size_t size, int handleType,
                                     unsigned long long flags) = nullptr;
  VmmApi vmm;              // all or nothing: see vmmMissing
  std::string vmmMissing;  // the VMM entry points the driver lacks ("" when vmm.usable())
  LegacyIpcApi ipc;        // all or nothing: see ipcMissing
  std::string ipcMissing;
};

// `name` from getProc for the CUDA 12.0 API (a NULL stream being the
// legacy default stream, as for cudart callers); null when the driver
// does not have it.
void* resolveSymbol(GetProcAddressFn getProc, const char* name);

// resolveSymbol into *fn, or `name` appended to *missing (", " between).
template <class Fn>
void resolveInto(GetProcAddressFn getProc, const char* name, Fn* fn, std::string* missing) {
  void* p = resolveSymbol(getProc, name);
  if (p) {
    *fn = reinterpret_cast<Fn>(p);
  } else {
    *missing += missing->empty() ? name : std::string(", ") + name;
  }
}

// Resolves every entry point of DeviceApi through d.getProc. Fails with
// hocclSystemError "unusable driver: <names> missing" when the driver is
// not Ready or lacks any of them; never calls an unresolved one. The VMM
// entry points are optional: lacking any leaves api->vmm empty and names
// them in api->vmmMissing, and is no failure.
Status resolveDeviceApi(const Driver& d, DeviceApi* api);

// "cuMemAlloc: CUDA_ERROR_OUT_OF_MEMORY (2)" as a hocclUnhandledCudaError,
// or Status() for CUDA_SUCCESS.
Status cuCheck(int rc, const char* what);

}  // namespace hoccl::cuda
