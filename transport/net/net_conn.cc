#include "transport/net/net_conn.h"

#include <algorithm>
#include <cstring>
#include <deque>
#include <map>
#include <thread>

#include "base/clock.h"
#include "base/log.h"

namespace hoccl {
namespace {

constexpr uint32_t kTagNetHandle = 0x40000000;

// What both ends of a network connection hold: the comm and a registered
// ring of `slots` buffers, each a SlotHeader followed by slotBytes.
class NetSlotRing {
 protected:
  NetSlotRing(NetTransport* net, void* comm, int peer, size_t slotBytes, int slots)
      : net_(net), comm_(comm), peer_(peer), slotBytes_(slotBytes), slots_(slots),
        buf_(static_cast<size_t>(slots) * stride()) {
    net_->regMr(comm_, buf_.data(), buf_.size(), kPtrHost, &mr_);
  }
  size_t stride() const { return sizeof(SlotHeader) + slotBytes_; }

  NetTransport* net_;
  void* comm_;
  int peer_;
  size_t slotBytes_;
  int slots_;
  std::vector<char> buf_;
  void* mr_ = nullptr;
  std::string failure_;
};

class NetSend : public SendConn, private NetSlotRing {
 public:
  NetSend(NetTransport* net, void* comm, int peer, size_t slotBytes, int slots)
      : NetSlotRing(net, comm, peer, slotBytes, slots) {}
  ~NetSend() override {
    net_->deregMr(comm_, mr_);
    net_->closeSend(comm_);
  }
  bool tryAcquire(SlotHeader** header, void** payload) override {
    reap();
    if (static_cast<int>(inflight_.size()) >= slots_ || !failure_.empty()) return false;
    char* slot = buf_.data() + (head_ % slots_) * stride();
    *header = reinterpret_cast<SlotHeader*>(slot);
    *payload = slot + sizeof(SlotHeader);
    return true;
  }
  void post() override {
    char* slot = buf_.data() + (head_ % slots_) * stride();
    size_t bytes = sizeof(SlotHeader) + reinterpret_cast<SlotHeader*>(slot)->bytes;
    void* req = nullptr;
    Status st = net_->isend(comm_, slot, bytes, 0, mr_, &req);
    if (!st.ok() || !req) {
      failure_ = st.ok() ? "network transport refused a send with free slots" : st.message();
      return;
    }
    inflight_.push_back(req);
    ++head_;
  }
  size_t slotBytes() const override { return slotBytes_; }
  int peer() const override { return peer_; }
  std::string failure() const override { return failure_; }
  std::string health() const override { return net_->health(comm_).message(); }

 private:
  void reap() {
    while (!inflight_.empty()) {
      int done = 0;
      Status st = net_->test(inflight_.front(), &done, nullptr);
      if (!st.ok()) {
        failure_ = st.message();
        return;
      }
      if (!done) return;
      inflight_.pop_front();
    }
  }
  std::deque<void*> inflight_;
  uint64_t head_ = 0;
};

class NetRecv : public RecvConn, private NetSlotRing {
 public:
  NetRecv(NetTransport* net, void* comm, int peer, size_t slotBytes, int slots)
      : NetSlotRing(net, comm, peer, slotBytes, slots), reqs_(slots, nullptr) {
    for (int i = 0; i < slots_; ++i) postSlot(i);
  }
  ~NetRecv() override {
    net_->deregMr(comm_, mr_);
    net_->closeRecv(comm_);
  }
  bool tryPeek(const SlotHeader** header, const void** payload) override {
    int i = static_cast<int>(tail_ % slots_);
    if (!ready_) {
      if (!reqs_[i] || !failure_.empty()) return false;
      int done = 0, size = 0;
      Status st = net_->test(reqs_[i], &done, &size);
      if (!st.ok()) {
        failure_ = st.message();
        return false;
      }
      if (!done) return false;
      reqs_[i] = nullptr;
      ready_ = true;
    }
    char* slot = buf_.data() + i * stride();
    *header = reinterpret_cast<const SlotHeader*>(slot);
    *payload = slot + sizeof(SlotHeader);
    return true;
  }
  void release() override {
    postSlot(static_cast<int>(tail_ % slots_));
    ++tail_;
    ready_ = false;
  }
  int peer() const override { return peer_; }
  std::string failure() const override { return failure_; }
  std::string health() const override { return net_->health(comm_).message(); }

