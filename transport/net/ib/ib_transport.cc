// The verbs transport's data path and progress thread (see ib_net.h). One
// mutex guards every connection of the transport; completions are polled
// by whoever calls isend/irecv/test, and by a progress thread that sleeps
// in poll() on the devices' completion channels and the connections' side
// channels, so a rank sleeping on its doorbell is woken by the network.
#include <arpa/inet.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <mutex>
#include <thread>

#include "build_info.h"
#include "src/base/log.h"
#include "transport/net/ib/ib_net.h"
#include "transport/net/ib/ib_select.h"

namespace hoccl {
namespace {

// Checked before anything is loaded, and also in a build without verbs, so
// that a malformed HOCCL_IB_HCA is an error everywhere, never a quiet
// fall back to TCP because IB happened to be missing.
Status checkHcaRule(const IbNetOptions& opt) {
  ibnet::HcaRule rule;
  std::string why;
  if (ibnet::parseHcaRule(opt.hcaRule, &rule, &why)) return Status();
  return errorf(hocclInvalidArgument, "HOCCL_IB_HCA=\"%s\" is invalid: %s", opt.hcaRule.c_str(), why.c_str());
}

}  // namespace
}  // namespace hoccl

#ifdef HOCCL_HAVE_IBVERBS

namespace hoccl {
namespace ibnet {
namespace {

constexpr size_t kMaxMessage = size_t(1) << 30;

class IbTransport : public NetTransport {
 public:
  IbTransport(const IbNetOptions& opt, const Verbs* v, std::vector<std::unique_ptr<Device>> devs)
      : opt_(opt), v_(*v), devs_(std::move(devs)) {
    for (auto& d : devs_) fcntl(d->channel->fd, F_SETFL, fcntl(d->channel->fd, F_GETFL) | O_NONBLOCK);
    wake_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    thread_ = std::thread([this] { progressLoop(); });
  }
  ~IbTransport() override {
    stop_ = true;
    kick();
    thread_.join();
    for (Comm* c : comms_) destroyComm(v_, c);
    for (auto& d : devs_) closeDevice(v_, d.get());
    close(wake_);
  }

  const char* name() const override { return "IB"; }
  int devices() const override { return static_cast<int>(devs_.size()); }

  Status getProperties(int dev, NetProperties* p) const override {
    HOCCL_TRY(checkDev(dev));
    const Device& d = *devs_[dev];
    *p = NetProperties();
    p->name = d.hca;
    p->port = d.port;
    p->pciPath = d.pciPath;
    p->guid = d.guid;
    p->ptrSupport = kPtrHost;
    p->regIsGlobal = 1;
    p->speedMbps = d.speedMbps;
    p->maxRecvs = 1;
    p->maxP2pBytes = kMaxMessage;
    return Status();
  }

  Status listen(int dev, void* handle, void** listenComm) override {
    HOCCL_TRY(checkDev(dev));
    ListenComm* lc = nullptr;
    Handle h;
    HOCCL_TRY(listenOn(opt_, devs_[dev].get(), &lc, &h));
    memset(handle, 0, kNetHandleBytes);
    memcpy(handle, &h, sizeof h);
    *listenComm = lc;
    return Status();
  }

  Status connect(int dev, void* handle, void** sendComm) override {
    *sendComm = nullptr;
    HOCCL_TRY(checkDev(dev));
    Handle h;
    memcpy(&h, handle, sizeof h);
    if (h.magic != kMagic)
      return errorf(hocclInvalidUsage, "IB transport: the peer's handle is not an IB one (it uses another network "
                    "transport: set HOCCL_NET to the same value on every rank)");
    if (!h.state) {
      h.state = newConnectState();
      memcpy(handle, &h, sizeof h);
    }
    Comm* c = nullptr;
    Status st = connectStep(v_, opt_, devs_[dev].get(), h.state, h, &c);
    if (!st.ok() || c) {
      destroyConnectState(v_, h.state);
      h.state = nullptr;
      memcpy(handle, &h, sizeof h);
    }
    HOCCL_TRY(st);
    if (c) {
      adopt(c);
      *sendComm = c;
    }
    return Status();
  }

