// The p2p transport's paths (p2p.h): which pairs of ranks write into each
// other's GPU memory directly and which stage through host memory, and how
// connection memory crosses processes.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <iterator>

#include "base/log.h"
#include "base/random.h"
#include "transport/p2p/p2p.h"
#include "transport/p2p/peer_access.h"

namespace hoccl::cuda {

P2pConnections::P2pConnections(const DeviceConnOptions& o)
    : o_(o), api_(*o.api), oob_(o.oob), rank_(o.oob->rank()), nranks_(o.oob->nranks()), device_(o.device) {
  for (int p = 0; p < nranks_; ++p) {
    const DevicePeer& peer = o_.peers[size_t(p)];
    if (!peer.sameProcess) {
      otherProcesses_ = true;
      continue;
    }
    // Ranks of this process on other GPUs: this rank's kernels write into
    // their connection memory, so its context needs peer access (reachRow).
    if (p != rank_ && peer.device != device_ &&
        std::find(peerDevices_.begin(), peerDevices_.end(), peer.device) == peerDevices_.end())
      peerDevices_.push_back(peer.device);
  }
}

Status P2pConnections::open(const DeviceConnOptions& o, std::unique_ptr<DeviceConnections>* out) {
  if (!o.api || !o.oob || !o.driver || o.peers.size() != size_t(o.oob->nranks()))
    return Status(hocclInternalError, "p2p device transport: opened without a driver, a bootstrap or every rank");
  std::unique_ptr<P2pConnections> c(new P2pConnections(o));
  HOCCL_TRY(c->chooseIpc());
  HOCCL_TRY(c->sharePaths());
  *out = std::move(c);
  return Status();
}

// NVML's answer, where the owner gave a way to ask it.
PeerWriteAnswer P2pConnections::peerWrite(const std::string& fromBus, const std::string& toBus) const {
  if (o_.peerWrite) return o_.peerWrite(fromBus, toBus);
  return PeerWriteAnswer{PeerWriteAnswer::Unknown, "no NVML answer was asked for"};
}

// Where some rank is another process, every rank learns how each can share
// GPU memory with others, and all take the same way (HOCCL_DEVICE_IPC); a
// nonce of rank 0's names this communicator's fd sockets. No rank does
// this where all are threads of one process: all of them know that alike.
Status P2pConnections::chooseIpc() {
  probing_.assign(size_t(nranks_), 0);
  if (!otherProcesses_) return Status();
  struct Entry {
    uint64_t nonce;   // rank 0's names the fd sockets
    int32_t ipcCaps;  // kIpcVmm | kIpcLegacy | kIpcFabric: how the driver shares memory between processes
    int32_t probing;  // runs the peer-path self-test (probePeers)
  };
  static_assert(sizeof(Entry) == 16, "Entry has no padding");
  constexpr int32_t kIpcVmm = 1, kIpcLegacy = 2, kIpcFabric = 4;
  const DeviceConnSettings& s = o_.settings;
  std::string noFabric;  // why this rank cannot use fabric handles (asked only where they are wanted)
  const bool fabric = s.ipc == "fabric" && fabricUsable(api_, device_, &noFabric);
  std::vector<Entry> all(static_cast<size_t>(nranks_));
  all[size_t(rank_)] = Entry{randomU64(),
                             (api_.vmm.usable() ? kIpcVmm : 0) | (api_.ipc.usable() ? kIpcLegacy : 0) |
                                 (fabric ? kIpcFabric : 0),
                             s.p2pCheck && !s.p2pDisable};
  HOCCL_TRY(oob_->allGather(all.data(), sizeof(Entry))
                .context("device setup: sharing how each rank shares GPU memory with other processes"));
  socketKey_ = all[0].nonce;
  int32_t caps = kIpcVmm | kIpcLegacy | kIpcFabric;
  std::string without;  // the ranks without fabric handles
  for (int r = 0; r < nranks_; ++r) {
    caps &= all[size_t(r)].ipcCaps;
    if (!(all[size_t(r)].ipcCaps & kIpcFabric)) without += (without.empty() ? "" : ", ") + std::to_string(r);
    probing_[size_t(r)] = all[size_t(r)].probing != 0;
  }
  const std::string& want = s.ipc;
  if (want == "fabric") {
    if (!(caps & kIpcFabric))
      return Status(hocclSystemError, "device buffers: HOCCL_DEVICE_IPC=fabric, but rank(s) " + without +
                                          " cannot share GPU memory by fabric handle" +
                                          (noFabric.empty() ? "" : " (here: " + noFabric + ")") +
                                          "; HOCCL_DEVICE_IPC=fd or auto shares it by POSIX fd instead");
    ipc_ = Ipc::Fabric;
  } else if ((want == "auto" || want == "fd") && (caps & kIpcVmm)) {
    ipc_ = Ipc::Fd;
  } else if ((want == "auto" || want == "legacy") && (caps & kIpcLegacy)) {
    ipc_ = Ipc::Legacy;
  } else {
    const bool fd = want != "legacy";
    return Status(hocclSystemError,
                  "device buffers: ranks in other processes of this host share connection memory through " +
                      std::string(want == "auto" ? "CUDA's virtual memory management (POSIX fds) or legacy CUDA IPC"
                                  : fd           ? "CUDA's virtual memory management (POSIX fds, HOCCL_DEVICE_IPC=fd)"
                                                 : "legacy CUDA IPC (HOCCL_DEVICE_IPC=legacy)") +
                      ", and the driver of some rank lacks it" +
                      (fd && !api_.vmm.usable() ? " (here: " + api_.vmmMissing + ")" : "") +
                      (want != "fd" && !api_.ipc.usable() ? " (here: " + api_.ipcMissing + ")" : "") + " (" +
                      o_.driver->status + ")");
  }
  // Exporters connect here (ipc.h).
  return FdListener::listen(fdSocketName(&socketKey_, sizeof socketKey_, rank_), &fdListener_)
      .context("device setup: listening for connection memory from other processes");
}

// Whether this rank's kernels can write into each rank's GPU memory: yes
// on its own GPU; for another GPU of this process, if peer access could be
// enabled; for a GPU of another process, if this process sees that GPU (by
// PCI bus id) and the driver gives peer access to it. HOCCL_P2P_DISABLE:
// no other rank. *why has the reason for each no.
Status P2pConnections::reachRow(std::vector<uint8_t>* row, std::map<int, std::string>* why) {
  row->assign(size_t(nranks_), 1);
  std::map<int, std::string> noPeer;  // by GPU of this process
  HOCCL_TRY(enablePeerAccess(api_, device_, peerDevices_, o_.settings.p2pCheck, &peerRetained_, &noPeer));
  const Driver& d = *o_.driver;
  const DevicePeer& me = o_.peers[size_t(rank_)];
  for (int r = 0; r < nranks_; ++r) {
    if (r == rank_) continue;
    const DevicePeer& other = o_.peers[size_t(r)];
    if (!other.sameHost) continue;  // another host: the network proxy's, not ours
    std::string& reason = (*why)[r];
    if (o_.settings.p2pDisable) {
      reason = "HOCCL_P2P_DISABLE=1";
    } else if (other.sameProcess) {
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
      else if (const PeerWriteAnswer nvml = peerWrite(me.bus, other.bus); nvml.kind == PeerWriteAnswer::Yes)
        continue;  // HOCCL_P2P_CHECK=0, and NVML, which sees every GPU, says yes
      else
        reason = "its GPU (" + other.bus + ") is not visible to this process (CUDA_VISIBLE_DEVICES?), " +
                 (nvml.kind == PeerWriteAnswer::No ? nvml.why : "and NVML could not say whether it is reachable (" +
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
Status P2pConnections::sharePaths() {
  const size_t n = size_t(nranks_);
  std::vector<uint8_t> row;
  std::map<int, std::string> why;
  direct_.assign(n * n, 1);  // the self-test's buffers are not staged
  const size_t maps = ipcMaps_.size(), exported = ipcExported_.size(), opened = ipcOpened_.size();
  Status mine = probePeers(&probed_);
  if (mine.ok()) mine = reachRow(&row, &why);
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
  for (uint8_t v : direct_) anyStaged_ = anyStaged_ || !v;
  if (o_.settings.p2pDisable && !why.empty()) {
    HINFO(kSubAll, "rank %d: HOCCL_P2P_DISABLE=1: device connections to other ranks stage through host memory",
          rank_);
  } else {
    for (const auto& [r, reason] : why)
      HWARN(kSubAll, "device buffers: rank %d (GPU %s) cannot write into rank %d's GPU (%s): %s; their connections "
            "stage through host memory, which is slower", rank_, o_.peers[size_t(rank_)].bus.c_str(), r,
            o_.peers[size_t(r)].bus.c_str(), reason.c_str());
  }
  return Status();
}

// The ranks of other processes on other GPUs (by PCI bus id): the pairs
// whose path the self-test checks (probePeers), the same set seen from
// either end.
std::vector<int> P2pConnections::probeTargets() const {
  std::vector<int> out;
  const std::string& mine = o_.peers[size_t(rank_)].bus;
  for (int r = 0; r < nranks_; ++r) {
    const std::string& theirs = o_.peers[size_t(r)].bus;
    if (r != rank_ && !sameProcess(r) && o_.peers[size_t(r)].sameHost && !mine.empty() && !theirs.empty() &&
        theirs != mine)
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
Status P2pConnections::probePeers(std::map<int, std::string>* probed) {
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
void P2pConnections::releaseProbes(size_t maps, size_t exported, size_t opened) {
  if (probeStuck_) return;
  for (size_t i = opened; i < ipcOpened_.size(); ++i) api_.ipc.ipcCloseMemHandle(ipcOpened_[i]);
  for (size_t i = exported; i < ipcExported_.size(); ++i) api_.memFree(ipcExported_[i]);
  for (size_t i = maps; i < ipcMaps_.size(); ++i) vmmRelease(api_.vmm, &ipcMaps_[i]);
  ipcOpened_.resize(opened);
  ipcExported_.resize(exported);
  ipcMaps_.resize(maps);
}

}  // namespace hoccl::cuda