 private:
  void postSlot(int i) {
    void* data = buf_.data() + i * stride();
    size_t size = stride();
    int tag = 0;
    Status st = net_->irecv(comm_, 1, &data, &size, &tag, &mr_, &reqs_[i]);
    if (!st.ok() || !reqs_[i]) failure_ = st.ok() ? "network transport refused a receive" : st.message();
  }
  std::vector<void*> reqs_;
  uint64_t tail_ = 0;
  bool ready_ = false;
};

}  // namespace

Status NetDomain::create(NetChoice choice, const NetDomainOptions& opt, Doorbell* wake,
                         std::unique_ptr<NetDomain>* out, std::string* chosen) {
  choice.socket.notify = choice.ib.notify = wake ? &Doorbell::ringCallback : nullptr;
  choice.socket.notifyArg = choice.ib.notifyArg = wake;
  // The executor polls its receives and says when it sleeps (Links).
  choice.socket.consumerPolls = wake != nullptr;
  std::unique_ptr<NetTransport> transport;
  std::string how;
  HOCCL_TRY(createNetTransport(choice, &transport, &how));
  int dev = opt.localIndex % std::max(1, transport->devices());
  *chosen = how + ", device " + std::to_string(dev);
  *out = std::make_unique<NetDomain>(std::move(transport), opt.rank, opt.slotBytes, opt.slots, opt.timeoutSec, dev);
  return Status();
}

NetDomain::~NetDomain() {
  sends_.clear();
  recvs_.clear();
}

Status connectNetComms(NetTransport& net, int dev, OutOfBand& oob, uint32_t tagBase,
                       const std::vector<ConnRequest>& requests, double timeoutSec, std::vector<NetCommMade>* made) {
  made->clear();
  Deadline dl = Deadline::in(timeoutSec);
  // 1. Receivers listen and hand their address to the sender.
  struct Listening {
    ConnRequest e;
    void* lc;
  };
  std::vector<Listening> listening;
  auto closeListening = [&] {
    for (Listening& l : listening)
      if (l.lc) net.closeListen(l.lc);
  };
  for (const ConnRequest& e : requests) {
    if (e.send) continue;
    char handle[kNetHandleBytes];
    void* lc = nullptr;
    Status st = net.listen(dev, handle, &lc);
    if (st.ok()) listening.push_back({e, lc});
    if (st.ok()) st = oob.send(e.peer, tagBase | static_cast<uint32_t>(e.channel), handle, sizeof handle);
    if (!st.ok()) {
      closeListening();
      return st;
    }
  }
  // 2. Senders get the handles.
  struct Connecting {
    ConnRequest e;
    std::string handle;  // the transport keeps its progress in it
    bool done;
  };
  std::vector<Connecting> connecting;
  for (const ConnRequest& e : requests) {
    if (!e.send) continue;
    std::string handle;
    Status st = oob.recv(e.peer, tagBase | static_cast<uint32_t>(e.channel), &handle);
    if (st.ok() && handle.size() != kNetHandleBytes)
      st = errorf(hocclInternalError, "malformed network handle from rank %d", e.peer);
    if (!st.ok()) {
      closeListening();
      return st;
    }
    connecting.push_back({e, std::move(handle), false});
  }
  // 3. Connects and accepts progress together: a transport whose connect
  // needs the peer's accept (IB) would deadlock two ranks that each wait in
  // connect for the other.
  size_t left = connecting.size() + listening.size();
  Status st;
  double lastCheck = nowSec();
  while (left > 0 && st.ok()) {
    bool progressed = false;
    for (Connecting& c : connecting) {
      if (c.done) continue;
      void* comm = nullptr;
      st = net.connect(dev, c.handle.data(), &comm).context("connecting to rank " + std::to_string(c.e.peer));
      if (!st.ok()) break;
      if (!comm) continue;
      made->push_back({c.e, comm});
      c.done = progressed = true;
      --left;
    }
    for (Listening& l : listening) {
      if (!st.ok() || !l.lc) continue;
      void* comm = nullptr;
      st = net.accept(l.lc, &comm).context("accepting rank " + std::to_string(l.e.peer));
      if (!st.ok() || !comm) continue;
      net.closeListen(l.lc);
      l.lc = nullptr;
      made->push_back({l.e, comm});
      progressed = true;
      --left;
    }
    int waitingFor = -1;
    for (Connecting& c : connecting)
      if (!c.done && waitingFor < 0) waitingFor = c.e.peer;
    for (Listening& l : listening)
      if (l.lc && waitingFor < 0) waitingFor = l.e.peer;
    if (st.ok() && left > 0 && dl.expired())
      st = errorf(hocclTimeout, "timed out connecting with rank %d over %s", waitingFor, net.name());
    // A peer that stopped (or runs another call) never connects: ask the
    // out-of-band channel now and then instead of waiting for the timeout.
    if (st.ok() && left > 0 && !progressed && nowSec() - lastCheck > 0.1) {
      lastCheck = nowSec();
      st = oob.whileWaiting(waitingFor);
    }
    if (!progressed && left > 0) std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  closeListening();
  return st;
}

Status NetDomain::connect(OutOfBand& oob, const std::vector<ConnRequest>& requests) {
  std::vector<ConnRequest> missing;
  for (const ConnRequest& e : requests)
    if (!(e.send ? sends_.count({e.peer, e.channel}) : recvs_.count({e.peer, e.channel}))) missing.push_back(e);
  std::vector<NetCommMade> made;
  // What was made before a failure is kept (a peer may have kept its end):
  // the next connect asks only for the rest.
  const Status st = connectNetComms(*net_, dev_, oob, kTagNetHandle, missing, timeoutSec_, &made);
  std::map<std::pair<int, int>, void*> newSends, newRecvs;  // the transport's comms made here
  for (const NetCommMade& m : made) {
    const std::pair<int, int> key{m.e.peer, m.e.channel};
    if (m.e.send) {
      sends_[key] = std::make_unique<NetSend>(net_.get(), m.comm, m.e.peer, slotBytes_, slots_);
      newSends[key] = m.comm;
    } else {
      recvs_[key] = std::make_unique<NetRecv>(net_.get(), m.comm, m.e.peer, slotBytes_, slots_);
      newRecvs[key] = m.comm;
    }
  }
  HOCCL_TRY(st);
  // Both directions with a peer made together (the peer made them together
  // too): one channel for their small messages, owned by the lower rank's
  // send side.
  for (const auto& [key, sendComm] : newSends) {
    auto r = newRecvs.find(key);
    if (r == newRecvs.end()) continue;
    HOCCL_TRY(net_->pairControl(sendComm, r->second, rank_ < key.first)
                  .context("pairing the connections with rank " + std::to_string(key.first)));
  }
  HINFO(kSubNet, "rank %d: %zu network connections over %s", rank_, sends_.size() + recvs_.size(), net_->name());
  return Status();
}

SendConn* NetDomain::sendConn(int peer, int channel) {
  auto it = sends_.find({peer, channel});
  return it == sends_.end() ? nullptr : it->second.get();
}

bool NetDomain::lostPeer(int* peer, std::string* why) const {
  for (const auto& [key, conn] : sends_) {
    std::string w = conn->health();
    if (w.empty()) continue;
    *peer = key.first;
    *why = w;
    return true;
  }
  for (const auto& [key, conn] : recvs_) {
    std::string w = conn->health();
    if (w.empty()) continue;
    *peer = key.first;
    *why = w;
    return true;
  }
  return false;
}

RecvConn* NetDomain::recvConn(int peer, int channel) {
  auto it = recvs_.find({peer, channel});
  return it == recvs_.end() ? nullptr : it->second.get();
}

}  // namespace hoccl
