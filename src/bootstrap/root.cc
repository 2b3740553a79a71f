// The rendezvous ("root"): collects one hello per rank, checks that all
// ranks agree on the job, the library version and the wire settings, and
// answers each with the table of all ranks or with the error.
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <condition_variable>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "hoccl.h"
#include "src/bootstrap/wire.h"
#include "src/core/log.h"

namespace hoccl {

uint64_t fnv1a64(const void* data, size_t bytes, uint64_t seed) {
  const auto* p = static_cast<const unsigned char*>(data);
  uint64_t h = seed;
  for (size_t i = 0; i < bytes; ++i) {
    h ^= p[i];
    h *= 0x100000001b3ull;
  }
  return h;
}

uint64_t randomU64() {
  uint64_t v = 0;
  int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    if (read(fd, &v, sizeof v) != sizeof v) v = 0;
    close(fd);
  }
  if (v == 0) v = fnv1a64(&fd, sizeof fd, static_cast<uint64_t>(nowSec() * 1e9) ^ getpid());
  return v;
}

Status sendFrame(const Socket& s, uint64_t magic, uint32_t tag, const void* data, size_t bytes,
                 const Deadline& dl) {
  FrameHeader h{magic, tag, static_cast<uint32_t>(bytes)};
  HOCCL_TRY(s.sendAll(&h, sizeof h, dl));
  if (bytes) HOCCL_TRY(s.sendAll(data, bytes, dl));
  return Status();
}

Status recvFrameRaw(const Socket& s, FrameHeader* h, std::string* payload, const Deadline& dl) {
  HOCCL_TRY(s.recvAll(h, sizeof *h, dl));
  if (h->len > kMaxFrameBytes)
    return errorf(hocclInvalidUsage, "refused a bootstrap message of %u bytes (limit %u)", h->len,
                  kMaxFrameBytes);
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
  Root(Socket listener, uint64_t magic, double timeoutSec)
      : listener_(std::move(listener)), magic_(magic), dl_(Deadline::in(timeoutSec)), timeoutSec_(timeoutSec) {}

  void run() {
    int nranks = -1, joined = 0;
    std::vector<Socket> conns;
    std::vector<RootHello> hellos;
    std::string fatal;
    while ((nranks < 0 || joined < nranks) && fatal.empty()) {
      Socket c;
      if (!listener_.accept(dl_, &c).ok()) break;
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
      uint32_t tag = fh.tag;
      if (tag != kTagRootHello || payload.size() != sizeof(RootHello)) {
        reply(c, kTagRootError, "malformed hello: wrong tag or size (another hoccl version?)");
        continue;
      }
      RootHello h;
      memcpy(&h, payload.data(), sizeof h);
      h.fingerprint[sizeof h.fingerprint - 1] = '\0';
      h.info.hostId[sizeof h.info.hostId - 1] = '\0';
      if (h.protocol != kBootstrapProtocol) {
        reply(c, kTagRootError, "bootstrap protocol " + std::to_string(h.protocol) +
                                    " differs from the rendezvous' " + std::to_string(kBootstrapProtocol));
        continue;
      }
      if (nranks < 0) {
        if (h.nranks < 1) {
          reply(c, kTagRootError, "nranks must be >= 1");
          continue;
        }
        nranks = h.nranks;
        conns.resize(nranks);
        hellos.resize(nranks);
      }
      if (h.nranks != nranks) {
        fatal = "rank " + std::to_string(h.rank) + " was started with nranks=" +
                std::to_string(h.nranks) + " but the ranks before it with nranks=" + std::to_string(nranks);
        reply(c, kTagRootError, fatal);
        break;
      }
      if (h.rank < 0 || h.rank >= nranks) {
        reply(c, kTagRootError, "rank " + std::to_string(h.rank) + " is out of range [0, " +
                                    std::to_string(nranks) + ")");
        continue;
      }
      if (conns[h.rank].valid()) {
        fatal = "rank " + std::to_string(h.rank) + " joined twice (pids " +
                std::to_string(hellos[h.rank].info.pid) + " and " + std::to_string(h.info.pid) + ")";
        reply(c, kTagRootError, fatal);
        break;
      }
      conns[h.rank] = std::move(c);
      hellos[h.rank] = h;
      ++joined;
    }
    if (fatal.empty() && (nranks < 0 || joined < nranks)) {
      fatal = "timed out after " + std::to_string(static_cast<int>(timeoutSec_)) + " s waiting for ranks to join: ";
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
        reply(conns[r], kTagRootError, fatal);
        continue;
      }
      std::vector<RankInfo> table(nranks);
      for (int i = 0; i < nranks; ++i) table[i] = hellos[i].info;
      sendFrame(conns[r], magic_, kTagRootTable, table.data(), table.size() * sizeof(RankInfo),
                Deadline::in(std::min(10.0, timeoutSec_)));
    }
    if (!fatal.empty()) HWARN(kSubBootstrap, "rendezvous failed: %s", fatal.c_str());
  }

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

  void reply(const Socket& c, uint32_t tag, const std::string& msg) {
    sendFrame(c, magic_, tag, msg.data(), msg.size(), Deadline::in(2));
  }
  Socket listener_;
  uint64_t magic_;
  Deadline dl_;
  double timeoutSec_;
};

}  // namespace

// Rendezvous threads running in this process, so a rank of this process can
// wait until its rendezvous has answered everyone before init returns (the
// thread dies with the process).
struct LiveRoots {
  std::mutex mu;
  std::condition_variable cv;
  std::set<uint64_t> running;
};

LiveRoots& liveRoots() {
  static LiveRoots* roots = new LiveRoots();  // never destroyed: detached threads use it
  return *roots;
}

Status startRoot(const SockAddr& bindAddr, uint64_t magic, double timeoutSec, SockAddr* bound) {
  Socket listener;
  HOCCL_TRY(Socket::listen(bindAddr, &listener, bound));
  HINFO(kSubBootstrap, "rendezvous listening on %s", bound->toString().c_str());
  LiveRoots& live = liveRoots();
  {
    std::lock_guard<std::mutex> lock(live.mu);
    live.running.insert(magic);
  }
  std::thread([l = std::move(listener), magic, timeoutSec, &live]() mutable {
    Root root(std::move(l), magic, timeoutSec);
    root.run();
    std::lock_guard<std::mutex> lock(live.mu);
    live.running.erase(magic);
    live.cv.notify_all();
  }).detach();
  return Status();
}

void waitForLocalRoot(uint64_t magic, double timeoutSec) {
  LiveRoots& live = liveRoots();
  std::unique_lock<std::mutex> lock(live.mu);
  live.cv.wait_for(lock, std::chrono::duration<double>(timeoutSec), [&] { return !live.running.count(magic); });
}

}  // namespace hoccl
