#include "src/bootstrap/bootstrap.h"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <cstring>

#include "hoccl.h"
#include "src/bootstrap/wire.h"
#include "base/log.h"

namespace hoccl {
namespace {
constexpr uint32_t kTagCollBase = 0x10000000;  // allGather / barrier steps

// A rank that cannot join (out of descriptors, say) tells the rendezvous,
// which then stops every rank at once instead of waiting for this one
// (over the spare descriptor when this process ran out).
Status cannotJoin(const UniqueIdData& id, const BootstrapOptions& opt, Status why) {
  JoinFailure n{};
  n.rank = opt.rank;
  n.nranks = opt.nranks;
  n.code = why.code();
  snprintf(n.msg, sizeof n.msg, "rank %d (pid %d on %s) cannot join: %s", opt.rank, static_cast<int>(getpid()),
           opt.hostId.c_str(), why.message().c_str());
  Deadline dl = Deadline::in(std::min(1.0, opt.timeoutSec));
  auto tell = [&] {
    Socket s;
    if (Socket::connect(id.root, 0, dl, &s).ok()) (void)sendFrame(s, id.magic, kTagRootJoinFailed, &n, sizeof n, dl);
  };
  if (outOfDescriptors(why)) withSpareDescriptor(tell);
  else tell();
  return why;
}
}  // namespace

Status Bootstrap::join(const UniqueIdData& id, const BootstrapOptions& opt,
                       std::unique_ptr<Bootstrap>* out) {
  std::unique_ptr<Bootstrap> b(new Bootstrap());
  b->rank_ = opt.rank;
  b->magic_ = id.magic;
  b->timeoutSec_ = opt.timeoutSec;
  b->connectRetries_ = opt.connectRetries;
  Deadline dl = Deadline::in(opt.timeoutSec);

  // Listen on the interface that reaches the root: the one HOCCL_SOCKET_IFNAME
  // names, else the one the kernel routes the root's address through.
  SockAddr local;
  std::string ifname;
  Status st;
  if (opt.ifnameRule.empty()) {
    st = probeRouteTo(id.root, &local, &ifname);
    if (!st.ok()) return cannotJoin(id, opt, st.context("finding the interface that reaches the rendezvous"));
    HINFO(kSubBootstrap, "interface %s (%s) reaches the rendezvous at %s", ifname.c_str(), local.toString().c_str(),
          id.root.toString().c_str());
  } else {
    st = chooseLocalAddress(opt.ifnameRule, &local, &ifname);
    if (!st.ok()) return cannotJoin(id, opt, st);
  }
  if (local.u.sa.sa_family != id.root.u.sa.sa_family) {
    // Fall back to the wildcard of the root's family.
    local = SockAddr{};
    local.u.sa.sa_family = id.root.u.sa.sa_family;
    if (local.u.sa.sa_family == AF_INET) local.u.in4.sin_addr.s_addr = htonl(INADDR_ANY);
  }
  st = Socket::listen(local, &b->listener_, &b->listenAddr_);
  if (!st.ok()) return cannotJoin(id, opt, st.context("bootstrap listener"));

  Socket root;
  st = Socket::connect(id.root, std::max(opt.connectRetries, 1 << 20), dl, &root);
  if (outOfDescriptors(st)) return cannotJoin(id, opt, st.context("connecting to the rendezvous"));
  if (!st.ok()) return st.context("cannot reach the rendezvous (unique id or HOCCL_COMM_ID)");
  RootHello h{};
  h.protocol = kBootstrapProtocol;
  h.rank = opt.rank;
  h.nranks = opt.nranks;
  h.libVersion = opt.libVersion ? opt.libVersion : HOCCL_VERSION_CODE;
  snprintf(h.info.hostId, sizeof h.info.hostId, "%s", opt.hostId.c_str());
  snprintf(h.info.machineId, sizeof h.info.machineId, "%s", opt.machineId.c_str());
  h.info.pid = getpid();
  h.info.listenAddr = b->listenAddr_;
  if (opt.heartbeat.timeoutSec > 0) {
    b->liveness_ = Liveness::process();
    h.info.heartbeatPort = b->liveness_->listen(b->listenAddr_);
  }
  snprintf(h.fingerprint, sizeof h.fingerprint, "%s", opt.fingerprint.c_str());
  h.timeoutMs = static_cast<int32_t>(std::min(opt.timeoutSec * 1000.0, 2e9));
  HOCCL_TRY(sendFrame(root, id.magic, kTagRootHello, &h, sizeof h, dl).context("rendezvous"));
  uint32_t tag = 0;
  std::string payload;
  // A little past our own timeout: the rendezvous gives up on missing ranks
  // at it and sends their list.
  st = recvFrame(root, id.magic, &tag, &payload, Deadline::in(opt.timeoutSec + 2));
  waitForLocalRoot(id.magic, std::min(opt.timeoutSec, 10.0));
  if (!st.ok()) {
    if (st.code() == hocclTimeout)
      return errorf(hocclTimeout, "rank %d: timed out after %.0f s waiting for all %d ranks to join the rendezvous at %s",
                    opt.rank, opt.timeoutSec, opt.nranks, id.root.toString().c_str());
    return st.context("rendezvous at " + id.root.toString());
  }
  if (tag == kTagRootTimeout) return Status(hocclTimeout, "rank " + std::to_string(opt.rank) + ": " + payload);
  if (tag == kTagRootError) return Status(hocclInvalidUsage, "rendezvous refused rank " + std::to_string(opt.rank) + ": " + payload);
  if (tag == kTagRootFailed) return Status(hocclSystemError, "rank " + std::to_string(opt.rank) + ": " + payload);
  if (tag != kTagRootTable) return errorf(hocclInternalError, "rendezvous answered with unknown tag %u", tag);
  HOCCL_TRY(decodeRankTable(payload, opt.nranks, &b->table_));
  b->ifname_ = ifname;
  b->out_.resize(opt.nranks);
  b->in_.resize(opt.nranks);
  b->watchPeers(opt.heartbeat);
  HINFO(kSubBootstrap, "rank %d of %d joined via %s, listening on %s (%s)", opt.rank, opt.nranks,
        id.root.toString().c_str(), b->listenAddr_.toString().c_str(), ifname.c_str());
  *out = std::move(b);
  return Status();
}

Status Bootstrap::fromTable(uint64_t magic, int rank, std::vector<RankInfo> table, Socket listener,
                            double timeoutSec, std::unique_ptr<Bootstrap>* out, const HeartbeatOptions& hb) {
  std::unique_ptr<Bootstrap> b(new Bootstrap());
  b->rank_ = rank;
  b->magic_ = magic;
  b->timeoutSec_ = timeoutSec;
  b->listenAddr_ = table[rank].listenAddr;
  b->listener_ = std::move(listener);
  b->table_ = std::move(table);
  b->out_.resize(b->table_.size());
  b->in_.resize(b->table_.size());
  b->watchPeers(hb);
  *out = std::move(b);
  return Status();
}

void Bootstrap::watchPeers(const HeartbeatOptions& hb) {
  heartbeat_ = hb;
  watches_.resize(table_.size());
  if (hb.timeoutSec <= 0) return;
  const RankInfo& me = table_[rank_];
  for (int r = 0; r < nranks(); ++r) {
    const RankInfo& peer = table_[r];
    if (r == rank_ || peer.heartbeatPort <= 0 || strcmp(peer.hostId, me.hostId) == 0 || sameProcess(peer, me))
      continue;
    if (!liveness_) liveness_ = Liveness::process();
    SockAddr at = peer.listenAddr;
    at.setPort(peer.heartbeatPort);
    watches_[r] = liveness_->watch(at, hb.intervalSec);
  }
}

double Bootstrap::silentFor(int peer) const {
  if (peer < 0 || peer >= static_cast<int>(watches_.size()) || !watches_[peer]) return 0;
  return watches_[peer]->silentFor();
}

Status Bootstrap::peerSilent(int peer) const {
  const double silent = silentFor(peer);
  if (silent <= heartbeat_.timeoutSec || heartbeat_.timeoutSec <= 0) return Status();
  return errorf(hocclRemoteError,
                "rank %d: peer rank %d (pid %d on %s) is silent: no heartbeat for %.1f s (HOCCL_HEARTBEAT_TIMEOUT=%g "
                "s): its process is stopped or hung, its host frozen, or the link to it cut (%s)",
                rank_, peer, table_[peer].pid, table_[peer].hostId, silent, heartbeat_.timeoutSec,
                watches_[peer]->describe().c_str());
}

bool Bootstrap::quiet(int peer) const { return silentFor(peer) > std::max(1.0, 2 * heartbeat_.intervalSec); }

Status Bootstrap::newListener(Socket* sock, SockAddr* addr) const {
  SockAddr local = listenAddr_;
  local.setPort(0);
  return Socket::listen(local, sock, addr);
}

Status Bootstrap::connectTo(int peer) {
  if (out_[peer].valid()) return Status();
  Deadline dl = Deadline::in(timeoutSec_);
  Socket s;
  // Between refused attempts (the peer may not listen yet, or no longer),
  // what has arrived is read: a peer that stopped says so.
  auto stopped = [&] {
    (void)pump(Deadline::in(0), -1);
    HOCCL_TRY(peerSilent(peer));
    return abortSeen();
  };
  HOCCL_TRY(Socket::connect(table_[peer].listenAddr, connectRetries_, dl, &s, stopped)
                .context("bootstrap connection to rank " + std::to_string(peer)));
  int32_t me = rank_;
  HOCCL_TRY(sendFrame(s, magic_, kTagPeerHello, &me, sizeof me, dl));
  out_[peer] = std::move(s);
  return Status();
}

Status Bootstrap::send(int peer, uint32_t tag, const void* data, size_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  return sendLocked(peer, tag, data, bytes);
}

Status Bootstrap::recv(int peer, uint32_t tag, std::string* data) {
  std::lock_guard<std::mutex> lock(mu_);
  return recvLocked(peer, tag, data);
}

Status Bootstrap::sendLocked(int peer, uint32_t tag, const void* data, size_t bytes) {
  if (peer < 0 || peer >= nranks())
    return errorf(hocclInternalError, "bootstrap send to invalid rank %d", peer);
  if (peer == rank_) {
    inbox_[{peer, tag}].emplace_back(static_cast<const char*>(data), bytes);
    return Status();
  }
  HOCCL_TRY(connectTo(peer));
  Status st = sendFrame(out_[peer], magic_, tag, data, bytes, Deadline::in(timeoutSec_));
  if (!st.ok()) {
    st = noticeOf(st);
    out_[peer].close();
  }
  return st.context("bootstrap send to rank " + std::to_string(peer));
}

Bootstrap::~Bootstrap() {
  // What a peer sent and this rank never read would make the close a reset,
  // which can drop the abort notice this rank wrote just before.
  char drain[4096];
  for (std::vector<Socket>* v : {&out_, &in_})
    for (Socket& s : *v)
      while (s.valid() && ::recv(s.fd(), drain, sizeof drain, MSG_DONTWAIT) > 0) {
      }
  if (refused_ > 1)
    HWARN(kSubBootstrap, "rank %d: refused %d more incoming connections after the first", rank_, refused_ - 1);
}

void Bootstrap::recordAbort(const std::string& payload) {
  AbortNotice n;
  if (!decodeAbortNotice(payload, nranks(), &n).ok()) return;
  HINFO(kSubBootstrap, "rank %d: abort notice from rank %d: %s", rank_, n.rank, n.msg);
  std::lock_guard<std::mutex> lock(abortMu_);
  if (abort_.ok()) abort_ = Status(static_cast<hocclResult_t>(n.code), n.msg);
}

// Takes one connection off the listener. One that is not ours is refused
// (the first logged, the rest counted); the error returned is accept's
// own, which retrying cannot cure: the connection stays queued and the
// listener readable, so the caller would spin.
Status Bootstrap::acceptOne(const Deadline& dl) {
  Socket s;
  Status st = listener_.accept(dl, &s);
  if (!st.ok()) {
    if (outOfDescriptors(st)) readQueuedNotices();
    return errorf(st.code(), "rank %d: cannot accept a bootstrap connection: %s", rank_, st.message().c_str());
  }
  uint32_t tag = 0;
  std::string payload;
  int from = -1;
  st = recvFrame(s, magic_, &tag, &payload, Deadline::in(std::min(10.0, timeoutSec_)));
  if (st.ok() && tag == kTagAbort) {
    recordAbort(payload);
    return Status();
  }
  if (st.ok() && tag == kTagCallNotice) {
    CallNotice n;
    st = decodeCallNotice(payload, nranks(), &n);
    if (st.ok()) {
      std::lock_guard<std::mutex> lock(abortMu_);
      if (notices_.size() < 4096) notices_.push_back(n);  // bounded: a peer could send without end
      return Status();
    }
  }
  if (st.ok() && tag != kTagPeerHello)
    st = errorf(hocclInvalidUsage, "unexpected first message (tag %u)", tag);
  if (st.ok()) st = decodePeerHello(payload, nranks(), &from);
  if (st.ok()) {
    in_[from] = std::move(s);
  } else if (refused_++ == 0) {
    HWARN(kSubBootstrap, "rank %d: bootstrap refused an incoming connection: %s (more are only counted)", rank_,
          st.message().c_str());
  }
  return Status();
}

// A peer closed a connection under this rank (`lost`). If it stopped, its
// abort notice says why; it may close a connection before it has sent
// the notice (as it drops the connections it cannot keep), so this waits
// a moment for one. Returns the notice, else `lost`.
Status Bootstrap::noticeOf(const Status& lost) {
  Deadline grace = Deadline::in(std::min(1.0, timeoutSec_));
  while (abortSeen().ok() && !grace.expired()) {
    Status st = pump(grace, -1);
    if (!st.ok()) break;
  }
  Status notice = abortSeen();
  return notice.ok() ? lost : notice;
}

// Out of descriptors: takes the queued connections one at a time with the
// spare descriptor, keeping only what abort notices say: a peer that ran
// out first (often in this same process) says so there.
void Bootstrap::readQueuedNotices() {
  for (int left = 4 * nranks() + 16, more = 1; more && left > 0; --left) {
    more = 0;
    withSpareDescriptor([&] {
      Socket s;
      if (!listener_.accept(Deadline::in(0), &s).ok()) return;
      more = 1;
      uint32_t tag = 0;
      std::string payload;
      if (recvFrame(s, magic_, &tag, &payload, Deadline::in(std::min(1.0, timeoutSec_))).ok() && tag == kTagAbort)
        recordAbort(payload);
    });
  }
}

// Reads whatever has arrived into the inbox, waiting up to the deadline for
// at least one event.
Status Bootstrap::pump(const Deadline& dl, int waitPeer) {
  std::vector<pollfd> fds;
  std::vector<int> who;
  fds.push_back({listener_.fd(), POLLIN, 0});
  who.push_back(-1);
  for (int r = 0; r < nranks(); ++r) {
    if (in_[r].valid()) {
      fds.push_back({in_[r].fd(), POLLIN, 0});
      who.push_back(r);
    }
    // Only an abort notice comes back on a connection this rank opened.
    if (out_[r].valid()) {
      fds.push_back({out_[r].fd(), POLLIN, 0});
      who.push_back(nranks() + r);
    }
  }
  int rc;
  do rc = poll(fds.data(), fds.size(), dl.remainingMs(100)); while (rc < 0 && errno == EINTR);
  if (rc <= 0) return Status();
  for (size_t i = 0; i < fds.size(); ++i) {
    if (!fds[i].revents) continue;
    if (who[i] < 0) {
      HOCCL_TRY(acceptOne(dl));
      continue;
    }
    if (who[i] >= nranks()) {
      Socket& back = out_[who[i] - nranks()];
      uint32_t tag = 0;
      std::string payload;
      if (recvFrame(back, magic_, &tag, &payload, Deadline::in(std::min(1.0, timeoutSec_))).ok() && tag == kTagAbort)
        recordAbort(payload);
      else
        back.close();  // the peer closed it: the next send reconnects
      continue;
    }
    int from = who[i];
    uint32_t tag = 0;
    std::string payload;
    Status st = recvFrame(in_[from], magic_, &tag, &payload, Deadline::in(timeoutSec_));
    if (!st.ok()) {
      in_[from].close();
      if (from != waitPeer) continue;
      HOCCL_TRY(noticeOf(Status()));
      return Status(hocclRemoteError, "rank " + std::to_string(from) + " (pid " +
                                            std::to_string(table_[from].pid) + " on " +
                                            table_[from].hostId + ") closed its bootstrap connection: " +
                                            st.message());
    }
    if (tag == kTagAbort) recordAbort(payload);
    else inbox_[{from, tag}].push_back(std::move(payload));
  }
  return Status();
}

Status Bootstrap::recvLocked(int peer, uint32_t tag, std::string* data) {
  if (peer < 0 || peer >= nranks())
    return errorf(hocclInternalError, "bootstrap recv from invalid rank %d", peer);
  Deadline dl = Deadline::in(timeoutSec_);
  int polls = 0;  // pumps so far: each waits up to 100 ms
  for (;;) {
    HOCCL_TRY(abortSeen());
    auto it = inbox_.find({peer, tag});
    if (it != inbox_.end() && !it->second.empty()) {
      *data = std::move(it->second.front());
      it->second.pop_front();
      if (it->second.empty()) inbox_.erase(it);
      return Status();
    }
    if (dl.expired())
      return errorf(hocclTimeout, "rank %d: timed out after %.0f s waiting for a bootstrap message from rank %d (pid %d on %s)",
                    rank_, timeoutSec_, peer, table_[peer].pid, table_[peer].hostId);
    HOCCL_TRY(peerSilent(peer));
    if (waitHook_ && ++polls > 1) {
      std::vector<CallNotice> got;
      {
        std::lock_guard<std::mutex> lock(abortMu_);
        got.swap(notices_);
      }
      HOCCL_TRY(waitHook_(peer, std::move(got)));
    }
    HOCCL_TRY(pump(dl, peer));
  }
}

Status Bootstrap::allGather(void* all, size_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  int n = nranks();
  if (n == 1) return Status();
  char* base = static_cast<char*>(all);
  int next = (rank_ + 1) % n, prev = (rank_ + n - 1) % n;
  uint32_t tag = kTagCollBase + (collTag_++ & 0x0fffffff);
  // Ring: at step s, forward the block that originated s ranks back.
  for (int s = 0; s < n - 1; ++s) {
    int sendBlock = (rank_ - s + n) % n;
    int recvBlock = (rank_ - s - 1 + n) % n;
    HOCCL_TRY(sendLocked(next, tag, base + sendBlock * bytes, bytes));
    std::string got;
    HOCCL_TRY(recvLocked(prev, tag, &got));
    if (got.size() != bytes)
      return errorf(hocclInvalidUsage, "bootstrap allgather: rank %d sent %zu bytes, expected %zu (mismatched calls?)",
                    prev, got.size(), bytes);
    memcpy(base + recvBlock * bytes, got.data(), bytes);
  }
  return Status();
}

Status Bootstrap::barrier() {
  std::vector<char> dummy(nranks());
  return allGather(dummy.data(), 1);
}

Status Bootstrap::abortSeen() {
  std::lock_guard<std::mutex> lock(abortMu_);
  return ignoreAborts_ ? Status() : abort_;
}

void Bootstrap::setIgnoreAborts(bool on) {
  std::lock_guard<std::mutex> lock(abortMu_);
  ignoreAborts_ = on;
}

Status Bootstrap::pollAbort() {
  std::unique_lock<std::mutex> lock(mu_, std::try_to_lock);
  if (lock.owns_lock()) {
    Status st = pump(Deadline::in(0), -1);
    (void)st;  // only aborts matter here; pump keeps the rest for recv
  }
  return abortSeen();
}

void Bootstrap::broadcastAbort(hocclResult_t code, const std::string& msg, const std::vector<bool>& tell,
                               double budgetSec) {
  AbortNotice notice{};
  notice.rank = rank_;
  notice.code = code;
  snprintf(notice.msg, sizeof notice.msg, "%s", msg.c_str());
  sendShort(kTagAbort, &notice, sizeof notice, tell, budgetSec, true);
}

void Bootstrap::sendCallNotice(const CallNotice& notice, const std::vector<bool>& tell, double budgetSec) {
  sendShort(kTagCallNotice, &notice, sizeof notice, tell, budgetSec, false);
}

Status Bootstrap::whileWaiting(int peer) {
  HOCCL_TRY(pollAbort());
  HOCCL_TRY(peerSilent(peer));
  if (!waitHook_) return Status();
  std::vector<CallNotice> got;
  {
    std::lock_guard<std::mutex> lock(abortMu_);
    got.swap(notices_);
  }
  return waitHook_(peer, std::move(got));
}

std::vector<CallNotice> Bootstrap::takeCallNotices() {
  (void)pollAbort();  // reads what has arrived
  std::lock_guard<std::mutex> lock(abortMu_);
  std::vector<CallNotice> out;
  out.swap(notices_);
  return out;
}

void Bootstrap::sendShort(uint32_t tag, const void* data, size_t bytes, const std::vector<bool>& tell,
                          double budgetSec, bool viaExisting) {
  FrameHeader h{magic_, tag, static_cast<uint32_t>(bytes)};
  std::string frame(reinterpret_cast<const char*>(&h), sizeof h);
  frame.append(static_cast<const char*>(data), bytes);
  // First, where asked, the connections this rank already has with a peer,
  // in either direction (the peer reads both; see pump), each a whole frame
  // into an idle socket's buffer or nothing. (Not from inside a bootstrap
  // call, which holds mu_: the call check's notices go below only.)
  std::vector<bool> told(nranks(), false);
  std::unique_lock<std::mutex> lock(mu_, std::defer_lock);
  if (viaExisting) (void)lock.try_lock();  // owns_lock() below says whether it did
  for (int r = 0; lock.owns_lock() && r < nranks(); ++r) {
    if (r == rank_ || r >= static_cast<int>(tell.size()) || !tell[r]) continue;
    for (const Socket* s : {&out_[r], &in_[r]})
      if (!told[r] && s->valid())
        told[r] = ::send(s->fd(), frame.data(), frame.size(), MSG_NOSIGNAL | MSG_DONTWAIT) ==
                  static_cast<ssize_t>(frame.size());
  }
  if (lock.owns_lock()) lock.unlock();
  // Then a connection of its own to each of the others, all at once and
  // without blocking: a peer behind a cut link must not hold up the
  // others, and the whole broadcast stays within budget.
  struct Pending {
    int fd;
    size_t sent;
  };
  std::vector<Pending> pending;
  std::vector<int> starved;  // peers left for the spare descriptor: this process ran out
  for (int r = 0; r < nranks(); ++r) {
    if (r == rank_ || r >= static_cast<int>(tell.size()) || !tell[r] || told[r] || quiet(r)) continue;
    const SockAddr& a = table_[r].listenAddr;
    int fd;
    {
      OpeningDescriptor opening;
      fd = ::socket(a.u.sa.sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    }
    if (fd < 0 && (errno == EMFILE || errno == ENFILE)) starved.push_back(r);
    if (fd < 0) continue;
    if (::connect(fd, &a.u.sa, a.len()) != 0 && errno != EINPROGRESS) {
      ::close(fd);
      continue;
    }
    pending.push_back({fd, 0});
  }
  Deadline dl = Deadline::in(budgetSec);
  while (!pending.empty() && !dl.expired()) {
    std::vector<pollfd> fds;
    for (const Pending& p : pending) fds.push_back({p.fd, POLLOUT, 0});
    int rc = poll(fds.data(), fds.size(), dl.remainingMs());
    if (rc < 0 && errno != EINTR) break;
    std::vector<Pending> left;
    for (size_t i = 0; i < pending.size(); ++i) {
      Pending p = pending[i];
      bool finished = false;
      if (fds[i].revents & (POLLERR | POLLHUP)) {
        finished = true;  // refused or reset: that peer is gone
      } else if (fds[i].revents & POLLOUT) {
        ssize_t n = ::send(p.fd, frame.data() + p.sent, frame.size() - p.sent, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n > 0) p.sent += static_cast<size_t>(n);
        finished = n < 0 ? (errno != EAGAIN && errno != EINTR) : p.sent == frame.size();
      }
      if (finished) ::close(p.fd);
      else left.push_back(p);
    }
    pending.swap(left);
  }
  for (const Pending& p : pending) ::close(p.fd);
  // One at a time through the spare; a local peer's kernel completes the
  // connection at once, so each takes about a round trip.
  for (int r : starved) {
    if (dl.expired()) break;
    withSpareDescriptor([&] {
      Socket s;
      Deadline one = Deadline::in(std::min(1.0, dl.remainingMs() / 1000.0));
      if (Socket::connect(table_[r].listenAddr, 0, one, &s).ok()) (void)s.sendAll(frame.data(), frame.size(), one);
    });
  }
}

}  // namespace hoccl
