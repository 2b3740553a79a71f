// The rendezvous ("root"): collects one hello per rank, checks that all
// ranks agree on the job, the library version and the wire settings, and
// answers each with the table of all ranks or with the error.
#include <fcntl.h>
#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <condition_variable>
#include <mutex>
#include <map>
#include <memory>
#include <thread>
#include <vector>

#include "hoccl.h"
#include "src/bootstrap/wire.h"
#include "base/log.h"
#include "base/thread_name.h"

namespace hoccl {

Status sendFrame(const Socket& s, uint64_t magic, uint32_t tag, const void* data, size_t bytes,
                 const Deadline& dl) {
  FrameHeader h{magic, tag, static_cast<uint32_t>(bytes)};
  HOCCL_TRY(s.sendAll(&h, sizeof h, dl));
  if (bytes) HOCCL_TRY(s.sendAll(data, bytes, dl));
  return Status();
}

Status recvFrameRaw(const Socket& s, FrameHeader* h, std::string* payload, const Deadline& dl) {
  char raw[sizeof *h];
  HOCCL_TRY(s.recvAll(raw, sizeof raw, dl));
  HOCCL_TRY(decodeFrameHeader(raw, sizeof raw, h));
  payload->resize(h->len);
  if (h->len) HOCCL_TRY(s.recvAll(payload->data(), h->len, dl));
  return Status();
}

Status recvFrame(const Socket& s, uint64_t magic, uint32_t* tag, std::string* payload,
                 const Deadline& dl) {
  FrameHeader h;
  HOCCL_TRY(recvFrameRaw(s, &h, payload, dl));
  if (h.magic != magic)
    return errorf(hocclInvalidUsage,
                  "refused a message from another job (its magic %016llx, ours %016llx): a stale "
                  "or foreign peer, or a unique id from another run",
                  static_cast<unsigned long long>(h.magic), static_cast<unsigned long long>(magic));
  *tag = h.tag;
  return Status();
}

Status decodeCallNotice(const std::string& payload, int nranks, CallNotice* out) {
  if (payload.size() != sizeof *out)
    return errorf(hocclInvalidUsage, "bootstrap: malformed call notice (%zu bytes)", payload.size());
  memcpy(out, payload.data(), sizeof *out);
  if (out->rank < 0 || out->rank >= nranks)
    return errorf(hocclInvalidUsage, "bootstrap: call notice from unknown rank %d", out->rank);
  return Status();
}

namespace {

// A fixed-size string field from the wire: terminated, or refused.
bool terminated(const char* s, size_t size) { return memchr(s, '\0', size) != nullptr; }

Status checkRankInfo(const RankInfo& info, const char* what) {
  if (!terminated(info.hostId, sizeof info.hostId) || !terminated(info.machineId, sizeof info.machineId))
    return errorf(hocclInvalidUsage, "%s: unterminated host or machine id", what);
  int family = info.listenAddr.u.sa.sa_family;
  if (family != AF_INET && family != AF_INET6)
    return errorf(hocclInvalidUsage, "%s: listening address has unknown family %d", what, family);
  return Status();
}

}  // namespace

Status decodeFrameHeader(const void* bytes, size_t n, FrameHeader* out) {
  if (n < sizeof *out) return errorf(hocclInvalidUsage, "short bootstrap frame header (%zu bytes)", n);
  memcpy(out, bytes, sizeof *out);
  if (out->len > kMaxFrameBytes)
    return errorf(hocclInvalidUsage, "refused a bootstrap message of %u bytes (limit %u)", out->len, kMaxFrameBytes);
  return Status();
}

Status decodeRootHello(const std::string& payload, RootHello* out) {
  if (payload.size() != sizeof *out)
    return errorf(hocclInvalidUsage, "malformed hello: %zu bytes, expected %zu (another hoccl version?)",
                  payload.size(), sizeof *out);
  memcpy(out, payload.data(), sizeof *out);
  if (out->protocol != kBootstrapProtocol)
    return errorf(hocclInvalidUsage, "bootstrap protocol %u differs from the rendezvous' %u", out->protocol,
                  kBootstrapProtocol);
  if (!terminated(out->fingerprint, sizeof out->fingerprint))
    return errorf(hocclInvalidUsage, "malformed hello: unterminated settings fingerprint");
  HOCCL_TRY(checkRankInfo(out->info, "malformed hello"));
  if (out->nranks < 1 || out->nranks > kMaxRanks)
    return errorf(hocclInvalidUsage, "nranks must be in [1, %d] (got %d)", kMaxRanks, out->nranks);
  if (out->rank < 0 || out->rank >= out->nranks)
    return errorf(hocclInvalidUsage, "rank %d is out of range [0, %d)", out->rank, out->nranks);
  return Status();
}

Status decodeRankTable(const std::string& payload, int nranks, std::vector<RankInfo>* out) {
  if (nranks < 1 || payload.size() != static_cast<size_t>(nranks) * sizeof(RankInfo))
    return errorf(hocclInternalError, "rendezvous sent a malformed table (%zu bytes for %d ranks)", payload.size(),
                  nranks);
  out->resize(nranks);
  memcpy(out->data(), payload.data(), payload.size());
  for (const RankInfo& info : *out) HOCCL_TRY(checkRankInfo(info, "rendezvous sent a malformed table"));
  return Status();
}

Status decodePeerHello(const std::string& payload, int nranks, int* from) {
  int32_t r = -1;
  if (payload.size() != sizeof r) return errorf(hocclInvalidUsage, "bootstrap: malformed hello from a peer");
  memcpy(&r, payload.data(), sizeof r);
  if (r < 0 || r >= nranks) return errorf(hocclInvalidUsage, "bootstrap: hello from unknown rank %d", r);
  *from = r;
  return Status();
}

Status decodeAbortNotice(const std::string& payload, int nranks, AbortNotice* out) {
  if (payload.size() != sizeof *out)
    return errorf(hocclInvalidUsage, "bootstrap: malformed abort notice (%zu bytes)", payload.size());
  memcpy(out, payload.data(), sizeof *out);
  if (out->rank < 0 || out->rank >= nranks)
    return errorf(hocclInvalidUsage, "bootstrap: abort notice from unknown rank %d", out->rank);
  if (out->code <= hocclSuccess || out->code >= hocclNumResults) out->code = hocclRemoteError;
  out->msg[sizeof out->msg - 1] = '\0';
  return Status();
}

Status decodeJoinFailure(const std::string& payload, JoinFailure* out) {
  if (payload.size() != sizeof *out)
    return errorf(hocclInvalidUsage, "bootstrap: malformed join failure (%zu bytes)", payload.size());
  memcpy(out, payload.data(), sizeof *out);
  if (out->nranks < 1 || out->nranks > kMaxRanks || out->rank < 0 || out->rank >= out->nranks)
    return errorf(hocclInvalidUsage, "bootstrap: join failure of rank %d of %d", out->rank, out->nranks);
  if (out->code <= hocclSuccess || out->code >= hocclNumResults) out->code = hocclSystemError;
  out->msg[sizeof out->msg - 1] = '\0';
  return Status();
}

namespace {

// The first line where two "NAME=value\n" lists differ, as "NAME=a" / "NAME=b".
void firstDifference(const std::string& a, const std::string& b, std::string* la, std::string* lb) {
  size_t pa = 0, pb = 0;
  while (pa < a.size() || pb < b.size()) {
    size_t ea = a.find('\n', pa), eb = b.find('\n', pb);
    if (ea == std::string::npos) ea = a.size();
    if (eb == std::string::npos) eb = b.size();
    std::string x = a.substr(pa, ea - pa), y = b.substr(pb, eb - pb);
    if (x != y) {
      *la = x.empty() ? "(nothing)" : x;
      *lb = y.empty() ? "(nothing)" : y;
      return;
    }
    pa = ea + 1;
    pb = eb + 1;
  }
}

class Root {
 public:
  Root(Socket listener, uint64_t magic, double timeoutSec, std::string timeoutFrom)
      : listener_(std::move(listener)), magic_(magic), timeoutSec_(timeoutSec), timeoutFrom_(std::move(timeoutFrom)) {}

