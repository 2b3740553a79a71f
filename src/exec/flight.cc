// The flight recorder's ring (flight.h) and the process's dumps: the
// registry of recorders, the file, and the signal that asks for one.
#include "src/exec/flight.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <thread>

#include "base/json.h"
#include "base/log.h"
#include "base/regular_file.h"
#include "base/thread_name.h"

namespace hoccl {

const char* flightStateName(FlightState s) {
  switch (s) {
    case FlightState::Started: return "started";
    case FlightState::Running: return "running";
    case FlightState::Queued: return "queued";
    case FlightState::Done: return "done";
    case FlightState::Failed: return "failed";
  }
  return "unknown";
}

namespace {

// Seconds since the epoch: dumps of several hosts are compared by it. The
// coarse clock (the kernel's tick: 1 to 4 ms) costs 3 ns a read where the
// precise one cost 22 (two reads a call were half the recorder's cost at
// 8 B); a post-mortem orders events seconds apart, it does not time calls.
double wallSec() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME_COARSE, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

template <size_t N>
void copyText(char (&dst)[N], const std::string& src) {
  const size_t n = src.size() < N - 1 ? src.size() : N - 1;
  memcpy(dst, src.data(), n);
  dst[n] = '\0';
}

}  // namespace

// Written by the calls' thread only. A dump, on another thread, may read
// an entry while it is written: every field is atomic (relaxed stores are
// plain moves), and begin() writes the call's fixed fields inside a
// sequence lock (an odd `version` while it writes), so a dump copies them
// whole or tries again; begin() takes no lock. The texts, written on the
// rare paths (a stall, a failure), are under the recorder's mutex, apart
// (Texts: the entries a call touches stay few cache lines), and belong to
// the call whose id is in `textsOf`.
struct FlightRecorder::Entry {
  std::atomic<uint64_t> version{0};
  std::atomic<uint64_t> id{0};  // 0: never used
  // A FlightCallHead in five words (pack/unpack below; built in registers:
  // a struct copied through memory cost a store-forwarding stall a call).
  static constexpr size_t kHeadWords = 5;
  std::atomic<uint64_t> head[kHeadWords] = {};
  std::atomic<const char*> algorithm{nullptr};  // the registry's names: string literals
  std::atomic<int> channels{0};
  std::atomic<FlightState> state{FlightState::Started};
  std::atomic<double> ended{0};
};

struct FlightRecorder::Texts {  // under the mutex only
  static constexpr int kMaxPeers = 8;
  uint64_t textsOf = 0;
  char waiting[240] = {};
  int waitPeers[kMaxPeers] = {};
  int nwaitPeers = 0;
  char error[480] = {};
};

namespace {

// The ring's size: a power of two, so that finding a call's entry is a mask,
// not a division (three a call).
size_t ringSize(size_t calls) {
  size_t n = 1;
  while (n < calls) n <<= 1;
  return n;
}

}  // namespace

FlightRecorder::FlightRecorder(const FlightOwner& owner, size_t capacity)
    : owner_(owner),
      ring_(new Entry[ringSize(capacity)]),
      texts_(new Texts[ringSize(capacity)]),
      capacity_(ringSize(capacity)) {}

FlightRecorder::~FlightRecorder() { flightUnregister(this); }

FlightRecorder::Entry* FlightRecorder::find(uint64_t id) {
  Entry& e = ring_[id & (capacity_ - 1)];
  return e.id.load(std::memory_order_relaxed) == id ? &e : nullptr;  // overwritten by a later call of a large group
}

namespace {

uint64_t doubleBits(double d) {
  uint64_t u;
  memcpy(&u, &d, sizeof u);
  return u;
}

void unpack(const uint64_t (&w)[5], FlightCallHead* h) {
  h->opSeq = w[0];
  h->count = w[1];
  h->root = static_cast<int>(static_cast<uint32_t>(w[2]));
  h->parts = static_cast<int>(static_cast<uint32_t>(w[2] >> 32));
  h->coll = static_cast<CollKind>(w[3] & 0xff);
  h->dtype = static_cast<DType>((w[3] >> 8) & 0xff);
  h->op = static_cast<RedOp>((w[3] >> 16) & 0xff);
  h->device = (w[3] >> 24) & 1;
  memcpy(&h->started, &w[4], sizeof h->started);
}

}  // namespace

uint64_t FlightRecorder::begin(const CollCall& call, uint64_t opSeq) {
  uint64_t count = call.count;
  int root = call.root, parts = 0;
  if (call.coll == CollKind::SendRecv) {
    count = 0;
    parts = static_cast<int>(call.parts.size());
    for (const PeerPart& p : call.parts) count += p.count;
    root = call.parts.empty() ? -1 : call.parts[0].peer;
  }
  const uint64_t words[Entry::kHeadWords] = {
      opSeq, count, static_cast<uint32_t>(root) | uint64_t(static_cast<uint32_t>(parts)) << 32,
      uint64_t(call.coll) | uint64_t(call.dtype) << 8 | uint64_t(call.op) << 16 | uint64_t(call.device) << 24,
      doubleBits(wallSec())};
  const uint64_t id = next_.load(std::memory_order_relaxed);
  Entry& e = ring_[id & (capacity_ - 1)];
  // Release stores (plain moves on x86), not a fence: a dump that reads any
  // of them (with acquire) then sees the odd version too (ThreadSanitizer
  // follows this; it does not follow fences).
  const uint64_t v = e.version.load(std::memory_order_relaxed);
  e.version.store(v + 1, std::memory_order_relaxed);
  e.id.store(id, std::memory_order_release);
  for (size_t i = 0; i < Entry::kHeadWords; ++i) e.head[i].store(words[i], std::memory_order_release);
  e.algorithm.store(nullptr, std::memory_order_release);
  e.channels.store(0, std::memory_order_release);
  e.state.store(FlightState::Started, std::memory_order_release);
  e.ended.store(0, std::memory_order_release);
  e.version.store(v + 2, std::memory_order_release);
  next_.store(id + 1, std::memory_order_release);
  return id;
}

void FlightRecorder::running(uint64_t id, const char* algorithm, int channels, bool queued) {
  if (Entry* e = find(id)) {
    e->algorithm.store(algorithm, std::memory_order_relaxed);
    e->channels.store(channels, std::memory_order_relaxed);
    e->state.store(queued ? FlightState::Queued : FlightState::Running, std::memory_order_release);
  }
}

void FlightRecorder::finished(uint64_t id, const Status& st) {
  Entry* e = find(id);
  if (!e) return;
  e->ended.store(wallSec(), std::memory_order_relaxed);
  if (st.ok()) {
    e->state.store(FlightState::Done, std::memory_order_release);
    return;
  }
  std::lock_guard<std::mutex> lock(mu_);
  copyText(textsFor(id)->error, st.message());
  e->state.store(FlightState::Failed, std::memory_order_release);
}

FlightRecorder::Texts* FlightRecorder::textsFor(uint64_t id) {
  Texts* t = &texts_[id & (capacity_ - 1)];
  if (t->textsOf == id) return t;
  t->textsOf = id;
  t->waiting[0] = '\0';
  t->nwaitPeers = 0;
  t->error[0] = '\0';
  return t;
}

void FlightRecorder::waiting(uint64_t id, const std::string& where, const std::vector<int>& peers) {
  Entry* e = find(id);
  if (!e) return;
  std::lock_guard<std::mutex> lock(mu_);
  Texts* t = textsFor(id);
  copyText(t->waiting, where);
  t->nwaitPeers = 0;
  for (int p : peers) {
    bool seen = false;
    for (int i = 0; i < t->nwaitPeers; ++i) seen |= t->waitPeers[i] == p;
    if (!seen && t->nwaitPeers < Texts::kMaxPeers) t->waitPeers[t->nwaitPeers++] = p;
  }
}

void FlightRecorder::noteFatal(const std::string& why) {
  std::lock_guard<std::mutex> lock(mu_);
  if (fatal_.empty()) fatal_ = why;
}

bool FlightRecorder::read(const Entry& e, uint64_t id, FlightCall* c) {
  for (int tries = 0; tries < 1000; ++tries) {
    const uint64_t v = e.version.load(std::memory_order_acquire);
    if (v & 1) continue;  // begin() is writing it: a few stores
    uint64_t words[Entry::kHeadWords];
    for (size_t i = 0; i < Entry::kHeadWords; ++i) words[i] = e.head[i].load(std::memory_order_acquire);
    const bool mine = e.id.load(std::memory_order_acquire) == id;
    c->state = e.state.load(std::memory_order_acquire);
    const char* algo = e.algorithm.load(std::memory_order_acquire);
    c->channels = e.channels.load(std::memory_order_acquire);
    c->ended = e.ended.load(std::memory_order_acquire);
    if (e.version.load(std::memory_order_relaxed) != v) continue;
    if (!mine) return false;
    unpack(words, c);
    c->algorithm = algo ? algo : "";
    return true;
  }
  return false;
}

std::vector<FlightCall> FlightRecorder::snapshot(std::string* fatal, uint64_t* recorded) const {
  std::vector<FlightCall> out;
  std::lock_guard<std::mutex> lock(mu_);
  if (fatal) *fatal = fatal_;
  const uint64_t next = next_.load(std::memory_order_acquire);
  if (recorded) *recorded = next - 1;
  const uint64_t first = next > capacity_ ? next - capacity_ : 1;
  for (uint64_t id = first; id < next; ++id) {
    const Entry& e = ring_[id & (capacity_ - 1)];
    FlightCall c;
    if (!read(e, id, &c)) continue;  // overwritten meanwhile by a newer call
    const Texts& t = texts_[id & (capacity_ - 1)];
    if (t.textsOf == id) {
      c.waiting = t.waiting;
      c.waitPeers.assign(t.waitPeers, t.waitPeers + t.nwaitPeers);
      c.error = t.error;
    }
    out.push_back(std::move(c));
  }
  return out;
}

// ---- The process's dumps -------------------------------------------------------

namespace {

struct Registry {
  std::mutex mu;  // the list, the pattern and the file (one dump at a time)
  std::vector<FlightRecorder*> recorders;
  std::string pattern;
  int signal = 0;          // the signal whose handler is installed (0: none)
  pid_t threadOf = 0;      // the process whose thread reads the pipe
  int pipeRead = -1;       // the end that thread reads
  std::atomic<uint64_t> signalDumps{0};
};
std::atomic<int> signalPipe{-1};  // the write end the handler uses
Registry& registry();

// A fork() while another thread dumps would leave the lock held in the
// child. The child has no thread reading the pipe (the pipe is its
// parent's: it stops writing there until it registers a recorder itself),
// and its parent's communicators are not its own: they leave its dumps.
void beforeFork() { registry().mu.lock(); }
void afterForkInParent() { registry().mu.unlock(); }
void afterForkInChild() {
  Registry& reg = registry();
  const int writeEnd = signalPipe.exchange(-1, std::memory_order_relaxed);
  if (writeEnd >= 0) close(writeEnd);
  if (reg.pipeRead >= 0) close(reg.pipeRead);
  reg.pipeRead = -1;
  reg.recorders.clear();
  reg.mu.unlock();
}

// Never destroyed: the signal's thread may still dump while the process exits.
Registry& registry() {
  static Registry* r = [] {
    Registry* made = new Registry;
    pthread_atfork(beforeFork, afterForkInParent, afterForkInChild);
    return made;
  }();
  return *r;
}

// What the signal handler reads besides signalPipe: set before it is installed.
struct sigaction previousAction;

void onSignal(int sig, siginfo_t* info, void* context) {
  const int saved = errno;
  const int fd = signalPipe.load(std::memory_order_relaxed);
  const char byte = 1;
  if (fd >= 0) (void)!write(fd, &byte, 1);  // non-blocking: a full pipe already asks for a dump
  errno = saved;
  // The handler the program had before, if any, still runs.
  if (previousAction.sa_flags & SA_SIGINFO) {
    if (previousAction.sa_sigaction) previousAction.sa_sigaction(sig, info, context);
  } else if (previousAction.sa_handler != SIG_DFL && previousAction.sa_handler != SIG_IGN) {
    previousAction.sa_handler(sig);
  }
}

// The thread that turns the signal into a dump (a handler may only do
// what is async-signal-safe: it writes a byte to a pipe).
void readSignals(int fd, int sig) {
  nameThisThread("hoccl-dump");
  char buf[64];
  for (;;) {
    ssize_t n = read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    std::string why;
    if (flightDump("signal " + std::to_string(sig) + " (" + strsignal(sig) + ")", nullptr, &why))
      registry().signalDumps.fetch_add(1, std::memory_order_relaxed);
    else
      HWARN(kSubAll, "HOCCL_DEBUG_DUMP: %s", why.c_str());
  }
}

// Under reg.mu. Installs the handler (once per process) and starts the
// thread that reads its pipe (once per process, again in a fork()ed child).
void listenForSignal(Registry& reg, int sig) {
  if (reg.threadOf == getpid()) return;
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    HWARN(kSubAll, "HOCCL_DEBUG_DUMP: no pipe for signal %d (%s): dumps on failure only", sig, strerror(errno));
    return;
  }
  fcntl(fds[1], F_SETFL, O_NONBLOCK);
  std::thread t;
  Status st = startThread("the flight recorder's signal thread", &t, [fd = fds[0], sig] { readSignals(fd, sig); });
  if (!st.ok()) {
    HWARN(kSubAll, "HOCCL_DEBUG_DUMP: %s: dumps on failure only", st.message().c_str());
    close(fds[0]);
    close(fds[1]);
    return;
  }
  t.detach();
  reg.threadOf = getpid();
  reg.pipeRead = fds[0];
  signalPipe.store(fds[1], std::memory_order_relaxed);
  if (reg.signal != 0) return;  // a fork()ed child: the handler is inherited
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = onSignal;
  sa.sa_flags = SA_SIGINFO | SA_RESTART;
  sigemptyset(&sa.sa_mask);
  if (sigaction(sig, &sa, &previousAction) != 0) {
    HWARN(kSubAll, "HOCCL_DEBUG_DUMP: cannot handle signal %d (%s): dumps on failure only", sig, strerror(errno));
    return;
  }
  reg.signal = sig;
}

void writeCall(std::string* out, const FlightCall& c) {
  json::Value v = json::Value::object();
  v.set("seq", c.opSeq);
  v.set("coll", collName(c.coll));
  v.set("count", c.count);
  if (c.coll == CollKind::SendRecv) {
    v.set("parts", c.parts);
    v.set("first_peer", c.root);
  } else {
    v.set("dtype", dtypeName(c.dtype));
    v.set("op", redOpName(c.op));
    v.set("root", c.root);
  }
  if (c.device) v.set("device", true);
  v.set("algorithm", c.algorithm);
  if (c.channels > 0) v.set("channels", c.channels);
  v.set("state", flightStateName(c.state));
  v.set("started", c.started);
  if (c.ended > 0) v.set("ended", c.ended);
  if (!c.waiting.empty()) {
    v.set("waiting", c.waiting);
    json::Value peers = json::Value::array();
    for (int p : c.waitPeers) peers.push(p);
    v.set("wait_peers", std::move(peers));
  }
  if (!c.error.empty()) v.set("error", c.error);
  *out += json::write(v, 0);
}

std::string dumpTextLocked(Registry& reg, const std::string& reason) {
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  std::string out = "{\"hoccl_flight_recorder\": 1, \"host\": " + json::quote(host) +
                    ", \"pid\": " + std::to_string(getpid()) + ", \"time\": " + json::write(json::Value(wallSec()), 0) +
                    ", \"reason\": " + json::quote(reason) + ",\n\"communicators\": [";
  bool firstComm = true;
  for (const FlightRecorder* r : reg.recorders) {
    std::string fatal;
    uint64_t recorded = 0;
    std::vector<FlightCall> calls = r->snapshot(&fatal, &recorded);
    const FlightOwner& o = r->owner();
    char hash[24];
    snprintf(hash, sizeof hash, "0x%016llx", static_cast<unsigned long long>(o.commHash));
    out += firstComm ? "\n" : ",\n";
    firstComm = false;
    out += "{\"comm\": \"" + std::string(hash) + "\", \"rank\": " + std::to_string(o.rank) +
           ", \"nranks\": " + std::to_string(o.nranks) + ", \"host\": " + json::quote(o.host) +
           ", \"pid\": " + std::to_string(o.pid) + ", \"calls_recorded\": " + std::to_string(recorded);
    if (!fatal.empty()) out += ", \"error\": " + json::quote(fatal);
    out += ", \"calls\": [";
    for (size_t i = 0; i < calls.size(); ++i) {
      out += i ? ",\n  " : "\n  ";
      writeCall(&out, calls[i]);
    }
    out += "]}";
  }
  out += "]}\n";
  return out;
}

}  // namespace

