// The p2p transport's connection memory (p2p.h): allocated by the
// receiving rank of each edge and handed to the sending one.
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <iterator>
#include <mutex>

#include "transport/p2p/p2p.h"

namespace hoccl::cuda {
namespace {

// Bootstrap tags, receiver to sender: a connection's address (a thread of
// this process), and a legacy IPC handle's IpcBufferMsg (another process).
constexpr uint32_t kTagDevConn = 0x60000000;
constexpr uint32_t kTagDevIpc = 0x60000001;

// What the receiver of an edge tells its sender.
struct ConnAddress {
  int32_t from, to, link, reserved;
  uint64_t address;
};

// A connection's memory is used by two ranks' transports: the receiver
// allocated it and the sender writes into it, so it is freed by whichever
// lets go last (after an abort, a peer's launch may still be sending).
struct SharedConn {
  int holders = 0;
  DevPtr slots = 0;     // device memory: the slots' own allocation
  void* host = nullptr;  // staged: the cuMemHostAlloc block (DevConnMem and slots)
};
std::mutex sharedMu;
std::map<DevPtr, SharedConn>& sharedConns() {
  static std::map<DevPtr, SharedConn> conns;
  return conns;
}

}  // namespace

// A connection's memory for a sender of this process: on this GPU, or in
// mapped host memory every context of the process reaches when staged.
Status P2pConnections::makeConn(bool staged, DevPtr* mem) {
  DevConnMem init;
  std::memset(static_cast<void*>(&init), 0, sizeof init);
  init.slotBytes = o_.slotBytes;
  SharedConn shared{1, 0, nullptr};
  if (staged) {
    void* host = nullptr;
    HOCCL_TRY(cuCheck(api_.memHostAlloc(&host, ipcSlotsOffset() + kDevSlots * o_.slotBytes, kHostAllocPortableMapped),
                      "cuMemHostAlloc(PORTABLE | DEVICEMAP) for a staged connection"));
    init.dataOffset = ipcSlotsOffset();
    std::memcpy(host, &init, sizeof init);
    const Status st = cuCheck(api_.memHostGetDevicePointer(mem, host, 0), "cuMemHostGetDevicePointer(connection)");
    if (!st.ok()) {
      api_.memFreeHost(host);
      return st;
    }
    shared.host = host;
  } else {
    DevPtr slots = 0;
    HOCCL_TRY(cuCheck(api_.memAlloc(mem, sizeof(DevConnMem)), "cuMemAlloc(connection)"));
    Status st = cuCheck(api_.memAlloc(&slots, kDevSlots * o_.slotBytes), "cuMemAlloc(connection slots)");
    init.dataOffset = slots - *mem;
    if (st.ok()) st = upload(*mem, &init, sizeof init, "cuMemcpyHtoDAsync(connection)");
    if (!st.ok()) {
      api_.memFree(*mem);
      if (slots) api_.memFree(slots);
      return st;
    }
    shared.slots = slots;
  }
  std::lock_guard<std::mutex> lock(sharedMu);
  sharedConns()[*mem] = shared;
  held_.push_back(*mem);
  return Status();
}

// Receiving ends first: allocate (on this GPU, or in host memory where the
// pair is staged), initialise, tell the sender (over the bootstrap, or as an
// exported fd to another process: exportConn); then
// the addresses of the sending ends, from their receivers (importConns for
// those in other processes). Sends do not wait for the peer, so every rank
// can post all of its own before reading any.
Status P2pConnections::connect(const std::vector<DeviceEdge>& edges) {
  const Status st = connectEdges(edges);
  if (!st.ok())  // the next call asks again for what did not arrive
    for (auto it = conns_.begin(); it != conns_.end();) it = it->second == 0 ? conns_.erase(it) : std::next(it);
  return st;
}

Status P2pConnections::connectEdges(const std::vector<DeviceEdge>& edges) {
  std::map<int, int> wanted;  // peer -> sending ends it still owes us
  std::vector<int> exporters;  // the same, from other processes (as an fd): one entry per edge
  std::vector<int> byHandle;   // the same, as a fabric or legacy IPC handle over the bootstrap
  for (const DeviceEdge& e : edges) {
    const auto key = std::make_tuple(e.from, e.to, e.link);
    if (conns_.count(key)) continue;
    if (e.to != rank_) {
      if (sameProcess(e.to))
        ++wanted[e.to];
      else if (ipc_ != Ipc::Fd && !staged(rank_, e.to))
        byHandle.push_back(e.to);
      else
        exporters.push_back(e.to);
      conns_[key] = 0;  // filled below
      continue;
    }
    if (e.from != rank_ && !sameProcess(e.from)) {
      HOCCL_TRY(exportConn(e, &conns_[key]));
      continue;
    }
    DevPtr mem = 0;
    HOCCL_TRY(makeConn(staged(e.from, rank_), &mem));
    conns_[key] = mem;
    if (e.from == rank_) continue;  // a rank's edge to itself
    const ConnAddress a{e.from, e.to, e.link, 0, mem};
    HOCCL_TRY(oob_->send(e.from, kTagDevConn, &a, sizeof a).context("device connection to rank " +
                                                                     std::to_string(e.from)));
  }
  Status st;
  for (auto& [peer, owed] : wanted) {
    for (; st.ok() && owed > 0; --owed) {
      std::string msg;
      st = oob_->recv(peer, kTagDevConn, &msg).context("device connection from rank " + std::to_string(peer));
      ConnAddress a{};
      if (st.ok() && msg.size() != sizeof a)
        st = errorf(hocclInternalError, "device connection: a %zu-byte message from rank %d", msg.size(), peer);
      if (!st.ok()) break;
      std::memcpy(&a, msg.data(), sizeof a);
      auto it = conns_.find(std::make_tuple(a.from, a.to, a.link));
      if (a.from != rank_ || a.to != peer || it == conns_.end() || it->second != 0) {
        st = errorf(hocclInternalError, "device connection: rank %d sent the address of edge %d->%d link %d, "
                    "which rank %d did not ask for", peer, a.from, a.to, a.link, rank_);
        break;
      }
      std::lock_guard<std::mutex> lock(sharedMu);
      auto shared = sharedConns().find(a.address);
      if (shared == sharedConns().end()) {
        st = errorf(hocclInternalError, "device connection: rank %d's memory for edge %d->%d link %d is already "
                    "freed (its communicator was destroyed)", peer, a.from, a.to, a.link);
        break;
      }
      ++shared->second.holders;
      held_.push_back(a.address);
      it->second = a.address;
    }
  }
  if (st.ok() && !(exporters.empty() && byHandle.empty())) st = importConns(exporters, byHandle);
  return st;
}

std::string P2pConnections::describePeer(int peer) const {
  const DevicePeer& p = o_.peers[size_t(peer)];
  return "rank " + std::to_string(peer) + " (pid " + std::to_string(p.pid) + " on " + p.host + ")";
}

// The receiving end of edge e, whose sender is another process of this
// host: one allocation (the DevConnMem, then the slots) made here and
// handed to the sender: VMM memory as an fd, or for a staged pair a memfd
// both register as host memory (over the fd socket), or with
// HOCCL_DEVICE_IPC=fabric VMM memory as a fabric handle, or with legacy
// cuMemAlloc memory as a cuIpc handle (both over the bootstrap:
// exportByHandle). *mem is the DevConnMem here.
Status P2pConnections::exportConn(const DeviceEdge& e, DevPtr* mem) {
  const std::string peer = describePeer(e.from);
  const size_t slotsOffset = ipcSlotsOffset();
  // A self-test's buffer is one 2 MiB allocation (VMM's usual granularity;
  // legacy IPC hands out whole allocations, and one that size shares its
  // pages with no other): the test uses its first kRoundTripBytes.
  const size_t slotsBytes = e.link == kProbeLink ? (size_t(2) << 20) - slotsOffset : kDevSlots * o_.slotBytes;
  DevConnMem init;
  std::memset(static_cast<void*>(&init), 0, sizeof init);
  init.dataOffset = slotsOffset;
  init.slotBytes = o_.slotBytes;
  IpcBufferMsg msg;
  msg.connOffset = 0;
  msg.connBytes = sizeof(DevConnMem);
  msg.slotsOffset = slotsOffset;
  msg.slotsBytes = slotsBytes;
  msg.from = e.from;
  msg.to = e.to;
  msg.link = e.link;
  msg.pid = getpid();
  gethostname(msg.host, sizeof msg.host - 1);
  const bool isStaged = staged(e.from, rank_);
  if (ipc_ != Ipc::Fd && !isStaged) return exportByHandle(e, init, &msg, mem);
  DevPtr base = 0;
  int fd = -1;
  if (isStaged) {
    HostShm m;
    HOCCL_TRY(hostShmCreate(api_, slotsOffset + slotsBytes, &m).context("staged connection memory for " + peer));
    std::memcpy(m.host, &init, sizeof init);
    fd = m.fd;
    m.fd = -1;
    shmMaps_.push_back(m);  // released with the executor
    msg.handleType = uint16_t(IpcHandle::HostShm);
    msg.size = m.size;
    msg.granularity = uint64_t(sysconf(_SC_PAGESIZE));
    base = m.dev;
  } else {
    VmmMapping m;
    HOCCL_TRY(vmmConn(kMemHandleTypePosixFd, init, peer, &msg, &m));
    HOCCL_TRY(vmmExport(api_.vmm, m, &fd));
    base = m.base;
  }
  Status sent = ipcSend(fd, msg, fdSocketName(&socketKey_, sizeof socketKey_, e.from), peer,
                        [&] { return peerGone(e.from); }, Deadline::in(o_.timeoutSec));
  close(fd);  // the message held its own reference
  HOCCL_TRY(sent.context("device connection to " + peer));
  *mem = base;
  return Status();
}

Status P2pConnections::exportByHandle(const DeviceEdge& e, const DevConnMem& init, IpcBufferMsg* msg, DevPtr* mem) {
  if (ipc_ == Ipc::Fabric) {
    VmmMapping m;
    HOCCL_TRY(vmmConn(kMemHandleTypeFabric, init, describePeer(e.from), msg, &m));
    static_assert(kFabricHandleBytes == sizeof msg->handle, "CUmemFabricHandle fits the message");
    HOCCL_TRY(vmmExportFabric(api_.vmm, m, msg->handle));
    msg->handleType = uint16_t(IpcHandle::Fabric);
    *mem = m.base;
  } else {
    HOCCL_TRY(exportLegacy(init, msg, mem));
  }
  const std::string bytes = encodeIpcBuffer(*msg);
  return oob_->send(e.from, kTagDevIpc, bytes.data(), bytes.size())
      .context(std::string("device connection (") + ipcHandleName(IpcHandle(msg->handleType)) + " handle) to " +
               describePeer(e.from));
}

// A connection's VMM memory, exportable as `handleType`, mapped here (and
// released with the executor) with its DevConnMem uploaded; msg gets its
// size and granularity.
Status P2pConnections::vmmConn(int handleType, const DevConnMem& init, const std::string& peer, IpcBufferMsg* msg,
                               VmmMapping* m) {
  size_t granularity = 0;
  HOCCL_TRY(vmmCreate(api_.vmm, device_, msg->slotsOffset + msg->slotsBytes, handleType, m, &granularity)
                .context("device connection memory for " + peer));
  ipcMaps_.push_back(*m);
  HOCCL_TRY(upload(m->base, &init, sizeof init, "cuMemcpyHtoDAsync(connection)"));
  msg->size = m->size;
  msg->granularity = granularity;
  return Status();
}

Status P2pConnections::exportLegacy(const DevConnMem& init, IpcBufferMsg* msg, DevPtr* mem) {
  constexpr size_t kPage = 4096;
  const size_t size = (msg->slotsOffset + msg->slotsBytes + kPage - 1) / kPage * kPage;
  DevPtr a = 0;
  HOCCL_TRY(cuCheck(api_.memAlloc(&a, size), "cuMemAlloc(connection memory for legacy IPC)"));
  ipcExported_.push_back(a);  // freed with the executor
  HOCCL_TRY(upload(a, &init, sizeof init, "cuMemcpyHtoDAsync(connection)"));
  IpcMemHandle h;
  HOCCL_TRY(cuCheck(api_.ipc.ipcGetMemHandle(&h, a), "cuIpcGetMemHandle(connection memory)"));
  static_assert(sizeof h == sizeof msg->handle, "CUipcMemHandle fits the message");
  std::memcpy(msg->handle, &h, sizeof h);
  msg->handleType = uint16_t(IpcHandle::LegacyIpc);
  msg->size = size;
  msg->granularity = kPage;
  *mem = a;
  return Status();
}

// The sending ends whose memory other processes export, one per entry of
// `exporters` (as fds) and of `byHandle` (fabric or legacy IPC handles),
// mapped here.
Status P2pConnections::importConns(const std::vector<int>& exporters, const std::vector<int>& byHandle,
                                   std::map<int, std::string>* unmapped) {
  std::vector<IpcReceived> got;
  Status st;
  const Deadline dl = Deadline::in(o_.timeoutSec);
  if (!exporters.empty())
    st = ipcReceive(
        api_, device_, fdListener_, nranks_, exporters, [this](int r) { return peerGone(r); },
        [this](int r) { return describePeer(r); }, dl, &got, unmapped);
  if (!st.ok() && dl.expired()) {  // the wait's bound, and what set it
    char bound[96];
    snprintf(bound, sizeof bound, " within %g s (%s)", o_.timeoutSec, o_.timeoutFrom);
    st = Status(st.code(), st.message() + bound);
  }
  for (const IpcReceived& r : got) {
    if (r.shm.dev) shmMaps_.push_back(r.shm);
    else ipcMaps_.push_back(r.mapping);
  }
  HOCCL_TRY(st);
  const IpcHandle want = ipc_ == Ipc::Fabric ? IpcHandle::Fabric : IpcHandle::LegacyIpc;
  for (int peer : byHandle) {
    std::string bytes;
    HOCCL_TRY(oob_->recv(peer, kTagDevIpc, &bytes).context(std::string("device connection (") + ipcHandleName(want) +
                                                           " handle) from " + describePeer(peer)));
    IpcReceived r;
    HOCCL_TRY(decodeIpcBuffer(bytes.data(), bytes.size(), nranks_, &r.msg)
                  .context("device connection from " + describePeer(peer)));
    if (IpcHandle(r.msg.handleType) != want || r.msg.to != peer)
      return errorf(hocclRemoteError, "device connection: %s sent a %s handle for edge %d->%d, where a %s "
                    "handle of its own was expected (HOCCL_DEVICE_IPC differs?)", describePeer(peer).c_str(),
                    ipcHandleName(IpcHandle(r.msg.handleType)), r.msg.from, r.msg.to, ipcHandleName(want));
    Status mapped;
    if (want == IpcHandle::Fabric) {
      mapped = vmmImportFabric(api_.vmm, device_, r.msg.handle, r.msg.size, &r.mapping);
      if (r.mapping.handle) ipcMaps_.push_back(r.mapping);
    } else {
      IpcMemHandle h;
      std::memcpy(&h, r.msg.handle, sizeof h);
      mapped = cuCheck(api_.ipc.ipcOpenMemHandle(&r.mapping.base, h, kIpcLazyEnablePeerAccess),
                       "cuIpcOpenMemHandle");
      if (mapped.ok()) ipcOpened_.push_back(r.mapping.base);
    }
    if (!mapped.ok() && unmapped) {
      (*unmapped)[peer] = mapped.message();
      continue;
    }
    HOCCL_TRY(mapped.context("device connections: mapping " + describePeer(peer) + "'s connection memory"));
    got.push_back(r);
  }
  for (const IpcReceived& r : got) {
    auto it = conns_.find(std::make_tuple(r.msg.from, r.msg.to, r.msg.link));
    if (r.msg.from != rank_ || it == conns_.end() || it->second != 0)
      return errorf(hocclInternalError, "device connection: %s exported edge %d->%d link %d, which rank %d did "
                    "not ask for", describePeer(r.msg.to).c_str(), r.msg.from, r.msg.to, r.msg.link, rank_);
    it->second = r.base() + r.msg.connOffset;
  }
  return Status();
}

// Memory this rank shares with a peer of this process is freed by the last
// of the two to let go; the rest is this rank's own mapping of memory the
// driver frees once every process has let go. The executor destroys this
// only after its launches ended.
P2pConnections::~P2pConnections() {
  for (DevPtr p : ipcOpened_) api_.ipc.ipcCloseMemHandle(p);
  for (DevPtr p : ipcExported_) api_.memFree(p);
  for (VmmMapping& m : ipcMaps_) vmmRelease(api_.vmm, &m);
  for (HostShm& m : shmMaps_) hostShmRelease(api_, &m);
  std::lock_guard<std::mutex> lock(sharedMu);
  for (DevPtr mem : held_) {
    auto it = sharedConns().find(mem);
    if (it == sharedConns().end() || --it->second.holders > 0) continue;
    if (it->second.host) {
      api_.memFreeHost(it->second.host);
    } else {
      api_.memFree(it->second.slots);
      api_.memFree(mem);
    }
    sharedConns().erase(it);
  }
  for (int peer : peerRetained_) api_.devicePrimaryCtxRelease(peer);
}

DevPtr P2pConnections::conn(const DeviceEdge& e) const {
  const auto it = conns_.find(std::make_tuple(e.from, e.to, e.link));
  return it == conns_.end() ? 0 : it->second;
}

// The receiver's initial DevConnMem, written into device memory before any
// sender can see it: on the executor's set-up stream, waited for (a copy
// from pageable memory may return before the data is on the device).
Status P2pConnections::upload(DevPtr dst, const void* src, size_t bytes, const char* what) {
  HOCCL_TRY(cuCheck(api_.memcpyHtoDAsync(dst, src, bytes, o_.setupStream), what));
  return cuCheck(api_.streamSynchronize(o_.setupStream), "cuStreamSynchronize(setup uploads)");
}

}  // namespace hoccl::cuda
