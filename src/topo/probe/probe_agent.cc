// One node's side of a probe round (probe_agent.h).
#include "src/topo/probe/probe_agent.h"

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <thread>

#include "base/clock.h"

namespace hoccl {
namespace probe {
namespace {

constexpr uint32_t kMagic = 0x68707262;  // "hprb"
enum : uint32_t { kFlow = 1, kPing = 2 };

struct Hello {
  uint32_t magic, kind;
  int32_t src, round;
};

struct Rtts {
  std::vector<double> us;
  void summarize(Report* r) const {
    if (us.empty()) return;
    std::vector<double> v = us;
    std::sort(v.begin(), v.end());
    r->rttMinUs = v.front();
    r->rttMedUs = v[v.size() / 2];
    r->rttP90Us = v[std::min(v.size() - 1, size_t(0.9 * double(v.size())))];
  }
};

// Streams until `until` (monotonic seconds), then closes its side.
Status sendFlow(const Socket& s, double until) {
  // Its own buffer: the library is dlopen'ed (torch), where a large static
  // or thread_local one would take the process's static TLS or BSS.
  std::vector<char> space(size_t(1) << 18);
  char* buf = space.data();
  while (nowSec() < until) {
    pollfd p{s.fd(), POLLOUT, 0};
    const int ms = std::max(1, int((until - nowSec()) * 1000));
    if (poll(&p, 1, std::min(ms, 50)) <= 0) continue;
    const ssize_t n = ::send(s.fd(), buf, space.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) return sysErrorf("send");
  }
  shutdown(s.fd(), SHUT_WR);
  return Status();
}

// Receives a flow until the sender closes (or `until`); the goodput over
// [t0+lo, t0+hi] and the bytes that came ahead of that rate since the
// first byte (a token bucket's depth).
struct Rx {
  std::mutex mu;
  double gbps = 0, burstKB = 0;
};

Status recvFlow(const Socket& s, double t0, double lo, double hi, double until, Rx* r) {
  std::vector<char> space(size_t(1) << 20);  // not thread_local: see sendFlow
  char* buf = space.data();
  uint64_t total = 0, atLo = 0, atHi = 0, atAnchor = 0;
  double first = 0, tLo = 0, tHi = 0, tAnchor = 0;
  // The bucket is judged 20 ms in: long after it drained, soon enough
  // that an error in the rate adds little.
  const double anchor = std::min(0.02, lo / 2);
  for (;;) {
    pollfd p{s.fd(), POLLIN, 0};
    const double left = until - nowSec();
    if (left <= 0) break;
    if (poll(&p, 1, std::max(1, std::min(50, int(left * 1000)))) <= 0) continue;
    const ssize_t n = ::recv(s.fd(), buf, space.size(), MSG_DONTWAIT);
    if (n == 0) break;
    if (n < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) continue;
      return sysErrorf("recv");
    }
    const double t = nowSec();
    if (total == 0) first = t;
    total += uint64_t(n);
    if (t <= first + anchor) atAnchor = total, tAnchor = t;
    if (t <= t0 + lo) atLo = total, tLo = t;
    if (t <= t0 + hi) atHi = total, tHi = t;
  }
  if (tHi > tLo && atHi > atLo) {
    const double bps = double(atHi - atLo) / (tHi - tLo);
    std::lock_guard<std::mutex> lock(r->mu);
    r->gbps += bps * 8e-9;  // flows into one node add up
    if (tAnchor > first) r->burstKB = std::max(r->burstKB, (double(atAnchor) - bps * (tAnchor - first)) / 1000);
  }
  return Status();
}

// Ping-pongs 8 bytes: `count` times, or (count 0) until `until`, keeping
// the samples started inside [from, until).
Status pingPong(const Socket& s, int count, double from, double until, Rtts* out) {
  uint64_t v = 0;
  for (int i = 0; count > 0 ? i < count : nowSec() < until; ++i) {
    const double t = nowSec();
    HOCCL_TRY(s.sendAll(&v, sizeof v, Deadline::in(5)));
    HOCCL_TRY(s.recvAll(&v, sizeof v, Deadline::in(5)));
    if (t >= from) out->us.push_back((nowSec() - t) * 1e6);
    if (count == 0) usleep(500);
  }
  return Status();
}

// Sends back each 8 bytes until the partner closes (Socket's descriptors
// are non-blocking: a read may return part of a ping).
Status echo(const Socket& s) {
  uint64_t v;
  for (;;) {
    if (!s.waitReadable(30000)) return errorf(hocclRemoteError, "ping partner went quiet");
    const ssize_t n = ::recv(s.fd(), &v, sizeof v, 0);
    if (n == 0) return Status();
    if (n < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) continue;
      return sysErrorf("recv");
    }
    if (size_t(n) < sizeof v) HOCCL_TRY(s.recvAll(reinterpret_cast<char*>(&v) + n, sizeof v - size_t(n), Deadline::in(5)));
    HOCCL_TRY(s.sendAll(&v, sizeof v, Deadline::in(5)));
  }
}

}  // namespace

