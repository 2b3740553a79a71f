// The fake libcuda's legacy IPC (fake_cuda_ipc.h).
#include "tests/support/fake_cuda_ipc.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <mutex>

#include "base/cuda_device_api.h"

namespace hoccl::fakecuda::ipc {
namespace {

using cuda::DevPtr;
constexpr int kOk = cuda::kCudaSuccess;
constexpr int kInvalid = cuda::kCudaErrorInvalidValue;
constexpr int kInvalidContext = 201;  // CUDA_ERROR_INVALID_CONTEXT: a process's own handle
constexpr uint32_t kMagic = 0x46495043;  // "CPIF"

struct Handle {  // inside CUipcMemHandle's 64 bytes
  uint32_t magic;
  int32_t pid, fd;
  uint64_t size;
};

struct State {
  std::mutex mu;
  std::map<uintptr_t, std::pair<int, size_t>> shared;  // base -> (memfd, bytes)
  std::map<uintptr_t, size_t> opened;                  // base -> bytes
};
State& st() {
  static State* s = new State();  // never destroyed: a forked child may still use it at exit
  return *s;
}

int getHandle(cuda::IpcMemHandle* h, DevPtr p) {
  if (!h) return kInvalid;
  std::lock_guard<std::mutex> l(st().mu);
  auto it = st().shared.find(uintptr_t(p));
  if (it == st().shared.end()) return kInvalid;
  std::memset(h, 0, sizeof *h);
  const Handle mine{kMagic, int32_t(getpid()), it->second.first, it->second.second};
  std::memcpy(h->reserved, &mine, sizeof mine);
  return kOk;
}

int openHandle(DevPtr* p, cuda::IpcMemHandle h, unsigned flags) {
  Handle theirs;
  std::memcpy(&theirs, h.reserved, sizeof theirs);
  if (!p || flags != cuda::kIpcLazyEnablePeerAccess || theirs.magic != kMagic || theirs.size == 0) return kInvalid;
  if (theirs.pid == getpid()) return kInvalidContext;
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/fd/%d", theirs.pid, theirs.fd);
  const int fd = open(path, O_RDWR | O_CLOEXEC);
  if (fd < 0) return kInvalid;
  void* m = mmap(nullptr, theirs.size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (m == MAP_FAILED) return kInvalid;
  std::lock_guard<std::mutex> l(st().mu);
  st().opened[uintptr_t(m)] = theirs.size;
  *p = DevPtr(uintptr_t(m));
  return kOk;
}

int closeHandle(DevPtr p) {
  std::lock_guard<std::mutex> l(st().mu);
  auto it = st().opened.find(uintptr_t(p));
  if (it == st().opened.end()) return kInvalid;
  munmap(reinterpret_cast<void*>(it->first), it->second);
  st().opened.erase(it);
  return kOk;
}

// cuMemGetHandleForAddressRange(DMA_BUF_FD): a new fd on the block's memfd,
// whose offset 0 is the block's start, so only ranges from the start of a
// shared block are exported (a driver's dma-buf begins at the range asked
// for; the fake cannot move the offset); other ranges and types refused.
int exportDmabuf(void* handle, DevPtr p, size_t size, int handleType, unsigned long long flags) {
  if (!handle || handleType != cuda::kMemRangeHandleTypeDmaBufFd || flags != 0 || size == 0) return kInvalid;
  std::lock_guard<std::mutex> l(st().mu);
  auto it = st().shared.find(uintptr_t(p));
  if (it == st().shared.end() || size > it->second.second) return kInvalid;
  const int fd = fcntl(it->second.first, F_DUPFD_CLOEXEC, 0);
  if (fd < 0) return kInvalid;
  *static_cast<int*>(handle) = fd;
  return kOk;
}

}  // namespace

void* allocShared(size_t bytes) {
  const int fd = memfd_create("fake-cuda-ipc", MFD_CLOEXEC);
  if (fd < 0) return nullptr;
  void* m = ftruncate(fd, off_t(bytes)) == 0 ? mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)
                                              : MAP_FAILED;
  if (m == MAP_FAILED) {
    close(fd);
    return nullptr;
  }
  std::memset(m, 0xA5, bytes);  // cuMemAlloc does not zero
  std::lock_guard<std::mutex> l(st().mu);
  st().shared[uintptr_t(m)] = {fd, bytes};
  return m;
}

bool freeShared(void* p) {
  std::lock_guard<std::mutex> l(st().mu);
  auto it = st().shared.find(uintptr_t(p));
  if (it == st().shared.end()) return false;
  munmap(p, it->second.second);
  close(it->second.first);
  st().shared.erase(it);
  return true;
}

const std::map<std::string, void*>& entryPoints() {
  static const std::map<std::string, void*> table = {
      {"cuIpcGetMemHandle", reinterpret_cast<void*>(&getHandle)},
      {"cuIpcOpenMemHandle", reinterpret_cast<void*>(&openHandle)},
      {"cuIpcCloseMemHandle", reinterpret_cast<void*>(&closeHandle)},
      {"cuMemGetHandleForAddressRange", reinterpret_cast<void*>(&exportDmabuf)},
  };
  return table;
}

int openLive() {
  std::lock_guard<std::mutex> l(st().mu);
  return int(st().opened.size());
}

}  // namespace hoccl::fakecuda::ipc
