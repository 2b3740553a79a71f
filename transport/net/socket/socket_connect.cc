// The TCP transport's connection set-up: listen, and connect/accept as
// non-blocking state machines (each call makes what progress it can and
// returns no comm until the control stream and every data stream exist).
#include <fcntl.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "base/random.h"
#include "base/log.h"
#include "transport/net/socket/socket_net.h"

namespace hoccl {
namespace socknet {
namespace {

void tune(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
}

Comm* makeComm(bool isSend, const std::string& peer, const std::vector<int>& fds) {
  Comm* c = new Comm();
  c->isSend = isSend;
  c->peer = peer;
  c->ctrlFd = fds[0];
  c->streams.resize(fds.size() - 1);
  for (size_t i = 1; i < fds.size(); ++i) c->streams[i - 1].fd = fds[i];
  return c;
}

std::string peerName(int fd) {
  SockAddr a;
  socklen_t len = sizeof a.u;
  if (getpeername(fd, &a.u.sa, &len) != 0) return "?";
  return a.toString();
}

}  // namespace

Status localAddress(const SocketNetOptions& opt, SockAddr* addr, std::string* ifname) {
  if (opt.ifnameRule.empty() && opt.localAddr.u.sa.sa_family != AF_UNSPEC) {
    *addr = opt.localAddr;
    addr->setPort(0);
    *ifname = opt.localIfname;
    return Status();
  }
  return chooseLocalAddress(opt.ifnameRule, addr, ifname);
}

Status listenOn(const SocketNetOptions& opt, ListenComm** out, Handle* h) {
  const int streams = opt.streams;
  SockAddr local;
  std::string ifname;
  HOCCL_TRY(localAddress(opt, &local, &ifname));
  auto lc = std::make_unique<ListenComm>();
  HOCCL_TRY(Socket::listen(local, &lc->listener, &lc->addr).context("socket transport listen on " + ifname));
  lc->streams = streams;
  h->magic = kMagic;
  h->addr = lc->addr;
  h->streams = streams;
  h->state = nullptr;
  *out = lc.release();
  return Status();
}

Status connectStep(ConnectState* st, const Handle& h, Comm** out) {
  int total = h.streams + 1;
  if (st->fds.empty()) {
    st->connId = randomU64();
    for (int i = 0; i < total; ++i) {
      int fd = ::socket(h.addr.u.sa.sa_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
      if (fd < 0) return sysErrorf("socket transport: socket");
      st->fds.push_back(fd);
      st->ready.push_back(false);
      if (::connect(fd, &h.addr.u.sa, h.addr.len()) != 0 && errno != EINPROGRESS)
        return sysErrorf("socket transport: connect to %s", h.addr.toString().c_str());
    }
  }
  bool all = true;
  for (int i = 0; i < total; ++i) {
    if (st->ready[i]) continue;
    pollfd p{st->fds[i], POLLOUT, 0};
    if (poll(&p, 1, 0) <= 0) {
      all = false;
      continue;
    }
    int err = 0;
    socklen_t l = sizeof err;
    getsockopt(st->fds[i], SOL_SOCKET, SO_ERROR, &err, &l);
    if (err) {
      errno = err;
      return sysErrorf("socket transport: connect to %s", h.addr.toString().c_str());
    }
    Hello hello{kMagic, st->connId, i - 1, h.streams};
    // 24 bytes into an empty socket buffer: never partial in practice; a
    // short write is treated as a failure rather than retried.
    if (::send(st->fds[i], &hello, sizeof hello, MSG_NOSIGNAL) != static_cast<ssize_t>(sizeof hello))
      return sysErrorf("socket transport: hello to %s", h.addr.toString().c_str());
    tune(st->fds[i]);
    st->ready[i] = true;
  }
  if (!all) return Status();
  *out = makeComm(true, h.addr.toString(), st->fds);
  st->fds.clear();
  HINFO(kSubNet, "socket transport: connected to %s with %d streams", h.addr.toString().c_str(), h.streams);
  return Status();
}

Status acceptStep(ListenComm* lc, Comm** out) {
  for (;;) {
    int fd = ::accept4(lc->listener.fd(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) break;
    lc->unidentified.push_back({fd, {0}, 0});
  }
  for (size_t i = 0; i < lc->unidentified.size();) {
    auto& p = lc->unidentified[i];
    ssize_t n = ::recv(p.fd, p.buf + p.len, sizeof(Hello) - p.len, MSG_DONTWAIT);
    if (n > 0) p.len += static_cast<size_t>(n);
    bool closed = n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
    if (p.len == sizeof(Hello) || closed) {
      Hello h;
      memcpy(&h, p.buf, sizeof h);
      int fd = p.fd;
      lc->unidentified.erase(lc->unidentified.begin() + static_cast<long>(i));
      if (closed || h.magic != kMagic || h.streams != lc->streams || h.index < -1 || h.index >= h.streams) {
        HWARN(kSubNet, "socket transport: refused a connection from %s (not a hoccl peer of this job)",
              peerName(fd).c_str());
        close(fd);
        continue;
      }
      auto& fds = lc->byConn[h.connId];
      if (fds.empty()) fds.assign(lc->streams + 1, -1);
      fds[h.index + 1] = fd;
      tune(fd);
      continue;
    }
    ++i;
  }
  for (auto it = lc->byConn.begin(); it != lc->byConn.end(); ++it) {
    bool complete = true;
    for (int fd : it->second) complete &= fd >= 0;
    if (!complete) continue;
    *out = makeComm(false, peerName(it->second[0]), it->second);
    lc->byConn.erase(it);
    return Status();
  }
  return Status();
}

}  // namespace socknet
}  // namespace hoccl
