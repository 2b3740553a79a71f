// Resolving the device path's driver entry points (cuda_device_api.h).
#include "base/cuda_device_api.h"

namespace hoccl::cuda {

void* resolveSymbol(GetProcAddressFn getProc, const char* name) {
  void* p = nullptr;
  int symbolStatus = -1;
  constexpr uint64_t kLegacyStream = 1;  // CU_GET_PROC_ADDRESS_LEGACY_STREAM
  const int rc = getProc(name, &p, kDriverApiVersion, kLegacyStream, &symbolStatus);
  return rc == kCudaSuccess && symbolStatus == 0 ? p : nullptr;
}

Status resolveDeviceApi(const Driver& d, DeviceApi* api) {
  *api = DeviceApi();
  if (!d.usable()) return Status(hocclSystemError, "no usable CUDA driver: " + d.status);
  if (!d.getProc) return Status(hocclSystemError, "unusable driver: cuGetProcAddress missing");
  std::string missing;
  auto get = [&](const char* name, auto* fn) { resolveInto(d.getProc, name, fn, &missing); };
  get("cuCtxGetCurrent", &api->ctxGetCurrent);
  get("cuCtxSetCurrent", &api->ctxSetCurrent);
  get("cuDevicePrimaryCtxRetain", &api->devicePrimaryCtxRetain);
  get("cuDevicePrimaryCtxRelease", &api->devicePrimaryCtxRelease);
  get("cuDeviceGetAttribute", &api->deviceGetAttribute);
  get("cuModuleLoadData", &api->moduleLoadData);
  get("cuModuleUnload", &api->moduleUnload);
  get("cuModuleGetFunction", &api->moduleGetFunction);
  get("cuLaunchKernel", &api->launchKernel);
  get("cuMemAlloc", &api->memAlloc);
  get("cuMemFree", &api->memFree);
  get("cuMemcpyHtoDAsync", &api->memcpyHtoDAsync);
  get("cuMemcpyDtoDAsync", &api->memcpyDtoDAsync);
  get("cuMemcpyDtoHAsync", &api->memcpyDtoHAsync);
  get("cuMemsetD8Async", &api->memsetD8Async);
  get("cuMemHostAlloc", &api->memHostAlloc);
  get("cuMemHostGetDevicePointer", &api->memHostGetDevicePointer);
  get("cuMemFreeHost", &api->memFreeHost);
  get("cuMemHostRegister", &api->memHostRegister);
  get("cuMemHostUnregister", &api->memHostUnregister);
  get("cuStreamCreate", &api->streamCreate);
  get("cuStreamDestroy", &api->streamDestroy);
  get("cuStreamQuery", &api->streamQuery);
  get("cuStreamSynchronize", &api->streamSynchronize);
  get("cuEventCreate", &api->eventCreate);
  get("cuEventDestroy", &api->eventDestroy);
  get("cuEventRecord", &api->eventRecord);
  get("cuEventQuery", &api->eventQuery);
  get("cuStreamWaitEvent", &api->streamWaitEvent);
  get("cuEventRecordWithFlags", &api->eventRecordWithFlags);
  get("cuStreamIsCapturing", &api->streamIsCapturing);
  get("cuThreadExchangeStreamCaptureMode", &api->threadExchangeStreamCaptureMode);
  get("cuDeviceCanAccessPeer", &api->deviceCanAccessPeer);
  get("cuCtxEnablePeerAccess", &api->ctxEnablePeerAccess);
  if (!missing.empty()) {
    *api = DeviceApi();
    return Status(hocclSystemError, "unusable driver: " + missing + " missing (" + d.status + ")");
  }
  api->memGetHandleForAddressRange = reinterpret_cast<decltype(api->memGetHandleForAddressRange)>(
      resolveSymbol(d.getProc, "cuMemGetHandleForAddressRange"));
  VmmApi& v = api->vmm;
  std::string& vmissing = api->vmmMissing;
  auto opt = [&](const char* name, auto* fn) { resolveInto(d.getProc, name, fn, &vmissing); };
  opt("cuMemGetAllocationGranularity", &v.memGetAllocationGranularity);
  opt("cuMemCreate", &v.memCreate);
  opt("cuMemExportToShareableHandle", &v.memExportToShareableHandle);
  opt("cuMemImportFromShareableHandle", &v.memImportFromShareableHandle);
  opt("cuMemAddressReserve", &v.memAddressReserve);
  opt("cuMemMap", &v.memMap);
  opt("cuMemSetAccess", &v.memSetAccess);
  opt("cuMemUnmap", &v.memUnmap);
  opt("cuMemRelease", &v.memRelease);
  opt("cuMemAddressFree", &v.memAddressFree);
  if (!vmissing.empty()) v = VmmApi();  // all or nothing
  auto legacy = [&](const char* name, auto* fn) { resolveInto(d.getProc, name, fn, &api->ipcMissing); };
  legacy("cuIpcGetMemHandle", &api->ipc.ipcGetMemHandle);
  legacy("cuIpcOpenMemHandle", &api->ipc.ipcOpenMemHandle);
  legacy("cuIpcCloseMemHandle", &api->ipc.ipcCloseMemHandle);
  if (!api->ipcMissing.empty()) api->ipc = LegacyIpcApi();
  return Status();
}

Status cuCheck(int rc, const char* what) {
  if (rc == kCudaSuccess) return Status();
  return Status(hocclUnhandledCudaError, std::string(what) + ": " + resultName(rc));
}

}  // namespace hoccl::cuda