  Status accept(void* listenComm, void** recvComm) override {
    *recvComm = nullptr;
    Comm* c = nullptr;
    HOCCL_TRY(acceptStep(v_, opt_, static_cast<ListenComm*>(listenComm), &c));
    if (c) {
      adopt(c);
      *recvComm = c;
    }
    return Status();
  }

  Status regMr(void* comm, void* data, size_t size, int type, void** mhandle) override {
    *mhandle = nullptr;
    if (!(type & kPtrHost))
      return errorf(hocclInvalidArgument, "IB transport registers host memory only (type %#x; no GPUDirect here)", type);
    if (size == 0) return Status();
    Comm* c = static_cast<Comm*>(comm);
    std::lock_guard<std::mutex> lock(mu_);
    Mr* mr = nullptr;
    HOCCL_TRY(c->dev->mrs.acquire(v_, c->dev->pd, c->dev->name, data, size, &mr));
    *mhandle = mr;
    return Status();
  }

  Status deregMr(void* comm, void* mhandle) override {
    if (!mhandle) return Status();
    std::lock_guard<std::mutex> lock(mu_);
    static_cast<Comm*>(comm)->dev->mrs.release(v_, static_cast<Mr*>(mhandle));
    return Status();
  }

  Status isend(void* sendComm, void* data, size_t size, int tag, void* mhandle, void** request) override {
    *request = nullptr;
    Comm* c = static_cast<Comm*>(sendComm);
    if (size > kMaxMessage)
      return errorf(hocclInvalidArgument, "IB transport: a %zu-byte message is over the %zu-byte limit", size, kMaxMessage);
    std::lock_guard<std::mutex> lock(mu_);
    HOCCL_TRY(c->failed);
    if (c->inflight >= kFifoDepth) return Status();
    auto r = std::make_unique<Request>();
    r->comm = c;
    r->isSend = true;
    r->data = static_cast<char*>(data);
    r->size = size;
    r->tag = tag;
    HOCCL_TRY(attachMr(c, r.get(), static_cast<Mr*>(mhandle)));
    r->seq = c->nextSeq++;
    splitParts(r.get(), static_cast<int>(c->qps.size()));
    c->unposted.push_back(r.get());
    ++c->inflight;
    *request = r.get();
    c->requests.push_back(std::move(r));
    pollCq(c);
    progress(c);
    return Status();
  }

  Status irecv(void* recvComm, int n, void** data, size_t* sizes, int* tags, void** mhandles,
               void** request) override {
    *request = nullptr;
    if (n != 1) return errorf(hocclInvalidArgument, "IB transport: %d grouped receives (maxRecvs is 1)", n);
    Comm* c = static_cast<Comm*>(recvComm);
    std::lock_guard<std::mutex> lock(mu_);
    HOCCL_TRY(c->failed);
    int slot = static_cast<int>(c->nextSeq % kFifoDepth);
    if (c->inflight >= kFifoDepth || c->slots[slot]) return Status();
    auto r = std::make_unique<Request>();
    r->comm = c;
    r->data = static_cast<char*>(data[0]);
    r->size = sizes[0];
    r->tag = tags ? tags[0] : 0;
    HOCCL_TRY(attachMr(c, r.get(), mhandles ? static_cast<Mr*>(mhandles[0]) : nullptr));
    r->seq = c->nextSeq++;
    c->slots[slot] = r.get();
    c->fifoPending.push_back(r.get());
    ++c->inflight;
    *request = r.get();
    c->requests.push_back(std::move(r));
    pollCq(c);
    progress(c);
    return Status();
  }

  Status test(void* request, int* done, int* sizes) override {
    Request* r = static_cast<Request*>(request);
    std::lock_guard<std::mutex> lock(mu_);
    *done = 0;
    Comm* c = r->comm;
    if (!r->done && r->error.ok() && c->failed.ok()) {
      pollCq(c);
      progress(c);
    }
    if (!r->error.ok()) return r->error;
    if (!r->done) return c->failed;
    *done = 1;
    if (sizes) *sizes = static_cast<int>(r->isSend ? r->size : r->received);
    --c->inflight;
    for (auto it = c->requests.begin(); it != c->requests.end(); ++it)
      if (it->get() == r) {
        c->requests.erase(it);
        break;
      }
    return Status();
  }

