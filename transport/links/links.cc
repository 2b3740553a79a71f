#include "transport/links/links.h"

#include "base/log.h"
#include "transport/p2p/p2p.h"

namespace hoccl {

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
  return cuda::P2pConnections::open(o, out);
}

}  // namespace hoccl
