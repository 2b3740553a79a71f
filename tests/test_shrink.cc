// hocclCommShrink: a communicator of the survivors, made from the parent
// with no new unique id, whether the excluded ranks left, died or hang.
#include <gtest/gtest.h>
#include <dirent.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/harness.h"

using namespace testutil;

namespace {

// Every collective on `c` (n ranks, this one `rank`) against closed forms.
void everyCollectiveWorks(hocclComm_t c) {
  const int n = commSize(c), rank = commRank(c);
  const int count = 1000;
  std::vector<float> in(count * n), out(count * n);
  for (int i = 0; i < count * n; ++i) in[i] = float(rank + 1);
  ASSERT_EQ(hocclAllReduce(in.data(), out.data(), count, hocclFloat32, hocclSum, c, nullptr), hocclSuccess)
      << hocclGetLastError(c);
  EXPECT_EQ(out[count - 1], float(n * (n + 1) / 2));
  ASSERT_EQ(hocclAllGather(in.data(), out.data(), count, hocclFloat32, c, nullptr), hocclSuccess);
  for (int r = 0; r < n; ++r) EXPECT_EQ(out[r * count], float(r + 1));
  ASSERT_EQ(hocclReduceScatter(in.data(), out.data(), count, hocclFloat32, hocclMax, c, nullptr), hocclSuccess);
  EXPECT_EQ(out[0], float(n));
  float b = float(rank == n - 1 ? 42 : 0);
  ASSERT_EQ(hocclBroadcast(&b, &b, 1, hocclFloat32, n - 1, c, nullptr), hocclSuccess);
  EXPECT_EQ(b, 42.0f);
  ASSERT_EQ(hocclReduce(in.data(), out.data(), count, hocclFloat32, hocclMin, 0, c, nullptr), hocclSuccess);
  if (rank == 0) {
    EXPECT_EQ(out[count - 1], 1.0f);
  }
  for (int r = 0; r < n; ++r) in[r * count] = float(rank * 100 + r);  // block r goes to rank r
  ASSERT_EQ(hocclAlltoAll(in.data(), out.data(), count, hocclFloat32, c, nullptr), hocclSuccess);
  for (int r = 0; r < n; ++r) EXPECT_EQ(out[r * count], float(r * 100 + rank));
}

// The survivors of `excluded` shrink and check their new numbering.
hocclComm_t shrinkAndCheck(hocclComm_t comm, int rank, std::vector<int> excluded, int flags) {
  hocclComm_t sub = nullptr;
  EXPECT_EQ(hocclCommShrink(comm, excluded.data(), int(excluded.size()), &sub, nullptr, flags), hocclSuccess)
      << hocclGetLastError(comm);
  if (!sub) return nullptr;
  int below = 0;  // survivors keep their order
  for (int r = 0; r < rank; ++r) below += std::find(excluded.begin(), excluded.end(), r) == excluded.end();
  EXPECT_EQ(commRank(sub), below);
  EXPECT_EQ(commSize(sub), commSize(comm) - int(excluded.size()));
  return sub;
}

// At 4 and 8 ranks, as threads and as processes.
class ShrinkShape : public testing::TestWithParam<std::tuple<int, bool>> {
 protected:
  Options options(double timeoutSec) const {
    Options o = processes() ? inProcesses(ranks(), timeoutSec) : Options();
    o.ranks = ranks();
    o.timeoutSec = timeoutSec;
    return o;
  }
  int ranks() const { return std::get<0>(GetParam()); }
  bool processes() const { return std::get<1>(GetParam()); }
};

std::string shapeName(const testing::TestParamInfo<std::tuple<int, bool>>& info) {
  return std::to_string(std::get<0>(info.param)) + (std::get<1>(info.param) ? "Processes" : "Threads");
}

TEST_P(ShrinkShape, ARankThatLeavesIsExcludedAndTheRestGoOn) {
  Options o = options(30);
  std::string err;
  ASSERT_TRUE(spawn(o, [&](hocclComm_t comm, int rank) {
    if (rank == 1) return;  // leaves: never calls
    hocclComm_t sub = shrinkAndCheck(comm, rank, {1}, HOCCL_SHRINK_DEFAULT);
    ASSERT_NE(sub, nullptr);
    everyCollectiveWorks(sub);
    EXPECT_EQ(hocclCommDestroy(sub), hocclSuccess);
  }, &err)) << err;
}

INSTANTIATE_TEST_SUITE_P(Shapes, ShrinkShape, testing::Combine(testing::Values(4, 8), testing::Bool()), shapeName);

// Killed (SIGKILL) and frozen (SIGSTOP) ranks need processes.
class ShrinkProcesses : public testing::TestWithParam<int> {};

// kill -9 of the last rank in the middle of a loop across two emulated
// nodes (its node's ranks see its process end, the other node's see TCP
// connections close): every survivor's call fails naming it, then they
// shrink with HOCCL_SHRINK_ABORT and carry on.
TEST_P(ShrinkProcesses, AfterARankIsKilledTheSurvivorsShrinkAndCarryOn) {
  const int n = GetParam(), victim = n - 1;
  Options o = inProcesses(n, 30);
  o.nodeSizes = {n / 2, n - n / 2};
  o.net = Net::Socket;
  o.killedRanks = {victim};
  std::string err;
  ASSERT_TRUE(spawn(o, [&](hocclComm_t comm, int rank) {
    float v = 1, sum = 0;
    ASSERT_EQ(hocclAllReduce(&v, &sum, 1, hocclFloat32, hocclSum, comm, nullptr), hocclSuccess);
    if (rank == victim) raise(SIGKILL);
    hocclResult_t rc = hocclSuccess;
    for (int i = 0; i < 100 && rc == hocclSuccess; ++i)
      rc = hocclAllReduce(&v, &sum, 1, hocclFloat32, hocclSum, comm, nullptr);
    ASSERT_NE(rc, hocclSuccess) << "the survivors did not notice rank " << victim << "'s death";
    EXPECT_NE(std::string(hocclGetLastError(comm)).find("rank " + std::to_string(victim)), std::string::npos)
        << hocclGetLastError(comm);
    hocclComm_t sub = shrinkAndCheck(comm, rank, {victim}, HOCCL_SHRINK_ABORT);
    ASSERT_NE(sub, nullptr);
    everyCollectiveWorks(sub);
    EXPECT_EQ(hocclCommDestroy(sub), hocclSuccess);
    hocclCommAbort(comm);
  }, &err)) << err;
}

TEST(CommShrink, BadArgumentsAreRefusedByName) {
  std::string err;
  ASSERT_TRUE(runThreads(3, [&](hocclComm_t comm, int rank) {
    hocclComm_t sub = nullptr;
    int self[1] = {rank};
    EXPECT_EQ(hocclCommShrink(comm, self, 1, &sub, nullptr, 0), hocclInvalidArgument);
    EXPECT_NE(std::string(hocclGetLastError(comm)).find("is in excludeRanksList"), std::string::npos);
    int all[3] = {0, 1, 2};
    EXPECT_EQ(hocclCommShrink(comm, all, 3, &sub, nullptr, 0), hocclInvalidArgument);
    int twice[2] = {(rank + 1) % 3, (rank + 1) % 3};
    EXPECT_EQ(hocclCommShrink(comm, twice, 2, &sub, nullptr, 0), hocclInvalidArgument);
    EXPECT_NE(std::string(hocclGetLastError(comm)).find("excluded twice"), std::string::npos);
    int out[1] = {9};
    EXPECT_EQ(hocclCommShrink(comm, out, 1, &sub, nullptr, 0), hocclInvalidArgument);
    EXPECT_EQ(hocclCommShrink(comm, nullptr, 1, &sub, nullptr, 0), hocclInvalidArgument);
    EXPECT_EQ(hocclCommShrink(comm, nullptr, 0, &sub, nullptr, 0x10), hocclInvalidArgument);
    // Nothing excluded: a copy of the parent.
    ASSERT_EQ(hocclCommShrink(comm, nullptr, 0, &sub, nullptr, 0), hocclSuccess) << hocclGetLastError(comm);
    everyCollectiveWorks(sub);
    hocclCommDestroy(sub);
  }, &err)) << err;
}

// A frozen rank (SIGSTOP): the survivors' call ends at their timeout, they
// shrink without it, and then let it go on (SIGCONT) to leave in order.
TEST_P(ShrinkProcesses, AFrozenRankIsLeftBehind) {
  const int n = GetParam(), frozen = n - 1;
  Options o = inProcesses(n, 30);
  o.timeoutSec = 1;
  std::string err;
  ASSERT_TRUE(spawn(o, [&](hocclComm_t comm, int rank) {
    std::vector<int64_t> pids(n);
    int64_t pid = getpid();
    ASSERT_EQ(hocclAllGather(&pid, pids.data(), 1, hocclInt64, comm, nullptr), hocclSuccess);
    if (rank == frozen) {
      raise(SIGSTOP);
      return;  // resumed by rank 0 after the others shrank
    }
    float v = 1, sum = 0;
    EXPECT_NE(hocclAllReduce(&v, &sum, 1, hocclFloat32, hocclSum, comm, nullptr), hocclSuccess);
    hocclComm_t sub = shrinkAndCheck(comm, rank, {frozen}, HOCCL_SHRINK_ABORT);
    ASSERT_NE(sub, nullptr);
    everyCollectiveWorks(sub);
    if (rank == 0) kill(pid_t(pids[frozen]), SIGCONT);
    EXPECT_EQ(hocclCommDestroy(sub), hocclSuccess);
    hocclCommAbort(comm);
  }, &err)) << err;
}

INSTANTIATE_TEST_SUITE_P(Ranks, ShrinkProcesses, testing::Values(4, 8),
                         [](const testing::TestParamInfo<int>& info) { return std::to_string(info.param) + "Ranks"; });

// Shrinking 8 ranks to 7 against a fresh init of the same 7, as threads and
// as processes (printed by rank 0, not asserted): the init is timed from
// just before hocclCommInitRankConfig to its return, unique id excluded.
TEST(CommShrink, TimeAgainstAFreshInit) {
  for (bool processes : {false, true}) {
    const char* how = processes ? "processes" : "threads";
    Options o = processes ? inProcesses(8, 30) : Options();
    o.ranks = 8;
    o.timeoutSec = 30;
    std::string err;
    ASSERT_TRUE(spawn(o, [&](hocclComm_t comm, int rank) {
      if (rank == 7) return;
      int ex[1] = {7};
      hocclComm_t sub = nullptr;
      const auto t0 = std::chrono::steady_clock::now();
      ASSERT_EQ(hocclCommShrink(comm, ex, 1, &sub, nullptr, 0), hocclSuccess) << hocclGetLastError(comm);
      const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      if (rank == 0) std::printf("shrink 8 -> 7 ranks (%s): %.1f ms\n", how, ms);
      everyCollectiveWorks(sub);
      hocclCommDestroy(sub);
    }, &err)) << err;
    Options seven = o;
    seven.ranks = 7;
    std::chrono::steady_clock::time_point initStart;
    seven.beforeInit = [&](int rank) {
      if (rank == 0) initStart = std::chrono::steady_clock::now();
    };
    ASSERT_TRUE(spawn(seven, [&](hocclComm_t, int rank) {
      const double ms =
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - initStart).count();
      if (rank == 0) std::printf("init of 7 ranks (%s): %.1f ms\n", how, ms);
    }, &err)) << err;
  }
}

}  // namespace

