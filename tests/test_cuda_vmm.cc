// CUDA's virtual memory management (VMM) entry points of the device path:
// optional in DeviceApi (a driver without them still runs ranks that are
// threads of one process), and the fake's implementation of them
// (support/fake_cuda_vmm.h): an allocation exported as a POSIX fd, passed
// to another process and mapped there is the same memory; what the driver
// refuses, the fake refuses.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "hoccl.h"
#include "base/config.h"
#include "base/cuda_device_api.h"
#include "base/fdpass.h"
#include "src/exec/cuda/interp.h"
#include "tests/support/fake_cuda.h"
#include "tests/support/fake_cuda_ipc.h"
#include "tests/support/fake_cuda_vmm.h"
#include "tests/support/harness.h"
#include "transport/p2p/ipc.h"
#include "transport/p2p/peer_access.h"

namespace hoccl {
namespace {

using fakecuda::FakeCuda;

const std::set<std::string> kVmmNames = {
    "cuMemGetAllocationGranularity", "cuMemCreate", "cuMemExportToShareableHandle", "cuMemImportFromShareableHandle",
    "cuMemAddressReserve", "cuMemMap", "cuMemSetAccess", "cuMemUnmap", "cuMemRelease", "cuMemAddressFree"};

TEST(CudaVmm, ADriverWithoutVmmStillResolvesAndNamesWhatItLacks) {
  FakeCuda fake(kVmmNames);
  cuda::DeviceApi api;
  const Status st = cuda::resolveDeviceApi(fake.driver(), &api);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_TRUE(api.launchKernel != nullptr);
  EXPECT_FALSE(api.vmm.usable());
  EXPECT_TRUE(api.vmm.memMap == nullptr && api.vmm.memGetAllocationGranularity == nullptr);
  for (const std::string& name : kVmmNames)
    EXPECT_NE(api.vmmMissing.find(name), std::string::npos) << name << " not in: " << api.vmmMissing;
}

TEST(CudaVmm, ThreadRanksRunOnADriverWithoutVmm) {
  FakeCuda fake(kVmmNames);
  ASSERT_TRUE(testutil::runThreads(2, [&](hocclComm_t comm, int rank) {
    const size_t n = 1000;
    auto* d = static_cast<float*>(fake.alloc(n * sizeof(float)));
    for (size_t i = 0; i < n; ++i) d[i] = float(rank + 1) * float(i % 7);
    void* stream = fake.createStream();
    ASSERT_EQ(hocclAllReduce(d, d, n, hocclFloat32, hocclSum, comm, stream), hocclSuccess) << hocclGetLastError(comm);
    ASSERT_TRUE(fake.sync(stream));
    for (size_t i = 0; i < n; ++i) ASSERT_EQ(d[i], 3.0f * float(i % 7)) << i;
    fake.free(d);
  }));
}

// Ranks in other processes need VMM or legacy IPC: a driver with neither
// is named, not a hang; one without VMM falls back to legacy IPC (auto) and
// runs (the exact sums of whole numbers), unless HOCCL_DEVICE_IPC=fd asks
// for VMM, which is then named as missing.
TEST(CudaVmm, ProcessRanksWithoutVmmUseLegacyIpcOrAreToldWhatTheDriverLacks) {
  const std::string noLegacy = "cuIpcOpenMemHandle";
  for (const std::string mode : {"auto", "fd", "auto-without-legacy"}) {
    SCOPED_TRACE(mode);
    std::set<std::string> missing = {"cuMemExportToShareableHandle"};
    if (mode == "auto-without-legacy") missing.insert(noLegacy);
    FakeCuda fake(missing);
    setenv("HOCCL_DEVICE_IPC", mode == "fd" ? "fd" : "auto", 1);
    reloadSettingsForTesting();
    testutil::Options o = testutil::inProcesses(2);
    std::string error;
    EXPECT_TRUE(testutil::spawn(o, [&](hocclComm_t comm, int rank) {
      const size_t n = 1000;
      auto* d = static_cast<float*>(fake.alloc(n * sizeof(float)));
      for (size_t i = 0; i < n; ++i) d[i] = float(rank + 1) * float(i % 7);
      void* stream = fake.createStream();
      const hocclResult_t rc = hocclAllReduce(d, d, n, hocclFloat32, hocclSum, comm, stream);
      const std::string msg = hocclGetLastError(comm);
      if (mode == "auto") {
        ASSERT_EQ(rc, hocclSuccess) << msg;
        ASSERT_TRUE(fake.sync(stream));
        for (size_t i = 0; i < n; ++i) ASSERT_EQ(d[i], 3.0f * float(i % 7)) << i;
        EXPECT_EQ(fakecuda::ipc::openLive(), 1) << "rank " << rank << " opened its peer's connection by handle";
        EXPECT_EQ(fake.vmmLive(), 0);
        return;
      }
      EXPECT_EQ(rc, hocclSystemError) << msg;
      EXPECT_NE(msg.find("the driver of some rank lacks it"), std::string::npos) << msg;
      EXPECT_NE(msg.find(mode == "fd" ? "here: cuMemExportToShareableHandle" : "here: cuIpcOpenMemHandle"),
                std::string::npos) << msg;
    }, &error)) << error;
  }
  unsetenv("HOCCL_DEVICE_IPC");
  reloadSettingsForTesting();
}

// HOCCL_DEVICE_IPC=fabric: connection memory travels as fabric handles
// over the bootstrap where every rank's driver makes them (the fake's
// Works: sums exact, handles exported); where the GPU has them but no IMEX
// channel permits them (NotPermitted, as on an H100 without IMEX), every
// rank is told so by name, and auto still connects by POSIX fd.
TEST(CudaVmm, FabricHandlesConnectProcessesWhereTheDriverPermitsThem) {
  using fakecuda::vmm::Fabric;
  for (const auto& [mode, want] : {std::pair{Fabric::Works, "fabric"}, {Fabric::NotPermitted, "fabric"},
                                   {Fabric::NotPermitted, "auto"}, {Fabric::Unsupported, "fabric"}}) {
    const bool works = mode == Fabric::Works || std::string(want) == "auto";
    SCOPED_TRACE(std::string(want) + (mode == Fabric::Works ? ", fabric works" : mode == Fabric::NotPermitted
                                                                                     ? ", not permitted"
                                                                                     : ", unsupported"));
    FakeCuda fake;
    fakecuda::vmm::setFabric(mode);
    setenv("HOCCL_DEVICE_IPC", want, 1);
    reloadSettingsForTesting();
    testutil::Options o = testutil::inProcesses(3);
    std::string error;
    EXPECT_TRUE(testutil::spawn(o, [&](hocclComm_t comm, int rank) {
      const size_t n = 100000;
      auto* d = static_cast<float*>(fake.alloc(n * sizeof(float)));
      for (size_t i = 0; i < n; ++i) d[i] = float(rank + 1) * float(i % 7);
      void* stream = fake.createStream();
      const hocclResult_t rc = hocclAllReduce(d, d, n, hocclFloat32, hocclSum, comm, stream);
      const std::string msg = hocclGetLastError(comm);
      if (works) {
        ASSERT_EQ(rc, hocclSuccess) << msg;
        ASSERT_TRUE(fake.sync(stream));
        for (size_t i = 0; i < n; ++i) ASSERT_EQ(d[i], 6.0f * float(i % 7)) << i;
        if (mode == Fabric::Works) EXPECT_GT(fakecuda::vmm::fabricExports(), 1) << "rank " << rank;
        else EXPECT_EQ(fakecuda::vmm::fabricExports(), 0) << "rank " << rank;  // auto: by fd
        return;
      }
      EXPECT_EQ(rc, hocclSystemError) << msg;
      EXPECT_NE(msg.find("HOCCL_DEVICE_IPC=fabric, but rank(s) 0, 1, 2 cannot share GPU memory by fabric handle"),
                std::string::npos) << msg;
      EXPECT_NE(msg.find(mode == Fabric::NotPermitted ? "CUDA_ERROR_NOT_PERMITTED" : "has no fabric handles"),
                std::string::npos) << msg;
      EXPECT_NE(msg.find("HOCCL_DEVICE_IPC=fd or auto"), std::string::npos) << msg;
    }, &error)) << error;
  }
  unsetenv("HOCCL_DEVICE_IPC");
  reloadSettingsForTesting();
}

using cuda::DevPtr;
using cuda::IpcBufferMsg;
using cuda::MemHandle;
using cuda::VmmMapping;
constexpr size_t kGran = fakecuda::vmm::kGranularity;

cuda::MemAllocationProp propFor(int handleTypes) {
  cuda::MemAllocationProp p{};
  p.type = cuda::kMemAllocationTypePinned;
  p.requestedHandleTypes = handleTypes;
  p.location = {cuda::kMemLocationTypeDevice, 0};
  return p;
}

// One mapping of an allocation, made and undone as the device executor will.
struct Mapped {
  const cuda::VmmApi* v = nullptr;
  MemHandle handle = 0;
  DevPtr base = 0;
  size_t size = 0;
  int map(const cuda::VmmApi& vmm, MemHandle h, size_t bytes) {
    v = &vmm;
    handle = h;
    size = bytes;
    if (int rc = vmm.memAddressReserve(&base, bytes, 0, 0, 0)) return rc;
    if (int rc = vmm.memMap(base, bytes, 0, h, 0)) return rc;
    const cuda::MemAccessDesc rw{{cuda::kMemLocationTypeDevice, 0}, cuda::kMemAccessReadWrite};
    return vmm.memSetAccess(base, bytes, &rw, 1);
  }
  int unmap() {
    int rc = v->memUnmap(base, size);
    rc = rc ? rc : v->memAddressFree(base, size);
    return rc ? rc : v->memRelease(handle);
  }
  char* ptr() const { return reinterpret_cast<char*>(base); }
};

class CudaVmmFake : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(cuda::resolveDeviceApi(fake.driver(), &api).ok());
    ASSERT_TRUE(api.vmm.usable()) << api.vmmMissing;
  }
  FakeCuda fake;
  cuda::DeviceApi api;
  const cuda::VmmApi& v = api.vmm;
};

