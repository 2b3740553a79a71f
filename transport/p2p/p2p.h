// The p2p device transport: connections between ranks of one host, named
// after NCCL's transport of the same job (CUDA.md, "Intra-node"). The
// receiving rank of an edge allocates its memory (a DevConnMem and its
// slots) and hands it to the sender:
//   - a thread of this process: its device address, over the bootstrap;
//   - another process of this host: a VMM allocation exported as a POSIX
//     fd over a Unix socket (ipc.h), or with HOCCL_DEVICE_IPC=fabric or
//     legacy, a fabric or cuIpc handle over the bootstrap.
// Where the sender's GPU cannot write into the receiver's (no peer access,
// a failed self-test of the path, HOCCL_P2P_DISABLE) the pair is staged:
// its connections live in host memory both GPUs map (between processes, a
// memfd each registers). Which pairs are direct is decided once, at open,
// from a table every rank publishes, so both ends of a pair agree.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "base/fdpass.h"
#include "transport/device_connection.h"
#include "transport/p2p/ipc.h"

namespace hoccl::cuda {

class P2pConnections final : public DeviceConnections {
 public:
  // Collective: every rank of the communicator calls it once, with the
  // device's context current. Enables peer access to the GPUs of this
  // process's other ranks, chooses how memory crosses processes, runs the
  // peer-path self-test (HOCCL_P2P_CHECK) and shares which pairs are
  // direct. Fails, on every rank alike, where ranks in other processes
  // cannot share memory the way HOCCL_DEVICE_IPC asks.
  static Status open(const DeviceConnOptions& o, std::unique_ptr<DeviceConnections>* out);
  ~P2pConnections() override;
  P2pConnections(const P2pConnections&) = delete;
  P2pConnections& operator=(const P2pConnections&) = delete;

  Status connect(const std::vector<DeviceEdge>& edges) override;
  DevPtr conn(const DeviceEdge& e) const override;
  bool inHostMemory() const override { return anyStaged_; }

 private:
  // The link number of the peer-path self-test's buffers (probePeers),
  // which travel as connections do; no plan has this many links.
  static constexpr int32_t kProbeLink = 0x7fffffff;

  explicit P2pConnections(const DeviceConnOptions& o);
  // p2p_paths.cc: who reaches whom.
  PeerWriteAnswer peerWrite(const std::string& fromBus, const std::string& toBus) const;
  Status chooseIpc();
  Status sharePaths();
  Status reachRow(std::vector<uint8_t>* row, std::map<int, std::string>* why);
  std::vector<int> probeTargets() const;
  Status probePeers(std::map<int, std::string>* probed);
  void releaseProbes(size_t maps, size_t exported, size_t opened);
  bool staged(int from, int to) const { return from != to && !direct_[size_t(from) * size_t(nranks_) + size_t(to)]; }
  // p2p_conns.cc: the connection memory.
  Status makeConn(bool staged, DevPtr* mem);
  Status connectEdges(const std::vector<DeviceEdge>& edges);
  Status exportConn(const DeviceEdge& e, DevPtr* mem);
  Status importConns(const std::vector<int>& exporters, const std::vector<int>& byHandle,
                     std::map<int, std::string>* unmapped = nullptr);
  Status exportByHandle(const DeviceEdge& e, const DevConnMem& init, IpcBufferMsg* msg, DevPtr* mem);
  Status exportLegacy(const DevConnMem& init, IpcBufferMsg* msg, DevPtr* mem);
  Status vmmConn(int handleType, const DevConnMem& init, const std::string& peer, IpcBufferMsg* msg, VmmMapping* m);
  Status upload(DevPtr dst, const void* src, size_t bytes, const char* what);
  std::string describePeer(int peer) const;
  bool sameProcess(int peer) const { return o_.peers[size_t(peer)].sameProcess; }
  bool peerGone(int peer) const { return o_.peerProcessGone && o_.peerProcessGone(peer); }

  DeviceConnOptions o_;
  const DeviceApi& api_;
  OutOfBand* oob_;
  int rank_ = 0, nranks_ = 1, device_ = 0;
  bool otherProcesses_ = false;  // some rank is another process (of this host)
  // How connections reach ranks of other processes (HOCCL_DEVICE_IPC): VMM
  // memory as POSIX fds over a Unix socket, VMM memory as fabric handles or
  // cuMemAlloc memory as cuIpc handles (both over the bootstrap).
  enum class Ipc { Fd, Fabric, Legacy } ipc_ = Ipc::Fd;
  uint64_t socketKey_ = 0;           // names this communicator's fd sockets (fdSocketName)
  FdListener fdListener_;            // where exporters hand this rank connection memory
  std::vector<VmmMapping> ipcMaps_;  // connection memory shared with other processes
  std::vector<HostShm> shmMaps_;     // the same, staged through host memory
  std::vector<DevPtr> ipcExported_, ipcOpened_;  // legacy IPC: allocations handed out, and mapped here
  // [from * nranks + to]: 1 where rank `from`'s kernels write into rank
  // `to`'s GPU memory directly; 0: their connection stages through host memory.
  std::vector<uint8_t> direct_;
  bool anyStaged_ = false;
  // The peer-path self-test's answer for each rank of another process on
  // another GPU (probePeers): "" if this rank's GPU wrote into that rank's
  // GPU memory and read it back intact, else why not. Empty without
  // HOCCL_P2P_CHECK or with HOCCL_P2P_DISABLE.
  std::map<int, std::string> probed_;
  std::vector<uint8_t> probing_;   // by rank: runs that test (HOCCL_P2P_CHECK=1, HOCCL_P2P_DISABLE=0)
  bool probeStuck_ = false;        // a self-test's copies did not finish: its buffers are leaked
  std::vector<int> peerDevices_;   // GPUs of this process's other ranks, not ours
  std::vector<int> peerRetained_;  // their primary contexts, retained for peer access
  std::map<std::tuple<int, int, int>, DevPtr> conns_;  // (from, to, link) -> DevConnMem
  std::vector<DevPtr> held_;  // connection memory shared with a peer of this process (p2p_conns.cc)
};

}  // namespace hoccl::cuda