void flightRegister(FlightRecorder* r, const std::string& pattern, int signal) {
  Registry& reg = registry();
  std::lock_guard<std::mutex> lock(reg.mu);
  reg.recorders.push_back(r);
  if (!pattern.empty()) reg.pattern = pattern;
  if (signal > 0) listenForSignal(reg, signal);
}

void flightUnregister(FlightRecorder* r) {
  Registry& reg = registry();
  std::lock_guard<std::mutex> lock(reg.mu);
  for (size_t i = 0; i < reg.recorders.size(); ++i) {
    if (reg.recorders[i] == r) {
      reg.recorders.erase(reg.recorders.begin() + static_cast<long>(i));
      return;
    }
  }
}

std::string flightDumpText(const std::string& reason) {
  Registry& reg = registry();
  std::lock_guard<std::mutex> lock(reg.mu);
  return dumpTextLocked(reg, reason);
}

bool flightDump(const std::string& reason, std::string* pathOut, std::string* why) {
  Registry& reg = registry();
  std::lock_guard<std::mutex> lock(reg.mu);
  std::string path;
  if (reg.pattern.empty() || !expandFilePattern(reg.pattern, &path)) {
    if (why) *why = "no file to write: HOCCL_DEBUG_DUMP=\"" + reg.pattern + "\"";
    return false;
  }
  if (pathOut) *pathOut = path;
  const std::string text = dumpTextLocked(reg, reason);
  // Whole or not at all: a reader never sees half a dump, and a later dump
  // (a second rank of this process failing) replaces an earlier one.
  const std::string tmp = path + ".tmp" + std::to_string(getpid());
  FILE* f = openForWriting(tmp);
  bool ok = f && fwrite(text.data(), 1, text.size(), f) == text.size();
  if (f) ok = (fclose(f) == 0) && ok;
  if (ok) ok = rename(tmp.c_str(), path.c_str()) == 0;
  if (!ok) {
    if (why) *why = "cannot write " + path + ": " + strerror(errno);
    unlink(tmp.c_str());
    return false;
  }
  return true;
}

uint64_t flightSignalDumps() { return registry().signalDumps.load(std::memory_order_relaxed); }

}  // namespace hoccl
