// hocclCommCreateGroup: a communicator of listed ranks, made by those
// ranks only (MPI_Comm_create_group), while the others do something else,
// hang or are gone.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/harness.h"

using namespace testutil;

namespace {

// An all-reduce of each rank's `value` on `c`.
int64_t sumOn(hocclComm_t c, int64_t value) {
  int64_t sum = -1;
  EXPECT_EQ(hocclAllReduce(&value, &sum, 1, hocclInt64, hocclSum, c, nullptr), hocclSuccess) << hocclGetLastError(c);
  return sum;
}

// Odd ranks make a group in reversed order while even ranks make theirs,
// then overlapping groups, in threads and across emulated nodes in processes.
void oddAndEven(const Options& o) {
  std::string err;
  ASSERT_TRUE(spawn(o, [&](hocclComm_t comm, int rank) {
    const int n = commSize(comm);
    std::vector<int> mine;
    for (int r = n - 1; r >= 0; --r)
      if (r % 2 == rank % 2) mine.push_back(r);  // reversed: the first listed becomes rank 0
    hocclComm_t sub = nullptr;
    ASSERT_EQ(hocclCommCreateGroup(comm, mine.data(), int(mine.size()), &sub, nullptr), hocclSuccess)
        << hocclGetLastError(comm);
    ASSERT_NE(sub, nullptr);
    EXPECT_EQ(commSize(sub), int(mine.size()));
    int want = 0;
    while (mine[want] != rank) ++want;
    EXPECT_EQ(commRank(sub), want);
    int64_t expect = 0;
    for (int r : mine) expect += r;
    EXPECT_EQ(sumOn(sub, rank), expect);
    // Overlapping groups {r, r+1}, each rank in two of them, made in the
    // same (ascending) order by every member.
    std::vector<hocclComm_t> pairs;
    for (int first = std::max(0, rank - 1); first <= rank && first + 1 < n; ++first) {
      int members[2] = {first, first + 1};
      hocclComm_t p = nullptr;
      ASSERT_EQ(hocclCommCreateGroup(comm, members, 2, &p, nullptr), hocclSuccess) << hocclGetLastError(comm);
      EXPECT_EQ(sumOn(p, rank), 2 * first + 1);
      pairs.push_back(p);
    }
    // The parent still works, and the same list again makes a second group.
    EXPECT_EQ(sumOn(comm, rank), int64_t(n) * (n - 1) / 2);
    hocclComm_t again = nullptr;
    ASSERT_EQ(hocclCommCreateGroup(comm, mine.data(), int(mine.size()), &again, nullptr), hocclSuccess)
        << hocclGetLastError(comm);
    EXPECT_EQ(sumOn(again, 1), int64_t(mine.size()));
    for (hocclComm_t p : pairs) EXPECT_EQ(hocclCommDestroy(p), hocclSuccess);
    EXPECT_EQ(hocclCommDestroy(again), hocclSuccess);
    EXPECT_EQ(hocclCommDestroy(sub), hocclSuccess);
  }, &err)) << err;
}

TEST(CommCreateGroup, OddAndEvenRanksMakeTheirOwnGroupsAsThreads) {
  Options o;
  o.ranks = 6;
  o.timeoutSec = 30;
  oddAndEven(o);
}

TEST(CommCreateGroup, OddAndEvenRanksMakeTheirOwnGroupsAcrossNodesInProcesses) {
  Options o = inProcesses(6, 30);
  o.nodeSizes = {3, 3};
  o.net = Net::Socket;
  oddAndEven(o);
}

// Ranks outside the list never call: they may be stuck in something else.
TEST(CommCreateGroup, RanksOutsideTheListAreNotWaitedFor) {
  Options o;
  o.ranks = 4;
  o.timeoutSec = 30;
  std::string err;
  ASSERT_TRUE(spawn(o, [&](hocclComm_t comm, int rank) {
    if (rank == 3) {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));  // busy elsewhere, then leaves
      return;
    }
    int members[3] = {0, 1, 2};
    hocclComm_t sub = nullptr;
    const auto t0 = std::chrono::steady_clock::now();
    ASSERT_EQ(hocclCommCreateGroup(comm, members, 3, &sub, nullptr), hocclSuccess) << hocclGetLastError(comm);
    EXPECT_EQ(sumOn(sub, rank), 3);
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
    hocclCommDestroy(sub);
  }, &err)) << err;
}