// The exporter creates its allocation after the importer was forked (so
// nothing is inherited), fills it, and passes the fd over fdpass; the
// importer maps it at an address of its own, checks and writes; the
// exporter sees the write.
TEST_F(CudaVmmFake, AnExportedAllocationIsTheSameMemoryInAnotherProcess) {
  const std::string name = "hoccl-test-vmm-" + std::to_string(getpid());
  FdListener listener;
  ASSERT_TRUE(FdListener::listen(name, &listener).ok());
  const size_t bytes = 2 * kGran;
  const pid_t child = fork();
  if (child == 0) {
    FdChannel ch;
    if (!FdChannel::connect(name, "the exporter", Deadline::in(10), &ch).ok()) _exit(10);
    uint64_t size = 0;
    std::vector<int> fds;
    if (!ch.recv(&size, sizeof size, 1, &fds, Deadline::in(10)).ok()) _exit(11);
    MemHandle h = 0;
    if (v.memImportFromShareableHandle(&h, reinterpret_cast<void*>(intptr_t(fds[0])), cuda::kMemHandleTypePosixFd))
      _exit(12);
    close(fds[0]);
    Mapped m;
    if (m.map(v, h, size)) _exit(13);
    for (size_t i = 0; i < size; i += 4096)
      if (m.ptr()[i] != char(i / 4096 % 100)) _exit(14);
    m.ptr()[size - 1] = 'Z';
    if (m.unmap() || fakecuda::vmm::live() != 0) _exit(15);
    const char done = 'd';
    _exit(ch.send(&done, 1, nullptr, 0, Deadline::in(10)).ok() ? 0 : 16);
  }
  FdChannel ch;
  ASSERT_TRUE(listener.accept("the importer", Deadline::in(10), &ch).ok());
  const cuda::MemAllocationProp prop = propFor(cuda::kMemHandleTypePosixFd);
  size_t gran = 0;
  ASSERT_EQ(v.memGetAllocationGranularity(&gran, &prop, cuda::kMemAllocGranularityMinimum), 0);
  ASSERT_EQ(gran, kGran);
  MemHandle h = 0;
  ASSERT_EQ(v.memCreate(&h, bytes, &prop, 0), 0);
  Mapped m;
  ASSERT_EQ(m.map(v, h, bytes), 0);
  for (size_t i = 0; i < bytes; i += 4096) m.ptr()[i] = char(i / 4096 % 100);
  int fd = -1;
  ASSERT_EQ(v.memExportToShareableHandle(&fd, h, cuda::kMemHandleTypePosixFd, 0), 0);
  const uint64_t size = bytes;
  ASSERT_TRUE(ch.send(&size, sizeof size, &fd, 1, Deadline::in(10)).ok());
  close(fd);
  char done = 0;
  std::vector<int> none;
  const Status st = ch.recv(&done, 1, 0, &none, Deadline::in(10));
  int status = 0;
  waitpid(child, &status, 0);
  ASSERT_TRUE(WIFEXITED(status)) << status;
  EXPECT_EQ(WEXITSTATUS(status), 0);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(m.ptr()[bytes - 1], 'Z') << "the importer's write is not in the exporter's mapping";
  uint32_t kind = 0;
  EXPECT_EQ(fake.driver().api.pointerGetAttribute(&kind, cuda::kPointerAttributeMemoryType, m.base + 8), 0);
  EXPECT_EQ(kind, cuda::kMemoryTypeDevice);
  EXPECT_EQ(m.unmap(), 0);
  EXPECT_EQ(fake.vmmLive(), 0);
}

