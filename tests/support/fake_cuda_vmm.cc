// The fake libcuda's virtual memory management (fake_cuda_vmm.h).
#include "tests/support/fake_cuda_vmm.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <mutex>

#include "base/cuda_device_api.h"

namespace hoccl::fakecuda::vmm {
namespace {

using cuda::DevPtr;
using cuda::MemHandle;
constexpr int kOk = cuda::kCudaSuccess;
constexpr int kInvalid = cuda::kCudaErrorInvalidValue;
constexpr int kOutOfMemory = 2;    // CUDA_ERROR_OUT_OF_MEMORY
constexpr int kNotSupported = 801;  // CUDA_ERROR_NOT_SUPPORTED
constexpr int kNotPermitted = 800;  // CUDA_ERROR_NOT_PERMITTED
constexpr uint32_t kFabricMagic = 0x46425246;  // "FRBF"
constexpr int kKnownTypes = cuda::kMemHandleTypePosixFd | cuda::kMemHandleTypeFabric;

struct FabricHandle {  // inside CUmemFabricHandle's 64 bytes
  uint32_t magic;
  int32_t pid, fd;
  uint64_t size;
};
std::atomic<Fabric> fabricMode{Fabric::Unsupported};
std::atomic<int> fabricExported{0};

struct Allocation {
  int fd = -1;
  size_t size = 0;
  int handleTypes = 0;  // requested at cuMemCreate (imports: the type they came as)
};
struct Mapping {
  size_t size = 0;
  MemHandle handle = 0;
};

struct State {
  std::mutex mu;
  MemHandle next = 1;
  std::map<MemHandle, Allocation> handles;
  std::map<uintptr_t, size_t> reserved;  // base -> bytes
  std::map<uintptr_t, Mapping> maps;     // base -> mapping
};
State& st() {
  static State* s = new State();  // never destroyed: a forked child may still use it at exit
  return *s;
}

std::atomic<int> devices{1};
std::atomic<bool> noImports{false};
bool validDevice(const cuda::MemLocation& l) {
  return l.type == cuda::kMemLocationTypeDevice && l.id >= 0 && l.id < devices.load();
}

bool validProp(const cuda::MemAllocationProp* prop) {
  return prop && prop->type == cuda::kMemAllocationTypePinned && validDevice(prop->location) &&
         !prop->win32HandleMetaData;
}

// The reserved range that holds all of [p, p + n), or end().
std::map<uintptr_t, size_t>::iterator reservationOf(State& s, uintptr_t p, size_t n) {
  auto it = s.reserved.upper_bound(p);
  if (it == s.reserved.begin()) return s.reserved.end();
  --it;
  return p >= it->first && n <= it->second && p - it->first <= it->second - n ? it : s.reserved.end();
}

bool overlapsMap(const State& s, uintptr_t p, size_t n) {
  auto it = s.maps.lower_bound(p);
  if (it != s.maps.end() && it->first < p + n) return true;
  if (it == s.maps.begin()) return false;
  --it;
  return it->first + it->second.size > p;
}

int granularity(size_t* g, const cuda::MemAllocationProp* prop, int option) {
  if (!g || !validProp(prop) || (option != 0 && option != 1)) return kInvalid;
  *g = kGranularity;
  return kOk;
}

int create(MemHandle* h, size_t size, const cuda::MemAllocationProp* prop, unsigned long long flags) {
  if (!h || !validProp(prop) || flags != 0 || size == 0 || size % kGranularity != 0) return kInvalid;
  if (prop->requestedHandleTypes & ~kKnownTypes) return kNotSupported;
  if (prop->requestedHandleTypes & cuda::kMemHandleTypeFabric) {
    if (fabricMode == Fabric::Unsupported) return kNotSupported;
    if (fabricMode == Fabric::NotPermitted) return kNotPermitted;  // no IMEX channel
  }
  const int fd = memfd_create("fake-cuda-vmm", MFD_CLOEXEC);
  if (fd < 0) return kOutOfMemory;
  if (ftruncate(fd, off_t(size)) != 0) {
    close(fd);
    return kOutOfMemory;
  }
  std::lock_guard<std::mutex> l(st().mu);
  *h = st().next++;
  st().handles[*h] = Allocation{fd, size, prop->requestedHandleTypes};
  return kOk;
}

int exportHandle(void* shareable, MemHandle h, int type, unsigned long long flags) {
  if (!shareable || flags != 0) return kInvalid;
  std::lock_guard<std::mutex> l(st().mu);
  auto it = st().handles.find(h);
  if (it == st().handles.end()) return kInvalid;
  if (type != cuda::kMemHandleTypePosixFd && (type != cuda::kMemHandleTypeFabric || fabricMode == Fabric::Unsupported))
    return kNotSupported;
  if (!(it->second.handleTypes & type)) return kInvalid;  // not requested at cuMemCreate
  if (type == cuda::kMemHandleTypeFabric) {
    const FabricHandle h{kFabricMagic, int32_t(getpid()), it->second.fd, it->second.size};
    std::memset(shareable, 0, cuda::kFabricHandleBytes);
    std::memcpy(shareable, &h, sizeof h);
    ++fabricExported;
    return kOk;
  }
  const int fd = fcntl(it->second.fd, F_DUPFD_CLOEXEC, 0);
  if (fd < 0) return kOutOfMemory;
  *static_cast<int*>(shareable) = fd;
  return kOk;
}

// A fabric handle names the exporter's memfd; it is opened through /proc
// (a handle this process exported opens its own).
int importFabric(MemHandle* h, const void* handle) {
  if (fabricMode != Fabric::Works) return fabricMode == Fabric::Unsupported ? kNotSupported : kNotPermitted;
  FabricHandle theirs;
  std::memcpy(&theirs, handle, sizeof theirs);
  if (theirs.magic != kFabricMagic || theirs.size == 0 || theirs.size % kGranularity != 0) return kInvalid;
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/fd/%d", theirs.pid, theirs.fd);
  const int fd = open(path, O_RDWR | O_CLOEXEC);
  if (fd < 0) return kInvalid;
  struct stat sb;
  if (fstat(fd, &sb) != 0 || uint64_t(sb.st_size) != theirs.size) {
    close(fd);
    return kInvalid;
  }
  std::lock_guard<std::mutex> l(st().mu);
  *h = st().next++;
  st().handles[*h] = Allocation{fd, size_t(theirs.size), cuda::kMemHandleTypeFabric};
  return kOk;
}

int importHandle(MemHandle* h, void* osHandle, int type) {
  if (!h) return kInvalid;
  if (type == cuda::kMemHandleTypeFabric) return importFabric(h, osHandle);
  if (type != cuda::kMemHandleTypePosixFd || noImports) return kNotSupported;
  const int fd = int(reinterpret_cast<intptr_t>(osHandle));
  struct stat sb;
  if (fd < 0 || fstat(fd, &sb) != 0 || sb.st_size <= 0 || size_t(sb.st_size) % kGranularity != 0) return kInvalid;
  const int own = fcntl(fd, F_DUPFD_CLOEXEC, 0);  // the caller keeps (and closes) its fd
  if (own < 0) return kOutOfMemory;
  std::lock_guard<std::mutex> l(st().mu);
  *h = st().next++;
  st().handles[*h] = Allocation{own, size_t(sb.st_size), type};
  return kOk;
}

int reserve(DevPtr* p, size_t size, size_t alignment, DevPtr, unsigned long long flags) {
  if (!p || size == 0 || size % kGranularity != 0 || flags != 0 || (alignment & (alignment - 1)) != 0) return kInvalid;
  const size_t align = std::max(alignment, kGranularity);
  void* raw = mmap(nullptr, size + align, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (raw == MAP_FAILED) return kOutOfMemory;
  const uintptr_t start = reinterpret_cast<uintptr_t>(raw);
  const uintptr_t base = (start + align - 1) & ~(uintptr_t(align) - 1);
  if (base > start) munmap(raw, base - start);
  if (start + size + align > base + size) munmap(reinterpret_cast<void*>(base + size), start + align - base);
  std::lock_guard<std::mutex> l(st().mu);
  st().reserved[base] = size;
  *p = base;
  return kOk;
}

int map(DevPtr p, size_t size, size_t offset, MemHandle h, unsigned long long flags) {
  if (flags != 0 || offset != 0 || size == 0 || size % kGranularity != 0) return kInvalid;
  std::lock_guard<std::mutex> l(st().mu);
  State& s = st();
  auto a = s.handles.find(h);
  if (a == s.handles.end() || size > a->second.size) return kInvalid;
  if (reservationOf(s, p, size) == s.reserved.end() || overlapsMap(s, p, size)) return kInvalid;
  void* m = mmap(reinterpret_cast<void*>(p), size, PROT_NONE, MAP_SHARED | MAP_FIXED, a->second.fd, 0);
  if (m == MAP_FAILED) return kOutOfMemory;
  s.maps[p] = Mapping{size, h};
  return kOk;
}

int setAccess(DevPtr p, size_t size, const cuda::MemAccessDesc* desc, size_t count) {
  if (!desc || count == 0 || size == 0) return kInvalid;
  int prot = PROT_NONE;
  for (size_t i = 0; i < count; ++i) {
    if (!validDevice(desc[i].location) || desc[i].flags < 0 || desc[i].flags > cuda::kMemAccessReadWrite)
      return kInvalid;
    prot = desc[i].flags == cuda::kMemAccessReadWrite ? PROT_READ | PROT_WRITE : desc[i].flags ? PROT_READ : PROT_NONE;
  }
  std::lock_guard<std::mutex> l(st().mu);
  // Every byte of the range must be mapped: walk the maps that cover it.
  for (uintptr_t at = p; at < p + size;) {
    auto it = st().maps.upper_bound(at);
    if (it == st().maps.begin()) return kInvalid;
    --it;
    if (at >= it->first + it->second.size) return kInvalid;
    at = it->first + it->second.size;
  }
  return mprotect(reinterpret_cast<void*>(p), size, prot) == 0 ? kOk : kInvalid;
}

int unmap(DevPtr p, size_t size) {
  std::lock_guard<std::mutex> l(st().mu);
  auto it = st().maps.find(p);
  if (it == st().maps.end() || it->second.size != size) return kInvalid;  // whole mappings only
  // Back to reserved-but-unmapped address space.
  if (mmap(reinterpret_cast<void*>(p), size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1,
           0) == MAP_FAILED)
    return kInvalid;
  st().maps.erase(it);
  return kOk;
}

int release(MemHandle h) {
  std::lock_guard<std::mutex> l(st().mu);
  auto it = st().handles.find(h);
  if (it == st().handles.end()) return kInvalid;
  close(it->second.fd);  // a live mapping keeps the memory, as the driver's does
  st().handles.erase(it);
  return kOk;
}

int addressFree(DevPtr p, size_t size) {
  std::lock_guard<std::mutex> l(st().mu);
  auto it = st().reserved.find(p);
  if (it == st().reserved.end() || it->second != size || overlapsMap(st(), p, size)) return kInvalid;
  munmap(reinterpret_cast<void*>(p), size);
  st().reserved.erase(it);
  return kOk;
}

}  // namespace

void setFabric(Fabric f) { fabricMode = f; }
Fabric fabric() { return fabricMode; }
int fabricExports() { return fabricExported; }

const std::map<std::string, void*>& entryPoints() {
  static const std::map<std::string, void*> table = {
      {"cuMemGetAllocationGranularity", reinterpret_cast<void*>(&granularity)},
      {"cuMemCreate", reinterpret_cast<void*>(&create)},
      {"cuMemExportToShareableHandle", reinterpret_cast<void*>(&exportHandle)},
      {"cuMemImportFromShareableHandle", reinterpret_cast<void*>(&importHandle)},
      {"cuMemAddressReserve", reinterpret_cast<void*>(&reserve)},
      {"cuMemMap", reinterpret_cast<void*>(&map)},
      {"cuMemSetAccess", reinterpret_cast<void*>(&setAccess)},
      {"cuMemUnmap", reinterpret_cast<void*>(&unmap)},
      {"cuMemRelease", reinterpret_cast<void*>(&release)},
      {"cuMemAddressFree", reinterpret_cast<void*>(&addressFree)},
  };
  return table;
}

bool mapped(uintptr_t p) {
  std::lock_guard<std::mutex> l(st().mu);
  auto it = st().maps.upper_bound(p);
  if (it == st().maps.begin()) return false;
  --it;
  return p < it->first + it->second.size;
}

int live() {
  std::lock_guard<std::mutex> l(st().mu);
  return int(st().handles.size() + st().reserved.size());
}

void setDevices(int n) { devices = n; }
void refuseImports(bool on) { noImports = on; }

void reset() {
  devices = 1;
  noImports = false;
  std::lock_guard<std::mutex> l(st().mu);
  State& s = st();
  for (auto& [p, m] : s.maps) munmap(reinterpret_cast<void*>(p), m.size);
  for (auto& [p, n] : s.reserved) munmap(reinterpret_cast<void*>(p), n);
  for (auto& [h, a] : s.handles) close(a.fd);
  s.maps.clear();
  s.reserved.clear();
  s.handles.clear();
}

}  // namespace hoccl::fakecuda::vmm
