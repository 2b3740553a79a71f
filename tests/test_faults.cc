// Injected faults: a peer that stops calling, aborts, or never joins. Every
// surviving rank must return a specific error that names the culprit, well
// before any generous "no hang" bound, and leave no descriptors or shared
// segments behind. Ranks are threads here; killed processes are in
// test_multiprocess.cc and results/scripts/soak-kill.sh.
#include <dirent.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <fstream>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "src/comm/comm.h"
#include "tests/support/harness.h"

namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

bool has(const std::string& s, const std::string& what) { return s.find(what) != std::string::npos; }

// Runs body(comm, rank) on n threads, each with a communicator whose config
// sets timeoutMs (timeoutSec in milliseconds); node(rank) names the rank's
// node ("" = this machine's).
void runRanks(int n, double timeoutSec, const std::function<std::string(int)>& node,
              const std::function<void(hocclComm_t, int)>& body) {
  hocclUniqueId id;
  ASSERT_EQ(hocclGetUniqueId(&id), hocclSuccess);
  std::vector<std::thread> threads;
  std::vector<std::string> errors(n);
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      std::string host = node(r);
      if (!host.empty()) hoccl::setThreadHostIdOverride(host);
      hocclConfig_t config = HOCCL_CONFIG_INITIALIZER;
      config.timeoutMs = static_cast<int>(std::lround(timeoutSec * 1000));
      hocclComm_t comm = nullptr;
      if (hocclCommInitRankConfig(&comm, n, id, r, &config) != hocclSuccess) {
        errors[r] = hocclGetLastError(nullptr);
        return;
      }
      body(comm, r);
      hocclCommDestroy(comm);  // an aborted handle is refused, harmlessly
    });
  for (auto& t : threads) t.join();
  for (int r = 0; r < n; ++r) EXPECT_TRUE(errors[r].empty()) << "rank " << r << " init: " << errors[r];
}

std::string sameNode(int) { return ""; }
std::string ownNode(int rank) { return "fault-node-" + std::to_string(rank); }

// A rank that stops calling: its peer times out with a message naming this
// rank and host, the op and its sequence number, the step, the peer waited
// on and the last step completed; the stalled rank learns of it as soon
// as it waits on the failed one.
TEST(Timeout, MessageNamesRankOpStepAndPeer) {
  for (bool network : {false, true}) {
    SCOPED_TRACE(network ? "TCP" : "shared memory");
    std::vector<hocclResult_t> rc(2, hocclSuccess);
    std::vector<std::string> msg(2);
    std::atomic<bool> rank0Done{false};
    double rank0Secs = 0;
    runRanks(2, 0.5, network ? ownNode : sameNode, [&](hocclComm_t comm, int rank) {
      std::vector<float> buf(4096, 1.0f);
      ASSERT_EQ(hocclAllReduce(buf.data(), buf.data(), buf.size(), hocclFloat, hocclSum, comm, nullptr), hocclSuccess);
      if (rank == 0) {
        auto t0 = Clock::now();
        rc[0] = hocclAllReduce(buf.data(), buf.data(), buf.size(), hocclFloat, hocclSum, comm, nullptr);
        rank0Secs = since(t0);
        msg[0] = hocclGetLastError(comm);
        rank0Done = true;
      } else {
        while (!rank0Done) std::this_thread::sleep_for(std::chrono::milliseconds(10));
        // This call may still complete (rank 0's data is on its way, and an
        // algorithm may need nothing more from it); the first one that
        // waits on rank 0 fails.
        for (int call = 0; call < 20 && rc[1] == hocclSuccess; ++call)
          rc[1] = hocclAllReduce(buf.data(), buf.data(), buf.size(), hocclFloat, hocclSum, comm, nullptr);
        msg[1] = hocclGetLastError(comm);
      }
    });
    EXPECT_EQ(rc[0], hocclTimeout) << msg[0];
    EXPECT_GE(rank0Secs, 0.45);
    EXPECT_LT(rank0Secs, 30.0);
    // The timeout is the config's (runRanks): the message says so.
    for (const char* part : {"rank 0 (pid ", "0.5 s (hocclConfig_t.timeoutMs)", "AllReduce(count=4096, float, sum)",
                             "call #2", "channel 0 step ", "rank 1", "last completed step", "rank 1 is pid "})
      EXPECT_TRUE(has(msg[0], part)) << "missing \"" << part << "\" in: " << msg[0];
    // The stalled rank is told instead of timing out in turn.
    EXPECT_EQ(rc[1], hocclTimeout) << msg[1];
    EXPECT_TRUE(has(msg[1], "stopped because rank 0")) << msg[1];
  }
}

