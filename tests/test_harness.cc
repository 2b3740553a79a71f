// The rank harness itself (tests/support/harness.h): what it promises the
// other suites, so that a case passing there means what it says.
#include <gtest/gtest.h>
#include <unistd.h>

#include <set>
#include <string>
#include <vector>

#include "algorithms/registry.h"
#include "src/comm/comm.h"
#include "tests/support/harness.h"

using namespace testutil;

namespace {

// The algorithm reaches the communicator through hocclConfig_t (nothing
// in the environment), and node sizes become the communicator's nodes.
TEST(Harness, AlgorithmAndNodesReachTheCommunicator) {
  ASSERT_EQ(getenv("HOCCL_ALGO"), nullptr) << "run without HOCCL_ALGO";
  for (const hoccl::AlgoInfo& a : hoccl::allAlgorithms()) {
    Options o;
    o.ranks = 5;
    o.nodeSizes = {3, 2};
    o.net = Net::Socket;
    o.algorithm = a.name;
    std::vector<std::string> algo(o.ranks);
    std::vector<size_t> local(o.ranks);
    std::string err;
    ASSERT_TRUE(spawn(o, [&](hocclComm_t comm, int rank) {
      algo[rank] = comm->algo ? comm->algo->name : "auto";
      local[rank] = comm->localRanks.size();
    }, &err)) << err;
    for (int r = 0; r < o.ranks; ++r) {
      EXPECT_EQ(algo[r], a.name) << "rank " << r;
      EXPECT_EQ(local[r], r < 3 ? 3u : 2u) << "rank " << r;
    }
  }
}

// Ranks as processes are processes: every rank sees a different pid
// (exchanged with an all-gather, checked in each child; a failed check
// makes that child, and so spawn, fail).
TEST(Harness, ProcessRanksAreProcesses) {
  for (Net net : {Net::Shm, Net::Socket}) {
    Options o;
    o.ranks = 3;
    o.mode = Mode::Processes;
    o.net = net;
    if (net == Net::Socket) o.nodeSizes = {2, 1};
    std::string err;
    EXPECT_TRUE(spawn(o, [&](hocclComm_t comm, int) {
      int64_t mine = getpid();
      std::vector<int64_t> all(3);
      ASSERT_EQ(hocclAllGather(&mine, all.data(), 1, hocclInt64, comm, nullptr), hocclSuccess);
      EXPECT_EQ(std::set<int64_t>(all.begin(), all.end()).size(), 3u);
      EXPECT_NE(all[0], static_cast<int64_t>(getppid()));
    }, &err)) << o.describe() << ": " << err;
  }
}

// Runs `body` on two rank processes, expecting spawn to fail; returns its
// error.
std::string spawnFailureOfTwoProcesses(const Body& body) {
  Options o;
  o.ranks = 2;
  o.mode = Mode::Processes;
  o.timeoutSec = 10;
  std::string err;
  EXPECT_FALSE(spawn(o, body, &err));
  return err;
}

// A rank process that exits early or dies is reported, naming it.
TEST(Harness, AFailedRankProcessFailsSpawn) {
  const std::string err = spawnFailureOfTwoProcesses([](hocclComm_t, int rank) {
    if (rank == 1) _exit(7);
  });
  EXPECT_NE(err.find("rank 1"), std::string::npos) << err;
  EXPECT_NE(err.find("exited with 7"), std::string::npos) << err;
}

// A failed assertion in a rank process is recorded there, not here: the
// child exits non-zero and spawn fails, or such failures would pass
// unseen. (The child prints its failure; this test expects it.)
TEST(Harness, AFailedAssertionInARankProcessFailsSpawn) {
  const std::string err = spawnFailureOfTwoProcesses([](hocclComm_t, int rank) {
    if (rank == 1) ADD_FAILURE() << "deliberate failure in rank process 1 (Harness.AFailedAssertionInARankProcessFailsSpawn)";
  });
  EXPECT_NE(err.find("rank 1"), std::string::npos) << err;
  EXPECT_NE(err.find("failed (its failures are printed above)"), std::string::npos) << err;
}

TEST(Harness, InconsistentOptionsAreRefused) {
  Options o;
  o.ranks = 4;
  o.nodeSizes = {2, 1};
  std::string err;
  EXPECT_FALSE(spawn(o, [](hocclComm_t, int) {}, &err));
  EXPECT_NE(err.find("add up to 3"), std::string::npos) << err;
  o.nodeSizes = {2, 2};  // two nodes but no network
  EXPECT_FALSE(spawn(o, [](hocclComm_t, int) {}, &err));
  EXPECT_NE(err.find("need a network"), std::string::npos) << err;
}

}  // namespace