Status Agent::start(const SockAddr& local) { return Socket::listen(local, &listener_, &bound_); }

Status Agent::run(const Round& r, int index, int self, const std::vector<SockAddr>& peers, const Options& o,
                  Report* out) {
  *out = Report();
  const double t0 = nowSec();
  const double flowEnd = t0 + o.flowSec;
  const Flow* send = nullptr;
  int recvs = 0;
  int pingTo = -1, expectPings = 0;
  bool flowPing = false;
  for (const Flow& f : r.flows) {
    if (f.src == self) send = &f, flowPing = f.ping, pingTo = f.ping ? f.dst : pingTo;
    if (f.dst == self) ++recvs, expectPings += f.ping;
  }
  for (const PingPair& p : r.pings) {
    if (p.from == self) pingTo = p.to;
    if (p.to == self) ++expectPings;
  }
  const int expect = recvs + expectPings;
  Rx rx;
  Status acceptSt, sendSt, pingSt;
  Rtts rtts;
  std::vector<std::thread> threads;
  // Incoming: the flow (timed) and ping partners (echoed), told apart by
  // their hello.
  threads.emplace_back([&] {
    std::vector<std::thread> served;
    std::vector<Status> results(static_cast<size_t>(expect));
    for (int i = 0; i < expect && acceptSt.ok(); ++i) {
      Socket c;
      Status st = listener_.accept(Deadline::in(o.flowSec + 30), &c);
      Hello h{};
      if (st.ok()) st = c.recvAll(&h, sizeof h, Deadline::in(10));
      if (st.ok() && (h.magic != kMagic || h.round != index || h.src < 0 || h.src >= int(peers.size())))
        st = errorf(hocclRemoteError, "a connection that is not this round's probe (round %d)", index);
      if (!st.ok()) {
        acceptSt = st.context("waiting for round " + std::to_string(index) + "'s connections");
        break;
      }
      served.emplace_back([&, i, kind = h.kind, c = std::move(c)]() mutable {
        results[size_t(i)] = kind == kFlow ? recvFlow(c, t0, o.windowLo * o.flowSec, o.windowHi * o.flowSec,
                                                      flowEnd + 30, &rx)
                                           : echo(c);
      });
    }
    for (auto& t : served) t.join();
    for (Status& st : results)
      if (acceptSt.ok() && !st.ok()) acceptSt = st;
  });
  auto connect = [&](int peer, uint32_t kind, Socket* s) {
    Status st = Socket::connect(peers[peer], 50, Deadline::in(30), s);
    Hello h{kMagic, kind, self, index};
    if (st.ok()) st = s->sendAll(&h, sizeof h, Deadline::in(10));
    return st.context("connecting to node " + std::to_string(peer) + " in round " + std::to_string(index));
  };
  if (send) {
    threads.emplace_back([&] {
      Socket s;
      sendSt = connect(send->dst, kFlow, &s);
      if (sendSt.ok()) sendSt = sendFlow(s, flowEnd);
      if (sendSt.ok()) s.waitReadable(int(30000));  // the receiver closes after the last byte
    });
  }
  if (pingTo >= 0) {
    threads.emplace_back([&] {
      Socket s;
      pingSt = connect(pingTo, kPing, &s);
      if (!pingSt.ok()) return;
      if (flowPing) {
        pingSt = pingPong(s, 0, t0 + o.windowLo * o.flowSec, t0 + o.windowHi * o.flowSec, &rtts);
      } else {
        Rtts warm;
        pingSt = pingPong(s, 8, 0, 0, &warm);
        if (pingSt.ok()) pingSt = pingPong(s, o.pings, 0, 0, &rtts);
      }
    });
  }
  for (auto& t : threads) t.join();
  for (Status* st : {&acceptSt, &sendSt, &pingSt})
    if (!st->ok()) return *st;
  rtts.summarize(out);
  out->rxGbps = rx.gbps;
  out->rxBurstKB = rx.burstKB;
  return Status();
}

}  // namespace probe
}  // namespace hoccl
