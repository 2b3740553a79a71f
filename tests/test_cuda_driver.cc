// The CUDA driver loader: the decision logic on an injected fake driver
// (every outcome of resolving, cuInit, the version and the device count),
// dlopen failures, and the toolkit's real stub library, which must read as
// "stub library (no GPU)". Then the API's use of it: with a driver that
// calls a buffer device memory, collectives refuse it; host buffers run.
#include <gtest/gtest.h>

#include <cstdio>
#include <set>
#include <string>

#include "hoccl.h"
#include "base/cuda_driver.h"
#include "tests/support/harness.h"

using namespace hoccl::cuda;

namespace {

// What the fake driver answers; reset by each test.
struct FakeDriver {
  int procResult = kCudaSuccess;     // cuGetProcAddress's result for every symbol
  std::set<std::string> missing;     // symbols it does not have
  int initResult = kCudaSuccess;
  int version = 12040;
  int deviceCount = 1;
  int countResult = kCudaSuccess;
  int requestedVersion = 0;          // the cudaVersion cuGetProcAddress was asked for
  int attributeCalls = 0;
  const void* deviceBegin = nullptr;  // [begin, end) is device memory
  const void* deviceEnd = nullptr;
};
FakeDriver fake;

int fakeInit(unsigned) { return fake.initResult; }
int fakeVersion(int* v) {
  *v = fake.version;
  return kCudaSuccess;
}
int fakeCount(int* n) {
  *n = fake.deviceCount;
  return fake.countResult;
}
int fakeAttribute(void* data, int attribute, uint64_t ptr) {
  ++fake.attributeCalls;
  if (attribute != kPointerAttributeMemoryType) return kCudaErrorInvalidValue;
  auto p = reinterpret_cast<const char*>(ptr);
  if (p < static_cast<const char*>(fake.deviceBegin) || p >= static_cast<const char*>(fake.deviceEnd))
    return kCudaErrorInvalidValue;  // as the driver answers for malloc'ed memory
  *static_cast<unsigned*>(data) = kMemoryTypeDevice;
  return kCudaSuccess;
}

int fakeDeviceGet(int* device, int ordinal) {
  *device = ordinal;
  return kCudaSuccess;
}
int fakeDeviceName(char* name, int len, int device) {
  snprintf(name, len, "Fake GPU %d", device);
  return kCudaSuccess;
}

int fakeGetProc(const char* symbol, void** fn, int cudaVersion, uint64_t flags, int* status) {
  fake.requestedVersion = cudaVersion;
  *fn = nullptr;
  if (fake.procResult != kCudaSuccess) return fake.procResult;
  std::string s = symbol;
  if (fake.missing.count(s)) {
    *status = 1;  // CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND
    return kCudaSuccess;
  }
  *status = 0;
  if (s == "cuInit") *fn = reinterpret_cast<void*>(&fakeInit);
  if (s == "cuDriverGetVersion") *fn = reinterpret_cast<void*>(&fakeVersion);
  if (s == "cuDeviceGetCount") *fn = reinterpret_cast<void*>(&fakeCount);
  if (s == "cuPointerGetAttribute") *fn = reinterpret_cast<void*>(&fakeAttribute);
  if (s == "cuDeviceGet") *fn = reinterpret_cast<void*>(&fakeDeviceGet);
  if (s == "cuDeviceGetName" || s == "cuDeviceGetPCIBusId") *fn = reinterpret_cast<void*>(&fakeDeviceName);
  return *fn ? kCudaSuccess : 500;  // CUDA_ERROR_NOT_FOUND for anything else
}

Driver probeFake() { return probeDriver(&fakeGetProc, "libfake.so"); }

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

class CudaDriverTest : public ::testing::Test {
 protected:
  void SetUp() override { fake = FakeDriver(); }
  void TearDown() override { setProcessDriverForTesting(nullptr); }
};

}  // namespace

TEST_F(CudaDriverTest, ReadyWithDevicesAndTheVersionAskedFor) {
  fake.deviceCount = 2;
  Driver d = probeFake();
  EXPECT_EQ(d.state, DriverState::Ready) << d.status;
  EXPECT_TRUE(d.usable());
  EXPECT_EQ(d.devices, 2);
  EXPECT_EQ(d.version, 12040);
  EXPECT_EQ(d.status, "CUDA driver 12.4, 2 devices");
  EXPECT_EQ(fake.requestedVersion, kDriverApiVersion);
  EXPECT_EQ(d.getProc, &fakeGetProc);  // more entry points are resolved through it
}