// Ranks on four nodes (TCP between them). Rank 3 aborts while the others
// are in an all-reduce: rank 1 and rank 2 never receive from rank 3 in a
// ring, yet all three stop at once with an error naming rank 3.
TEST(DeadPeer, AbortNoticeReachesRanksThatDoNotTalkToTheCulprit) {
  std::vector<hocclResult_t> rc(4, hocclSuccess);
  std::vector<std::string> msg(4);
  std::vector<double> secs(4, 0);
  runRanks(4, 120, ownNode, [&](hocclComm_t comm, int rank) {
    std::vector<float> buf(1 << 16, 1.0f);
    ASSERT_EQ(hocclAllReduce(buf.data(), buf.data(), buf.size(), hocclFloat, hocclSum, comm, nullptr), hocclSuccess);
    if (rank == 3) {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      EXPECT_EQ(hocclCommAbort(comm), hocclSuccess);
      return;
    }
    auto t0 = Clock::now();
    rc[rank] = hocclAllReduce(buf.data(), buf.data(), buf.size(), hocclFloat, hocclSum, comm, nullptr);
    secs[rank] = since(t0);
    msg[rank] = hocclGetLastError(comm);
  });
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(rc[r], hocclRemoteError) << "rank " << r << ": " << msg[r];
    EXPECT_TRUE(has(msg[r], "rank 3")) << "rank " << r << ": " << msg[r];
    EXPECT_LT(secs[r], 30.0) << "rank " << r;  // far below the 120 s timeout
  }
}

// An idle rank polls hocclCommGetAsyncError: a peer's abort on another
// node shows up there without any call.
TEST(AsyncError, ReportsAPeersAbortBetweenCalls) {
  std::atomic<int> seen{-1};
  std::atomic<bool> aborted{false};
  runRanks(2, 60, ownNode, [&](hocclComm_t comm, int rank) {
    int x = 1;
    ASSERT_EQ(hocclAllReduce(&x, &x, 1, hocclInt32, hocclSum, comm, nullptr), hocclSuccess);
    if (rank == 1) {
      // Set before the call: its notice can reach rank 0 before it returns.
      aborted = true;
      EXPECT_EQ(hocclCommAbort(comm), hocclSuccess);
      return;
    }
    hocclResult_t async = hocclSuccess;
    ASSERT_EQ(hocclCommGetAsyncError(comm, &async), hocclSuccess);
    EXPECT_TRUE(async == hocclSuccess || aborted);
    auto t0 = Clock::now();
    while (async == hocclSuccess && since(t0) < 20) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      ASSERT_EQ(hocclCommGetAsyncError(comm, &async), hocclSuccess);
    }
    seen = async;
    EXPECT_TRUE(has(hocclGetLastError(comm), "rank 1 aborted")) << hocclGetLastError(comm);
    // Sticky: the next call fails with it too.
    EXPECT_EQ(hocclAllReduce(&x, &x, 1, hocclInt32, hocclSum, comm, nullptr), hocclRemoteError);
  });
  EXPECT_EQ(seen.load(), hocclRemoteError);
}

// config.blocking = 0: init returns hocclInProgress at once and
// hocclCommGetAsyncError says hocclInProgress until the communicator works.
TEST(NonBlockingInit, InProgressUntilReady) {
  hocclUniqueId id;
  ASSERT_EQ(hocclGetUniqueId(&id), hocclSuccess);
  const int n = 3;
  std::vector<hocclComm_t> comms(n, nullptr);
  std::vector<hocclResult_t> initRc(n);
  hocclConfig_t config = HOCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  // Rank 0 starts alone: its init cannot finish before the others join.
  initRc[0] = hocclCommInitRankConfig(&comms[0], n, id, 0, &config);
  ASSERT_NE(comms[0], nullptr);
  hocclResult_t async = hocclSuccess;
  ASSERT_EQ(hocclCommGetAsyncError(comms[0], &async), hocclSuccess);
  EXPECT_EQ(async, hocclInProgress);
  int x = 1;
  EXPECT_EQ(hocclAllReduce(&x, &x, 1, hocclInt32, hocclSum, comms[0], nullptr), hocclInvalidUsage);
  EXPECT_TRUE(has(hocclGetLastError(nullptr), "in progress")) << hocclGetLastError(nullptr);
  std::vector<std::thread> threads;
  for (int r = 1; r < n; ++r)
    threads.emplace_back([&, r] { initRc[r] = hocclCommInitRankConfig(&comms[r], n, id, r, &config); });
  for (auto& t : threads) t.join();
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(initRc[r], hocclInProgress) << "rank " << r;
    auto t0 = Clock::now();
    do {
      ASSERT_EQ(hocclCommGetAsyncError(comms[r], &async), hocclSuccess);
      if (async == hocclInProgress) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    } while (async == hocclInProgress && since(t0) < 60);
    EXPECT_EQ(async, hocclSuccess) << "rank " << r << ": " << hocclGetLastError(comms[r]);
  }
  threads.clear();
  std::vector<int> sums(n, 0);
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      int v = r + 1;
      EXPECT_EQ(hocclAllReduce(&v, &sums[r], 1, hocclInt32, hocclSum, comms[r], nullptr), hocclSuccess);
    });
  for (auto& t : threads) t.join();
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(sums[r], 6);
    EXPECT_EQ(hocclCommDestroy(comms[r]), hocclSuccess);
  }
}

