#include "src/bootstrap/liveness.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "base/clock.h"
#include "base/descriptors.h"
#include "base/log.h"
#include "base/thread_name.h"

namespace hoccl {

namespace {

// Every ping and its echo: 16 bytes, so that a stray connection (a port
// scan, a peer of another version) is told apart and dropped.
constexpr uint64_t kBeatMagic = 0x3154424c43434f48ull;  // "HOCCLBT1"
struct Beat {
  uint64_t magic;
  uint64_t seq;
};
static_assert(sizeof(Beat) == 16, "a beat travels as 16 bytes");

// Connections of processes that watch this one, at most (a flood of
// connections is refused rather than served).
constexpr size_t kMaxAnswering = 16384;

std::string ipOf(const SockAddr& a) {
  std::string s = a.toString();
  return s.substr(0, s.rfind(':'));
}

bool transientErrno(int e) { return e == EAGAIN || e == EWOULDBLOCK || e == EINTR; }

// The peer's process is gone or has closed its service (as opposed to a
// network that does not answer, which is what silence measures).
bool peerClosed(int e) { return e == ECONNREFUSED || e == ECONNRESET || e == EPIPE; }

}  // namespace

struct LivenessPeer {
  SockAddr addr;
  std::atomic<double> lastHeard{0};
  std::atomic<bool> left{false};
  // The heartbeat thread's, under Liveness::mu_:
  int watchers = 0;
  Socket conn;
  bool connecting = false;
  uint64_t seq = 0;
  size_t have = 0;  // bytes of the echo being read
  unsigned char buf[sizeof(Beat)] = {};
};

namespace {
// The process's service (Liveness::process), never destroyed (used at exit);
// held across a fork so that a child never inherits it locked.
std::mutex processMu;
std::weak_ptr<Liveness>* processCurrent = new std::weak_ptr<Liveness>();
void lockForFork() { processMu.lock(); }
void unlockAfterFork() { processMu.unlock(); }
}  // namespace

std::shared_ptr<Liveness> Liveness::process() {
  static const int registered = pthread_atfork(lockForFork, unlockAfterFork, unlockAfterFork);
  (void)registered;
  std::weak_ptr<Liveness>* current = processCurrent;
  std::lock_guard<std::mutex> lock(processMu);
  std::shared_ptr<Liveness> svc = current->lock();
  if (!svc || svc->pid_ != getpid()) {
    svc = create();
    *current = svc;
  }
  return svc;
}

std::shared_ptr<Liveness> Liveness::create() { return std::shared_ptr<Liveness>(new Liveness()); }

Liveness::Liveness() : pid_(getpid()) {
  OpeningDescriptor opening;
  wakeFd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  lastTick_ = nowSec();
}

Liveness::~Liveness() {
  if (getpid() != pid_) {
    // A forked child's copy: the thread lives in the parent only, and
    // joining it here would wait forever.
    if (thread_.joinable()) (void)new std::thread(std::move(thread_));
  } else {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    pausedCv_.notify_all();
    wake();
    if (thread_.joinable()) thread_.join();
  }
  if (wakeFd_ >= 0) ::close(wakeFd_);
}

void Liveness::wake() const {
  uint64_t one = 1;
  if (wakeFd_ >= 0) (void)!::write(wakeFd_, &one, sizeof one);
}

double Liveness::staleAfter() const { return 2 * interval_.load(std::memory_order_relaxed) + 0.5; }

int Liveness::listen(const SockAddr& local) {
  std::lock_guard<std::mutex> lock(mu_);
  const std::string ip = ipOf(local);
  for (const Listener& l : listeners_)
    if (l.ip == ip) return l.port;
  SockAddr at = local, bound;
  at.setPort(0);
  Listener l;
  Status st = Socket::listen(at, &l.sock, &bound);
  if (!st.ok()) {
    HWARN(kSubBootstrap, "no heartbeats from this process at %s: %s (peers on other hosts find it silent only "
          "by HOCCL_TIMEOUT)", ip.c_str(), st.message().c_str());
    return 0;
  }
  l.ip = ip;
  l.port = bound.port();
  listeners_.push_back(std::move(l));
  // The thread starts with the first watch: a process is watched only by
  // peers on other hosts, which it watches in turn from the same table,
  // and until then the kernel queues their connections and pings.
  wake();
  return listeners_.back().port;
}

std::unique_ptr<Liveness::Watch> Liveness::watch(const SockAddr& addr, double intervalSec) {
  std::unique_ptr<Watch> w(new Watch());
  std::lock_guard<std::mutex> lock(mu_);
  const std::string key = addr.toString();
  std::shared_ptr<LivenessPeer>& p = peers_[key];
  if (!p) {
    p = std::make_shared<LivenessPeer>();
    p->addr = addr;
    p->lastHeard = nowSec();
  }
  ++p->watchers;
  double was = interval_.load();
  while (intervalSec < was && !interval_.compare_exchange_weak(was, intervalSec)) {
  }
  ensureThreadLocked();
  wake();  // connect now: the first echo should not wait for the next round
  w->svc_ = shared_from_this();
  w->peer_ = p;
  return w;
}

Liveness::Watch::~Watch() {
  if (!svc_) return;
  std::lock_guard<std::mutex> lock(svc_->mu_);
  if (--peer_->watchers == 0) {
    auto it = svc_->peers_.find(peer_->addr.toString());
    if (it != svc_->peers_.end() && it->second == peer_) svc_->peers_.erase(it);  // the thread closes it
  }
}

double Liveness::Watch::silentFor() const {
  const double now = nowSec();
  if (peer_->left.load(std::memory_order_relaxed)) return 0;
  if (now - svc_->lastTick_.load(std::memory_order_relaxed) > svc_->staleAfter()) return 0;
  return std::max(0.0, now - peer_->lastHeard.load(std::memory_order_relaxed));
}

std::string Liveness::Watch::describe() const {
  std::lock_guard<std::mutex> lock(svc_->mu_);
  const LivenessPeer& p = *peer_;
  char out[256];
  if (!p.conn.valid()) return "no heartbeat connection open (the last one failed; the next round connects again)";
  if (p.connecting) return "the heartbeat connection is still being made (no answer to its SYN yet)";
  tcp_info ti{};
  socklen_t len = sizeof ti;
  if (getsockopt(p.conn.fd(), IPPROTO_TCP, TCP_INFO, &ti, &len) != 0)
    return "heartbeat connection open; " + std::to_string(p.seq) + " pings sent on it";
  snprintf(out, sizeof out,
           "heartbeat connection: %llu pings sent, %u segments unacknowledged, %u retransmissions of the oldest "
           "(backoff %u), rto %.0f ms, rtt %.1f ms, last data received %.1f s ago",
           static_cast<unsigned long long>(p.seq), ti.tcpi_unacked, static_cast<unsigned>(ti.tcpi_retransmits),
           static_cast<unsigned>(ti.tcpi_backoff), ti.tcpi_rto / 1e3, ti.tcpi_rtt / 1e3, ti.tcpi_last_data_recv / 1e3);
  return out;
}

void Liveness::pauseForTesting(bool paused) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    paused_ = paused;
  }
  pausedCv_.notify_all();
  wake();
}

