// A process that runs out of a resource (file descriptors, threads, space
// in /dev/shm) fails the call at once on every rank, with an error that
// names the resource and the call that ran out; no loop spins on the error
// meanwhile. Each case lowers a limit in a forked child (support/child.h),
// whose ranks are threads; the child reports one line per rank.
//
// Not here: RLIMIT_MEMLOCK. The host path pins no memory; only the IB
// transport registers memory, and its error names the locked-memory limit.
#include <gtest/gtest.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "hoccl.h"
#include "base/log.h"
#include "src/comm/comm.h"
#include "tests/support/child.h"

namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }
bool has(const std::string& s, const char* what) { return s.find(what) != std::string::npos; }

constexpr int kTimeoutSec = 20;  // every rank's HOCCL_TIMEOUT: a rank that waits for it is far from prompt
constexpr double kPromptSec = 3;

double cpuSeconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_utime.tv_sec + u.ru_stime.tv_sec + (u.ru_utime.tv_usec + u.ru_stime.tv_usec) * 1e-6;
}

// Warning lines, counted per text (after the rank prefix), so that a loop
// that logs one failure over and over shows as a large count.
std::mutex warnMu;
std::map<std::string, int>* warnCounts;
void countWarning(hoccl::LogLevel level, uint32_t, const char*, int, const char* msg) {
  if (level != hoccl::LogLevel::Warn) return;
  std::lock_guard<std::mutex> lock(warnMu);
  ++(*warnCounts)[msg];
}
void countWarnings() {
  warnCounts = new std::map<std::string, int>;
  hoccl::setLogSink(countWarning, hoccl::LogLevel::Warn);
}
int mostRepeatedWarning(std::string* text) {
  std::lock_guard<std::mutex> lock(warnMu);
  int most = 0;
  for (auto& [msg, n] : *warnCounts) {
    if (n > most) {
      most = n;
      *text = msg;
    }
  }
  return most;
}

bool setLimit(int resource, rlim_t value) {
  rlimit l{};
  getrlimit(resource, &l);
  l.rlim_cur = value;
  if (l.rlim_max < value) l.rlim_max = value;
  return setrlimit(resource, &l) == 0;
}

hocclConfig_t withTimeout() {
  hocclConfig_t c = HOCCL_CONFIG_INITIALIZER;
  c.timeoutSec = kTimeoutSec;
  return c;
}

// What a rank's failing call reported: "fail <rank> <seconds> <message>".
struct Failure {
  int rank = -1;
  double seconds = 0;
  std::string error;
};

struct Report {
  std::vector<Failure> failures;
  std::vector<std::string> other;  // every other line, for messages
  double cpuDuringFailure = -1;    // "cpu <seconds>"
  int repeats = 0;                 // "repeats <n> <text>": the most repeated warning
};

Report parse(const testutil::ChildOutcome& o) {
  Report r;
  for (const std::string& line : o.lines) {
    Failure f;
    int used = 0;
    char text[1024];
    if (sscanf(line.c_str(), "fail %d %lf %n", &f.rank, &f.seconds, &used) == 2) {
      f.error = line.substr(static_cast<size_t>(used));
      r.failures.push_back(f);
    } else if (sscanf(line.c_str(), "cpu %lf", &r.cpuDuringFailure) == 1) {
    } else if (sscanf(line.c_str(), "repeats %d %1023[^\n]", &r.repeats, text) >= 1) {
      r.other.push_back(line);
    } else {
      r.other.push_back(line);
    }
  }
  return r;
}

std::string joined(const std::vector<std::string>& lines) {
  std::string s;
  for (const std::string& l : lines) s += "\n  " + l;
  return s;
}