  void run() {
    int nranks = -1, joined = 0;
    std::vector<Socket> conns;
    std::vector<RootHello> hellos;
    std::string fatal;
    bool failed = false;  // fatal is a failure of this process or a rank's, not the ranks' mistake
    int gone = -1;        // the rank that could not join
    // The unique id does not expire (hoccl.h: the rendezvous is served
    // until all ranks have joined): the first rank may come any time after
    // hocclGetUniqueId. The timeout runs from its hello.
    Deadline joinDl = Deadline::in(HUGE_VAL);
    double joinTimeoutSec = timeoutSec_;
    std::string joinTimeoutFrom = timeoutFrom_ + " of the process serving the rendezvous";
    while ((nranks < 0 || joined < nranks) && fatal.empty()) {
      Socket c;
      Status accepted = listener_.accept(joinDl, &c);
      if (accepted.code() == hocclTimeout) break;
      if (!accepted.ok()) {
        failed = true;
        fatal = "the rendezvous (pid " + std::to_string(getpid()) + ") cannot accept the ranks' connections: " +
                accepted.message();
        break;
      }
      FrameHeader fh{};
      std::string payload;
      Status st = recvFrameRaw(c, &fh, &payload, Deadline::in(std::min(10.0, timeoutSec_)));
      if (!st.ok()) {
        HWARN(kSubBootstrap, "rendezvous: dropped a connection: %s", st.message().c_str());
        continue;
      }
      if (fh.magic != magic_) {
        char msg[256];
        snprintf(msg, sizeof msg,
                 "the rendezvous at this address belongs to another job (magic %016llx, yours "
                 "%016llx): a stale unique id or HOCCL_COMM_ID shared by two jobs",
                 static_cast<unsigned long long>(magic_), static_cast<unsigned long long>(fh.magic));
        HWARN(kSubBootstrap, "rendezvous: refused a peer from another job (magic %016llx)",
              static_cast<unsigned long long>(fh.magic));
        sendFrame(c, fh.magic, kTagRootError, msg, strlen(msg), Deadline::in(2));
        continue;
      }
      JoinFailure gaveUp;
      if (fh.tag == kTagRootJoinFailed && decodeJoinFailure(payload, &gaveUp).ok()) {
        failed = true;
        fatal = gaveUp.msg;
        if (nranks < 0) {
          nranks = gaveUp.nranks;
          conns.resize(nranks);
          hellos.resize(nranks);
        }
        if (gaveUp.rank < nranks) gone = gaveUp.rank;
        break;
      }
      RootHello h;
      st = fh.tag == kTagRootHello ? decodeRootHello(payload, &h)
                                   : Status(hocclInvalidUsage, "expected a hello, got tag " + std::to_string(fh.tag));
      if (!st.ok()) {
        reply(c, kTagRootError, st.message());
        continue;
      }
      if (nranks < 0) {
        nranks = h.nranks;
        conns.resize(nranks);
        hellos.resize(nranks);
        joinDl = Deadline::in(timeoutSec_);
      }
      if (h.nranks != nranks) {
        fatal = "rank " + std::to_string(h.rank) + " was started with nranks=" +
                std::to_string(h.nranks) + " but the ranks before it with nranks=" + std::to_string(nranks);
        reply(c, kTagRootError, fatal);
        break;
      }
      if (conns[h.rank].valid()) {
        fatal = "rank " + std::to_string(h.rank) + " joined twice (pids " +
                std::to_string(hellos[h.rank].info.pid) + " and " + std::to_string(h.info.pid) + ")";
        reply(c, kTagRootError, fatal);
        break;
      }
      if (h.timeoutMs > 0 && Deadline::in(h.timeoutMs / 1000.0).at() < joinDl.at()) {
        joinDl = Deadline::in(h.timeoutMs / 1000.0);
        joinTimeoutSec = h.timeoutMs / 1000.0;
        // The hello does not say which of them set it.
        joinTimeoutFrom = "rank " + std::to_string(h.rank) + "'s HOCCL_TIMEOUT, hocclConfig_t.timeoutSec or .timeoutMs";
      }
      conns[h.rank] = std::move(c);
      hellos[h.rank] = h;
      ++joined;
    }
    const bool timedOut = fatal.empty() && (nranks < 0 || joined < nranks);
    if (timedOut) {
      char secs[32];
      snprintf(secs, sizeof secs, "%g", joinTimeoutSec);
      fatal = std::string("timed out after ") + secs + " s (" + joinTimeoutFrom + ") waiting for ranks to join: ";
      fatal += std::to_string(joined) + " of " + std::to_string(nranks) + " joined; missing:";
      int listed = 0;
      for (int r = 0; r < nranks && listed < 16; ++r)
        if (!conns[r].valid()) { fatal += " " + std::to_string(r); ++listed; }
      if (nranks - joined > listed) fatal += " ...";
    }
    if (fatal.empty()) fatal = checkAgreement(hellos);
    // Highest rank first: the rendezvous usually lives in rank 0's process,
    // which may exit as soon as it has its answer.
    for (int r = std::min(nranks, static_cast<int>(conns.size())) - 1; r >= 0; --r) {
      if (!conns[r].valid()) continue;
      if (!fatal.empty()) {
        reply(conns[r], timedOut ? kTagRootTimeout : failed ? kTagRootFailed : kTagRootError, fatal);
        continue;
      }
      std::vector<RankInfo> table(nranks);
      for (int i = 0; i < nranks; ++i) table[i] = hellos[i].info;
      sendFrame(conns[r], magic_, kTagRootTable, table.data(), table.size() * sizeof(RankInfo),
                Deadline::in(std::min(10.0, timeoutSec_)));
    }
    if (!fatal.empty()) HWARN(kSubBootstrap, "rendezvous failed: %s", fatal.c_str());
    if (!fatal.empty() && !timedOut) {
      std::vector<bool> told(std::max(nranks, 0));
      for (int r = 0; r < nranks; ++r) told[r] = r == gone || conns[r].valid();
      // Before any rank arrived the join deadline is open-ended: answer late
      // ranks for one timeout, no longer.
      const Deadline answerDl = nranks < 0 ? Deadline::in(timeoutSec_) : joinDl;
      answerTheRest(fatal, failed ? kTagRootFailed : kTagRootError, std::move(told), answerDl);
    }
  }