TEST(CommCreateGroup, BadArgumentsAreRefusedByName) {
  std::string err;
  ASSERT_TRUE(runThreads(2, [&](hocclComm_t comm, int rank) {
    hocclComm_t sub = nullptr;
    int twice[2] = {rank, rank};
    EXPECT_EQ(hocclCommCreateGroup(comm, twice, 2, &sub, nullptr), hocclInvalidArgument);
    EXPECT_NE(std::string(hocclGetLastError(comm)).find("listed twice"), std::string::npos) << hocclGetLastError(comm);
    int outside[1] = {1 - rank};
    EXPECT_EQ(hocclCommCreateGroup(comm, outside, 1, &sub, nullptr), hocclInvalidArgument);
    EXPECT_NE(std::string(hocclGetLastError(comm)).find("not in ranks"), std::string::npos) << hocclGetLastError(comm);
    int range[1] = {7};
    EXPECT_EQ(hocclCommCreateGroup(comm, range, 1, &sub, nullptr), hocclInvalidArgument);
    EXPECT_NE(std::string(hocclGetLastError(comm)).find("out of range"), std::string::npos) << hocclGetLastError(comm);
    EXPECT_EQ(hocclCommCreateGroup(comm, nullptr, 1, &sub, nullptr), hocclInvalidArgument);
    int self[1] = {rank};
    EXPECT_EQ(hocclCommCreateGroup(comm, self, 0, &sub, nullptr), hocclInvalidArgument);
    EXPECT_EQ(hocclCommCreateGroup(comm, self, 1, nullptr, nullptr), hocclInvalidArgument);
    // A group of one is fine.
    ASSERT_EQ(hocclCommCreateGroup(comm, self, 1, &sub, nullptr), hocclSuccess) << hocclGetLastError(comm);
    EXPECT_EQ(sumOn(sub, 5), 5);
    hocclCommDestroy(sub);
    // Nothing was left behind: the parent and a real pair still work.
    int both[2] = {0, 1};
    ASSERT_EQ(hocclCommCreateGroup(comm, both, 2, &sub, nullptr), hocclSuccess) << hocclGetLastError(comm);
    EXPECT_EQ(sumOn(sub, rank), 1);
    hocclCommDestroy(sub);
  }, &err)) << err;
}

// Members that pass different lists are told so, naming both ranks; none
// waits for the timeout.
TEST(CommCreateGroup, DifferentListsAreNamedOnEveryMember) {
  Options o;
  o.ranks = 3;
  o.timeoutSec = 20;
  std::string err;
  ASSERT_TRUE(spawn(o, [&](hocclComm_t comm, int rank) {
    if (rank == 2) return;
    std::vector<int> members = rank == 0 ? std::vector<int>{0, 1} : std::vector<int>{0, 1, 2};
    hocclComm_t sub = nullptr;
    const auto t0 = std::chrono::steady_clock::now();
    EXPECT_EQ(hocclCommCreateGroup(comm, members.data(), int(members.size()), &sub, nullptr), hocclInvalidUsage);
    const std::string msg = hocclGetLastError(comm);
    EXPECT_NE(msg.find("ranks 0 and 1 are creating different groups"), std::string::npos) << msg;
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
    EXPECT_EQ(sub, nullptr);
  }, &err)) << err;
}

// A listed rank that never calls: the others end with the parent's
// timeout, naming it.
TEST(CommCreateGroup, AMemberThatNeverCallsIsNamedAtTheTimeout) {
  Options o;
  o.ranks = 3;
  o.timeoutSec = 1;
  std::string err;
  ASSERT_TRUE(spawn(o, [&](hocclComm_t comm, int rank) {
    if (rank == 1) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2500));
      return;
    }
    int members[3] = {0, 1, 2};
    hocclComm_t sub = nullptr;
    EXPECT_EQ(hocclCommCreateGroup(comm, members, 3, &sub, nullptr), hocclTimeout);
    const std::string msg = hocclGetLastError(comm);
    EXPECT_NE(msg.find(rank == 0 ? "from rank 1" : "from rank 0"), std::string::npos) << msg;
  }, &err)) << err;
}

}  // namespace