// ---- 100 kill-and-shrink cycles --------------------------------------------
//
// Three survivor processes live through every cycle. Each cycle they make a
// communicator with a fresh fourth process (on the node of survivor 2, so
// it shares memory with one survivor and TCP with the others), which dies
// of SIGKILL after one all-reduce; the survivors see the failure, shrink
// with HOCCL_SHRINK_ABORT, use the new communicator, destroy it and abort
// the old one. After the first cycle and after the last, each survivor
// counts its descriptors, threads, shared-memory mappings and the
// /dev/shm segments it created: they must not grow. At the end no segment
// of a victim older than the last is left in /dev/shm.

namespace {

constexpr int kCycles = 100;

struct Footprint {
  int fds = 0, threads = 0, mappings = 0, segments = 0;
  bool operator==(const Footprint& o) const {
    return fds == o.fds && threads == o.threads && mappings == o.mappings && segments == o.segments;
  }
  std::string text() const {
    return std::to_string(fds) + " descriptors, " + std::to_string(threads) + " threads, " +
           std::to_string(mappings) + " shared mappings, " + std::to_string(segments) + " /dev/shm segments";
  }
};

int entriesIn(const char* dir) {
  int n = 0;
  if (DIR* d = opendir(dir)) {
    while (dirent* e = readdir(d)) n += e->d_name[0] != '.';
    closedir(d);
  }
  return n;
}

// The pids in the names of hoccl's /dev/shm segments ("hoccl-<hash>-<pid>-...").
std::vector<int> segmentCreators() {
  std::vector<int> pids;
  if (DIR* d = opendir("/dev/shm")) {
    while (dirent* e = readdir(d)) {
      unsigned long long hash = 0;
      int pid = 0;
      if (sscanf(e->d_name, "hoccl-%16llx-%d-", &hash, &pid) == 2) pids.push_back(pid);
    }
    closedir(d);
  }
  return pids;
}

Footprint footprint() {
  Footprint f;
  f.fds = entriesIn("/proc/self/fd");
  f.threads = entriesIn("/proc/self/task");
  if (FILE* m = fopen("/proc/self/maps", "r")) {
    char line[512];
    while (fgets(line, sizeof line, m))
      f.mappings += strstr(line, "/dev/shm/") != nullptr || strstr(line, "memfd:") != nullptr;
    fclose(m);
  }
  for (int pid : segmentCreators()) f.segments += pid == getpid();
  return f;
}

// Threads end a moment after the calls that stop them return: wait up to
// 2 s for the count to come back to `before`.
Footprint settledFootprint(const Footprint& before) {
  Footprint now = footprint();
  for (int i = 0; i < 200 && !(now == before); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    now = footprint();
  }
  return now;
}

bool writeFull(int fd, const void* p, size_t n) { return write(fd, p, n) == ssize_t(n); }

Options cycleShape() {
  Options o;
  o.ranks = 4;
  o.nodeSizes = {2, 2};
  o.net = Net::Socket;
  o.timeoutSec = 30;
  return o;
}

// Survivor `rank` (0-2): kCycles cycles; 0 when nothing failed or grew.
int survivor(int rank, int idOut, int idIn) {
  const Options o = cycleShape();
  Footprint first;
  for (int cycle = 0; cycle < kCycles; ++cycle) {
    hocclUniqueId id;
    if (rank == 0) {
      if (hocclGetUniqueId(&id) != hocclSuccess || !writeFull(idOut, &id, sizeof id)) return 2;
    } else if (!testutil::readAll(idIn, &id, sizeof id)) {
      return 3;
    }
    hocclComm_t comm = nullptr;
    if (initRankAs(o, id, rank, &comm) != hocclSuccess) {
      fprintf(stderr, "cycle %d rank %d: init: %s\n", cycle, rank, hocclGetLastError(nullptr));
      return 4;
    }
    float v = 1, sum = 0;
    hocclResult_t rc = hocclSuccess;
    for (int i = 0; i < 1000 && rc == hocclSuccess; ++i)
      rc = hocclAllReduce(&v, &sum, 1, hocclFloat32, hocclSum, comm, nullptr);
    const std::string why = hocclGetLastError(comm);
    if (rc == hocclSuccess || why.find("rank 3") == std::string::npos) {
      fprintf(stderr, "cycle %d rank %d: the victim's death was not named: %s\n", cycle, rank, why.c_str());
      return 5;
    }
    int ex[1] = {3};
    hocclComm_t sub = nullptr;
    if (hocclCommShrink(comm, ex, 1, &sub, nullptr, HOCCL_SHRINK_ABORT) != hocclSuccess) {
      fprintf(stderr, "cycle %d rank %d: shrink: %s\n", cycle, rank, hocclGetLastError(comm));
      return 6;
    }
    std::vector<float> in(1000, float(rank + 1)), out(1000);
    if (hocclAllReduce(in.data(), out.data(), in.size(), hocclFloat32, hocclSum, sub, nullptr) != hocclSuccess ||
        out[999] != 6.0f) {
      fprintf(stderr, "cycle %d rank %d: all-reduce on the shrunk communicator: %s (got %g)\n", cycle, rank,
              hocclGetLastError(sub), double(out[999]));
      return 7;
    }
    hocclCommDestroy(sub);
    hocclCommAbort(comm);
    if (cycle == 0) first = settledFootprint(Footprint{});
    if (cycle == kCycles - 1) {
      const Footprint last = settledFootprint(first);
      if (!(last == first)) {
        fprintf(stderr, "rank %d: after cycle 1: %s; after cycle %d: %s\n", rank, first.text().c_str(), kCycles,
                last.text().c_str());
        return 8;
      }
      fprintf(stderr, "rank %d: after cycles 1 and %d alike: %s\n", rank, kCycles, last.text().c_str());
    }
  }
  return 0;
}

}  // namespace