void Liveness::ensureThreadLocked() {
  if (thread_.joinable()) return;
  lastTick_ = nowSec();
  Status st = startThread("the heartbeat thread", &thread_, [this] { run(); });
  if (!st.ok()) HWARN(kSubBootstrap, "no heartbeats: %s", st.message().c_str());
}

void Liveness::pingOrConnect(LivenessPeer& p, double now) {
  if (p.left) return;
  if (p.conn.valid() && !p.connecting) {
    Beat b{kBeatMagic, ++p.seq};
    ssize_t n = ::send(p.conn.fd(), &b, sizeof b, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0 && peerClosed(errno)) p.left = true;
    if (n < 0 && !transientErrno(errno)) p.conn.close();
    // A partial send (a full buffer: the link is stalled) is dropped with
    // the connection, which the next round makes again.
    if (n >= 0 && n != static_cast<ssize_t>(sizeof b)) p.conn.close();
    return;
  }
  if (p.conn.valid()) return;  // still connecting: a cut link keeps it so until the kernel gives up
  int fd;
  {
    OpeningDescriptor opening;
    fd = ::socket(p.addr.u.sa.sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  }
  if (fd < 0) return;  // out of descriptors: the next round tries again
  p.conn = Socket(fd);
  p.have = 0;
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  if (::connect(fd, &p.addr.u.sa, p.addr.len()) == 0) {
    finishConnect(p, now);
  } else if (errno == EINPROGRESS) {
    p.connecting = true;
  } else {
    if (peerClosed(errno)) p.left = true;
    p.conn.close();
  }
}

void Liveness::finishConnect(LivenessPeer& p, double now) {
  int err = 0;
  socklen_t len = sizeof err;
  getsockopt(p.conn.fd(), SOL_SOCKET, SO_ERROR, &err, &len);
  p.connecting = false;
  if (err != 0) {
    if (peerClosed(err)) p.left = true;
    p.conn.close();
    return;
  }
  pingOrConnect(p, now);  // the first ping at once
}

void Liveness::readPongs(LivenessPeer& p, double now) {
  for (;;) {
    ssize_t n = ::recv(p.conn.fd(), p.buf + p.have, sizeof p.buf - p.have, MSG_DONTWAIT);
    if (n < 0 && transientErrno(errno)) return;
    if (n <= 0) {  // closed in order, or reset: the peer's process or service is gone
      if (n == 0 || peerClosed(errno)) p.left = true;
      p.conn.close();
      return;
    }
    p.have += static_cast<size_t>(n);
    if (p.have < sizeof p.buf) continue;
    p.have = 0;
    Beat b;
    memcpy(&b, p.buf, sizeof b);
    if (b.magic != kBeatMagic) {
      p.conn.close();  // not a heartbeat service: try again next round
      return;
    }
    p.lastHeard = now;
  }
}

// Echoes every whole ping; false when the connection is to be dropped.
bool Liveness::answer(Answering& a) {
  for (;;) {
    ssize_t n = ::recv(a.sock.fd(), a.buf + a.have, sizeof a.buf - a.have, MSG_DONTWAIT);
    if (n < 0 && transientErrno(errno)) return true;
    if (n <= 0) return false;
    a.have += static_cast<size_t>(n);
    if (a.have < sizeof a.buf) continue;
    a.have = 0;
    Beat b;
    memcpy(&b, a.buf, sizeof b);
    if (b.magic != kBeatMagic) return false;
    // The echo of a ping the watcher cannot take (its buffer full) is
    // dropped: it pings again.
    (void)::send(a.sock.fd(), &b, sizeof b, MSG_NOSIGNAL | MSG_DONTWAIT);
  }
}

void Liveness::acceptAll(const Listener& l) {
  for (;;) {
    int fd;
    {
      OpeningDescriptor opening;
      fd = ::accept4(l.sock.fd(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    }
    if (fd < 0) return;
    if (answering_.size() >= kMaxAnswering) {
      ::close(fd);
      continue;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    answering_.push_back(Answering{Socket(fd)});
  }
}

void Liveness::run() {
  nameThisThread("hoccl-heartbeat");
  double nextPing = 0;
  std::vector<pollfd> fds;
  std::vector<std::shared_ptr<LivenessPeer>> polled;  // kept open until their events are handled
  for (;;) {
    double now;
    size_t nListen, nPeers;
    {
      std::unique_lock<std::mutex> lock(mu_);
      pausedCv_.wait(lock, [&] { return !paused_ || stop_; });
      if (stop_) return;
      now = nowSec();
      // This thread did not run for a while: the silence it missed is this
      // process's, not the peers'.
      if (now - lastTick_.load() > staleAfter()) {
        HWARN(kSubBootstrap, "the heartbeat thread of process %d did not run for %.1f s (stopped, or starved of CPU): "
              "peers may find this process silent", static_cast<int>(pid_), now - lastTick_.load());
        for (auto& [key, p] : peers_) p->lastHeard = now;
      }
      lastTick_ = now;
      if (now >= nextPing) {
        for (auto& [key, p] : peers_) pingOrConnect(*p, now);
        nextPing = now + interval_.load();
      }
      fds.clear();
      polled.clear();
      fds.push_back({wakeFd_, POLLIN, 0});
      for (const Listener& l : listeners_) fds.push_back({l.sock.fd(), POLLIN, 0});
      nListen = listeners_.size();
      for (auto& [key, p] : peers_) {
        if (!p->conn.valid()) continue;
        fds.push_back({p->conn.fd(), static_cast<short>(POLLIN | (p->connecting ? POLLOUT : 0)), 0});
        polled.push_back(p);
      }
      nPeers = polled.size();
      for (const Answering& a : answering_) fds.push_back({a.sock.fd(), POLLIN, 0});
    }
    const int waitMs = static_cast<int>(std::clamp((nextPing - now) * 1000 + 1, 0.0, 1000.0));
    int rc;
    do rc = poll(fds.data(), fds.size(), waitMs); while (rc < 0 && errno == EINTR);
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_) return;
    if (rc <= 0) continue;
    now = nowSec();
    uint64_t drained;
    if (fds[0].revents) (void)!::read(wakeFd_, &drained, sizeof drained);
    if (fds[0].revents) nextPing = 0;  // a new peer: connect at once
    for (size_t i = 0; i < nListen; ++i)
      if (fds[1 + i].revents) acceptAll(listeners_[i]);
    for (size_t i = 0; i < nPeers; ++i) {
      const short ev = fds[1 + nListen + i].revents;
      LivenessPeer& p = *polled[i];
      if (!ev || p.watchers == 0 || !p.conn.valid() || p.conn.fd() != fds[1 + nListen + i].fd) continue;
      if (p.connecting) finishConnect(p, now);
      else readPongs(p, now);
    }
    // Answering connections: the first ones answer their pings; the ones
    // accepted above were not polled yet.
    const size_t nAnswering = fds.size() - 1 - nListen - nPeers;
    std::vector<Answering> kept;
    kept.reserve(answering_.size());
    for (size_t i = 0; i < answering_.size(); ++i) {
      const short ev = i < nAnswering ? fds[1 + nListen + nPeers + i].revents : 0;
      if (ev && !answer(answering_[i])) continue;
      kept.push_back(std::move(answering_[i]));
    }
    answering_.swap(kept);
  }
}

}  // namespace hoccl