TEST_F(CudaVmmFake, RefusesWhatTheDriverRefuses) {
  constexpr int kInvalid = cuda::kCudaErrorInvalidValue, kNotSupported = 801;
  const cuda::MemAllocationProp fdProp = propFor(cuda::kMemHandleTypePosixFd), plain = propFor(0);
  const cuda::MemAllocationProp fabric = propFor(cuda::kMemHandleTypeFabric);
  MemHandle h = 0, bare = 0;
  EXPECT_EQ(v.memCreate(&h, kGran, &fabric, 0), kNotSupported) << "fabric handles";
  EXPECT_EQ(v.memCreate(&h, kGran + 4096, &fdProp, 0), kInvalid) << "a size off the granularity";
  EXPECT_EQ(v.memCreate(&h, 0, &fdProp, 0), kInvalid) << "size 0";
  cuda::MemAllocationProp host = fdProp;
  host.location.id = 3;
  EXPECT_EQ(v.memCreate(&h, kGran, &host, 0), kInvalid) << "a device that is not there";
  ASSERT_EQ(v.memCreate(&h, 2 * kGran, &fdProp, 0), 0);
  ASSERT_EQ(v.memCreate(&bare, kGran, &plain, 0), 0);
  int fd = -1;
  EXPECT_EQ(v.memExportToShareableHandle(&fd, h, cuda::kMemHandleTypeFabric, 0), kNotSupported);
  EXPECT_EQ(v.memExportToShareableHandle(&fd, bare, cuda::kMemHandleTypePosixFd, 0), kInvalid)
      << "exporting a type not requested at creation";
  EXPECT_EQ(v.memExportToShareableHandle(&fd, 12345, cuda::kMemHandleTypePosixFd, 0), kInvalid) << "unknown handle";
  const int small = memfd_create("small", MFD_CLOEXEC);
  ASSERT_EQ(ftruncate(small, 4096), 0);
  MemHandle imported = 0;
  EXPECT_EQ(v.memImportFromShareableHandle(&imported, reinterpret_cast<void*>(intptr_t(small)),
                                           cuda::kMemHandleTypePosixFd), kInvalid)
      << "an fd whose size is off the granularity";
  EXPECT_EQ(v.memImportFromShareableHandle(&imported, reinterpret_cast<void*>(intptr_t(small)),
                                           cuda::kMemHandleTypeFabric), kNotSupported);
  close(small);

  DevPtr base = 0;
  EXPECT_EQ(v.memAddressReserve(&base, kGran + 1, 0, 0, 0), kInvalid);
  ASSERT_EQ(v.memAddressReserve(&base, 2 * kGran, 0, 0, 0), 0);
  EXPECT_EQ(base % kGran, 0u);
  EXPECT_EQ(v.memMap(base + kGran, 2 * kGran, 0, h, 0), kInvalid) << "a map past the reserved range";
  EXPECT_EQ(v.memMap(base - kGran, kGran, 0, bare, 0), kInvalid) << "a map before the reserved range";
  EXPECT_EQ(v.memMap(base, 4 * kGran, 0, h, 0), kInvalid) << "a map larger than the allocation";
  EXPECT_EQ(v.memMap(base, kGran, kGran, h, 0), kInvalid) << "an offset into the allocation";
  const cuda::MemAccessDesc rw{{cuda::kMemLocationTypeDevice, 0}, cuda::kMemAccessReadWrite};
  EXPECT_EQ(v.memSetAccess(base, kGran, &rw, 1), kInvalid) << "access to an unmapped range";
  ASSERT_EQ(v.memMap(base, kGran, 0, bare, 0), 0);
  EXPECT_EQ(v.memMap(base, kGran, 0, h, 0), kInvalid) << "a map over a map";
  EXPECT_EQ(v.memSetAccess(base, 2 * kGran, &rw, 1), kInvalid) << "access beyond what is mapped";
  ASSERT_EQ(v.memSetAccess(base, kGran, &rw, 1), 0);
  reinterpret_cast<volatile char*>(base)[kGran - 1] = 1;  // accessible now
  EXPECT_EQ(v.memAddressFree(base, 2 * kGran), kInvalid) << "freeing a range that is still mapped";
  EXPECT_EQ(v.memUnmap(base, kGran / 2), kInvalid) << "unmapping part of a mapping";
  EXPECT_EQ(v.memUnmap(base, kGran), 0);
  EXPECT_EQ(v.memAddressFree(base, kGran), kInvalid) << "freeing part of a reservation";
  EXPECT_EQ(v.memAddressFree(base, 2 * kGran), 0);
  EXPECT_EQ(v.memRelease(h), 0);
  EXPECT_EQ(v.memRelease(bare), 0);
  EXPECT_EQ(v.memRelease(bare), kInvalid) << "releasing twice";
  EXPECT_EQ(fake.vmmLive(), 0);
}