TEST_F(CudaDriverTest, StubLibraryFromCuGetProcAddressOrCuInit) {
  fake.procResult = kCudaErrorStubLibrary;
  Driver d = probeFake();
  EXPECT_EQ(d.state, DriverState::Stub);
  EXPECT_FALSE(d.usable());
  EXPECT_TRUE(contains(d.status, "stub library (no GPU)")) << d.status;
  EXPECT_TRUE(contains(d.status, "CUDA_ERROR_STUB_LIBRARY (34)")) << d.status;
  fake.procResult = kCudaSuccess;
  fake.initResult = kCudaErrorStubLibrary;
  d = probeFake();
  EXPECT_EQ(d.state, DriverState::Stub);
  EXPECT_TRUE(contains(d.status, "cuInit returned CUDA_ERROR_STUB_LIBRARY (34)")) << d.status;
}

TEST_F(CudaDriverTest, NoDeviceFromCuInitOrACountOfZero) {
  fake.initResult = kCudaErrorNoDevice;
  Driver d = probeFake();
  EXPECT_EQ(d.state, DriverState::NoDevice);
  EXPECT_TRUE(contains(d.status, "no device: cuInit returned CUDA_ERROR_NO_DEVICE (100)")) << d.status;
  fake.initResult = kCudaSuccess;
  fake.deviceCount = 0;
  d = probeFake();
  EXPECT_EQ(d.state, DriverState::NoDevice);
  EXPECT_EQ(d.devices, 0);
  EXPECT_TRUE(contains(d.status, "counts 0 devices")) << d.status;
}

TEST_F(CudaDriverTest, FailuresNameTheirCause) {
  fake.missing = {"cuPointerGetAttribute"};
  Driver d = probeFake();
  EXPECT_EQ(d.state, DriverState::Failed);
  EXPECT_TRUE(contains(d.status, "libfake.so")) << d.status;
  EXPECT_TRUE(contains(d.status, "has no cuPointerGetAttribute")) << d.status;

  fake = FakeDriver();
  fake.initResult = 999;
  d = probeFake();
  EXPECT_EQ(d.state, DriverState::Failed);
  EXPECT_TRUE(contains(d.status, "unusable driver: cuInit returned CUresult (999)")) << d.status;

  fake = FakeDriver();
  fake.version = 11080;
  d = probeFake();
  EXPECT_EQ(d.state, DriverState::Failed);
  EXPECT_TRUE(contains(d.status, "CUDA driver 11.8 is older than the 12.0")) << d.status;

  fake = FakeDriver();
  fake.countResult = kCudaErrorNotInitialized;
  d = probeFake();
  EXPECT_EQ(d.state, DriverState::Failed);
  EXPECT_TRUE(contains(d.status, "cuDeviceGetCount returned CUDA_ERROR_NOT_INITIALIZED (3)")) << d.status;
}

TEST_F(CudaDriverTest, MemoryKindAsksTheDriverOnlyWhenReady) {
  static char deviceMemory[64];
  char host[16];
  fake.deviceBegin = deviceMemory;
  fake.deviceEnd = deviceMemory + sizeof deviceMemory;
  Driver d = probeFake();
  ASSERT_TRUE(d.usable()) << d.status;
  EXPECT_EQ(memoryKind(d, deviceMemory + 8), MemoryKind::Device);
  EXPECT_EQ(memoryKind(d, host), MemoryKind::Host);
  EXPECT_EQ(fake.attributeCalls, 2);
  fake.deviceCount = 0;
  Driver none = probeFake();
  EXPECT_EQ(memoryKind(none, deviceMemory), MemoryKind::Host);
  EXPECT_EQ(fake.attributeCalls, 2) << "a driver without devices was asked about a pointer";
}

TEST_F(CudaDriverTest, DlopenFailures) {
  Driver d = loadDriver("libhoccl-no-such-driver.so.1");
  EXPECT_EQ(d.state, DriverState::NoDriver);
  EXPECT_TRUE(contains(d.status, "no driver: libhoccl-no-such-driver.so.1 not found")) << d.status;
  // A library that is not a CUDA 12 driver.
  d = loadDriver("libm.so.6");
  EXPECT_EQ(d.state, DriverState::NoDriver);
  EXPECT_TRUE(contains(d.status, "has no cuGetProcAddress_v2")) << d.status;
}