TEST(CommShrink, HundredKillAndShrinkCyclesLeakNothing) {
  int up[2], down[2][2];  // survivor 0 -> test: each cycle's id; test -> survivors 1 and 2
  ASSERT_EQ(pipe(up), 0);
  ASSERT_EQ(pipe(down[0]), 0);
  ASSERT_EQ(pipe(down[1]), 0);
  fflush(nullptr);
  pid_t survivors[3];
  for (int r = 0; r < 3; ++r) {
    survivors[r] = fork();
    ASSERT_GE(survivors[r], 0);
    if (survivors[r] == 0) _exit(survivor(r, up[1], r > 0 ? down[r - 1][0] : -1));
  }
  close(up[1]);
  close(down[0][0]);
  close(down[1][0]);
  std::vector<pid_t> victims;
  std::string failure;
  const auto t0 = std::chrono::steady_clock::now();
  for (int cycle = 0; cycle < kCycles && failure.empty(); ++cycle) {
    hocclUniqueId id;
    if (!testutil::readAll(up[0], &id, sizeof id)) {
      failure = "survivor 0 stopped before cycle " + std::to_string(cycle + 1);
      break;
    }
    pid_t v = fork();
    if (v == 0) {
      hocclComm_t comm = nullptr;
      if (initRankAs(cycleShape(), id, 3, &comm) != hocclSuccess) _exit(4);
      float x = 1, sum = 0;
      hocclAllReduce(&x, &sum, 1, hocclFloat32, hocclSum, comm, nullptr);
      raise(SIGKILL);
    }
    victims.push_back(v);
    if (!writeFull(down[0][1], &id, sizeof id) || !writeFull(down[1][1], &id, sizeof id))
      failure = "a survivor stopped before cycle " + std::to_string(cycle + 1);
    int st = 0;
    waitpid(v, &st, 0);
    if (!WIFSIGNALED(st) || WTERMSIG(st) != SIGKILL)
      failure = "cycle " + std::to_string(cycle + 1) + ": the victim did not die of SIGKILL";
  }
  close(down[0][1]);
  close(down[1][1]);
  close(up[0]);
  for (int r = 0; r < 3; ++r) {
    int st = 0;
    waitpid(survivors[r], &st, 0);
    EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0)
        << "survivor " << r << " ended with status " << st << " (its stderr says why)";
  }
  EXPECT_EQ(failure, "");
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const std::vector<pid_t> older(victims.begin(), victims.empty() ? victims.end() : victims.end() - 1);
  int stale = 0;
  for (int pid : segmentCreators()) stale += std::find(older.begin(), older.end(), pid) != older.end();
  EXPECT_EQ(stale, 0) << "segments of earlier victims left in /dev/shm";
  std::printf("%zu kill-and-shrink cycles in %.1f s\n", victims.size(), secs);
}