// Mapped memory is not accessible before cuMemSetAccess, as on a GPU.
TEST_F(CudaVmmFake, MemoryIsInaccessibleUntilAccessIsSet) {
  const cuda::MemAllocationProp prop = propFor(cuda::kMemHandleTypePosixFd);
  MemHandle h = 0;
  DevPtr base = 0;
  ASSERT_EQ(v.memCreate(&h, kGran, &prop, 0), 0);
  ASSERT_EQ(v.memAddressReserve(&base, kGran, 0, 0, 0), 0);
  ASSERT_EQ(v.memMap(base, kGran, 0, h, 0), 0);
  EXPECT_DEATH(reinterpret_cast<volatile char*>(base)[0] = 1, "");
  EXPECT_EQ(v.memUnmap(base, kGran), 0);
  EXPECT_EQ(v.memAddressFree(base, kGran), 0);
  EXPECT_EQ(v.memRelease(h), 0);
}

// True if process `pid` has exited, reaped or not (a zombie is gone too).
bool processGone(int pid) {
  if (pid <= 0) return false;
  if (kill(pid, 0) != 0) return errno == ESRCH;
  char path[64], state = 0;
  snprintf(path, sizeof path, "/proc/%d/stat", pid);
  FILE* f = fopen(path, "r");
  if (!f) return false;
  const int n = fscanf(f, "%*d (%*[^)]) %c", &state);
  fclose(f);
  return n == 1 && (state == 'Z' || state == 'X');
}