// Every rank of the call failed, promptly, naming the resource; `names`
// holds the words of which at least one must appear in each message.
void expectPromptNamedFailures(const testutil::ChildOutcome& o, int ranks, std::initializer_list<const char*> names,
                               const std::string& what) {
  SCOPED_TRACE(what + ", the child's report:" + joined(o.lines));
  ASSERT_FALSE(o.hung()) << "the child outlived its limit" << joined(o.lines);
  Report r = parse(o);
  ASSERT_EQ(static_cast<int>(r.failures.size()), ranks) << "ranks that failed:" << joined(o.lines);
  for (const Failure& f : r.failures) {
    EXPECT_LT(f.seconds, kPromptSec) << "rank " << f.rank << ": " << f.error;
    bool named = false;
    for (const char* n : names) named = named || has(f.error, n);
    EXPECT_TRUE(named) << "rank " << f.rank << " does not name the resource: " << f.error;
    EXPECT_FALSE(has(f.error, "timed out")) << "rank " << f.rank << ": " << f.error;
  }
  if (r.cpuDuringFailure >= 0) {
    EXPECT_LT(r.cpuDuringFailure, 2.0) << "CPU seconds while the ranks failed";
  }
  EXPECT_LE(r.repeats, 10) << "the most repeated warning" << joined(r.other);
}

// Four ranks (threads of one process) split their communicator again and
// again, keeping every child, until descriptors run out (about 5 per rank
// per communicator). The split that runs out fails on every rank at once;
// it used to return after the whole timeout ("timed out waiting for a
// bootstrap message", "closed its bootstrap connection") while an accept
// loop spun on EMFILE.
int splitUntilOutOfDescriptors(FILE* out, rlim_t limit) {
  countWarnings();
  if (!setLimit(RLIMIT_NOFILE, limit)) return 2;
  const int n = 4;
  hocclUniqueId id;
  if (hocclGetUniqueId(&id) != hocclSuccess) return 3;
  std::vector<double> cpuAtStart(n, -1);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      hocclConfig_t config = withTimeout();
      hocclComm_t parent = nullptr;
      if (hocclCommInitRankConfig(&parent, n, id, r, &config) != hocclSuccess) {
        fprintf(out, "init of rank %d failed: %s\n", r, hocclGetLastError(nullptr));
        return;
      }
      for (int i = 0; i < 200; ++i) {
        hocclComm_t child = nullptr;
        cpuAtStart[r] = cpuSeconds();
        auto t0 = Clock::now();
        if (hocclCommSplit(parent, 0, r, &child, nullptr) != hocclSuccess) {
          fprintf(out, "fail %d %.3f split #%d: %s\n", r, since(t0), i, hocclGetLastError(parent));
          return;
        }
      }
      fprintf(out, "rank %d made 200 splits without running out\n", r);
    });
  for (auto& t : threads) t.join();
  double first = *std::min_element(cpuAtStart.begin(), cpuAtStart.end());
  fprintf(out, "cpu %.3f\n", cpuSeconds() - first);
  std::string text;
  int repeats = mostRepeatedWarning(&text);
  fprintf(out, "repeats %d %s\n", repeats, text.c_str());
  return 0;
}

TEST(Descriptors, SplitsUntilTheLimitFailPromptlyOnEveryRank) {
  // A few limits: which call runs out first moves with the count.
  for (rlim_t limit : {256, 257, 258, 259}) {
    testutil::ChildOutcome o =
        testutil::runInChild(kTimeoutSec * 2, [&](FILE* out) { return splitUntilOutOfDescriptors(out, limit); });
    expectPromptNamedFailures(o, 4, {"Too many open files", "file descriptors"},
                              "RLIMIT_NOFILE " + std::to_string(limit));
  }
}

