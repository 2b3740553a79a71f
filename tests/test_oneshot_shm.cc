// One-shot over shared memory (oneshot_shm, formerly "the board": one-shot
// all-reduce, all-gather, reduce-scatter, broadcast and reduce of a few
// hundred bytes on one node, src/exec/oneshot_shm.cc): it
// takes the calls it should, under auto and forced by name (falling back,
// and saying why, where it does not fit), gets the right answers in and out of place,
// keeps its order with calls that go over connections (grouped on one
// rank, not on another), works across processes, and turns a peer that
// called something else into an error on both sides instead of a hang.
#include <gtest/gtest.h>
#include <unistd.h>

#include <mutex>
#include <string>
#include <vector>

#include "base/log.h"
#include "src/comm/comm.h"
#include "tests/support/harness.h"

using namespace testutil;

namespace {

float valueOf(int rank, size_t i) { return static_cast<float>(rank * 100 + static_cast<int>(i % 97)); }

// All-reduce (sum and max), all-gather and reduce-scatter of `count`
// elements per rank, out of place and in place; checks every element.
void smallCalls(hocclComm_t comm, int rank, int nranks, size_t count) {
  std::vector<float> in(count * nranks), out(count * nranks, -1);
  for (size_t i = 0; i < in.size(); ++i) in[i] = valueOf(rank, i);
  ASSERT_EQ(hocclAllReduce(in.data(), out.data(), count, hocclFloat32, hocclSum, comm, nullptr), hocclSuccess)
      << hocclGetLastError(comm);
  for (size_t i = 0; i < count; ++i) {
    float want = 0;
    for (int r = 0; r < nranks; ++r) want += valueOf(r, i);
    ASSERT_EQ(out[i], want) << "all-reduce element " << i;
  }
  std::vector<int32_t> mine(count), inPlace(count);
  for (size_t i = 0; i < count; ++i) inPlace[i] = mine[i] = rank * 7 - static_cast<int>(i);
  ASSERT_EQ(hocclAllReduce(inPlace.data(), inPlace.data(), count, hocclInt32, hocclMax, comm, nullptr), hocclSuccess);
  for (size_t i = 0; i < count; ++i) ASSERT_EQ(inPlace[i], (nranks - 1) * 7 - static_cast<int>(i));
  // All-gather, in place: this rank's block already sits at its place.
  std::vector<float> gathered(count * nranks, -1);
  for (size_t i = 0; i < count; ++i) gathered[rank * count + i] = valueOf(rank, i);
  ASSERT_EQ(hocclAllGather(gathered.data() + rank * count, gathered.data(), count, hocclFloat32, comm, nullptr),
            hocclSuccess);
  for (int r = 0; r < nranks; ++r)
    for (size_t i = 0; i < count; ++i) ASSERT_EQ(gathered[r * count + i], valueOf(r, i));
  // Reduce-scatter, out of place, average.
  std::vector<float> block(count, -1);
  ASSERT_EQ(hocclReduceScatter(in.data(), block.data(), count, hocclFloat32, hocclAvg, comm, nullptr), hocclSuccess);
  for (size_t i = 0; i < count; ++i) {
    float sum = 0;
    for (int r = 0; r < nranks; ++r) sum += valueOf(r, rank * count + i);
    ASSERT_FLOAT_EQ(block[i], sum / nranks);
  }
}

uint64_t oneShotShmCalls(hocclComm_t comm) { return comm->oneShotSeq; }
std::string lastAlgorithm(hocclComm_t comm) { return comm->lastSchedule ? comm->lastSchedule->algorithm : ""; }

// The INFO lines hoccl logs while a test runs (rank 0 names each
// collective's choice once per size bucket: the tuner's log).
std::mutex infoMu;
std::vector<std::string> infoLines;
void takeInfo(hoccl::LogLevel level, uint32_t, const char*, int, const char* msg) {
  std::lock_guard<std::mutex> lock(infoMu);
  if (level == hoccl::LogLevel::Info) infoLines.push_back(msg);
}
struct CapturedInfo {
  CapturedInfo() {
    infoLines.clear();
    hoccl::setLogSink(&takeInfo, hoccl::LogLevel::Info);
  }
  ~CapturedInfo() { hoccl::setLogSink(nullptr, hoccl::LogLevel::None); }
  // The line that says all of `parts`, or "" when none does.
  static std::string find(const std::vector<std::string>& parts) {
    std::lock_guard<std::mutex> lock(infoMu);
    for (const std::string& line : infoLines) {
      bool all = true;
      for (const std::string& p : parts) all = all && line.find(p) != std::string::npos;
      if (all) return line;
    }
    return "";
  }
  static std::string all() {
    std::lock_guard<std::mutex> lock(infoMu);
    std::string out;
    for (const std::string& line : infoLines) out += line + "\n";
    return out;
  }
};

// From `root`: a broadcast out of place (non-roots pass no send buffer)
// and one in place, a sum reduce (non-roots pass no receive buffer) and an
// average reduce in place; checks every element where it is defined.
void rootedCalls(hocclComm_t comm, int rank, int nranks, int root, size_t count) {
  std::vector<float> in(count), out(count, -1);
  for (size_t i = 0; i < count; ++i) in[i] = valueOf(rank, i);
  ASSERT_EQ(hocclBroadcast(rank == root ? in.data() : nullptr, out.data(), count, hocclFloat32, root, comm, nullptr),
            hocclSuccess)
      << hocclGetLastError(comm);
  for (size_t i = 0; i < count; ++i) ASSERT_EQ(out[i], valueOf(root, i)) << "broadcast element " << i;
  std::vector<int32_t> same(count);
  for (size_t i = 0; i < count; ++i) same[i] = rank == root ? static_cast<int32_t>(i) * 3 - 5 : -1;
  ASSERT_EQ(hocclBroadcast(same.data(), same.data(), count, hocclInt32, root, comm, nullptr), hocclSuccess);
  for (size_t i = 0; i < count; ++i) ASSERT_EQ(same[i], static_cast<int32_t>(i) * 3 - 5);
  std::vector<float> sum(count, -1);
  ASSERT_EQ(hocclReduce(in.data(), rank == root ? sum.data() : nullptr, count, hocclFloat32, hocclSum, root, comm,
                        nullptr),
            hocclSuccess);
  std::vector<float> avg(in);
  ASSERT_EQ(hocclReduce(avg.data(), avg.data(), count, hocclFloat32, hocclAvg, root, comm, nullptr), hocclSuccess);
  for (size_t i = 0; i < count; ++i) {
    float want = 0;
    for (int r = 0; r < nranks; ++r) want += valueOf(r, i);
    if (rank == root) {
      ASSERT_EQ(sum[i], want) << "reduce element " << i;
      ASSERT_FLOAT_EQ(avg[i], want / nranks) << "average element " << i;
    } else {
      ASSERT_EQ(sum[i], -1) << "a non-root's buffer was written";
      ASSERT_EQ(avg[i], valueOf(rank, i)) << "a non-root's in-place buffer was written";
    }
  }
}

TEST(OneShotShm, SmallCallsRunThereLargeOnesDoNot) {
  std::string err;
  ASSERT_TRUE(runThreads(4, [](hocclComm_t comm, int rank) {
    smallCalls(comm, rank, 4, 1);
    smallCalls(comm, rank, 4, 30);  // reduce-scatter: 480 bytes, still one-shot over shared memory
    EXPECT_EQ(oneShotShmCalls(comm), 8u);
    smallCalls(comm, rank, 4, 40);  // all-gather 160 B and all-reduce there; reduce-scatter 640 B is not
    EXPECT_EQ(oneShotShmCalls(comm), 11u);
    smallCalls(comm, rank, 4, 1000);  // none
    EXPECT_EQ(oneShotShmCalls(comm), 11u);
  }, &err)) << err;
}

// Under auto the tuner takes the small calls there and says so; above 512
// bytes per rank the model picks, as before oneshot_shm was a registry row.
TEST(OneShotShm, TheTunerChoosesItUnderAuto) {
  CapturedInfo info;
  std::string err;
  ASSERT_TRUE(runThreads(4, [](hocclComm_t comm, int rank) {
    smallCalls(comm, rank, 4, 2);
    EXPECT_EQ(oneShotShmCalls(comm), 4u);
    EXPECT_EQ(lastAlgorithm(comm), "oneshot_shm");
    smallCalls(comm, rank, 4, 1000);
    EXPECT_EQ(oneShotShmCalls(comm), 4u);
    EXPECT_NE(lastAlgorithm(comm), "oneshot_shm");
  }, &err)) << err;
  EXPECT_NE(info.find({"AllReduce of 8 bytes: oneshot_shm, 1 channel(s)", "(HOCCL_BOARD_BYTES=512)"}), "")
      << info.all();
  EXPECT_EQ(info.find({"AllReduce of 4000 bytes: oneshot_shm"}), "") << info.all();
  EXPECT_EQ(info.find({" bytes: ", "fallback"}), "") << info.all();
}

// Forced by name, it runs every call that fits (the rooted ones too), and
// a call over 512 bytes per rank gets the tuner's choice, with the right
// answers and one line naming why.
TEST(OneShotShm, ForcedItRunsWhereItFitsAndFallsBackSayingWhy) {
  CapturedInfo info;
  Options o;
  o.ranks = 3;
  o.algorithm = "oneshot_shm";
  std::string err;
  ASSERT_TRUE(spawn(o, [](hocclComm_t comm, int rank) {
    ASSERT_NE(comm->algo, nullptr);
    EXPECT_STREQ(comm->algo->name, "oneshot_shm");
    smallCalls(comm, rank, 3, 5);
    EXPECT_EQ(oneShotShmCalls(comm), 4u);
    EXPECT_EQ(lastAlgorithm(comm), "oneshot_shm");
    rootedCalls(comm, rank, 3, 1, 7);
    EXPECT_EQ(oneShotShmCalls(comm), 8u);
    smallCalls(comm, rank, 3, 200);  // 800 bytes per rank and more: over the slots
    EXPECT_EQ(oneShotShmCalls(comm), 8u);
    EXPECT_NE(lastAlgorithm(comm), "oneshot_shm");
    rootedCalls(comm, rank, 3, 2, 129);  // 516 bytes
    EXPECT_EQ(oneShotShmCalls(comm), 8u);
    // All-to-all is pairwise whatever is forced.
    std::vector<int32_t> mine(3 * 4), theirs(3 * 4, -1);
    for (size_t i = 0; i < mine.size(); ++i) mine[i] = rank * 100 + static_cast<int>(i);
    ASSERT_EQ(hocclAlltoAll(mine.data(), theirs.data(), 4, hocclInt32, comm, nullptr), hocclSuccess);
    for (int r = 0; r < 3; ++r)
      for (int i = 0; i < 4; ++i) ASSERT_EQ(theirs[r * 4 + i], r * 100 + rank * 4 + i);
    EXPECT_EQ(oneShotShmCalls(comm), 8u);
  }, &err)) << err;
  EXPECT_NE(info.find({"AllReduce of 20 bytes: oneshot_shm", "(HOCCL_ALGO)"}), "") << info.all();
  EXPECT_NE(info.find({"Broadcast of 28 bytes: oneshot_shm", "(HOCCL_ALGO)"}), "") << info.all();
  EXPECT_NE(info.find({"AllReduce of 800 bytes: ", "fallback: HOCCL_ALGO=oneshot_shm: oneshot_shm takes at most 512 "
                       "bytes per rank, and this call puts 800 in each rank's slot"}),
            "")
      << info.all();
  EXPECT_NE(info.find({"Reduce of 516 bytes: ", "fallback: HOCCL_ALGO=oneshot_shm"}), "") << info.all();
  EXPECT_NE(info.find({"AllToAll: pairwise exchange (fallback: HOCCL_ALGO=oneshot_shm does not apply"}), "")
      << info.all();
}

// Ranks on two nodes have no slots: a forced oneshot_shm falls back for
// every call, with the right answers, naming the nodes. Its former name
// still forces it.
TEST(OneShotShm, ForcedAcrossNodesFallsBack) {
  CapturedInfo info;
  Options o;
  o.ranks = 3;
  o.nodeSizes = {2, 1};
  o.net = Net::Socket;
  o.algorithm = "board";
  std::string err;
  ASSERT_TRUE(spawn(o, [](hocclComm_t comm, int rank) {
    ASSERT_NE(comm->algo, nullptr);
    EXPECT_STREQ(comm->algo->name, "oneshot_shm");
    smallCalls(comm, rank, 3, 5);
    rootedCalls(comm, rank, 3, 0, 3);
    EXPECT_EQ(oneShotShmCalls(comm), 0u);
    EXPECT_NE(lastAlgorithm(comm), "oneshot_shm");
  }, &err)) << err;
  EXPECT_NE(info.find({"AllReduce of 20 bytes: ", "fallback: HOCCL_ALGO=oneshot_shm: oneshot_shm needs every rank on "
                       "one node, and these span 2 nodes"}),
            "")
      << info.all();
}

TEST(OneShotShm, AcrossProcesses) {
  std::string err;
  ASSERT_TRUE(spawn(inProcesses(3, 60), [](hocclComm_t comm, int rank) {
    for (int i = 0; i < 50; ++i) smallCalls(comm, rank, 3, 1 + i % 13);
    EXPECT_EQ(oneShotShmCalls(comm), 200u);
  }, &err)) << err;
}

TEST(OneShotShm, BroadcastAndReduceRunThereFromEveryRoot) {
  std::string err;
  ASSERT_TRUE(runThreads(4, [](hocclComm_t comm, int rank) {
    for (int root = 0; root < 4; ++root) rootedCalls(comm, rank, 4, root, 1 + root * 40);  // 4-484 bytes
    EXPECT_EQ(oneShotShmCalls(comm), 16u);
    rootedCalls(comm, rank, 4, 2, 200);  // 800 bytes: over connections
    EXPECT_EQ(oneShotShmCalls(comm), 16u);
  }, &err)) << err;
}

// Calls of every kind in turn from changing roots, across processes: a
// broadcast's root reads no payload, so only the slots' rule that every
// rank waits for every post keeps a fast root from rewriting a slot a slow
// rank still reads.
TEST(OneShotShm, RootedAndUnrootedCallsInTurnAcrossProcesses) {
  std::string err;
  ASSERT_TRUE(spawn(inProcesses(3, 60), [](hocclComm_t comm, int rank) {
    for (int i = 0; i < 40; ++i) {
      rootedCalls(comm, rank, 3, i % 3, 1 + i % 17);
      smallCalls(comm, rank, 3, 1 + i % 5);
    }
    EXPECT_EQ(oneShotShmCalls(comm), 320u);
  }, &err)) << err;
}

TEST(OneShotShm, AForcedAlgorithmKeepsCallsOffIt) {
  Options o;
  o.ranks = 3;
  o.algorithm = "ring";
  std::string err;
  ASSERT_TRUE(spawn(o, [](hocclComm_t comm, int rank) {
    smallCalls(comm, rank, 3, 5);
    EXPECT_EQ(oneShotShmCalls(comm), 0u);
  }, &err)) << err;
}

// One rank groups oneshot_shm calls with a call over connections; the other
// makes the same calls one by one. The group's calls on one communicator
// run in order, as the other rank's do.
TEST(OneShotShm, GroupedOnOneRankOneByOneOnTheOther) {
  std::string err;
  ASSERT_TRUE(runThreads(2, [](hocclComm_t comm, int rank) {
    const size_t counts[] = {3, 4000, 5, 7, 2};
    std::vector<std::vector<float>> bufs;
    for (size_t c : counts) bufs.emplace_back(c, static_cast<float>(rank + 1));
    if (rank == 0) {
      ASSERT_EQ(hocclGroupStart(), hocclSuccess);
    }
    for (auto& b : bufs)
      ASSERT_EQ(hocclAllReduce(b.data(), b.data(), b.size(), hocclFloat32, hocclSum, comm, nullptr), hocclSuccess)
          << hocclGetLastError(comm);
    if (rank == 0) {
      ASSERT_EQ(hocclGroupEnd(), hocclSuccess) << hocclGetLastError(comm);
    }
    for (auto& b : bufs)
      for (float v : b) ASSERT_EQ(v, 3.0f);
    EXPECT_EQ(oneShotShmCalls(comm), 4u);
  }, &err)) << err;
}

// Rank 0's call fits the one-shot slots, rank 1's does not (or is another
// collective): each side sees the other's call and says so.
void expectOneShotShmMismatch(bool otherIsBroadcast) {
  std::string err;
  ASSERT_TRUE(spawn(inProcesses(2, 60), [&](hocclComm_t comm, int rank) {
    std::vector<float> buf(4096, 1.0f);
    hocclResult_t r = rank == 0 ? hocclAllReduce(buf.data(), buf.data(), 4, hocclFloat32, hocclSum, comm, nullptr)
                      : otherIsBroadcast ? hocclBroadcast(buf.data(), buf.data(), 4, hocclFloat32, 0, comm, nullptr)
                                         : hocclAllReduce(buf.data(), buf.data(), 4096, hocclFloat32, hocclSum, comm,
                                                          nullptr);
    EXPECT_NE(r, hocclSuccess);
    std::string msg = hocclGetLastError(comm);
    EXPECT_NE(msg.find("mismatch"), std::string::npos) << msg;
    EXPECT_EQ(msg.find("HOCCL_TIMEOUT"), std::string::npos) << msg;
  }, &err)) << err;
}

TEST(OneShotShm, APeerOverConnectionsIsAMismatch) { expectOneShotShmMismatch(false); }
TEST(OneShotShm, APeerInAnotherCollectiveIsAMismatch) { expectOneShotShmMismatch(true); }

// A broadcast's root one-shot over shared memory, its peer over connections (a larger
// count): the peer, which waits for the root's message, finds the root's
// call one-shot; the root learns it from the peer's abort.
TEST(OneShotShm, ABroadcastPeerOverConnectionsIsAMismatch) {
  std::string err;
  ASSERT_TRUE(spawn(inProcesses(2, 60), [&](hocclComm_t comm, int rank) {
    std::vector<float> buf(4096, 1.0f);
    EXPECT_NE(hocclBroadcast(buf.data(), buf.data(), rank == 0 ? 4 : 4096, hocclFloat32, 0, comm, nullptr),
              hocclSuccess);
    std::string msg = hocclGetLastError(comm);
    EXPECT_NE(msg.find("mismatch"), std::string::npos) << msg;
    EXPECT_EQ(msg.find("HOCCL_TIMEOUT"), std::string::npos) << msg;
  }, &err)) << err;
}

}  // namespace

namespace {

// A rank that never makes the call: the others time out naming it and the
// one-shot slot it waits on; one whose process ends: the others say it exited.
TEST(OneShotShm, AMissingOrDeadPeerIsNamed) {
  for (bool dies : {false, true}) {
    Options o = inProcesses(3, 60);
    o.timeoutSec = 0.5;
    std::string err;
    ASSERT_TRUE(spawn(o, [&](hocclComm_t comm, int rank) {
      float x = 1;
      if (rank == 2) {
        if (dies) _exit(0);
        usleep(1500 * 1000);  // three times the others' timeout
        return;
      }
      EXPECT_NE(hocclAllReduce(&x, &x, 1, hocclFloat32, hocclSum, comm, nullptr), hocclSuccess);
      std::string msg = hocclGetLastError(comm);
      const std::vector<const char*> wants =
          dies ? std::vector<const char*>{"rank 2", "exited"}
               : std::vector<const char*>{"0.5 s (hocclConfig_t.timeoutMs)", "rank 2's input in its shared-memory one-shot slot"};
      for (const char* want : wants) EXPECT_NE(msg.find(want), std::string::npos) << msg;
    }, &err)) << err;
  }
}

}  // namespace