// A non-blocking init whose peer never joins ends with the timeout, named in
// the async error; an abort while it is pending returns at once.
TEST(NonBlockingInit, FailureAndAbortWhilePending) {
  hocclUniqueId id;
  ASSERT_EQ(hocclGetUniqueId(&id), hocclSuccess);
  hocclConfig_t config = HOCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  config.timeoutMs = 300;
  hocclComm_t comm = nullptr;
  EXPECT_EQ(hocclCommInitRankConfig(&comm, 2, id, 0, &config), hocclInProgress);
  hocclResult_t async = hocclInProgress;
  auto t0 = Clock::now();
  while (async == hocclInProgress && since(t0) < 30) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    ASSERT_EQ(hocclCommGetAsyncError(comm, &async), hocclSuccess);
  }
  EXPECT_EQ(async, hocclTimeout);
  EXPECT_TRUE(has(hocclGetLastError(comm), "missing: 1")) << hocclGetLastError(comm);
  EXPECT_EQ(hocclCommDestroy(comm), hocclSuccess);

  hocclUniqueId id2;
  ASSERT_EQ(hocclGetUniqueId(&id2), hocclSuccess);
  config.timeoutMs = 1000;
  EXPECT_EQ(hocclCommInitRankConfig(&comm, 2, id2, 0, &config), hocclInProgress);
  t0 = Clock::now();
  EXPECT_EQ(hocclCommAbort(comm), hocclSuccess);
  EXPECT_LT(since(t0), 0.5);  // not the init's 1 s
  // The init thread frees the communicator when its wait ends.
  std::this_thread::sleep_for(std::chrono::milliseconds(1300));
}

// hocclCommAbort with nothing in flight: under 1 s, and it releases what the
// communicator held, as destroy does.
int openDescriptors() {
  int n = 0;
  if (DIR* d = opendir("/proc/self/fd")) {
    while (readdir(d)) ++n;
    closedir(d);
  }
  return n;
}

std::vector<std::string> shmNamesOfThisProcess() {
  std::vector<std::string> out;
  std::string mine = "-" + std::to_string(getpid()) + "-";
  if (DIR* d = opendir("/dev/shm")) {
    while (dirent* e = readdir(d))
      if (strncmp(e->d_name, "hoccl-", 6) == 0 && strstr(e->d_name, mine.c_str())) out.push_back(e->d_name);
    closedir(d);
  }
  return out;
}

TEST(Resources, DestroyAndAbortReleaseDescriptorsAndSegments) {
  for (bool network : {false, true}) {
    for (bool abort : {false, true}) {
      SCOPED_TRACE(std::string(network ? "TCP" : "shared memory") + (abort ? ", abort" : ", destroy"));
      int before = openDescriptors();
      hocclUniqueId id;
      ASSERT_EQ(hocclGetUniqueId(&id), hocclSuccess);
      std::vector<hocclComm_t> comms(3, nullptr);
      std::vector<std::thread> threads;
      for (int r = 0; r < 3; ++r)
        threads.emplace_back([&, r] {
          if (network) hoccl::setThreadHostIdOverride(ownNode(r));
          ASSERT_EQ(hocclCommInitRank(&comms[r], 3, id, r), hocclSuccess);
          std::vector<float> buf(100000, 1.0f);
          EXPECT_EQ(hocclAllReduce(buf.data(), buf.data(), buf.size(), hocclFloat, hocclSum, comms[r], nullptr),
                    hocclSuccess);
        });
      for (auto& t : threads) t.join();
      EXPECT_TRUE(shmNamesOfThisProcess().empty());  // unlinked once both sides mapped them
      for (hocclComm_t c : comms) {
        auto t0 = Clock::now();
        EXPECT_EQ(abort ? hocclCommAbort(c) : hocclCommDestroy(c), hocclSuccess);
        EXPECT_LT(since(t0), 1.0);
      }
      EXPECT_EQ(openDescriptors(), before);
      EXPECT_TRUE(shmNamesOfThisProcess().empty());
    }
  }
}

// Segments left in /dev/shm by a process that was killed (its pid is in the
// name) are removed by the next init on the machine; live ones are kept.
TEST(Resources, InitRemovesSegmentsOfDeadProcesses) {
  pid_t child = fork();
  if (child == 0) _exit(0);
  ASSERT_GT(child, 0);
  waitpid(child, nullptr, 0);  // a pid that no longer runs
  std::string dead = "/dev/shm/hoccl-00000000deadbeef-" + std::to_string(child) + "-edge-1-0-0";
  std::string live = "/dev/shm/hoccl-00000000deadbeef-" + std::to_string(getpid()) + "-edge-1-0-9";
  std::ofstream(dead) << "left by a killed run";
  std::ofstream(live) << "in use";
  ASSERT_EQ(access(dead.c_str(), F_OK), 0);
  std::string err;
  ASSERT_TRUE(testutil::runThreads(2, [](hocclComm_t, int) {}, &err)) << err;
  EXPECT_NE(access(dead.c_str(), F_OK), 0) << dead << " is still there";
  EXPECT_EQ(access(live.c_str(), F_OK), 0) << live << " was removed but its process lives";
  unlink(live.c_str());
}

}  // namespace