// Two ranks (threads) make 2-rank communicators, each with a new unique id,
// until descriptors run out: both fail at once naming them. The rendezvous'
// failed accept used to read as "timed out after 10 s ... 1 of 2 joined"
// (at once) and the other rank got "connection reset by the peer".
int initUntilOutOfDescriptors(FILE* out, rlim_t limit) {
  countWarnings();
  if (!setLimit(RLIMIT_NOFILE, limit)) return 2;
  double cpuAtStart = 0;
  for (int i = 0; i < 100; ++i) {
    hocclUniqueId id;
    cpuAtStart = cpuSeconds();
    auto t0 = Clock::now();
    if (hocclGetUniqueId(&id) != hocclSuccess) {
      // The launcher itself ran out: its call fails; there are no ranks yet.
      fprintf(out, "fail 0 %.3f hocclGetUniqueId: %s\n", since(t0), hocclGetLastError(nullptr));
      fprintf(out, "fail 1 %.3f hocclGetUniqueId: %s\n", since(t0), hocclGetLastError(nullptr));
      fprintf(out, "cpu %.3f\n", cpuSeconds() - cpuAtStart);
      return 0;
    }
    std::vector<std::string> errors(2);
    std::vector<double> secs(2);
    std::vector<std::thread> threads;
    for (int r = 0; r < 2; ++r)
      threads.emplace_back([&, r] {
        hocclConfig_t config = withTimeout();
        hocclComm_t comm = nullptr;
        auto t1 = Clock::now();
        if (hocclCommInitRankConfig(&comm, 2, id, r, &config) != hocclSuccess) errors[r] = hocclGetLastError(nullptr);
        secs[r] = since(t1);
      });
    for (auto& t : threads) t.join();
    if (errors[0].empty() && errors[1].empty()) continue;
    for (int r = 0; r < 2; ++r) {
      if (errors[r].empty()) fprintf(out, "rank %d initialised in %.3f s\n", r, secs[r]);
      else fprintf(out, "fail %d %.3f comm #%d: %s\n", r, secs[r], i, errors[r].c_str());
    }
    fprintf(out, "cpu %.3f\n", cpuSeconds() - cpuAtStart);
    std::string text;
    int repeats = mostRepeatedWarning(&text);
    fprintf(out, "repeats %d %s\n", repeats, text.c_str());
    return 0;
  }
  fprintf(out, "100 communicators without running out\n");
  return 0;
}

TEST(Descriptors, InitsUntilTheLimitFailPromptlyOnEveryRank) {
  for (rlim_t limit = 64; limit < 72; ++limit) {
    testutil::ChildOutcome o =
        testutil::runInChild(kTimeoutSec * 2, [&](FILE* out) { return initUntilOutOfDescriptors(out, limit); });
    expectPromptNamedFailures(o, 2, {"Too many open files", "file descriptors"},
                              "RLIMIT_NOFILE " + std::to_string(limit));
  }
}

// Threads: as root, RLIMIT_NPROC binds only after leaving uid 0 (the kernel
// exempts it), so the child becomes nobody first. A limit of 1 then refuses
// every new thread. Each call that starts a thread fails naming threads
// instead of ending the process (std::thread threw through the C API).
bool refuseNewThreads() {
  if (getuid() == 0 && (setgid(65534) != 0 || setuid(65534) != 0)) return false;
  return setLimit(RLIMIT_NPROC, 1);
}