  Status closeSend(void* comm) override { return closeComm(static_cast<Comm*>(comm)); }
  Status closeRecv(void* comm) override { return closeComm(static_cast<Comm*>(comm)); }
  Status closeListen(void* listenComm) override {
    closeListenComm(v_, static_cast<ListenComm*>(listenComm));
    return Status();
  }

  MrCacheStats stats(int dev) {
    std::lock_guard<std::mutex> lock(mu_);
    return devs_[dev]->mrs.stats();
  }

 private:
  Status checkDev(int dev) const {
    if (dev < 0 || dev >= devices())
      return errorf(hocclInvalidArgument, "IB transport: device %d does not exist (%d devices)", dev, devices());
    return Status();
  }

  void kick() {
    uint64_t one = 1;
    ssize_t rc = write(wake_, &one, sizeof one);
    (void)rc;
  }

  void adopt(Comm* c) {
    std::lock_guard<std::mutex> lock(mu_);
    comms_.push_back(c);
    kick();
  }

  Status health(void* comm) override {
    Comm* c = static_cast<Comm*>(comm);
    std::lock_guard<std::mutex> lock(mu_);
    return c->goodbye ? Status() : c->failed;
  }

  Status closeComm(Comm* c) {
    std::lock_guard<std::mutex> lock(mu_);
    comms_.erase(std::remove(comms_.begin(), comms_.end(), c), comms_.end());
    if (c->sideFd >= 0 && c->failed.ok()) {
      // Best effort; the peer reads it as "closed in order".
      ssize_t n = ::send(c->sideFd, &kGoodbyeByte, 1, MSG_NOSIGNAL | MSG_DONTWAIT);
      (void)n;
      char sink[64];
      while (::recv(c->sideFd, sink, sizeof sink, MSG_DONTWAIT) > 0) {
      }
    }
    destroyComm(v_, c);
    kick();
    return Status();
  }

  // The registration covering the request's buffer: the caller's if it
  // covers it, else one taken from the cache for this request (mu_ held).
  Status attachMr(Comm* c, Request* r, Mr* given) {
    if (r->size == 0) return Status();
    uintptr_t a = reinterpret_cast<uintptr_t>(r->data);
    if (given && given->start <= a && a + r->size <= given->end) {
      r->mr = given;
      return Status();
    }
    HOCCL_TRY(c->dev->mrs.acquire(v_, c->dev->pd, c->dev->name, r->data, r->size, &r->mr));
    r->ownsMr = true;
    return Status();
  }

  void finish(Request* r) {
    if (r->ownsMr) r->comm->dev->mrs.release(v_, r->mr);
    r->ownsMr = false;
    r->mr = nullptr;
    completed_ = true;
  }

  // Small messages go whole to one QP (in turn); large ones are cut into one
  // 4 KiB-aligned part per QP.
  static void splitParts(Request* r, int n) {
    if (r->size < kSplitMin || n == 1) {
      int q = static_cast<int>(r->seq % static_cast<uint64_t>(n));
      r->partStart[q] = 0;
      r->partEnd[q] = r->size;
      return;
    }
    for (int i = 0; i < n; ++i) {
      r->partStart[i] = i == 0 ? 0 : (r->size * i / n) & ~size_t(4095);
      r->partEnd[i] = i == n - 1 ? r->size : (r->size * (i + 1) / n) & ~size_t(4095);
    }
    for (int i = 0; i < n; ++i) r->cursor[i] = r->partStart[i];
  }

  void failComm(Comm* c, const Status& why) {
    if (!c->failed.ok()) return;
    c->failed = why;
    bool outstanding = false;
    for (auto& r : c->requests)
      if (!r->done && r->error.ok()) {
        r->error = why;
        outstanding = true;
      }
    completed_ = true;
    if (outstanding) HWARN(kSubNet, "%s", why.message().c_str());
    else HINFO(kSubNet, "%s", why.message().c_str());
  }

  int qpIndex(const Comm* c, uint32_t qpn) const {
    for (size_t i = 0; i < c->qps.size(); ++i)
      if (c->qps[i]->qp_num == qpn) return static_cast<int>(i);
    return -1;
  }