  int listenerFd() const { return listener_.fd(); }
  void closeListener() { listener_.close(); }

 private:
  static std::string checkAgreement(const std::vector<RootHello>& hellos) {
    const RootHello& ref = hellos[0];
    for (size_t r = 1; r < hellos.size(); ++r) {
      const RootHello& h = hellos[r];
      if (h.libVersion != ref.libVersion)
        return "rank " + std::to_string(r) + " runs hoccl version " + std::to_string(h.libVersion) +
               " but rank 0 runs " + std::to_string(ref.libVersion);
      if (strcmp(h.fingerprint, ref.fingerprint) != 0) {
        std::string a, b;
        firstDifference(h.fingerprint, ref.fingerprint, &a, &b);
        return "configuration differs: rank " + std::to_string(r) + " has " + a + " but rank 0 has " + b;
      }
    }
    return "";
  }

  // After a failure or a refusal (a rank given twice, say), answers each
  // rank still to come with it, until every rank has been told (`told`,
  // which grows once the number of ranks is known; until then, only those
  // already queued) or the deadline: none then waits for a rendezvous that
  // gave up, or is reset when its listener closes. Out of descriptors,
  // each is taken with the spare one.
  void answerTheRest(const std::string& msg, uint32_t tag, std::vector<bool> told, const Deadline& dl) {
    for (int left = 4 * kMaxAnswered, backoffMs = 1; left > 0; --left) {
      bool waiting = std::find(told.begin(), told.end(), false) != told.end();
      if (!listener_.waitReadable(waiting ? dl.remainingMs() : 0)) return;
      int rank = -1, nranks = 0;
      Socket c;
      Status st = listener_.accept(Deadline::in(0), &c);
      if (st.ok()) {
        answerOne(c, tag, msg, &rank, &nranks);
      } else if (!outOfDescriptors(st)) {
        return;
      } else if (!withSpareDescriptor([&] {
                   Socket s;
                   if (listener_.accept(Deadline::in(0), &s).ok()) answerOne(s, tag, msg, &rank, &nranks);
                 })) {
        // The spare is gone until some descriptor is freed, as the failing
        // ranks will do: wait for that, not spin.
        if (dl.expired()) return;
        std::this_thread::sleep_for(std::chrono::milliseconds(std::min(backoffMs, dl.remainingMs())));
        backoffMs = std::min(backoffMs * 2, 100);
        continue;
      }
      if (told.empty() && nranks > 0 && nranks <= kMaxAnswered) told.assign(nranks, false);
      if (rank >= 0 && rank < static_cast<int>(told.size())) told[rank] = true;
    }
  }
  static constexpr int kMaxAnswered = 4096;

