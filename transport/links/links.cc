#include "transport/links/links.h"

#include "base/log.h"
#include "transport/net/net_device.h"
#include "transport/p2p/p2p.h"

namespace hoccl {
namespace {

// The device connections of a communicator whose ranks span hosts: p2p
// for the edges between ranks of this host, the network proxy for the
// others. An edge's other end decides.
class RoutedDeviceConnections final : public cuda::DeviceConnections {
 public:
  RoutedDeviceConnections(int rank, std::vector<bool> sameHost, std::unique_ptr<cuda::DeviceConnections> p2p,
                          std::unique_ptr<cuda::NetDeviceConnections> net)
      : rank_(rank), sameHost_(std::move(sameHost)), p2p_(std::move(p2p)), net_(std::move(net)) {}
  Status connect(const std::vector<cuda::DeviceEdge>& edges) override {
    std::vector<cuda::DeviceEdge> near, far;
    for (const cuda::DeviceEdge& e : edges) (local(e) ? near : far).push_back(e);
    // Both: a rank's peers on this host and on others wait for it alike.
    const Status a = p2p_->connect(near);
    const Status b = net_->connect(far);
    HOCCL_TRY(a);
    return b;
  }
  cuda::DevPtr conn(const cuda::DeviceEdge& e) const override { return local(e) ? p2p_->conn(e) : net_->conn(e); }
  bool inHostMemory() const override { return true; }
  void launched() override { net_->launched(); }
  void quiesce() override { net_->quiesce(); }
  std::string describeWait(const cuda::DeviceEdge& e) const override {
    return local(e) ? p2p_->describeWait(e) : net_->describeWait(e);
  }

 private:
  bool local(const cuda::DeviceEdge& e) const { return sameHost_[size_t(e.from == rank_ ? e.to : e.from)]; }
  int rank_;
  std::vector<bool> sameHost_;
  std::unique_ptr<cuda::DeviceConnections> p2p_;
  std::unique_ptr<cuda::NetDeviceConnections> net_;
};

}  // namespace

Status Links::create(OutOfBand& oob, const Settings& s, const LinksOptions& opt, std::unique_ptr<Links>* out) {
  std::unique_ptr<Links> l(new Links());
  l->oob_ = &oob;
  l->rank_ = opt.rank;
  l->isLocal_ = opt.isLocal;
  std::vector<int> localRanks;
  bool anyRemote = false;
  for (int r = 0; r < static_cast<int>(opt.isLocal.size()); ++r) {
    if (opt.isLocal[r]) localRanks.push_back(r);
    else anyRemote = true;
  }
  ShmOptions so;
  so.commHash = opt.commHash;
  so.rank = opt.rank;
  so.slotBytes = s.sliceBytes;
  so.slots = s.slots;
  so.crossMemoryAttach = s.crossMemoryAttach != 0;
  HOCCL_TRY(ShmDomain::create(oob, so, localRanks, &l->shm_));
  l->bell_ = std::make_unique<LinksDoorbell>(l->shm_->doorbell());
  if (anyRemote) {
    NetChoice choice = netChoiceFrom(s);
    choice.socket.localAddr = choice.ib.localAddr = opt.localAddr;
    choice.socket.localIfname = opt.localIfname;
    NetDomainOptions no;
    no.rank = opt.rank;
    no.slotBytes = s.sliceBytes;
    no.slots = s.slots;
    no.timeoutSec = s.timeoutSec;
    int local = 0;
    while (local < static_cast<int>(localRanks.size()) && localRanks[local] != opt.rank) ++local;
    no.localIndex = local;
    std::string chosen;
    // The network's completions wake this rank through the doorbell it
    // sleeps on, whichever transport that belongs to.
    l->netChoice_ = choice;
    l->localIndex_ = local;
    HOCCL_TRY(NetDomain::create(choice, no, &l->shm_->doorbell(), &l->net_, &chosen));
    l->bell_->setNet(l->net_.get());
    HINFO(kSubNet, "rank %d: network %s", opt.rank, chosen.c_str());
  }
  *out = std::move(l);
  return Status();
}

Links::~Links() {
  // The network's progress threads ring the shared-memory doorbell: they
  // stop first.
  if (bell_) bell_->setNet(nullptr);
  net_.reset();
  shm_.reset();
}

Status Links::connect(const std::vector<ConnRequest>& requests) {
  std::vector<ConnRequest> local, remote;
  for (const ConnRequest& e : requests) (isLocal_[e.peer] ? local : remote).push_back(e);
  if (!local.empty()) HOCCL_TRY(shm_->connect(*oob_, local));
  if (!remote.empty()) {
    if (!net_) return errorf(hocclInternalError, "rank %d: no network transport to reach rank %d", rank_, remote[0].peer);
    HOCCL_TRY(net_->connect(*oob_, remote));
  }
  return Status();
}

Status Links::openDeviceConnections(const cuda::DeviceConnOptions& o,
                                    std::unique_ptr<cuda::DeviceConnections>* out) {
  std::vector<bool> sameHost;
  bool anyRemote = false;
  for (const cuda::DevicePeer& p : o.peers) {
    sameHost.push_back(p.sameHost);
    anyRemote = anyRemote || !p.sameHost;
  }
  std::unique_ptr<cuda::DeviceConnections> p2p;
  HOCCL_TRY(cuda::P2pConnections::open(o, &p2p));
  if (!anyRemote) {
    *out = std::move(p2p);
    return Status();
  }
  if (!net_)
    return errorf(hocclInternalError, "rank %d: device buffers reach ranks of other hosts, but no network "
                  "transport was opened", rank_);
  std::unique_ptr<cuda::NetDeviceConnections> net;
  HOCCL_TRY(cuda::NetDeviceConnections::open(o, netChoice_, localIndex_, &net));
  *out = std::make_unique<RoutedDeviceConnections>(rank_, std::move(sameHost), std::move(p2p), std::move(net));
  return Status();
}

}  // namespace hoccl