TEST(Threads, CallsThatStartAThreadFailNamingIt) {
  testutil::ChildOutcome o = testutil::runInChild(kTimeoutSec * 2, [](FILE* out) {
    // Ranks on two emulated nodes over TCP: each network transport starts
    // a progress thread. The rank threads exist before the limit is lowered.
    hocclUniqueId id;
    if (hocclGetUniqueId(&id) != hocclSuccess) return 3;
    std::atomic<bool> go{false};
    std::vector<std::thread> threads;
    for (int r = 0; r < 2; ++r)
      threads.emplace_back([&, r] {
        hoccl::setThreadHostIdOverride("nproc-node-" + std::to_string(r));
        while (!go.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
        hocclConfig_t config = withTimeout();
        config.netName = "Socket";
        hocclComm_t comm = nullptr;
        auto t0 = Clock::now();
        if (hocclCommInitRankConfig(&comm, 2, id, r, &config) != hocclSuccess)
          fprintf(out, "fail %d %.3f %s\n", r, since(t0), hocclGetLastError(nullptr));
        else
          fprintf(out, "rank %d initialised\n", r);
      });
    if (!refuseNewThreads()) {
      fprintf(out, "cannot lower RLIMIT_NPROC\n");
      go = true;
      for (auto& t : threads) t.join();
      return 2;
    }
    go = true;
    for (auto& t : threads) t.join();
    // The rendezvous thread of hocclGetUniqueId.
    auto t0 = Clock::now();
    hocclResult_t rc = hocclGetUniqueId(&id);
    fprintf(out, "fail 2 %.3f %s\n", since(t0), rc == hocclSuccess ? "hocclGetUniqueId succeeded" : hocclGetLastError(nullptr));
    // A non-blocking init's thread.
    hocclConfig_t config = withTimeout();
    config.blocking = 0;
    hocclComm_t comm = nullptr;
    t0 = Clock::now();
    rc = hocclCommInitRankConfig(&comm, 1, id, 0, &config);
    fprintf(out, "fail 3 %.3f %s\n", since(t0),
            rc == hocclInProgress || rc == hocclSuccess ? "non-blocking init started" : hocclGetLastError(nullptr));
    return 0;
  });
  expectPromptNamedFailures(o, 4, {"thread"}, "RLIMIT_NPROC 1");
}

// /dev/shm: a 256 KiB tmpfs in a private mount namespace (root only). The
// segments of the connections (1 MiB each) do not fit: both ranks fail
// init naming /dev/shm and the space, rather than dying of SIGBUS at the
// first touch of an unbacked page.
TEST(SharedMemory, FullDevShmFailsPromptlyOnEveryRank) {
  if (getuid() != 0) GTEST_SKIP() << "mounting a small /dev/shm in a private mount namespace needs root";
  testutil::ChildOutcome o = testutil::runInChild(kTimeoutSec * 2, [](FILE* out) {
    if (unshare(CLONE_NEWNS) != 0 || mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0 ||
        mount("tmpfs", "/dev/shm", "tmpfs", 0, "size=256k") != 0) {
      fprintf(out, "skip: cannot mount a tmpfs on /dev/shm: %s\n", strerror(errno));
      return 0;
    }
    hocclUniqueId id;
    if (hocclGetUniqueId(&id) != hocclSuccess) return 3;
    std::vector<std::thread> threads;
    for (int r = 0; r < 2; ++r)
      threads.emplace_back([&, r] {
        hocclConfig_t config = withTimeout();
        hocclComm_t comm = nullptr;
        auto t0 = Clock::now();
        if (hocclCommInitRankConfig(&comm, 2, id, r, &config) != hocclSuccess) {
          fprintf(out, "fail %d %.3f %s\n", r, since(t0), hocclGetLastError(nullptr));
          return;
        }
        std::vector<float> buf(1 << 20, 1.0f);  // fills every slot of the connections
        hocclResult_t rc = hocclAllReduce(buf.data(), buf.data(), buf.size(), hocclFloat, hocclSum, comm, nullptr);
        if (rc != hocclSuccess) fprintf(out, "fail %d %.3f all-reduce: %s\n", r, since(t0), hocclGetLastError(comm));
        else fprintf(out, "rank %d initialised and reduced\n", r);
      });
    for (auto& t : threads) t.join();
    return 0;
  });
  for (const std::string& line : o.lines)
    if (line.compare(0, 5, "skip:") == 0) GTEST_SKIP() << line;
  EXPECT_EQ(o.exitCode, 0) << "the child died (135: SIGBUS)" << joined(o.lines);
  expectPromptNamedFailures(o, 2, {"/dev/shm"}, "a 256 KiB /dev/shm");
  for (const Failure& f : parse(o).failures) EXPECT_TRUE(has(f.error, "No space left")) << f.error;
}

}  // namespace
