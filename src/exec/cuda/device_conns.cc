// Device connections (device_executor.h): which pairs of ranks write into
// each other's GPU memory directly and which stage through host memory,
// and the connection memory itself, allocated by the receiving rank and
// shared with the sending one.
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <iterator>

#include "src/base/log.h"
#include "src/exec/cuda/device_executor.h"
#include "src/exec/cuda/peer_access.h"
#include "src/topo/nvml.h"

namespace hoccl::cuda {
namespace {

// Bootstrap tags, receiver to sender: a connection's address (a thread of
// this process), and a legacy IPC handle's IpcBufferMsg (another process).
constexpr uint32_t kTagDevConn = 0x60000000;
constexpr uint32_t kTagDevIpc = 0x60000001;

// The link number of the peer-path self-test's buffers (probePeers), which
// travel as connections do; no plan has this many links.
constexpr int32_t kProbeLink = 0x7fffffff;

// What the receiver of an edge tells its sender.
struct ConnAddress {
  int32_t from, to, link, reserved;
  uint64_t address;
};

// A connection's memory is used by two ranks' executors: the receiver
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

// Whether this rank's kernels can write into each rank's GPU memory: yes
// on its own GPU; for another GPU of this process, if peer access could be
// enabled; for a GPU of another process, if this process sees that GPU (by
// PCI bus id) and the driver gives peer access to it. HOCCL_P2P_DISABLE:
// no other rank. *why has the reason for each no.
Status DeviceExecutor::reachRow(const Driver& d, std::vector<uint8_t>* row, std::map<int, std::string>* why) {
  row->assign(size_t(nranks_), 1);
  std::map<int, std::string> noPeer;  // by GPU of this process
  HOCCL_TRY(enablePeerAccess(api_, device_, peerDevices_, settings_.p2pCheck, &peerRetained_, &noPeer));
  const RankGpu& me = rankGpus_[size_t(rank_)];
  for (int r = 0; r < nranks_; ++r) {
    if (r == rank_) continue;
    const RankGpu& other = rankGpus_[size_t(r)];
    std::string& reason = (*why)[r];
    if (settings_.p2pDisable) {
      reason = "HOCCL_P2P_DISABLE=1";
    } else if (owner_->sameProcess(r)) {
      if (other.device == device_ || !noPeer.count(other.device)) continue;
      reason = noPeer[other.device];
    } else if (me.bus.empty() || other.bus.empty() || me.bus == other.bus) {
      continue;  // one GPU, or unknown: VMM mapping as before
    } else {
      int count = 0, local = -1;
      if (d.api.deviceGetCount && d.api.deviceGetCount(&count) == kCudaSuccess)
        for (int i = 0; i < count && local < 0; ++i) {
          char bus[32] = {};
          int dev = 0;
          if (d.api.deviceGet(&dev, i) == kCudaSuccess &&
              d.api.deviceGetPciBusId(bus, sizeof bus - 1, dev) == kCudaSuccess && other.bus == bus)
            local = i;
        }
      int can = 0;
      if (local >= 0)
        HOCCL_TRY(cuCheck(api_.deviceCanAccessPeer(&can, device_, local), "cuDeviceCanAccessPeer"));
      // A GPU this process sees needs the driver's yes and then the test;
      // one it does not see (CUDA_VISIBLE_DEVICES) only the test, which
      // wrote into memory of that GPU through the same kind of mapping.
      const auto test = probed_.find(r);
      if (local >= 0 && !can)
        reason = "cuDeviceCanAccessPeer says GPU " + me.bus + " has no peer access to GPU " + other.bus +
                 " (no NVLink or PCIe peer path, or ACS/IOMMU forbids it)";
      else if (test != probed_.end() && test->second.empty())
        continue;
      else if (test != probed_.end())
        reason = test->second + " (HOCCL_P2P_CHECK=0 skips the test)";
      else if (local >= 0)
        continue;  // HOCCL_P2P_CHECK=0
      else if (const topo::P2pAnswer nvml = topo::p2pWrite(topo::processNvml(), me.bus, other.bus);
               nvml.kind == topo::P2pAnswer::Yes)
        continue;  // HOCCL_P2P_CHECK=0, and NVML, which sees every GPU, says yes
      else
        reason = "its GPU (" + other.bus + ") is not visible to this process (CUDA_VISIBLE_DEVICES?), " +
                 (nvml.kind == topo::P2pAnswer::No ? nvml.why : "and NVML could not say whether it is reachable (" +
                                                                   nvml.why + ")") +
                 ", and HOCCL_P2P_CHECK=0 skips the test that could show this rank's GPU reaches it";
    }
    (*row)[size_t(r)] = 0;
  }
  for (auto it = why->begin(); it != why->end();) it = it->second.empty() ? why->erase(it) : std::next(it);
  return Status();
}

// Every rank's row of reachRow, so that both ends of a pair agree on where
// its connections live (the receiver allocates, for the sender's row). A
// rank whose row failed marks its own entry 2, and every rank refuses.
Status DeviceExecutor::sharePaths(const Driver& d) {
  const size_t n = size_t(nranks_);
  std::vector<uint8_t> row;
  std::map<int, std::string> why;
  direct_.assign(n * n, 1);  // the self-test's buffers are not staged
  const size_t maps = ipcMaps_.size(), exported = ipcExported_.size(), opened = ipcOpened_.size();
  Status mine = probePeers(&probed_);
  if (mine.ok()) mine = reachRow(d, &row, &why);
  if (mine.ok()) std::memcpy(&direct_[size_t(rank_) * n], row.data(), n);
  else direct_[size_t(rank_) * n + size_t(rank_)] = 2;
  const Status shared = oob_->allGather(direct_.data(), n).context("device setup: sharing which GPUs reach which");
  // Every rank has tested the buffers it imported once it joined the
  // allgather, so each can let go of those it exported.
  if (shared.ok()) releaseProbes(maps, exported, opened);
  HOCCL_TRY(shared);
  HOCCL_TRY(mine);
  for (size_t r = 0; r < n; ++r)
    if (direct_[r * n + r] == 2)
      return errorf(hocclInvalidUsage, "device buffers: rank %zu could not tell which GPUs it reaches (its error "
                    "names the call that failed)", r);
  for (uint8_t v : direct_) oneGpu_ = oneGpu_ && v;  // host memory: system scope
  if (settings_.p2pDisable && !why.empty()) {
    HINFO(kSubAll, "rank %d: HOCCL_P2P_DISABLE=1: device connections to other ranks stage through host memory",
          rank_);
  } else {
    for (const auto& [r, reason] : why)
      HWARN(kSubAll, "device buffers: rank %d (GPU %s) cannot write into rank %d's GPU (%s): %s; their connections "
            "stage through host memory, which is slower", rank_, rankGpus_[size_t(rank_)].bus.c_str(), r,
            rankGpus_[size_t(r)].bus.c_str(), reason.c_str());
  }
  return Status();
}

// The ranks of other processes on other GPUs (by PCI bus id): the pairs
// whose path the self-test checks (probePeers), the same set seen from
// either end.
std::vector<int> DeviceExecutor::probeTargets() const {
  std::vector<int> out;
  const std::string& mine = rankGpus_[size_t(rank_)].bus;
  for (int r = 0; r < nranks_; ++r) {
    const std::string& theirs = rankGpus_[size_t(r)].bus;
    if (r != rank_ && !owner_->sameProcess(r) && !mine.empty() && !theirs.empty() && theirs != mine)
      out.push_back(r);
  }
  return out;
}

// The peer-path self-test between processes (HOCCL_P2P_CHECK). Each rank
// hands every probeTargets rank that runs the test a buffer of its own
// GPU's memory, the way it hands over connection memory (a VMM fd, fabric
// or legacy IPC handle). The ranks then share which buffers went out, so
// that each takes exactly those sent to it (none is left queued for a
// later connection, and none is awaited from a rank whose export failed).
// Each maps the buffers it was given and copies 64 KiB into each and back
// (copyRoundTrip). (*probed)[r] says why this rank cannot write into r's
// GPU: the buffer could not be mapped here, or the data came back wrong;
// "" if it came back intact. Only where this rank runs the test. The
// buffers are released by sharePaths once every rank has answered.
// Every rank calls it where some rank is another process (the allgather).
Status DeviceExecutor::probePeers(std::map<int, std::string>* probed) {
  probed->clear();
  if (!otherProcesses_) return Status();
  const size_t n = size_t(nranks_);
  const std::vector<int> peers = probeTargets();
  std::vector<uint8_t> sent(n * n, 0);  // [exporter * n + importer]
  Status mine;
  for (int r : peers) {
    if (!probing_[size_t(r)]) continue;
    DevPtr mem = 0;
    mine = exportConn(DeviceEdge{r, rank_, kProbeLink}, &mem);
    if (!mine.ok()) break;
    sent[size_t(rank_) * n + size_t(r)] = 1;
  }
  HOCCL_TRY(oob_->allGather(sent.data(), n).context("device setup: sharing the peer-path self-test's buffers"));
  HOCCL_TRY(mine.context("device setup: the peer-path self-test"));
  std::vector<int> from;
  for (int r : peers)
    if (sent[size_t(r) * n + size_t(rank_)]) from.push_back(r);
  std::map<int, std::string> unmapped;
  for (int r : from) conns_[std::make_tuple(rank_, r, kProbeLink)] = 0;
  Status st = from.empty()           ? Status()
              : ipc_ == Ipc::Fd ? importConns(from, {}, &unmapped)
                                     : importConns({}, from, &unmapped);
  std::map<int, DevPtr> at;
  for (int r : from) {
    auto key = std::make_tuple(rank_, r, kProbeLink);
    at[r] = conns_[key];
    conns_.erase(key);
  }
  HOCCL_TRY(st.context("device setup: the peer-path self-test"));
  if (!probing_[size_t(rank_)]) return Status();
  for (int r : peers) {
    std::string& why = (*probed)[r];
    if (!at.count(r)) {
      why = "rank " + std::to_string(r) + " handed over no buffer for the test (its error says why)";
      continue;
    }
    if (unmapped.count(r) || at[r] == 0) {
      why = "its GPU memory could not be mapped here: " + unmapped[r];
      continue;
    }
    bool stuck = false;
    why = copyRoundTrip(api_, at[r] + ipcSlotsOffset(), uint32_t(rank_ << 16 | r), 5, &stuck);
    if (stuck) probeStuck_ = true;
    if (!why.empty()) why = "the peer-path self-test into its GPU memory failed: " + why;
  }
  return Status();
}

// Releases what probePeers mapped and exported: the entries past the given
// sizes (after a copy that never finished, nothing: a leak, not a free
// under a running copy).
void DeviceExecutor::releaseProbes(size_t maps, size_t exported, size_t opened) {
  if (probeStuck_) return;
  for (size_t i = opened; i < ipcOpened_.size(); ++i) api_.ipc.ipcCloseMemHandle(ipcOpened_[i]);
  for (size_t i = exported; i < ipcExported_.size(); ++i) api_.memFree(ipcExported_[i]);
  for (size_t i = maps; i < ipcMaps_.size(); ++i) vmmRelease(api_.vmm, &ipcMaps_[i]);
  ipcOpened_.resize(opened);
  ipcExported_.resize(exported);
  ipcMaps_.resize(maps);
}

// A connection's memory for a sender of this process: on this GPU, or in
// mapped host memory every context of the process reaches when staged.
Status DeviceExecutor::makeConn(bool staged, DevPtr* mem) {
  DevConnMem init;
  std::memset(static_cast<void*>(&init), 0, sizeof init);
  init.slotBytes = slotBytes_;
  SharedConn shared{1, 0, nullptr};
  if (staged) {
    void* host = nullptr;
    HOCCL_TRY(cuCheck(api_.memHostAlloc(&host, ipcSlotsOffset() + kDevSlots * slotBytes_, kHostAllocPortableMapped),
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
    Status st = cuCheck(api_.memAlloc(&slots, kDevSlots * slotBytes_), "cuMemAlloc(connection slots)");
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
Status DeviceExecutor::connect(const std::vector<DeviceEdge>& edges) {
  const Status st = connectEdges(edges);
  if (!st.ok())  // the next call asks again for what did not arrive
    for (auto it = conns_.begin(); it != conns_.end();) it = it->second == 0 ? conns_.erase(it) : std::next(it);
  return st;
}

Status DeviceExecutor::connectEdges(const std::vector<DeviceEdge>& edges) {
  std::map<int, int> wanted;  // peer -> sending ends it still owes us
  std::vector<int> exporters;  // the same, from other processes (as an fd): one entry per edge
  std::vector<int> byHandle;   // the same, as a fabric or legacy IPC handle over the bootstrap
  for (const DeviceEdge& e : edges) {
    const auto key = std::make_tuple(e.from, e.to, e.link);
    if (conns_.count(key)) continue;
    if (e.to != rank_) {
      if (owner_->sameProcess(e.to))
        ++wanted[e.to];
      else if (ipc_ != Ipc::Fd && !staged(rank_, e.to))
        byHandle.push_back(e.to);
      else
        exporters.push_back(e.to);
      conns_[key] = 0;  // filled below
      continue;
    }
    if (e.from != rank_ && !owner_->sameProcess(e.from)) {
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

std::string DeviceExecutor::describePeer(int peer) const {
  const PeerInfo info = owner_->peerInfo(peer);
  return "rank " + std::to_string(peer) + " (pid " + std::to_string(info.pid) + " on " + info.host + ")";
}

// The receiving end of edge e, whose sender is another process of this
// host: one allocation (the DevConnMem, then the slots) made here and
// handed to the sender: VMM memory as an fd, or for a staged pair a memfd
// both register as host memory (over the fd socket), or with
// HOCCL_DEVICE_IPC=fabric VMM memory as a fabric handle, or with legacy
// cuMemAlloc memory as a cuIpc handle (both over the bootstrap:
// exportByHandle). *mem is the DevConnMem here.
Status DeviceExecutor::exportConn(const DeviceEdge& e, DevPtr* mem) {
  const std::string peer = describePeer(e.from);
  const size_t slotsOffset = ipcSlotsOffset();
  // A self-test's buffer is one 2 MiB allocation (VMM's usual granularity;
  // legacy IPC hands out whole allocations, and one that size shares its
  // pages with no other): the test uses its first kRoundTripBytes.
  const size_t slotsBytes = e.link == kProbeLink ? (size_t(2) << 20) - slotsOffset : kDevSlots * slotBytes_;
  DevConnMem init;
  std::memset(static_cast<void*>(&init), 0, sizeof init);
  init.dataOffset = slotsOffset;
  init.slotBytes = slotBytes_;
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
                        [&] { return owner_->peerProcessGone(e.from); }, Deadline::in(timeoutSec_));
  close(fd);  // the message held its own reference
  HOCCL_TRY(sent.context("device connection to " + peer));
  *mem = base;
  return Status();
}

Status DeviceExecutor::exportByHandle(const DeviceEdge& e, const DevConnMem& init, IpcBufferMsg* msg, DevPtr* mem) {
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
Status DeviceExecutor::vmmConn(int handleType, const DevConnMem& init, const std::string& peer, IpcBufferMsg* msg,
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

Status DeviceExecutor::exportLegacy(const DevConnMem& init, IpcBufferMsg* msg, DevPtr* mem) {
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
Status DeviceExecutor::importConns(const std::vector<int>& exporters, const std::vector<int>& byHandle,
                                   std::map<int, std::string>* unmapped) {
  std::vector<IpcReceived> got;
  Status st;
  const Deadline dl = Deadline::in(timeoutSec_);
  if (!exporters.empty())
    st = ipcReceive(
        api_, device_, fdListener_, nranks_, exporters, [this](int r) { return owner_->peerProcessGone(r); },
        [this](int r) { return describePeer(r); }, dl, &got, unmapped);
  if (!st.ok() && dl.expired()) {  // the wait's bound, and what set it
    char bound[96];
    snprintf(bound, sizeof bound, " within %g s (%s)", timeoutSec_, timeoutFrom_);
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

void DeviceExecutor::releaseConns() {
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
}

}  // namespace hoccl::cuda
