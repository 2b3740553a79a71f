// The verbs transport's connection set-up, as non-blocking state machines
// over the TCP side channel:
//   sender -> receiver   PeerInfo (QPs in INIT, receives posted, its FIFO)
//   receiver             QPs to RTR and RTS
//   receiver -> sender   PeerInfo
//   sender               QPs to RTR and RTS
//   sender -> receiver   one byte: ready (the receiver may now write the FIFO)
// The side channel then stays open: its closing is how a peer's exit shows.
#include <fcntl.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "base/random.h"
#include "base/log.h"
#include "transport/net/ib/ib_net.h"
#include "transport/net/ib/ib_select.h"

#ifdef HOCCL_HAVE_IBVERBS

namespace hoccl {
namespace ibnet {

struct Exchange {
  int fd = -1;
  Comm* comm = nullptr;
  std::string out;
  size_t outDone = 0;
  PeerInfo in{};
  size_t inLen = 0;
  int phase = 0;
};
struct ConnectState : Exchange {};
struct ListenComm {
  Socket listener;
  SockAddr addr;
  Device* dev = nullptr;
  std::vector<Exchange*> pending;
};

namespace {

constexpr char kReady = 'R';

// 1: done, 0: not yet, -1: the peer closed or failed (errno set, 0 = closed).
int pumpOut(Exchange* x) {
  while (x->outDone < x->out.size()) {
    ssize_t n = ::send(x->fd, x->out.data() + x->outDone, x->out.size() - x->outDone, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return 0;
    if (n <= 0) return -1;
    x->outDone += static_cast<size_t>(n);
  }
  return 1;
}

int pumpIn(int fd, void* buf, size_t want, size_t* have) {
  while (*have < want) {
    ssize_t n = ::recv(fd, static_cast<char*>(buf) + *have, want - *have, MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return 0;
    if (n <= 0) {
      if (n == 0) errno = 0;
      return -1;
    }
    *have += static_cast<size_t>(n);
  }
  return 1;
}

Status sideError(const char* what, const std::string& peer) {
  int err = errno;
  return errorf(hocclRemoteError, "IB transport: side channel %s %s: %s", what, peer.c_str(),
                err ? strerror(err) : "closed by the peer");
}

std::string describePeer(const PeerInfo& p, const std::string& addr) {
  char buf[200];
  snprintf(buf, sizeof buf, "%.32s on host %.64s pid %d (side channel %s)", p.device, p.host, p.pid, addr.c_str());
  return buf;
}

// CQ, QPs in INIT with receives posted, FIFO memory; fills `info`.
Status createResources(const Verbs& v, Device* dev, Comm* c, int nqps, PeerInfo* info) {
  c->cq = v.createCq(dev->ctx, nqps * (kSendDepth + kRecvDepth) + 16, c, dev->channel, 0);
  if (!c->cq) return errorf(hocclSystemError, "IB: ibv_create_cq on %s failed: %s", dev->name.c_str(), strerror(errno));
  if (ibv_req_notify_cq(c->cq, 0) != 0) return errorf(hocclSystemError, "IB: ibv_req_notify_cq failed");
  uint32_t psn = static_cast<uint32_t>(randomU64()) & 0xffffff;
  *info = PeerInfo();
  info->magic = kMagic;
  memcpy(info->gid, dev->gid.raw, 16);
  info->nqps = static_cast<uint32_t>(nqps);
  info->psn = psn;
  info->lid = dev->attr.lid;
  info->linkLayer = dev->attr.link_layer;
  info->mtu = static_cast<uint8_t>(dev->attr.active_mtu);
  info->gidIndex = dev->gidIndex;
  info->port = dev->port;
  info->pid = getpid();
  snprintf(info->device, sizeof info->device, "%s", dev->name.c_str());
  if (gethostname(info->host, sizeof info->host - 1) != 0) snprintf(info->host, sizeof info->host, "?");
  for (int i = 0; i < nqps; ++i) {
    ibv_qp_init_attr ia;
    memset(&ia, 0, sizeof ia);
    ia.send_cq = c->cq;
    ia.recv_cq = c->cq;
    ia.qp_type = IBV_QPT_RC;
    ia.cap.max_send_wr = kSendDepth;
    ia.cap.max_recv_wr = kRecvDepth;
    ia.cap.max_send_sge = 1;
    ia.cap.max_recv_sge = 1;
    ibv_qp* qp = v.createQp(dev->pd, &ia);
    if (!qp) return errorf(hocclSystemError, "IB: ibv_create_qp on %s failed: %s", dev->name.c_str(), strerror(errno));
    c->qps.push_back(qp);
    c->sqUsed.push_back(0);
    c->partsSeen.push_back(0);
    ibv_qp_attr a;
    memset(&a, 0, sizeof a);
    a.qp_state = IBV_QPS_INIT;
    a.pkey_index = 0;
    a.port_num = static_cast<uint8_t>(dev->port);
    a.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
    if (v.modifyQp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS) != 0)
      return errorf(hocclSystemError, "IB: QP to INIT on %s failed: %s", dev->name.c_str(), strerror(errno));
    info->qpn[i] = qp->qp_num;
    HOCCL_TRY(postRecvs(v, c, i, kRecvDepth));
  }
  FifoEntry** mem = c->isSend ? &c->fifo : &c->fifoOut;
  ibv_mr** mr = c->isSend ? &c->fifoMr : &c->fifoOutMr;
  *mem = static_cast<FifoEntry*>(aligned_alloc(4096, 4096));
  if (!*mem) return errorf(hocclSystemError, "IB: out of memory for a FIFO");
  memset(*mem, 0, 4096);
  *mr = v.regMr(dev->pd, *mem, 4096, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  if (!*mr) return errorf(hocclSystemError, "IB: registering a FIFO on %s failed: %s", dev->name.c_str(), strerror(errno));
  if (c->isSend) {
    info->fifoAddr = reinterpret_cast<uint64_t>(c->fifo);
    info->fifoRkey = (*mr)->rkey;
  }
  return Status();
}

Status toRtrRts(const Verbs& v, const IbNetOptions& opt, Comm* c, const PeerInfo& local) {
  const PeerInfo& r = c->remote;
  Device* dev = c->dev;
  for (size_t i = 0; i < c->qps.size(); ++i) {
    ibv_qp_attr a;
    memset(&a, 0, sizeof a);
    a.qp_state = IBV_QPS_RTR;
    a.path_mtu = static_cast<ibv_mtu>(std::min<int>(dev->attr.active_mtu, r.mtu));
    a.dest_qp_num = r.qpn[i];
    a.rq_psn = r.psn;
    a.max_dest_rd_atomic = 1;
    a.min_rnr_timer = 12;
    a.ah_attr.port_num = static_cast<uint8_t>(dev->port);
    if (dev->attr.link_layer == IBV_LINK_LAYER_ETHERNET) {
      a.ah_attr.is_global = 1;
      memcpy(a.ah_attr.grh.dgid.raw, r.gid, 16);
      a.ah_attr.grh.sgid_index = static_cast<uint8_t>(dev->gidIndex);
      a.ah_attr.grh.hop_limit = 255;
    } else {
      a.ah_attr.dlid = r.lid;
    }
    int mask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
               IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
    if (v.modifyQp(c->qps[i], &a, mask) != 0)
      return errorf(hocclSystemError, "IB: QP %#x to RTR on %s (remote QP %#x, remote GID %s) failed: %s",
                    c->qps[i]->qp_num, dev->name.c_str(), r.qpn[i], gidText(r.gid).c_str(), strerror(errno));
    memset(&a, 0, sizeof a);
    a.qp_state = IBV_QPS_RTS;
    a.timeout = static_cast<uint8_t>(opt.timeout);
    a.retry_cnt = static_cast<uint8_t>(opt.retryCnt);
    a.rnr_retry = 7;
    a.sq_psn = local.psn;
    a.max_rd_atomic = 1;
    mask = IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC;
    if (v.modifyQp(c->qps[i], &a, mask) != 0)
      return errorf(hocclSystemError, "IB: QP %#x to RTS on %s failed: %s", c->qps[i]->qp_num, dev->name.c_str(),
                    strerror(errno));
  }
  return Status();
}

Status checkPeerInfo(const PeerInfo& p, const std::string& addr) {
  if (p.magic != kMagic)
    return errorf(hocclInvalidUsage, "IB transport: %s is not a hoccl IB peer (does every rank use the same "
                  "HOCCL_NET?)", addr.c_str());
  if (p.nqps < 1 || p.nqps > kMaxQps)
    return errorf(hocclInternalError, "IB transport: %s announced %u QPs", addr.c_str(), p.nqps);
  return Status();
}

void setNonBlocking(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
}

}  // namespace

Status postRecvs(const Verbs& v, Comm* c, int qp, int n) {
  for (int i = 0; i < n; ++i) {
    ibv_recv_wr wr;
    memset(&wr, 0, sizeof wr);
    wr.wr_id = static_cast<uint64_t>(qp);
    ibv_recv_wr* bad = nullptr;
    if (ibv_post_recv(c->qps[qp], &wr, &bad) != 0)
      return errorf(hocclSystemError, "IB: ibv_post_recv on %s failed", c->dev->name.c_str());
  }
  return Status();
}

void destroyComm(const Verbs& v, Comm* c) {
  if (!c) return;
  for (auto& r : c->requests)
    if (r->ownsMr) c->dev->mrs.release(v, r->mr);
  for (ibv_qp* qp : c->qps) v.destroyQp(qp);
  if (c->cq) v.destroyCq(c->cq);
  if (c->fifoMr) v.deregMr(c->fifoMr);
  if (c->fifoOutMr) v.deregMr(c->fifoOutMr);
  free(c->fifo);
  free(c->fifoOut);
  if (c->sideFd >= 0) close(c->sideFd);
  delete c;
}

Status listenOn(const IbNetOptions& opt, Device* dev, ListenComm** out, Handle* h) {
  SockAddr local;
  std::string ifname;
  if (opt.localAddr.u.sa.sa_family != AF_UNSPEC && opt.ifnameRule.empty()) {
    local = opt.localAddr;
    local.setPort(0);
  } else {
    HOCCL_TRY(chooseLocalAddress(opt.ifnameRule, &local, &ifname));
  }
  auto lc = std::make_unique<ListenComm>();
  HOCCL_TRY(Socket::listen(local, &lc->listener, &lc->addr).context("IB transport side channel"));
  fcntl(lc->listener.fd(), F_SETFL, fcntl(lc->listener.fd(), F_GETFL) | O_NONBLOCK);
  lc->dev = dev;
  *h = Handle();
  h->magic = kMagic;
  h->addr = lc->addr;
  *out = lc.release();
  return Status();
}

Status connectStep(const Verbs& v, const IbNetOptions& opt, Device* dev, ConnectState* st, const Handle& h,
                   Comm** out) {
  std::string addr = h.addr.toString();
  if (st->phase == 0) {
    st->fd = ::socket(h.addr.u.sa.sa_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (st->fd < 0) return sysErrorf("IB transport: socket");
    if (::connect(st->fd, &h.addr.u.sa, h.addr.len()) != 0 && errno != EINPROGRESS)
      return sysErrorf("IB transport: connect to %s", addr.c_str());
    st->phase = 1;
  }
  if (st->phase == 1) {
    pollfd p{st->fd, POLLOUT, 0};
    if (poll(&p, 1, 0) <= 0) return Status();
    int err = 0;
    socklen_t l = sizeof err;
    getsockopt(st->fd, SOL_SOCKET, SO_ERROR, &err, &l);
    if (err) {
      errno = err;
      return sysErrorf("IB transport: connect to %s", addr.c_str());
    }
    setNonBlocking(st->fd);
    st->comm = new Comm();
    st->comm->isSend = true;
    st->comm->dev = dev;
    PeerInfo mine;
    HOCCL_TRY(createResources(v, dev, st->comm, std::max(1, std::min(opt.qpsPerConn, kMaxQps)), &mine));
    st->out.assign(reinterpret_cast<const char*>(&mine), sizeof mine);
    st->phase = 2;
  }
  if (st->phase == 2) {
    if (pumpOut(st) < 0) return sideError("to", addr);
    int in = pumpIn(st->fd, &st->in, sizeof st->in, &st->inLen);
    if (in < 0) return sideError("from", addr);
    if (in == 0 || st->outDone < st->out.size()) return Status();
    HOCCL_TRY(checkPeerInfo(st->in, addr));
    Comm* c = st->comm;
    c->remote = st->in;
    if (c->remote.nqps != c->qps.size())
      return errorf(hocclInternalError, "IB transport: %s answered with %u QPs for %zu", addr.c_str(), c->remote.nqps,
                    c->qps.size());
    PeerInfo mine;
    memcpy(&mine, st->out.data(), sizeof mine);
    HOCCL_TRY(toRtrRts(v, opt, c, mine));
    char ready = kReady;
    if (::send(st->fd, &ready, 1, MSG_NOSIGNAL) != 1) return sideError("to", addr);
    c->sideFd = st->fd;
    c->peer = describePeer(c->remote, addr);
    st->fd = -1;
    st->comm = nullptr;
    *out = c;
    HINFO(kSubNet, "IB: connected %s to %s, %zu QPs", dev->name.c_str(), c->peer.c_str(), c->qps.size());
  }
  return Status();
}

Status acceptStep(const Verbs& v, const IbNetOptions& opt, ListenComm* lc, Comm** out) {
  for (;;) {
    int fd = ::accept4(lc->listener.fd(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) break;
    setNonBlocking(fd);
    auto* x = new Exchange();
    x->fd = fd;
    lc->pending.push_back(x);
  }
  for (size_t i = 0; i < lc->pending.size(); ++i) {
    Exchange* x = lc->pending[i];
    SockAddr pa;
    socklen_t len = sizeof pa.u;
    std::string addr = getpeername(x->fd, &pa.u.sa, &len) == 0 ? pa.toString() : "?";
    Status st;
    if (x->phase == 0) {
      int in = pumpIn(x->fd, &x->in, sizeof x->in, &x->inLen);
      if (in < 0) st = sideError("from", addr);
      else if (in == 0) continue;
      else st = checkPeerInfo(x->in, addr);
      if (st.ok()) {
        x->comm = new Comm();
        x->comm->dev = lc->dev;
        x->comm->remote = x->in;
        PeerInfo mine;
        st = createResources(v, lc->dev, x->comm, static_cast<int>(x->in.nqps), &mine);
        if (st.ok()) st = toRtrRts(v, opt, x->comm, mine);
        x->out.assign(reinterpret_cast<const char*>(&mine), sizeof mine);
        x->phase = 1;
      }
    }
    if (st.ok() && x->phase == 1) {
      int o = pumpOut(x);
      char ready = 0;
      size_t got = 0;
      int in = o > 0 ? pumpIn(x->fd, &ready, 1, &got) : 0;
      if (o < 0 || in < 0) st = sideError(o < 0 ? "to" : "from", addr);
      else if (in > 0 && ready != kReady) st = errorf(hocclInternalError, "IB transport: bad ready byte from %s", addr.c_str());
      else if (in > 0) {
        Comm* c = x->comm;
        c->sideFd = x->fd;
        c->peer = describePeer(c->remote, addr);
        lc->pending.erase(lc->pending.begin() + static_cast<long>(i));
        delete x;
        *out = c;
        HINFO(kSubNet, "IB: accepted %s on %s, %zu QPs", c->peer.c_str(), lc->dev->name.c_str(), c->qps.size());
        return Status();
      }
    }
    if (!st.ok()) {
      lc->pending.erase(lc->pending.begin() + static_cast<long>(i));
      destroyComm(v, x->comm);
      close(x->fd);
      delete x;
      return st;
    }
  }
  return Status();
}

void closeListenComm(const Verbs& v, ListenComm* lc) {
  for (Exchange* x : lc->pending) {
    destroyComm(v, x->comm);
    close(x->fd);
    delete x;
  }
  delete lc;
}

void destroyConnectState(const Verbs& v, ConnectState* st) {
  if (!st) return;
  destroyComm(v, st->comm);
  if (st->fd >= 0) close(st->fd);
  delete st;
}

ConnectState* newConnectState() { return new ConnectState(); }

}  // namespace ibnet
}  // namespace hoccl

#endif  // HOCCL_HAVE_IBVERBS