  bool post(Comm* c, int qp, ibv_send_wr* wr) {
    ibv_send_wr* bad = nullptr;
    int rc = ibv_post_send(c->qps[qp], wr, &bad);
    if (rc == 0) {
      ++c->sqUsed[qp];
      return true;
    }
    failComm(c, errorf(hocclSystemError, "IB transport: ibv_post_send on %s QP %#x failed: %s", c->dev->name.c_str(),
                       c->qps[qp]->qp_num, strerror(rc)));
    return false;
  }

  void progress(Comm* c) {
    if (!c->failed.ok()) return;
    if (c->isSend) progressSends(c);
    else postFifo(c);
  }

  // Sender: writes each message once its FIFO entry has landed, in order,
  // as far as the send queues take (mu_ held).
  void progressSends(Comm* c) {
    size_t maxChunk = c->dev->attr.max_msg_sz ? std::min<size_t>(c->dev->attr.max_msg_sz, kMaxMessage) : kMaxMessage;
    while (!c->unposted.empty()) {
      Request* r = c->unposted.front();
      if (!r->haveDest) {
        if (c->fifoArrived <= r->seq) return;
        const volatile FifoEntry* e = &c->fifo[r->seq % kFifoDepth];
        if (e->seq != static_cast<uint32_t>(r->seq + 1))
          return failComm(c, errorf(hocclInternalError, "IB transport: FIFO entry for message %llu from %s holds "
                                    "message %u", static_cast<unsigned long long>(r->seq), c->peer.c_str(), e->seq - 1));
        r->haveDest = true;
        r->raddr = e->addr;
        r->rkey = e->rkey;
        if (r->size > e->size) {
          r->truncated = true;
          r->error = errorf(hocclInvalidUsage, "IB transport: a %zu-byte message to %s does not fit the %llu-byte "
                            "receive", r->size, c->peer.c_str(), static_cast<unsigned long long>(e->size));
          for (size_t i = 0; i < c->qps.size(); ++i) r->partStart[i] = r->partEnd[i] = r->cursor[i] = 0;
          completed_ = true;
        }
      }
      for (size_t i = 0; i < c->qps.size(); ++i) {
        while (!r->partClosed[i]) {
          if (c->sqUsed[i] >= kSendDepth) return;
          size_t left = r->partEnd[i] - r->cursor[i];
          size_t len = std::min(left, maxChunk);
          bool last = len == left;
          ibv_sge sge;
          sge.addr = reinterpret_cast<uint64_t>(r->data + r->cursor[i]);
          sge.length = static_cast<uint32_t>(len);
          sge.lkey = r->mr ? r->mr->mr->lkey : 0;
          ibv_send_wr wr;
          memset(&wr, 0, sizeof wr);
          wr.wr_id = reinterpret_cast<uint64_t>(r);
          wr.sg_list = len ? &sge : nullptr;
          wr.num_sge = len ? 1 : 0;
          wr.opcode = last ? IBV_WR_RDMA_WRITE_WITH_IMM : IBV_WR_RDMA_WRITE;
          wr.send_flags = IBV_SEND_SIGNALED;
          if (last)
            wr.imm_data = htonl(r->truncated ? kImmTruncated : static_cast<uint32_t>(r->partEnd[i] - r->partStart[i]));
          wr.wr.rdma.remote_addr = r->raddr + r->cursor[i];
          wr.wr.rdma.rkey = r->rkey;
          if (!post(c, static_cast<int>(i), &wr)) return;
          ++r->wrsLeft;
          r->cursor[i] += len;
          if (last) r->partClosed[i] = true;
        }
      }
      c->unposted.pop_front();
    }
  }

  // Receiver: announces posted buffers to the sender, each FIFO slot once
  // its previous write has completed (mu_ held).
  void postFifo(Comm* c) {
    while (!c->fifoPending.empty()) {
      Request* r = c->fifoPending.front();
      int slot = static_cast<int>(r->seq % kFifoDepth);
      if (c->fifoBusy[slot] || c->sqUsed[0] >= kSendDepth) return;
      FifoEntry& e = c->fifoOut[slot];
      e.addr = reinterpret_cast<uint64_t>(r->data);
      e.size = r->size;
      e.rkey = r->mr ? r->mr->mr->rkey : 0;
      e.tag = r->tag;
      e.seq = static_cast<uint32_t>(r->seq + 1);
      ibv_sge sge;
      sge.addr = reinterpret_cast<uint64_t>(&e);
      sge.length = sizeof e;
      sge.lkey = c->fifoOutMr->lkey;
      ibv_send_wr wr;
      memset(&wr, 0, sizeof wr);
      wr.wr_id = kFifoWr | static_cast<uint64_t>(slot);
      wr.sg_list = &sge;
      wr.num_sge = 1;
      wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
      wr.send_flags = IBV_SEND_SIGNALED;
      wr.imm_data = htonl(kImmFifo);
      wr.wr.rdma.remote_addr = c->remote.fifoAddr + static_cast<uint64_t>(slot) * sizeof(FifoEntry);
      wr.wr.rdma.rkey = c->remote.fifoRkey;
      if (!post(c, 0, &wr)) return;
      c->fifoBusy[slot] = true;
      r->fifoPosted = true;
      c->fifoPending.pop_front();
    }
  }

