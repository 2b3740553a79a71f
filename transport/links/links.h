// The connections of one communicator's rank: owns the shared-memory
// domain (peers on this node) and, when any peer is on another node, the
// network domain, and routes each connection to one of them; and opens the
// device path's connections (transport/p2p). The communicator sees the
// transports only through this class, transport/connection.h and
// transport/device_connection.h.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "base/config.h"
#include "base/oob.h"
#include "base/socket.h"
#include "transport/connection.h"
#include "transport/device_connection.h"
#include "transport/net/net_conn.h"
#include "transport/shm/shm.h"

namespace hoccl {

struct LinksOptions {
  int rank = 0;
  uint64_t commHash = 0;
  std::vector<bool> isLocal;  // per rank: on this node (shared memory reaches it)
  // Where the network transport listens unless HOCCL_SOCKET_IFNAME says
  // otherwise: the bootstrap's address, probed to reach the other ranks.
  SockAddr localAddr;
  std::string localIfname;
};

// The doorbell a rank sleeps on (the shared-memory domain's, which every
// transport rings), telling the network transport when the rank sleeps:
// while it polls, it reads what arrives itself (NetTransport::consumerWaiting).
class LinksDoorbell : public Doorbell {
 public:
  explicit LinksDoorbell(Doorbell& inner) : inner_(inner) {}
  void setNet(NetDomain* net) { net_ = net; }
  void ring() override { inner_.ring(); }
  uint32_t arm() override {
    if (net_) net_->consumerWaiting(true);
    return inner_.arm();
  }
  void disarm() override {
    inner_.disarm();
    if (net_) net_->consumerWaiting(false);
  }
  void wait(uint32_t seen, int timeoutMs) override {
    inner_.wait(seen, timeoutMs);
    if (net_) net_->consumerWaiting(false);
  }

 private:
  Doorbell& inner_;
  NetDomain* net_ = nullptr;
};

class Links : public Connections {
 public:
  // Collective over `oob` (every rank of the communicator calls it), which
  // must outlive the Links: later connects use it too.
  static Status create(OutOfBand& oob, const Settings& s, const LinksOptions& opt, std::unique_ptr<Links>* out);
  ~Links() override;

  SendConn* sendConn(int peer, int channel) override {
    return isLocal_[peer] ? shm_->sendConn(peer, channel) : net_ ? net_->sendConn(peer, channel) : nullptr;
  }
  RecvConn* recvConn(int peer, int channel) override {
    return isLocal_[peer] ? shm_->recvConn(peer, channel) : net_ ? net_->recvConn(peer, channel) : nullptr;
  }
  OneShotSlots* oneShotSlots() override { return shm_ ? shm_->oneShotSlots() : nullptr; }
  // Sets up the connections in `requests` that do not exist yet, each over
  // shared memory or the network depending on where the peer is
  // (collective with the peers named).
  Status connect(const std::vector<ConnRequest>& requests);
  // The device executor's connections (collective: every rank's executor
  // opens them once): p2p to ranks of this host, the network proxy
  // (transport/net/net_device.h) to the others. NVML's answers about GPU
  // pairs come from here, so that the transport needs no topology code.
  Status openDeviceConnections(const cuda::DeviceConnOptions& o, std::unique_ptr<cuda::DeviceConnections>* out);

  // The doorbell this rank sleeps on; every transport rings it.
  Doorbell& doorbell() { return *bell_; }
  bool isLocal(int peer) const { return isLocal_[peer]; }
  bool hasNetwork() const { return net_ != nullptr; }

  // Failure plumbing. Records an abort with every local peer and wakes it.
  void broadcastAbort(int code, const std::string& msg) { shm_->broadcastAbort(code, msg); }
  // An abort a local peer recorded for this rank, if any (cheap: every poll).
  bool abortNotice(int* code, std::string* msg) const { return shm_->abortNotice(code, msg); }
  bool abortFlagged() const { return shm_->abortFlagged(); }
  // Whether local `peer`'s process is gone (see ShmDomain::exited).
  bool localPeerExited(int peer, bool unfreedOnly, int* pid) {
    return isLocal_[peer] && shm_->exited(peer, unfreedOnly, pid);
  }
  // A network connection that broke other than by the peer closing it.
  bool lostRemotePeer(int* peer, std::string* why) const { return net_ && net_->lostPeer(peer, why); }

 private:
  Links() = default;
  OutOfBand* oob_ = nullptr;
  int rank_ = 0;
  std::vector<bool> isLocal_;
  std::unique_ptr<ShmDomain> shm_;
  std::unique_ptr<LinksDoorbell> bell_;
  std::unique_ptr<NetDomain> net_;  // null when every rank is on this node
  NetChoice netChoice_;             // net_'s, for the device path's network proxy
  int localIndex_ = 0;              // this rank's index on its node (its rail)
};

}  // namespace hoccl