// The exchange of transport/p2p/ipc.h between processes, with a peer that exits
// in the middle of it: the waiting side names it at once, no hang.
IpcBufferMsg exportMsg(const VmmMapping& m, int from, int to) {
  cuda::IpcBufferMsg msg;
  msg.size = m.size;
  msg.granularity = kGran;
  msg.connOffset = 0;
  msg.connBytes = sizeof(cuda::DevConnMem);
  msg.slotsOffset = cuda::ipcSlotsOffset();
  msg.slotsBytes = 4096;
  msg.from = from;
  msg.to = to;
  msg.link = 0;
  msg.pid = getpid();
  std::strcpy(msg.host, "here");
  return msg;
}

TEST_F(CudaVmmFake, TheExchangeMapsTheExportersMemory) {
  const std::string name = "hoccl-test-ipc-" + std::to_string(getpid());
  FdListener listener;
  ASSERT_TRUE(FdListener::listen(name, &listener).ok());
  const pid_t child = fork();
  if (child == 0) {  // rank 1 exports edge 0->1 to rank 0 and stays until it is taken
    cuda::VmmMapping m;
    size_t gran = 0;
    if (!cuda::vmmCreate(v, 0, 3 * kGran / 2, cuda::kMemHandleTypePosixFd, &m, &gran).ok() || m.size != 2 * kGran) _exit(10);
    std::strcpy(reinterpret_cast<char*>(m.base) + cuda::ipcSlotsOffset(), "from rank 1");
    int fd = -1;
    if (!cuda::vmmExport(v, m, &fd).ok()) _exit(12);
    const Status st = cuda::ipcSend(fd, exportMsg(m, 0, 1), name, "rank 0", [] { return false; }, Deadline::in(10));
    sleep(1);
    _exit(st.ok() ? 0 : 11);
  }
  std::vector<cuda::IpcReceived> got;
  const Status st = cuda::ipcReceive(api, 0, listener, 2, {1}, [](int) { return false; },
                                     [](int r) { return "rank " + std::to_string(r); }, Deadline::in(10), &got);
  int status = 0;
  waitpid(child, &status, 0);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(WEXITSTATUS(status), 0);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].msg.to, 1);
  EXPECT_STREQ(reinterpret_cast<const char*>(got[0].mapping.base) + cuda::ipcSlotsOffset(), "from rank 1");
  cuda::vmmRelease(v, &got[0].mapping);
  EXPECT_EQ(fake.vmmLive(), 0);
}