  void pollCq(Comm* c) {
    if (!c->failed.ok()) return;
    ibv_wc wc[32];
    for (;;) {
      int n = ibv_poll_cq(c->cq, 32, wc);
      if (n < 0) return failComm(c, errorf(hocclSystemError, "IB transport: ibv_poll_cq on %s failed", c->dev->name.c_str()));
      for (int i = 0; i < n; ++i) handleCompletion(c, wc[i]);
      if (n < 32) return;
    }
  }

  void handleCompletion(Comm* c, const ibv_wc& wc) {
    int qi = qpIndex(c, wc.qp_num);
    if (wc.status != IBV_WC_SUCCESS) return failComm(c, Status(hocclRemoteError, completionError(v_, opt_, *c, wc, qi)));
    if (qi < 0) return failComm(c, errorf(hocclInternalError, "IB transport: completion for unknown QP %#x", wc.qp_num));
    if (wc.opcode & IBV_WC_RECV) {
      uint32_t imm = ntohl(wc.imm_data);
      Status st = postRecvs(v_, c, qi, 1);
      if (!st.ok()) return failComm(c, st);
      if (c->isSend) {
        if (imm != kImmFifo) return failComm(c, errorf(hocclInternalError, "IB transport: unexpected immediate %#x", imm));
        ++c->fifoArrived;
        return;
      }
      uint64_t j = c->partsSeen[qi]++;
      Request* r = c->slots[j % kFifoDepth];
      if (!r || r->seq != j)
        return failComm(c, errorf(hocclInternalError, "IB transport: data for message %llu from %s with no receive "
                                  "posted for it", static_cast<unsigned long long>(j), c->peer.c_str()));
      if (imm & kImmTruncated) r->truncated = true;
      else r->received += imm;
      if (++r->partsArrived < static_cast<int>(c->qps.size())) return;
      c->slots[j % kFifoDepth] = nullptr;
      if (r->truncated || r->received > r->size)
        r->error = errorf(hocclInvalidUsage, "IB transport: a message from %s does not fit the %zu-byte receive",
                          c->peer.c_str(), r->size);
      else
        r->done = true;
      return finish(r);
    }
    --c->sqUsed[qi];
    if (wc.wr_id & kFifoWr) {
      c->fifoBusy[wc.wr_id & (kFifoDepth - 1)] = false;
      return;
    }
    Request* r = reinterpret_cast<Request*>(wc.wr_id);
    if (--r->wrsLeft > 0) return;
    for (size_t i = 0; i < c->qps.size(); ++i)
      if (!r->partClosed[i]) return;
    if (r->error.ok()) r->done = true;
    finish(r);
  }

  // The side channel closed: the peer exited or closed its end. What already
  // arrived still completes; the rest fails (mu_ held).
  void peerClosed(Comm* c, int err) {
    pollCq(c);
    failComm(c, errorf(hocclRemoteError, "IB transport: connection %s %s failed: %s", c->isSend ? "to" : "from",
                       c->peer.c_str(),
                       err           ? strerror(err)
                       : c->goodbye ? "closed by the peer"
                                    : "closed without a goodbye (the peer process exited or was killed)"));
  }