  // Reads a rank's first frame and answers it with `msg` (unless it is a
  // rank's own failure to join); *rank and *nranks get what it said.
  void answerOne(const Socket& c, uint32_t tag, const std::string& msg, int* rank, int* nranks) {
    FrameHeader fh{};
    std::string payload;
    if (!recvFrameRaw(c, &fh, &payload, Deadline::in(std::min(1.0, timeoutSec_))).ok()) return;
    RootHello h;
    JoinFailure j;
    if (fh.tag == kTagRootJoinFailed && decodeJoinFailure(payload, &j).ok()) {
      if (fh.magic == magic_) *rank = j.rank, *nranks = j.nranks;
      return;
    }
    (void)sendFrame(c, fh.magic, tag, msg.data(), msg.size(), Deadline::in(1));
    if (fh.magic == magic_ && fh.tag == kTagRootHello && decodeRootHello(payload, &h).ok())
      *rank = h.rank, *nranks = h.nranks;
  }

  void reply(const Socket& c, uint32_t tag, const std::string& msg) {
    sendFrame(c, magic_, tag, msg.data(), msg.size(), Deadline::in(2));
  }
  Socket listener_;
  uint64_t magic_;
  double timeoutSec_;
  std::string timeoutFrom_;  // what set timeoutSec_, for the message
};

}  // namespace

// Rendezvous threads running in this process, with their listening
// descriptors, so a rank of this process can wait until its rendezvous has
// answered everyone before init returns (the thread dies with the process).
// A fork()ed child has the listeners but not the threads. At the fork it
// closes its copies (a rank that connects after the parent's rendezvous
// ended is then refused, not queued where nobody answers) and starts with
// an empty set: it waited the full 10 s for a thread it does not have.
struct LiveRoots {
  std::mutex mu;
  std::condition_variable cv;
  std::map<uint64_t, int> running;  // magic -> listening descriptor
};

LiveRoots* roots = nullptr;  // never freed: detached threads use it

void lockRootsForFork() { roots->mu.lock(); }
void unlockRootsInParent() { roots->mu.unlock(); }
void resetRootsInChild() {
  for (const auto& [magic, fd] : roots->running) ::close(fd);
  // The forking thread locked it before the fork and is the child's only
  // thread: release it, so nothing (ThreadSanitizer included) sees a lock
  // held for ever. Then a new set: the old one's condition variable may
  // count waiters that were threads of the parent.
  roots->mu.unlock();
  roots = new LiveRoots();
}

LiveRoots& liveRoots() {
  static std::once_flag once;
  std::call_once(once, [] {
    roots = new LiveRoots();
    pthread_atfork(lockRootsForFork, unlockRootsInParent, resetRootsInChild);
  });
  return *roots;
}

Status startRoot(const SockAddr& bindAddr, uint64_t magic, double timeoutSec, SockAddr* bound,
                 const std::string& timeoutFrom) {
  Socket listener;
  HOCCL_TRY(Socket::listen(bindAddr, &listener, bound));
  HINFO(kSubBootstrap, "rendezvous listening on %s", bound->toString().c_str());
  auto root = std::make_shared<Root>(std::move(listener), magic, timeoutSec, timeoutFrom);
  LiveRoots& live = liveRoots();
  {
    std::lock_guard<std::mutex> lock(live.mu);
    live.running[magic] = root->listenerFd();
  }
  // The listener closes under the lock, as it leaves the set: a fork sees
  // both or neither.
  std::thread thread;
  Status st = startThread("the rendezvous thread", &thread, [root, magic, &live] {
    nameThisThread("hoccl-root");
    root->run();
    std::lock_guard<std::mutex> lock(live.mu);
    root->closeListener();
    live.running.erase(magic);
    live.cv.notify_all();
  });
  if (!st.ok()) {
    std::lock_guard<std::mutex> lock(live.mu);
    root->closeListener();
    live.running.erase(magic);
    return st;
  }
  thread.detach();
  return Status();
}

void waitForLocalRoot(uint64_t magic, double timeoutSec) {
  LiveRoots& live = liveRoots();
  std::unique_lock<std::mutex> lock(live.mu);
  live.cv.wait_for(lock, std::chrono::duration<double>(timeoutSec), [&] { return !live.running.count(magic); });
}

}  // namespace hoccl
