// The CUDA driver, opened at run time: dlopen("libcuda.so.1") and entry
// points resolved by version through cuGetProcAddress_v2, so libhoccl links
// neither cudart nor libcuda and one build runs with and without GPUs. The
// driver API types used are declared here (no CUDA header needed to build).
#pragma once

#include <cstdint>
#include <string>

namespace hoccl::cuda {

// CUresult values hoccl names.
enum : int {
  kCudaSuccess = 0,
  kCudaErrorInvalidValue = 1,
  kCudaErrorNotInitialized = 3,
  kCudaErrorStubLibrary = 34,
  kCudaErrorInsufficientDriver = 35,
  kCudaErrorNoDevice = 100,
};

// "CUDA_ERROR_STUB_LIBRARY (34)".
std::string resultName(int result);

// What the process can do with CUDA. Only Ready offers device memory; in
// every other state no pointer can be device memory.
enum class DriverState {
  NoDriver,  // no libcuda.so.1, or not a CUDA 12+ driver
  Stub,      // the toolkit's stub library: a build machine without a GPU
  Failed,    // a driver, but cuInit or a needed entry point failed
  NoDevice,  // a driver, no CUDA device
  Ready,
};

// The driver API versions the entry points are asked for (CUDA 12.0).
constexpr int kDriverApiVersion = 12000;

// cuGetProcAddress_v2.
using GetProcAddressFn = int (*)(const char* symbol, void** fn, int cudaVersion, uint64_t flags,
                                 int* symbolStatus);

// CU_POINTER_ATTRIBUTE_MEMORY_TYPE and its CUmemorytype values.
constexpr int kPointerAttributeMemoryType = 2;
enum : unsigned { kMemoryTypeHost = 1, kMemoryTypeDevice = 2, kMemoryTypeArray = 3, kMemoryTypeUnified = 4 };

// The entry points hoccl uses, all resolved or the state is not Ready.
struct DriverApi {
  int (*init)(unsigned flags) = nullptr;                                    // cuInit
  int (*driverGetVersion)(int* version) = nullptr;                          // cuDriverGetVersion
  int (*deviceGetCount)(int* count) = nullptr;                              // cuDeviceGetCount
  int (*pointerGetAttribute)(void* data, int attribute, uint64_t ptr) = nullptr;  // cuPointerGetAttribute
  int (*deviceGet)(int* device, int ordinal) = nullptr;                     // cuDeviceGet
  int (*deviceGetName)(char* name, int len, int device) = nullptr;          // cuDeviceGetName
  int (*deviceGetPciBusId)(char* busId, int len, int device) = nullptr;     // cuDeviceGetPCIBusId
};

struct Driver {
  DriverState state = DriverState::NoDriver;
  int version = 0;  // cuDriverGetVersion: 12040 is 12.4
  int devices = 0;
  // One line: "no driver: libcuda.so.1 not found (...)", "stub library (no
  // GPU): cuInit returned CUDA_ERROR_STUB_LIBRARY (34)", "unusable driver:
  // ...", "no device: ...", "CUDA driver 12.4, 1 device".
  std::string status;
  DriverApi api;
  // The resolver the entry points came from (the library's
  // cuGetProcAddress_v2, or a test's fake; null when none was found): code
  // that needs more of the driver API resolves it here, by version.
  GetProcAddressFn getProc = nullptr;
  bool usable() const { return state == DriverState::Ready; }
};

// The decision logic on a resolver (the driver's, or a fake in tests):
// resolves the entry points, runs cuInit and counts devices. `from` names
// the library in messages.
Driver probeDriver(GetProcAddressFn getProc, const std::string& from);

// dlopen(path) and probeDriver on its cuGetProcAddress_v2. The library stays
// loaded (unloading an initialised driver is not supported).
Driver loadDriver(const char* path);

// This process's driver: loadDriver("libcuda.so.1") on first use, cached,
// so later calls cost a load of a pointer.
const Driver& processDriver();

// Tests: makes processDriver() return `d` (null: the real one again).
void setProcessDriverForTesting(const Driver* d);

enum class MemoryKind { Host, Device };

// Where `p` lives according to the driver: Device for device or managed
// memory; Host for memory the driver does not know, pinned host memory, and
// always when the driver is not Ready.
MemoryKind memoryKind(const Driver& d, const void* p);

}  // namespace hoccl::cuda