#ifdef HOCCL_TEST_CUDA_STUB
// The toolkit's stub libcuda (found by CMake's FindCUDAToolkit): what a
// build machine without a GPU has. It must read as such, not as a failure.
TEST_F(CudaDriverTest, TheToolkitsStubLibraryReadsAsNoGpu) {
  Driver d = loadDriver(HOCCL_TEST_CUDA_STUB);
  EXPECT_EQ(d.state, DriverState::Stub) << d.status;
  EXPECT_FALSE(d.usable());
  EXPECT_TRUE(contains(d.status, "stub library (no GPU)")) << d.status;
  EXPECT_TRUE(contains(d.status, "CUDA_ERROR_STUB_LIBRARY (34)")) << d.status;
}
#endif

TEST_F(CudaDriverTest, ProcessDriverIsProbedOnceAndCanBeReplaced) {
  const Driver& real = processDriver();
  EXPECT_EQ(&real, &processDriver());
  EXPECT_FALSE(real.status.empty());
  Driver stand;
  stand.status = "stand-in";
  setProcessDriverForTesting(&stand);
  EXPECT_EQ(&processDriver(), &stand);
  setProcessDriverForTesting(nullptr);
  EXPECT_EQ(&processDriver(), &real);
}

// With a driver that calls one buffer device memory, the collectives send
// it to the device path, which this driver (no contexts, launches or
// streams) cannot run: they say which entry points it lacks, and refuse a
// mix; host buffers still run. A host communicator has no CUDA device.
// (The device path itself: test_cuda_device.cc.)
TEST_F(CudaDriverTest, CollectivesNameADriverTheDevicePathCannotUse) {
  static float deviceMemory[8];
  fake.deviceBegin = deviceMemory;
  fake.deviceEnd = deviceMemory + 8;
  Driver d = probeFake();
  ASSERT_TRUE(d.usable()) << d.status;
  setProcessDriverForTesting(&d);
  ASSERT_TRUE(testutil::runThreads(1, [&](hocclComm_t comm, int) {
    auto lastError = [] { return std::string(hocclGetLastError(nullptr)); };
    float host[8] = {1, 2, 3, 4, 5, 6, 7, 8}, out[8] = {0};
    EXPECT_EQ(hocclAllReduce(deviceMemory, deviceMemory, 8, hocclFloat, hocclSum, comm, nullptr), hocclSystemError);
    EXPECT_TRUE(contains(lastError(), "unusable driver: cuCtxGetCurrent, cuCtxSetCurrent,")) << lastError();
    EXPECT_TRUE(contains(lastError(), "cuCtxEnablePeerAccess missing (CUDA driver 12.4, 1 device)"))
        << lastError();
    EXPECT_EQ(hocclAllGather(host, deviceMemory, 8, hocclFloat, comm, nullptr), hocclInvalidUsage);
    EXPECT_TRUE(contains(lastError(), "sendbuff is host memory but recvbuff is CUDA device memory")) << lastError();
    EXPECT_EQ(hocclBroadcast(deviceMemory, out, 8, hocclFloat, 0, comm, nullptr), hocclInvalidUsage);
    // A zero count touches no buffer, so none is asked about.
    int calls = fake.attributeCalls;
    EXPECT_EQ(hocclAllReduce(deviceMemory, deviceMemory, 0, hocclFloat, hocclSum, comm, nullptr), hocclSuccess);
    EXPECT_EQ(fake.attributeCalls, calls);
    EXPECT_EQ(hocclAllReduce(host, out, 8, hocclFloat, hocclSum, comm, nullptr), hocclSuccess) << lastError();
    EXPECT_EQ(out[7], 8.0f);
    int device = 0;
    EXPECT_EQ(hocclCommCuDevice(comm, &device), hocclSuccess);
    EXPECT_EQ(device, -1);
  }));
}

// Without a usable driver (a stub here) the driver is never asked about a
// pointer: host calls run as before.
TEST_F(CudaDriverTest, WithoutAUsableDriverNoPointerIsAskedAbout) {
  fake.initResult = kCudaErrorStubLibrary;
  Driver d = probeFake();
  ASSERT_EQ(d.state, DriverState::Stub);
  setProcessDriverForTesting(&d);
  ASSERT_TRUE(testutil::runThreads(1, [&](hocclComm_t comm, int) {
    float host[4] = {1, 2, 3, 4}, out[4] = {0};
    EXPECT_EQ(hocclAllReduce(host, out, 4, hocclFloat, hocclSum, comm, nullptr), hocclSuccess);
    EXPECT_EQ(out[3], 4.0f);
  }));
  EXPECT_EQ(fake.attributeCalls, 0);
}
