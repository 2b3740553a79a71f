// Device connections between processes of one host (device_ipc.h).
#include "src/exec/cuda/device_ipc.h"

#include <unistd.h>

#include <algorithm>
#include <set>

#include "src/exec/cuda/interp.h"

namespace hoccl::cuda {
namespace {

MemAllocationProp propOn(int device) {
  MemAllocationProp p{};
  p.type = kMemAllocationTypePinned;
  p.requestedHandleTypes = kMemHandleTypePosixFd;
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

Status vmmCreate(const VmmApi& v, int device, size_t bytes, VmmMapping* out, size_t* granularity) {
  *out = VmmMapping();
  const MemAllocationProp prop = propOn(device);
  size_t gran = 0;
  HOCCL_TRY(cuCheck(v.memGetAllocationGranularity(&gran, &prop, kMemAllocGranularityMinimum),
                    "cuMemGetAllocationGranularity(POSIX fd)"));
  if (gran == 0 || (gran & (gran - 1)) != 0)
    return errorf(hocclSystemError, "cuMemGetAllocationGranularity gave %zu, not a power of two", gran);
  *granularity = gran;
  const size_t size = (bytes + gran - 1) & ~(gran - 1);
  HOCCL_TRY(cuCheck(v.memCreate(&out->handle, size, &prop, 0), "cuMemCreate(exportable as a POSIX fd)"));
  out->size = size;
  const Status st = mapHere(v, device, out);
  if (!st.ok()) vmmRelease(v, out);
  return st;
}

Status vmmImport(const VmmApi& v, int device, int fd, size_t size, VmmMapping* out) {
  *out = VmmMapping();
  HOCCL_TRY(cuCheck(v.memImportFromShareableHandle(&out->handle, reinterpret_cast<void*>(intptr_t(fd)),
                                                   kMemHandleTypePosixFd),
                    "cuMemImportFromShareableHandle(POSIX fd)"));
  out->size = size;
  const Status st = mapHere(v, device, out);
  if (!st.ok()) vmmRelease(v, out);
  return st;
}

void vmmRelease(const VmmApi& v, VmmMapping* m) {
  if (m->mapped) v.memUnmap(m->base, m->size);
  if (m->base) v.memAddressFree(m->base, m->size);
  if (m->handle) v.memRelease(m->handle);
  *m = VmmMapping();
}

Status ipcSend(const VmmApi& v, const VmmMapping& m, const IpcBufferMsg& msg, const std::string& peerSocket,
               const std::string& peerName, const std::function<bool()>& peerGone, const Deadline& dl) {
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
  int fd = -1;
  HOCCL_TRY(cuCheck(v.memExportToShareableHandle(&fd, m.handle, kMemHandleTypePosixFd, 0),
                    "cuMemExportToShareableHandle(POSIX fd)"));
  const std::string bytes = encodeIpcBuffer(msg);
  st = ch.send(bytes.data(), bytes.size(), &fd, 1, dl);
  close(fd);  // the message holds its own reference now
  return st;
}

Status ipcReceive(const VmmApi& v, int device, const FdListener& listener, int nranks, const std::vector<int>& from,
                  const std::function<bool(int)>& peerGone, const std::function<std::string(int)>& describe,
                  const Deadline& dl, std::vector<IpcReceived>* out) {
  std::vector<int> waiting = from;
  while (!waiting.empty()) {
    if (!listener.pending(std::min(100, dl.remainingMs()))) {
      for (int r : std::set<int>(waiting.begin(), waiting.end()))
        if (peerGone(r))
          return errorf(hocclRemoteError, "device connections: %s exited before handing over its connection memory",
                        describe(r).c_str());
      if (dl.expired())
        return errorf(hocclRemoteError, "device connections: timed out waiting for the connection memory of rank(s) "
                      "%s (HOCCL_TIMEOUT)", ranksText(waiting).c_str());
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
    HOCCL_TRY(vmmImport(v, device, fds[0], msg.size, &r.mapping)
                  .context("device connections: mapping " + describe(msg.to) + "'s connection memory"));
    out->push_back(r);
    waiting.erase(it);
  }
  return Status();
}

}  // namespace hoccl::cuda