  void progressLoop() {
    std::vector<pollfd> fds;
    std::vector<Comm*> who;
    while (!stop_) {
      fds.assign(1, pollfd{wake_, POLLIN, 0});
      for (auto& d : devs_) fds.push_back({d->channel->fd, POLLIN, 0});
      who.assign(fds.size(), nullptr);
      {
        std::lock_guard<std::mutex> lock(mu_);
        for (Comm* c : comms_) {
          if (!c->failed.ok()) continue;
          fds.push_back({c->sideFd, POLLIN, 0});
          who.push_back(c);
        }
      }
      if (poll(fds.data(), fds.size(), 100) <= 0) continue;
      if (fds[0].revents) {
        uint64_t x;
        ssize_t rc = read(wake_, &x, sizeof x);
        (void)rc;
      }
      {
        std::lock_guard<std::mutex> lock(mu_);
        for (size_t i = 0; i < devs_.size(); ++i) {
          if (!fds[i + 1].revents) continue;
          ibv_cq* cq = nullptr;
          void* ctx = nullptr;
          while (v_.getCqEvent(devs_[i]->channel, &cq, &ctx) == 0) {
            // Re-arm before acknowledging: a CQ being destroyed elsewhere
            // waits for the acknowledgement, so the CQ is not touched after.
            ibv_req_notify_cq(cq, 0);
            v_.ackCqEvents(cq, 1);
            Comm* c = static_cast<Comm*>(ctx);
            if (std::find(comms_.begin(), comms_.end(), c) == comms_.end()) continue;
            pollCq(c);
            progress(c);
          }
        }
        for (size_t i = devs_.size() + 1; i < fds.size(); ++i) {
          Comm* c = who[i];
          if (!fds[i].revents || std::find(comms_.begin(), comms_.end(), c) == comms_.end() || !c->failed.ok()) continue;
          char buf[64];
          ssize_t n = ::recv(c->sideFd, buf, sizeof buf, MSG_DONTWAIT);
          if (n > 0 && memchr(buf, kGoodbyeByte, static_cast<size_t>(n))) c->goodbye = true;
          if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR))
            peerClosed(c, n < 0 ? errno : 0);
        }
      }
      if (completed_.exchange(false) && opt_.notify) opt_.notify(opt_.notifyArg);
    }
  }

  IbNetOptions opt_;
  const Verbs& v_;
  std::vector<std::unique_ptr<Device>> devs_;
  std::mutex mu_;
  std::vector<Comm*> comms_;
  int wake_ = -1;
  std::atomic<bool> stop_{false};
  std::atomic<bool> completed_{false};
  std::thread thread_;
};

}  // namespace
}  // namespace ibnet

Status createIbTransport(const IbNetOptions& opt, std::unique_ptr<NetTransport>* out) {
  HOCCL_TRY(checkHcaRule(opt));
  if (opt.qpsPerConn < 1 || opt.qpsPerConn > ibnet::kMaxQps)
    return errorf(hocclInvalidArgument, "HOCCL_IB_QPS_PER_CONN=%d: expected 1 to %d", opt.qpsPerConn, ibnet::kMaxQps);
  std::string why;
  const ibnet::Verbs* v = ibnet::loadVerbs(&why);
  if (!v) return Status(hocclSystemError, why);
  std::vector<std::unique_ptr<ibnet::Device>> devs;
  HOCCL_TRY(ibnet::openDevices(*v, opt, &devs));
  out->reset(new ibnet::IbTransport(opt, v, std::move(devs)));
  return Status();
}

bool ibRegistrationStats(NetTransport& net, int dev, IbRegistrationStats* out) {
  auto* ib = dynamic_cast<ibnet::IbTransport*>(&net);
  if (!ib || dev < 0 || dev >= ib->devices()) return false;
  *out = ib->stats(dev);
  return true;
}

}  // namespace hoccl

#else  // !HOCCL_HAVE_IBVERBS

namespace hoccl {

Status createIbTransport(const IbNetOptions& opt, std::unique_ptr<NetTransport>*) {
  HOCCL_TRY(checkHcaRule(opt));
  return errorf(hocclSystemError, "this hoccl was built without the IB transport (%s)",
                strcmp(HOCCL_BUILD_IBVERBS_SWITCH, "OFF") == 0 ? "configured with HOCCL_IBVERBS=OFF"
                                                               : "no verbs headers at build time: libibverbs-dev");
}

bool ibRegistrationStats(NetTransport&, int, IbRegistrationStats*) { return false; }

}  // namespace hoccl

#endif  // HOCCL_HAVE_IBVERBS
