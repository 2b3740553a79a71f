// hocclCommShrink: a communicator of the survivors, made from the parent
// with no new unique id, whether the excluded ranks left, died or hang.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/harness.h"

using namespace testutil;

namespace {

int rankOf(hocclComm_t c) {
  int r = -1;
  hocclCommUserRank(c, &r);
  return r;
}

int countOf(hocclComm_t c) {
  int n = -1;
  hocclCommCount(c, &n);
  return n;
}

// Every collective on `c` (n ranks, this one `rank`) against closed forms.
void everyCollectiveWorks(hocclComm_t c) {
  const int n = countOf(c), rank = rankOf(c);
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
}

// The survivors of `excluded` shrink and check their new numbering.
hocclComm_t shrinkAndCheck(hocclComm_t comm, int rank, std::vector<int> excluded, int flags) {
  hocclComm_t sub = nullptr;
  EXPECT_EQ(hocclCommShrink(comm, excluded.data(), int(excluded.size()), &sub, nullptr, flags), hocclSuccess)
      << hocclGetLastError(comm);
  if (!sub) return nullptr;
  int below = 0;  // survivors keep their order
  for (int r = 0; r < rank; ++r) below += std::find(excluded.begin(), excluded.end(), r) == excluded.end();
  EXPECT_EQ(rankOf(sub), below);
  EXPECT_EQ(countOf(sub), countOf(comm) - int(excluded.size()));
  return sub;
}

TEST(CommShrink, ARankThatLeavesIsExcludedAndTheRestGoOn) {
  Options o;
  o.ranks = 4;
  o.timeoutSec = 30;
  std::string err;
  ASSERT_TRUE(spawn(o, [&](hocclComm_t comm, int rank) {
    if (rank == 1) return;  // leaves: never calls
    hocclComm_t sub = shrinkAndCheck(comm, rank, {1}, HOCCL_SHRINK_DEFAULT);
    ASSERT_NE(sub, nullptr);
    everyCollectiveWorks(sub);
    EXPECT_EQ(hocclCommDestroy(sub), hocclSuccess);
  }, &err)) << err;
}

// A rank that dies in the middle of a loop across emulated nodes: the
// survivors' call fails naming it, then they shrink with
// HOCCL_SHRINK_ABORT and carry on. It dies by _exit without destroying its
// communicator, which its peers cannot tell from kill -9 (the kernel closes
// its sockets, its pid is gone) while the harness counts the exit as clean.
TEST(CommShrink, AfterARankDiesTheSurvivorsShrinkAndCarryOn) {
  Options o = inProcesses(4, 30);
  o.nodeSizes = {2, 2};
  o.net = Net::Socket;
  std::string err;
  ASSERT_TRUE(spawn(o, [&](hocclComm_t comm, int rank) {
    float v = 1, sum = 0;
    ASSERT_EQ(hocclAllReduce(&v, &sum, 1, hocclFloat32, hocclSum, comm, nullptr), hocclSuccess);
    if (rank == 2) _exit(0);
    hocclResult_t rc = hocclSuccess;
    for (int i = 0; i < 100 && rc == hocclSuccess; ++i)
      rc = hocclAllReduce(&v, &sum, 1, hocclFloat32, hocclSum, comm, nullptr);
    ASSERT_NE(rc, hocclSuccess) << "the survivors did not notice rank 2's death";
    EXPECT_NE(std::string(hocclGetLastError(comm)).find("rank 2"), std::string::npos) << hocclGetLastError(comm);
    hocclComm_t sub = shrinkAndCheck(comm, rank, {2}, HOCCL_SHRINK_ABORT);
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
TEST(CommShrink, AFrozenRankIsLeftBehind) {
  Options o = inProcesses(4, 30);
  o.timeoutSec = 1;
  std::string err;
  ASSERT_TRUE(spawn(o, [&](hocclComm_t comm, int rank) {
    int64_t pid = getpid(), pids[4] = {};
    ASSERT_EQ(hocclAllGather(&pid, pids, 1, hocclInt64, comm, nullptr), hocclSuccess);
    if (rank == 3) {
      raise(SIGSTOP);
      return;  // resumed by rank 0 after the others shrank
    }
    float v = 1, sum = 0;
    EXPECT_NE(hocclAllReduce(&v, &sum, 1, hocclFloat32, hocclSum, comm, nullptr), hocclSuccess);
    hocclComm_t sub = shrinkAndCheck(comm, rank, {3}, HOCCL_SHRINK_ABORT);
    ASSERT_NE(sub, nullptr);
    everyCollectiveWorks(sub);
    if (rank == 0) kill(pid_t(pids[3]), SIGCONT);
    EXPECT_EQ(hocclCommDestroy(sub), hocclSuccess);
    hocclCommAbort(comm);
  }, &err)) << err;
}

// Shrinking 8 ranks to 7 against a fresh init of 7 (printed, not asserted).
TEST(CommShrink, TimeAgainstAFreshInit) {
  Options o;
  o.ranks = 8;
  o.timeoutSec = 30;
  std::string err;
  double shrinkMs = 0;
  ASSERT_TRUE(spawn(o, [&](hocclComm_t comm, int rank) {
    if (rank == 7) return;
    int ex[1] = {7};
    hocclComm_t sub = nullptr;
    const auto t0 = std::chrono::steady_clock::now();
    ASSERT_EQ(hocclCommShrink(comm, ex, 1, &sub, nullptr, 0), hocclSuccess) << hocclGetLastError(comm);
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (rank == 0) shrinkMs = ms;
    everyCollectiveWorks(sub);
    hocclCommDestroy(sub);
  }, &err)) << err;
  const auto t0 = std::chrono::steady_clock::now();
  Options seven;
  seven.ranks = 7;
  ASSERT_TRUE(spawn(seven, [&](hocclComm_t, int) {}, &err)) << err;
  const double initMs = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  std::printf("shrink 8 -> 7 ranks (threads): %.1f ms; a fresh init of 7 (and destroy): %.1f ms\n", shrinkMs, initMs);
}

}  // namespace