// A staged connection's memory: a memfd the exporter registers as host
// memory, passed the same way; the importer's mapping is the same pages,
// both ways, and registered with the driver until released.
TEST_F(CudaVmmFake, HostSharedMemoryTravelsTheSameWay) {
  const std::string name = "hoccl-test-shm-" + std::to_string(getpid());
  FdListener listener;
  ASSERT_TRUE(FdListener::listen(name, &listener).ok());
  const int liveBefore = fake.hostLive();
  const pid_t child = fork();
  if (child == 0) {  // rank 1 exports edge 0->1 and waits for rank 0's answer in the same pages
    cuda::HostShm m;
    if (!cuda::hostShmCreate(api, 5000, &m).ok() || m.size != 8192 || m.dev != DevPtr(uintptr_t(m.host))) _exit(10);
    char* slots = static_cast<char*>(m.host) + cuda::ipcSlotsOffset();
    std::strcpy(slots, "from rank 1");
    cuda::IpcBufferMsg msg;
    msg.handleType = uint16_t(cuda::IpcHandle::HostShm);
    msg.size = m.size;
    msg.granularity = 4096;
    msg.connBytes = sizeof(cuda::DevConnMem);
    msg.slotsOffset = cuda::ipcSlotsOffset();
    msg.slotsBytes = 4096;
    msg.from = 0;
    msg.to = 1;
    msg.link = 0;
    msg.pid = getpid();
    std::strcpy(msg.host, "here");
    const Status st = cuda::ipcSend(m.fd, msg, name, "rank 0", [] { return false; }, Deadline::in(10));
    if (!st.ok()) _exit(11);
    for (int i = 0; i < 1000 && std::strcmp(slots, "from rank 0") != 0; ++i) usleep(10000);
    _exit(std::strcmp(slots, "from rank 0") == 0 ? 0 : 12);
  }
  std::vector<cuda::IpcReceived> got;
  const Status st = cuda::ipcReceive(api, 0, listener, 2, {1}, [](int) { return false; },
                                     [](int r) { return "rank " + std::to_string(r); }, Deadline::in(10), &got);
  ASSERT_TRUE(st.ok()) << st.message();
  ASSERT_EQ(got.size(), 1u);
  ASSERT_NE(got[0].shm.host, nullptr);
  EXPECT_EQ(got[0].mapping.base, 0u) << "no VMM mapping for host memory";
  EXPECT_EQ(got[0].base(), got[0].shm.dev);
  char* slots = static_cast<char*>(got[0].shm.host) + cuda::ipcSlotsOffset();
  EXPECT_STREQ(slots, "from rank 1");
  std::strcpy(slots, "from rank 0");
  int status = 0;
  waitpid(child, &status, 0);
  EXPECT_EQ(WEXITSTATUS(status), 0) << "the exporter did not see the importer's write";
  EXPECT_EQ(fake.hostLive(), liveBefore + 1) << "registered";
  cuda::hostShmRelease(api, &got[0].shm);
  EXPECT_EQ(fake.hostLive(), liveBefore) << "unregistered";
}

