// The verbs transport's data path (see ib_transport.h): RDMA writes of
// messages once the receiver's FIFO entry says where, the receiver's FIFO
// announcements, completions, and the progress thread.
#include "transport/net/ib/ib_transport.h"

#ifdef HOCCL_HAVE_IBVERBS

#include <arpa/inet.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "base/log.h"
#include "base/thread_name.h"

namespace hoccl {
namespace ibnet {

Status IbTransport::attachMr(Comm* c, Request* r, Mr* given) {
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

void IbTransport::finish(Request* r) {
  if (r->ownsMr) r->comm->dev->mrs.release(v_, r->mr);
  r->ownsMr = false;
  r->mr = nullptr;
  completed_ = true;
}

void IbTransport::splitParts(Request* r, int n) {
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

void IbTransport::failComm(Comm* c, const Status& why) {
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

int IbTransport::qpIndex(const Comm* c, uint32_t qpn) const {
  for (size_t i = 0; i < c->qps.size(); ++i)
    if (c->qps[i]->qp_num == qpn) return static_cast<int>(i);
  return -1;
}

bool IbTransport::post(Comm* c, int qp, ibv_send_wr* wr) {
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

void IbTransport::progress(Comm* c) {
  if (!c->failed.ok()) return;
  if (c->isSend) progressSends(c);
  else postFifo(c);
}

void IbTransport::progressSends(Comm* c) {
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

void IbTransport::postFifo(Comm* c) {
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

void IbTransport::pollCq(Comm* c) {
  if (!c->failed.ok()) return;
  ibv_wc wc[32];
  for (;;) {
    int n = ibv_poll_cq(c->cq, 32, wc);
    if (n < 0) return failComm(c, errorf(hocclSystemError, "IB transport: ibv_poll_cq on %s failed", c->dev->name.c_str()));
    for (int i = 0; i < n; ++i) handleCompletion(c, wc[i]);
    if (n < 32) return;
  }
}

void IbTransport::handleCompletion(Comm* c, const ibv_wc& wc) {
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

void IbTransport::peerClosed(Comm* c, int err) {
  pollCq(c);
  failComm(c, errorf(hocclRemoteError, "IB transport: connection %s %s failed: %s", c->isSend ? "to" : "from",
                     c->peer.c_str(),
                     err           ? strerror(err)
                     : c->goodbye ? "closed by the peer"
                                  : "closed without a goodbye (the peer process exited or was killed)"));
}

void IbTransport::progressLoop() {
  nameThisThread("hoccl-ib");
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

}  // namespace ibnet
}  // namespace hoccl

#endif  // HOCCL_HAVE_IBVERBS
