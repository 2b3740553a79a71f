// Device connections between processes of one host (ipc.h).
#include "transport/p2p/ipc.h"

#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <algorithm>
#include <set>

#include "transport/device_conn_mem.h"

namespace hoccl::cuda {
namespace {

MemAllocationProp propOn(int device, int handleType) {
  MemAllocationProp p{};
  p.type = kMemAllocationTypePinned;
  p.requestedHandleTypes = handleType;
  p.location = {kMemLocationTypeDevice, device};
  return p;
}

// Reserves, maps and opens m->handle's `size` bytes for this device.
Status mapHere(const VmmApi& v, int device, VmmMapping* m) {
  HOCCL_TRY(cuCheck(v.memAddressReserve(&m->base, m->size, 0, 0, 0), "cuMemAddressReserve"));
  HOCCL_TRY(cuCheck(v.memMap(m->base, m->size, 0, m->handle, 0), "cuMemMap"));
  m->mapped = true;
  const MemAccessDesc rw{{kMemLocationTypeDevice, device}, kMemAccessReadWrite};
  return cuCheck(v.memSetAccess(m->base, m->size, &rw, 1), "cuMemSetAccess");
}

std::string ranksText(const std::vector<int>& ranks) {
  std::string s;
  for (int r : std::set<int>(ranks.begin(), ranks.end())) s += (s.empty() ? "" : ", ") + std::to_string(r);
  return s;
}

}  // namespace

size_t ipcSlotsOffset() { return (sizeof(DevConnMem) + 255) & ~size_t(255); }

Status vmmCreate(const VmmApi& v, int device, size_t bytes, int handleType, VmmMapping* out, size_t* granularity) {
  *out = VmmMapping();
  const MemAllocationProp prop = propOn(device, handleType);
  const bool fabric = handleType == kMemHandleTypeFabric;
  size_t gran = 0;
  HOCCL_TRY(cuCheck(v.memGetAllocationGranularity(&gran, &prop, kMemAllocGranularityMinimum),
                    fabric ? "cuMemGetAllocationGranularity(fabric)" : "cuMemGetAllocationGranularity(POSIX fd)"));
  if (gran == 0 || (gran & (gran - 1)) != 0)
    return errorf(hocclSystemError, "cuMemGetAllocationGranularity gave %zu, not a power of two", gran);
  *granularity = gran;
  const size_t size = (bytes + gran - 1) & ~(gran - 1);
  HOCCL_TRY(cuCheck(v.memCreate(&out->handle, size, &prop, 0),
                    fabric ? "cuMemCreate(exportable as a fabric handle)" : "cuMemCreate(exportable as a POSIX fd)"));
  out->size = size;
  const Status st = mapHere(v, device, out);
  if (!st.ok()) vmmRelease(v, out);
  return st;
}

namespace {

// Imports `osHandle` (an fd's value, or a pointer to a fabric handle's
// bytes) as `type` and maps its `size` bytes here.
Status importAndMap(const VmmApi& v, int device, void* osHandle, int type, const char* what, size_t size,
                    VmmMapping* out) {
  *out = VmmMapping();
  HOCCL_TRY(cuCheck(v.memImportFromShareableHandle(&out->handle, osHandle, type), what));
  out->size = size;
  const Status st = mapHere(v, device, out);
  if (!st.ok()) vmmRelease(v, out);
  return st;
}

}  // namespace

Status vmmImport(const VmmApi& v, int device, int fd, size_t size, VmmMapping* out) {
  return importAndMap(v, device, reinterpret_cast<void*>(intptr_t(fd)), kMemHandleTypePosixFd,
                      "cuMemImportFromShareableHandle(POSIX fd)", size, out);
}

Status vmmImportFabric(const VmmApi& v, int device, const uint8_t* handle, size_t size, VmmMapping* out) {
  uint8_t copy[kFabricHandleBytes];  // the driver takes a pointer to the handle's bytes
  std::memcpy(copy, handle, sizeof copy);
  return importAndMap(v, device, copy, kMemHandleTypeFabric, "cuMemImportFromShareableHandle(fabric)", size, out);
}

bool fabricUsable(const DeviceApi& api, int device, std::string* why) {
  if (!api.vmm.usable()) {
    *why = "the driver lacks VMM (" + api.vmmMissing + ")";
    return false;
  }
  int supported = 0;
  const int rc = api.deviceGetAttribute(&supported, kDeviceAttributeFabricSupported, device);
  if (rc != kCudaSuccess || !supported) {
    *why = "the driver says GPU " + std::to_string(device) + " has no fabric handles" +
           (rc != kCudaSuccess ? std::string(" (cuDeviceGetAttribute: ") + resultName(rc) + ")" : "");
    return false;
  }
  VmmMapping m;
  size_t gran = 0;
  Status st = vmmCreate(api.vmm, device, 1, kMemHandleTypeFabric, &m, &gran);
  uint8_t handle[kFabricHandleBytes];
  if (st.ok()) st = vmmExportFabric(api.vmm, m, handle);
  vmmRelease(api.vmm, &m);
  if (st.ok()) return true;
  *why = st.message() + "; fabric handles need an IMEX channel (/dev/nvidia-caps-imex-channels)";
  return false;
}

void vmmRelease(const VmmApi& v, VmmMapping* m) {
  if (m->mapped) v.memUnmap(m->base, m->size);
  if (m->base) v.memAddressFree(m->base, m->size);
  if (m->handle) v.memRelease(m->handle);
  *m = VmmMapping();
}

Status vmmExport(const VmmApi& v, const VmmMapping& m, int* fd) {
  *fd = -1;
  return cuCheck(v.memExportToShareableHandle(fd, m.handle, kMemHandleTypePosixFd, 0),
                 "cuMemExportToShareableHandle(POSIX fd)");
}

Status vmmExportFabric(const VmmApi& v, const VmmMapping& m, uint8_t* handle) {
  std::memset(handle, 0, kFabricHandleBytes);
  return cuCheck(v.memExportToShareableHandle(handle, m.handle, kMemHandleTypeFabric, 0),
                 "cuMemExportToShareableHandle(fabric)");
}

namespace {

// Maps m->fd's m->size bytes and registers them for every context.
Status mapShm(const DeviceApi& api, HostShm* m) {
  void* p = mmap(nullptr, m->size, PROT_READ | PROT_WRITE, MAP_SHARED, m->fd, 0);
  if (p == MAP_FAILED) return errorf(hocclSystemError, "mmap of %zu bytes of host shared memory: %s", m->size, strerror(errno));
  m->host = p;
  HOCCL_TRY(cuCheck(api.memHostRegister(p, m->size, kHostRegisterPortableMapped),
                    "cuMemHostRegister(PORTABLE | DEVICEMAP) of host shared memory"));
  m->registered = true;
  return cuCheck(api.memHostGetDevicePointer(&m->dev, p, 0), "cuMemHostGetDevicePointer(host shared memory)");
}

}  // namespace

Status hostShmCreate(const DeviceApi& api, size_t bytes, HostShm* out) {
  *out = HostShm();
  const size_t page = size_t(sysconf(_SC_PAGESIZE));
  out->size = (bytes + page - 1) / page * page;
  out->fd = memfd_create("hoccl-staged-connection", MFD_CLOEXEC);
  if (out->fd < 0) return errorf(hocclSystemError, "memfd_create for a staged connection: %s", strerror(errno));
  Status st;
  if (ftruncate(out->fd, off_t(out->size)) != 0)
    st = errorf(hocclSystemError, "ftruncate of a staged connection's memfd to %zu bytes: %s", out->size,
                strerror(errno));
  if (st.ok()) st = mapShm(api, out);
  if (!st.ok()) hostShmRelease(api, out);
  return st;
}

Status hostShmImport(const DeviceApi& api, int fd, size_t size, HostShm* out) {
  *out = HostShm();
  struct stat sb {};
  if (fstat(fd, &sb) != 0) return errorf(hocclSystemError, "fstat of a staged connection's fd: %s", strerror(errno));
  if (uint64_t(sb.st_size) < size)
    return errorf(hocclRemoteError, "a staged connection's memory is %lld bytes, its message says %zu",
                  static_cast<long long>(sb.st_size), size);
  out->fd = fd;  // the caller's: mapped, not kept
  out->size = size;
  const Status st = mapShm(api, out);
  out->fd = -1;
  if (!st.ok()) hostShmRelease(api, out);
  return st;
}

void hostShmRelease(const DeviceApi& api, HostShm* m) {
  if (m->registered) api.memHostUnregister(m->host);
  if (m->host) munmap(m->host, m->size);
  if (m->fd >= 0) close(m->fd);
  *m = HostShm();
}

Status ipcSend(int fd, const IpcBufferMsg& msg, const std::string& peerSocket, const std::string& peerName,
               const std::function<bool()>& peerGone, const Deadline& dl) {
  FdChannel ch;
  Status st;
  // In short tries, so that a peer that exited is named at once.
  for (;;) {
    st = FdChannel::connect(peerSocket, peerName, Deadline::in(std::min(0.1, dl.remainingMs() / 1000.0)), &ch);
    if (st.ok() || dl.expired()) break;
    if (peerGone())
      return errorf(hocclRemoteError, "device connections: %s exited before taking its connection memory",
                    peerName.c_str());
  }
  HOCCL_TRY(st);
  const std::string bytes = encodeIpcBuffer(msg);
  return ch.send(bytes.data(), bytes.size(), &fd, 1, dl);
}

Status ipcReceive(const DeviceApi& api, int device, const FdListener& listener, int nranks, const std::vector<int>& from,
                  const std::function<bool(int)>& peerGone, const std::function<std::string(int)>& describe,
                  const Deadline& dl, std::vector<IpcReceived>* out, std::map<int, std::string>* unmapped) {
  std::vector<int> waiting = from;
  while (!waiting.empty()) {
    if (!listener.pending(std::min(100, dl.remainingMs()))) {
      for (int r : std::set<int>(waiting.begin(), waiting.end()))
        if (peerGone(r))
          return errorf(hocclRemoteError, "device connections: %s exited before handing over its connection memory",
                        describe(r).c_str());
      if (dl.expired())
        return errorf(hocclRemoteError, "device connections: timed out waiting for the connection memory of rank(s) "
                      "%s", ranksText(waiting).c_str());
      continue;
    }
    FdChannel ch;
    HOCCL_TRY(listener.accept("a rank of rank(s) " + ranksText(waiting), dl, &ch));
    IpcBufferMsg msg;
    std::vector<int> fds;
    HOCCL_TRY(ch.recv(&msg, sizeof msg, 1, &fds, dl).context("device connections"));
    struct CloseFd {
      int fd;
      ~CloseFd() { close(fd); }
    } closeFd{fds[0]};
    HOCCL_TRY(decodeIpcBuffer(&msg, sizeof msg, nranks, &msg).context("device connections"));
    auto it = std::find(waiting.begin(), waiting.end(), msg.to);  // the exporter: the edge's receiver
    if (it == waiting.end())
      return errorf(hocclRemoteError, "device connections: an export for edge %d->%d link %d, from pid %d on %s, "
                    "which this rank does not expect (only from rank(s) %s)", msg.from, msg.to, msg.link, msg.pid,
                    msg.host, ranksText(waiting).c_str());
    if (msg.connBytes != sizeof(DevConnMem))
      return errorf(hocclRemoteError, "device connections: %s's DevConnMem is %llu bytes, this rank's %zu (mixed "
                    "hoccl builds?)", describe(msg.to).c_str(), static_cast<unsigned long long>(msg.connBytes),
                    sizeof(DevConnMem));
    IpcReceived r;
    r.msg = msg;
    Status mapped;
    if (IpcHandle(msg.handleType) == IpcHandle::HostShm)
      mapped = hostShmImport(api, fds[0], msg.size, &r.shm);
    else if (IpcHandle(msg.handleType) == IpcHandle::PosixFd)
      mapped = vmmImport(api.vmm, device, fds[0], msg.size, &r.mapping);
    else
      mapped = errorf(hocclRemoteError, "a %s handle, which this hoccl does not import",
                      ipcHandleName(IpcHandle(msg.handleType)));
    waiting.erase(it);
    if (!mapped.ok() && unmapped) {
      (*unmapped)[msg.to] = mapped.message();
      continue;
    }
    HOCCL_TRY(mapped.context("device connections: mapping " + describe(msg.to) + "'s connection memory"));
    out->push_back(r);
  }
  return Status();
}

}  // namespace hoccl::cuda