TEST_F(CudaVmmFake, AnExporterThatExitsIsNamedAtOnce) {
  const std::string name = "hoccl-test-ipc-gone-" + std::to_string(getpid());
  FdListener listener;
  ASSERT_TRUE(FdListener::listen(name, &listener).ok());
  const pid_t child = fork();
  if (child == 0) _exit(0);  // rank 2 exits without exporting
  const double t0 = nowSec();
  std::vector<cuda::IpcReceived> got;
  const Status st = cuda::ipcReceive(api, 0, listener, 3, {2, 2}, [&](int r) { return r == 2 && processGone(child); },
                                     [](int r) { return "rank " + std::to_string(r) + " (the child)"; },
                                     Deadline::in(30), &got);
  waitpid(child, nullptr, 0);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("rank 2 (the child) exited before handing over its connection memory"),
            std::string::npos) << st.message();
  EXPECT_LT(nowSec() - t0, 5.0);
}

TEST_F(CudaVmmFake, AnImporterThatExitsIsNamedAtOnce) {
  const pid_t child = fork();
  if (child == 0) _exit(0);  // never listens
  cuda::VmmMapping m;
  size_t gran = 0;
  ASSERT_TRUE(cuda::vmmCreate(v, 0, kGran, cuda::kMemHandleTypePosixFd, &m, &gran).ok());
  int fd = -1;
  ASSERT_TRUE(cuda::vmmExport(v, m, &fd).ok());
  const double t0 = nowSec();
  const Status st = cuda::ipcSend(fd, exportMsg(m, 0, 1), "hoccl-test-nobody-" + std::to_string(getpid()),
                                  "rank 0 (the child)", [&] { return processGone(child); }, Deadline::in(30));
  close(fd);
  waitpid(child, nullptr, 0);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("rank 0 (the child) exited before taking its connection memory"), std::string::npos)
      << st.message();
  EXPECT_LT(nowSec() - t0, 5.0);
  cuda::vmmRelease(v, &m);
  EXPECT_EQ(fake.vmmLive(), 0);
}

// Peer access for ranks of one process on different GPUs: asked per pair,
// enabled on the peer's primary context (retained for the caller to
// release), "already enabled" is fine, and a pair without it, or whose
// enable fails, is set apart with the reason (its connections stage
// through host memory).
namespace peerstub {
std::set<std::pair<int, int>> refused;  // (device, peer) pairs without peer access
std::vector<int> enabled;                // peers whose context was enabled
int enableResult = 0;
int canAccess(int* can, int device, int peer) {
  *can = refused.count({device, peer}) ? 0 : 1;
  return 0;
}
int retain(cuda::CuHandle* ctx, int device) {
  *ctx = reinterpret_cast<cuda::CuHandle>(uintptr_t(0x1000 + device));
  return 0;
}
int enable(cuda::CuHandle ctx, unsigned) {
  enabled.push_back(int(reinterpret_cast<uintptr_t>(ctx) - 0x1000));
  return enableResult;
}
}  // namespace peerstub

TEST(CudaPeerAccess, EnabledPerPeerGpuOrSetApartWithTheReason) {
  cuda::DeviceApi api;
  api.deviceCanAccessPeer = &peerstub::canAccess;
  api.devicePrimaryCtxRetain = &peerstub::retain;
  api.ctxEnablePeerAccess = &peerstub::enable;
  std::vector<int> retained;
  std::map<int, std::string> unreachable;
  ASSERT_TRUE(cuda::enablePeerAccess(api, 0, {1, 3}, false, &retained, &unreachable).ok());
  EXPECT_EQ(peerstub::enabled, (std::vector<int>{1, 3}));
  EXPECT_EQ(retained, (std::vector<int>{1, 3}));
  EXPECT_TRUE(unreachable.empty());
  peerstub::enableResult = 704;  // CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED: done already
  retained.clear();
  EXPECT_TRUE(cuda::enablePeerAccess(api, 0, {1}, false, &retained, &unreachable).ok());
  EXPECT_TRUE(unreachable.empty());
  peerstub::enableResult = 711;  // CUDA_ERROR_TOO_MANY_PEERS
  ASSERT_TRUE(cuda::enablePeerAccess(api, 0, {2}, false, &retained, &unreachable).ok());
  ASSERT_EQ(unreachable.size(), 1u);
  EXPECT_NE(unreachable[2].find("cuCtxEnablePeerAccess(GPU 0 to GPU 2) failed"), std::string::npos) << unreachable[2];
  peerstub::enableResult = 0;
  peerstub::refused = {{2, 5}};
  peerstub::enabled.clear();
  retained.clear();
  unreachable.clear();
  ASSERT_TRUE(cuda::enablePeerAccess(api, 2, {4, 5, 6}, false, &retained, &unreachable).ok());
  ASSERT_EQ(unreachable.size(), 1u);
  EXPECT_NE(unreachable[5].find("GPU 2 has no peer access to GPU 5"), std::string::npos) << unreachable[5];
  EXPECT_EQ(peerstub::enabled, (std::vector<int>{4, 6})) << "GPU 5's context is not touched";
  EXPECT_EQ(retained, (std::vector<int>{4, 6}));
}

// The self-test copies a pattern to the peer GPU and back: intact on a
// sound path; a path that damages the writes is named, with where, and
// enablePeerAccess sets that peer apart (or trusts it without the test).
TEST(CudaPeerAccess, TheSelfTestPassesASoundPathAndNamesADamagedOne) {
  FakeCuda fake;
  fake.setDevices(2);
  cuda::DeviceApi api;
  ASSERT_TRUE(cuda::resolveDeviceApi(fake.driver(), &api).ok());
  cuda::CuHandle ctx = nullptr;
  ASSERT_EQ(api.devicePrimaryCtxRetain(&ctx, 0), 0);
  ASSERT_EQ(api.ctxSetCurrent(ctx), 0);
  const int before = fake.deviceLive();
  EXPECT_EQ(cuda::peerSelfTest(api, 0, 1, ctx), "");
  EXPECT_EQ(fake.deviceLive(), before) << "the test's buffers are freed";
  fake.corruptDeviceCopies(true);
  const std::string why = cuda::peerSelfTest(api, 0, 1, ctx);
  EXPECT_NE(why.find("of 16384 words copied to the peer GPU and back, 16 came back different (the first at word "
                     "1023)"), std::string::npos) << why;
  EXPECT_EQ(fake.deviceLive(), before);
  std::vector<int> retained;
  std::map<int, std::string> unreachable;
  ASSERT_TRUE(cuda::enablePeerAccess(api, 0, {1}, true, &retained, &unreachable).ok());
  ASSERT_EQ(unreachable.size(), 1u);
  EXPECT_NE(unreachable[1].find("the peer-access self-test from GPU 0 to GPU 1 failed: of 16384"), std::string::npos)
      << unreachable[1];
  EXPECT_NE(unreachable[1].find("HOCCL_P2P_CHECK=0"), std::string::npos) << unreachable[1];
  unreachable.clear();
  ASSERT_TRUE(cuda::enablePeerAccess(api, 0, {1}, false, &retained, &unreachable).ok());
  EXPECT_TRUE(unreachable.empty()) << "HOCCL_P2P_CHECK=0 trusts the driver";
  for (int d : retained) api.devicePrimaryCtxRelease(d);
}

TEST(CudaVmm, AllOrNothing) {
  FakeCuda fake({"cuMemMap"});
  cuda::DeviceApi api;
  ASSERT_TRUE(cuda::resolveDeviceApi(fake.driver(), &api).ok());
  EXPECT_FALSE(api.vmm.usable());
  EXPECT_TRUE(api.vmm.memCreate == nullptr) << "a partial set was kept";
  EXPECT_EQ(api.vmmMissing, "cuMemMap");
}

}  // namespace
}  // namespace hoccl
