// hocclSend / hocclRecv, hocclAlltoAll, hocclAlltoAllv and hocclCommNodeInfo
// end to end: data checked element by element against closed-form values,
// groups posted in every order, self sends, mixed types, several messages
// to one peer, point-to-point calls that only some ranks make between
// collectives, and the errors a caller can make.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>
#include <cstring>
#include <functional>
#include <mutex>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "base/log.h"
#include "tests/support/harness.h"

using namespace testutil;

namespace {

// Element i of what rank `from` sends rank `to` (tag: which message).
int32_t value(int from, int to, uint64_t i, int tag = 0) {
  return static_cast<int32_t>(from * 1000003 + to * 10007 + tag * 101 + static_cast<int64_t>(i % 9973));
}

std::vector<int32_t> payload(int from, int to, uint64_t n, int tag = 0) {
  std::vector<int32_t> v(n);
  for (uint64_t i = 0; i < n; ++i) v[i] = value(from, to, i, tag);
  return v;
}

// How many elements rank a sends rank b in the all-pairs tests: differs per
// pair (some zero), the same formula on every rank.
uint64_t pairCount(int a, int b, uint64_t scale) { return (a * 7 + b * 3) % 5 == 0 ? 0 : scale + a * 13 + b * 5; }

void expectPayload(const std::vector<int32_t>& got, int from, int to, int tag, const std::string& what) {
  for (uint64_t i = 0; i < got.size(); ++i) {
    if (got[i] != value(from, to, i, tag)) {
      ADD_FAILURE() << what << ": element " << i << " is " << got[i] << ", expected " << value(from, to, i, tag);
      return;
    }
  }
}

// Two emulated nodes of `perNode` ranks each, over sockets.
Options twoNodes(int perNode, Mode mode) {
  Options o;
  o.ranks = 2 * perNode;
  o.nodeSizes = {perNode, perNode};
  o.net = Net::Socket;
  o.mode = mode;
  o.timeoutSec = 60;
  return o;
}

// Each rank sends to rank+1 and receives from rank-1, in the order given.
void ringShift(hocclComm_t comm, int rank, int n, uint64_t count, bool recvFirst) {
  const int next = (rank + 1) % n, prev = (rank + n - 1) % n;
  std::vector<int32_t> out = payload(rank, next, count), in(count, -1);
  ASSERT_EQ(hocclGroupStart(), hocclSuccess);
  auto recv = [&] { return hocclRecv(in.data(), count, hocclInt32, prev, comm, nullptr); };
  if (recvFirst) {
    ASSERT_EQ(recv(), hocclSuccess);
  }
  ASSERT_EQ(hocclSend(out.data(), count, hocclInt32, next, comm, nullptr), hocclSuccess);
  if (!recvFirst) {
    ASSERT_EQ(recv(), hocclSuccess);
  }
  ASSERT_EQ(hocclGroupEnd(), hocclSuccess) << hocclGetLastError(comm);
  expectPayload(in, prev, rank, 0, "rank " + std::to_string(rank) + " from " + std::to_string(prev));
}

TEST(PointToPoint, RingShiftAtOneToFourRanks) {
  for (int n = 1; n <= 4; ++n) {
    for (uint64_t count : {0ull, 1ull, 1000ull, 3ull << 20}) {
      for (bool recvFirst : {false, true}) {
        std::string err;
        ASSERT_TRUE(runThreads(n, [&](hocclComm_t comm, int rank) { ringShift(comm, rank, n, count, recvFirst); }, &err))
            << err;
      }
    }
  }
}

// Every rank sends to and receives from every rank (itself included),
// several messages per pair, in an order shuffled differently per rank:
// no order may deadlock, and the k-th send to a peer lands in its k-th
// receive from this rank.
void allPairs(hocclComm_t comm, int rank, int n, uint64_t scale, unsigned seed) {
  struct Op {
    bool send;
    int peer, tag;
  };
  std::vector<Op> ops;
  for (int p = 0; p < n; ++p)
    for (int tag = 0; tag < 2; ++tag) ops.push_back({true, p, tag}), ops.push_back({false, p, tag});
  std::mt19937 rng(seed + rank);
  std::shuffle(ops.begin(), ops.end(), rng);
  // Posting order must keep each pair's messages in tag order.
  for (int p = 0; p < n; ++p) {
    for (bool send : {true, false}) {
      int tag = 0;
      for (Op& op : ops)
        if (op.peer == p && op.send == send) op.tag = tag++;
    }
  }
  std::vector<std::vector<int32_t>> bufs(ops.size());
  ASSERT_EQ(hocclGroupStart(), hocclSuccess);
  for (size_t i = 0; i < ops.size(); ++i) {
    const Op& op = ops[i];
    uint64_t count = op.send ? pairCount(rank, op.peer, scale) + op.tag : pairCount(op.peer, rank, scale) + op.tag;
    if (op.send) {
      bufs[i] = payload(rank, op.peer, count, op.tag);
      ASSERT_EQ(hocclSend(bufs[i].data(), count, hocclInt32, op.peer, comm, nullptr), hocclSuccess);
    } else {
      bufs[i].assign(count, -1);
      ASSERT_EQ(hocclRecv(bufs[i].data(), count, hocclInt32, op.peer, comm, nullptr), hocclSuccess);
    }
  }
  ASSERT_EQ(hocclGroupEnd(), hocclSuccess) << hocclGetLastError(comm);
  for (size_t i = 0; i < ops.size(); ++i)
    if (!ops[i].send)
      expectPayload(bufs[i], ops[i].peer, rank, ops[i].tag,
                    "rank " + std::to_string(rank) + " message " + std::to_string(ops[i].tag) + " from " +
                        std::to_string(ops[i].peer));
}

TEST(PointToPoint, AllPairsInAnyOrder) {
  for (int n : {2, 3, 5}) {
    for (uint64_t scale : {1ull, 300000ull}) {
      std::string err;
      ASSERT_TRUE(runThreads(n, [&](hocclComm_t comm, int rank) { allPairs(comm, rank, n, scale, 17); }, &err)) << err;
    }
  }
}

TEST(PointToPoint, AllPairsAcrossNodesAsProcesses) {
  const Options o = twoNodes(2, Mode::Processes);
  std::string err;
  ASSERT_TRUE(spawn(o, [&](hocclComm_t comm, int rank) { allPairs(comm, rank, 4, 70000, 5); }, &err)) << err;
}

// Outside a group: a blocking send larger than the connection's buffers
// completes once the receiver takes it; the other ranks carry on with
// collectives they never mixed with point-to-point, before and after.
TEST(PointToPoint, BlockingPairBetweenCollectivesOfAllRanks) {
  const uint64_t count = 5 << 20;
  std::string err;
  ASSERT_TRUE(runThreads(3, [&](hocclComm_t comm, int rank) {
    int32_t one = 1, sum = 0;
    ASSERT_EQ(hocclAllReduce(&one, &sum, 1, hocclInt32, hocclSum, comm, nullptr), hocclSuccess);
    for (int round = 0; round < 3; ++round) {
      if (rank == 0) {
        std::vector<int32_t> out = payload(0, 2, count, round);
        ASSERT_EQ(hocclSend(out.data(), count, hocclInt32, 2, comm, nullptr), hocclSuccess) << hocclGetLastError(comm);
      } else if (rank == 2) {
        std::vector<int32_t> in(count, -1);
        ASSERT_EQ(hocclRecv(in.data(), count, hocclInt32, 0, comm, nullptr), hocclSuccess) << hocclGetLastError(comm);
        expectPayload(in, 0, 2, round, "blocking receive");
      }
    }
    ASSERT_EQ(hocclAllReduce(&one, &sum, 1, hocclInt32, hocclSum, comm, nullptr), hocclSuccess)
        << hocclGetLastError(comm);
    EXPECT_EQ(sum, 3);
  }, &err)) << err;
}

// A group with a collective and sends of several types: the collective
// runs first, the sends and receives after it, whatever the posting order
// (the k-th send to a peer still meets the peer's k-th receive).
TEST(PointToPoint, MixedTypesAndACollectiveInOneGroup) {
  std::string err;
  ASSERT_TRUE(runThreads(2, [&](hocclComm_t comm, int rank) {
    const int peer = 1 - rank;
    std::vector<double> dout(333, rank + 0.5), din(333, -1);
    std::vector<int8_t> bout(77, static_cast<int8_t>(rank + 3)), bin(77, 0);
    float x = 1.0f, y = 0;
    ASSERT_EQ(hocclGroupStart(), hocclSuccess);
    // To the peer: the doubles, then the bytes; from it the same.
    ASSERT_EQ(hocclRecv(din.data(), din.size(), hocclFloat64, peer, comm, nullptr), hocclSuccess);
    ASSERT_EQ(hocclAllReduce(&x, &y, 1, hocclFloat32, hocclSum, comm, nullptr), hocclSuccess);
    ASSERT_EQ(hocclRecv(bin.data(), bin.size(), hocclInt8, peer, comm, nullptr), hocclSuccess);
    ASSERT_EQ(hocclSend(dout.data(), dout.size(), hocclFloat64, peer, comm, nullptr), hocclSuccess);
    ASSERT_EQ(hocclSend(bout.data(), bout.size(), hocclInt8, peer, comm, nullptr), hocclSuccess);
    ASSERT_EQ(hocclGroupEnd(), hocclSuccess) << hocclGetLastError(comm);
    EXPECT_EQ(y, 2.0f);
    for (double d : din) ASSERT_EQ(d, peer + 0.5);
    for (int8_t b : bin) ASSERT_EQ(b, peer + 3);
  }, &err)) << err;
}

// Rank 0 sends 100 floats; rank 1 makes `call` instead of the matching
// receive and must fail with a message containing every one of `want`.
// (The send fits the connection's buffers and may well return success.)
void expectMismatch(const std::function<hocclResult_t(hocclComm_t, float*)>& call,
                    const std::vector<std::string>& want) {
  Options o;
  o.ranks = 2;
  o.timeoutSec = 20;
  std::string err;
  ASSERT_TRUE(spawn(o, [&](hocclComm_t comm, int rank) {
    std::vector<float> buf(200, 1.0f);
    if (rank == 0) {
      hocclSend(buf.data(), 100, hocclFloat32, 1, comm, nullptr);
      return;
    }
    EXPECT_EQ(call(comm, buf.data()), hocclInvalidUsage);
    const std::string msg = hocclGetLastError(comm);
    for (const std::string& w : want) EXPECT_NE(msg.find(w), std::string::npos) << "no '" << w << "' in: " << msg;
  }, &err)) << err;
}

TEST(PointToPoint, CountMismatchIsNamedOnTheReceiver) {
  expectMismatch([](hocclComm_t comm, float* buf) { return hocclRecv(buf, 50, hocclFloat32, 0, comm, nullptr); },
                 {"point-to-point mismatch", "hocclRecv(count=50, float)", "hocclSend(count=100, float)"});
}

TEST(PointToPoint, ACollectiveMeetingASendIsAMismatch) {
  expectMismatch([](hocclComm_t comm,
                    float* buf) { return hocclAllReduce(buf, buf + 100, 100, hocclFloat32, hocclSum, comm, nullptr); },
                 {"collective mismatch", "hocclSend(count=100, float)"});
}

// A send whose receiver never posts the receive: the timeout names the
// receiver and what it waits for, on every path, also where the send passed
// its buffer by reference (it reported no wait at all, so the message
// ended after "call #0:" and no health check looked at the peer).
TEST(PointToPoint, ASendNobodyReceivesTimesOutNamingTheReceiver) {
  for (size_t count : {size_t{4096}, size_t{1} << 20}) {
    Options o;
    o.ranks = 2;
    o.timeoutSec = 0.5;
    std::atomic<bool> senderDone{false};
    std::string msg;
    hocclResult_t rc = hocclSuccess;
    std::string err;
    ASSERT_TRUE(spawn(o, [&](hocclComm_t comm, int rank) {
      if (rank == 1) {  // never receives; stays alive until the sender gives up
        while (!senderDone.load()) std::this_thread::sleep_for(std::chrono::milliseconds(10));
        return;
      }
      std::vector<float> buf(count, 1.0f);
      rc = hocclSend(buf.data(), count, hocclFloat, 1, comm, nullptr);
      msg = hocclGetLastError(comm);
      senderDone = true;
    }, &err)) << err;
    EXPECT_EQ(rc, hocclTimeout) << count << ": " << msg;
    EXPECT_NE(msg.find("rank 1"), std::string::npos) << count << ": " << msg;
    EXPECT_NE(msg.find("waiting"), std::string::npos) << count << ": " << msg;
  }
}

// A small send returns before its receive is posted (eager, as NCCL's); if
// none ever is, destroying the communicators says so (a warning, caught
// here through the log sink) instead of losing the message silently.
std::mutex warnMu;
std::string warnings;
void takeWarning(hoccl::LogLevel, uint32_t, const char*, int, const char* msg) {
  std::lock_guard<std::mutex> lock(warnMu);
  warnings += msg;
  warnings += "\n";
}

TEST(PointToPoint, ASmallSendNobodyReceivesIsReportedAtDestroy) {
  warnings.clear();
  hoccl::setLogSink(&takeWarning, hoccl::LogLevel::Warn);
  std::string err;
  hocclResult_t rc = hocclInternalError;
  const bool ran = runThreads(2, [&](hocclComm_t comm, int rank) {
    float x[4] = {1, 2, 3, 4};
    if (rank == 0) rc = hocclSend(x, 4, hocclFloat, 1, comm, nullptr);
  }, &err);
  hoccl::setLogSink(nullptr, hoccl::LogLevel::None);
  ASSERT_TRUE(ran) << err;
  EXPECT_EQ(rc, hocclSuccess);
  std::lock_guard<std::mutex> lock(warnMu);
  EXPECT_NE(warnings.find("rank 1: destroyed with a message from rank 0 never received (the first: a hocclSend of 4 "
                          "float)"), std::string::npos) << warnings;
}

TEST(PointToPoint, BadArgumentsAreNamed) {
  std::string err;
  ASSERT_TRUE(runThreads(2, [&](hocclComm_t comm, int rank) {
    float x = 0;
    EXPECT_EQ(hocclSend(&x, 1, hocclFloat32, 2, comm, nullptr), hocclInvalidArgument);
    EXPECT_NE(std::string(hocclGetLastError(nullptr)).find("peer 2 is out of range"), std::string::npos);
    EXPECT_EQ(hocclRecv(nullptr, 1, hocclFloat32, 0, comm, nullptr), hocclInvalidArgument);
    EXPECT_NE(std::string(hocclGetLastError(nullptr)).find("recvbuff is NULL"), std::string::npos);
    EXPECT_EQ(hocclSend(&x, 1, static_cast<hocclDataType_t>(99), 0, comm, nullptr), hocclInvalidArgument);
    EXPECT_EQ(hocclSend(&x, 1, hocclFloat32, 0, nullptr, nullptr), hocclInvalidArgument);
    // A send to itself needs its receive in the same group.
    EXPECT_EQ(hocclSend(&x, 1, hocclFloat32, rank, comm, nullptr), hocclInvalidUsage);
    EXPECT_NE(std::string(hocclGetLastError(nullptr)).find("no matching hocclRecv"), std::string::npos);
    ASSERT_EQ(hocclGroupStart(), hocclSuccess);
    EXPECT_EQ(hocclSend(&x, 1, hocclFloat32, rank, comm, nullptr), hocclSuccess);
    EXPECT_EQ(hocclRecv(&x, 2, hocclFloat32, rank, comm, nullptr), hocclSuccess);
    EXPECT_EQ(hocclGroupEnd(), hocclInvalidUsage);
    EXPECT_NE(std::string(hocclGetLastError(nullptr)).find("they must agree"), std::string::npos);
    // Local errors leave the communicator usable.
    float one = 1, sum = 0;
    EXPECT_EQ(hocclAllReduce(&one, &sum, 1, hocclFloat32, hocclSum, comm, nullptr), hocclSuccess);
    EXPECT_EQ(sum, 2.0f);
  }, &err)) << err;
}

// All-to-all: block j of rank r's output is block r of rank j's input.
void allToAll(hocclComm_t comm, int rank, int n, uint64_t count, bool inPlace) {
  std::vector<int32_t> in(n * count), out(n * count, -1);
  for (int j = 0; j < n; ++j)
    for (uint64_t i = 0; i < count; ++i) in[j * count + i] = value(rank, j, i);
  if (inPlace) out = in;
  ASSERT_EQ(hocclAlltoAll(inPlace ? out.data() : in.data(), out.data(), count, hocclInt32, comm, nullptr),
            hocclSuccess) << hocclGetLastError(comm);
  for (int j = 0; j < n; ++j)
    expectPayload(std::vector<int32_t>(out.begin() + j * count, out.begin() + (j + 1) * count), j, rank, 0,
                  "rank " + std::to_string(rank) + " block " + std::to_string(j) + (inPlace ? " in place" : ""));
}

TEST(AllToAll, OneToFiveRanksInAndOutOfPlace) {
  for (int n = 1; n <= 5; ++n) {
    std::string err;
    ASSERT_TRUE(runThreads(n, [&](hocclComm_t comm, int rank) {
      for (uint64_t count : {0ull, 1ull, 4097ull, 600000ull})
        for (bool inPlace : {false, true}) allToAll(comm, rank, n, count, inPlace);
    }, &err)) << err;
  }
}

TEST(AllToAll, AcrossNodesAsProcesses) {
  const Options o = twoNodes(2, Mode::Processes);
  std::string err;
  ASSERT_TRUE(spawn(o, [&](hocclComm_t comm, int rank) {
    for (bool inPlace : {false, true}) allToAll(comm, rank, 4, 100000, inPlace);
  }, &err)) << err;
}

// All-to-all-v: rank a sends pairCount(a, b) elements to b; each rank packs
// its blocks in reverse peer order with gaps, so displacements matter.
void allToAllv(hocclComm_t comm, int rank, int n, uint64_t scale) {
  std::vector<size_t> sc(n), sd(n), rc(n), rd(n);
  size_t sendEnd = 0, recvEnd = 0;
  for (int j = n - 1; j >= 0; --j) {
    sc[j] = pairCount(rank, j, scale);
    rc[j] = pairCount(j, rank, scale);
    sd[j] = sendEnd + 3;
    rd[j] = recvEnd + 5;
    sendEnd = sd[j] + sc[j];
    recvEnd = rd[j] + rc[j];
  }
  // Sends to itself must match: pairCount(r, r) is used both ways.
  std::vector<int32_t> in(sendEnd, -7), out(recvEnd, -9);
  for (int j = 0; j < n; ++j)
    for (uint64_t i = 0; i < sc[j]; ++i) in[sd[j] + i] = value(rank, j, i);
  ASSERT_EQ(hocclAlltoAllv(in.data(), sc.data(), sd.data(), out.data(), rc.data(), rd.data(), hocclInt32, comm,
                           nullptr),
            hocclSuccess) << hocclGetLastError(comm);
  for (int j = 0; j < n; ++j) {
    expectPayload(std::vector<int32_t>(out.begin() + rd[j], out.begin() + rd[j] + rc[j]), j, rank, 0,
                  "rank " + std::to_string(rank) + " from " + std::to_string(j));
    for (size_t g = rd[j] - 5; g < rd[j]; ++g) ASSERT_EQ(out[g], -9) << "gap before block " << j << " was written";
  }
}

TEST(AllToAllv, UnevenLayoutsAtOneToFiveRanks) {
  for (int n = 1; n <= 5; ++n) {
    std::string err;
    ASSERT_TRUE(runThreads(n, [&](hocclComm_t comm, int rank) {
      for (uint64_t scale : {1ull, 250000ull}) allToAllv(comm, rank, n, scale);
    }, &err)) << err;
  }
}

TEST(AllToAllv, BadLayoutsAreNamed) {
  std::string err;
  ASSERT_TRUE(runThreads(2, [&](hocclComm_t comm, int rank) {
    std::vector<int32_t> buf(16);
    size_t c[2] = {2, 2}, d[2] = {0, 2}, bad[2] = {1, 1};
    EXPECT_EQ(hocclAlltoAllv(buf.data(), c, d, buf.data() + 8, nullptr, d, hocclInt32, comm, nullptr),
              hocclInvalidArgument);
    EXPECT_NE(std::string(hocclGetLastError(nullptr)).find("recvcounts is NULL"), std::string::npos);
    EXPECT_EQ(hocclAlltoAllv(buf.data(), c, d, buf.data() + 8, bad, d, hocclInt32, comm, nullptr),
              hocclInvalidArgument);
    EXPECT_NE(std::string(hocclGetLastError(nullptr)).find("sends itself"), std::string::npos);
    EXPECT_EQ(hocclAlltoAllv(buf.data(), c, d, buf.data() + 1, c, d, hocclInt32, comm, nullptr), hocclInvalidArgument);
    EXPECT_NE(std::string(hocclGetLastError(nullptr)).find("overlap"), std::string::npos);
  }, &err)) << err;
}

TEST(NodeInfo, SplitsIntoNodesAndRails) {
  const Options o = twoNodes(3, Mode::Threads);
  std::string err;
  ASSERT_TRUE(spawn(o, [&](hocclComm_t comm, int rank) {
    int node = -1, nnodes = -1, local = -1, nlocal = -1;
    ASSERT_EQ(hocclCommNodeInfo(comm, &node, &nnodes, &local, &nlocal), hocclSuccess);
    EXPECT_EQ(node, rank / 3);
    EXPECT_EQ(nnodes, 2);
    EXPECT_EQ(local, rank % 3);
    EXPECT_EQ(nlocal, 3);
    hocclComm_t intra = nullptr, rail = nullptr;
    ASSERT_EQ(hocclCommSplit(comm, node, rank, &intra, nullptr), hocclSuccess);
    ASSERT_EQ(hocclCommSplit(comm, local, node, &rail, nullptr), hocclSuccess);
    int n = 0, r = 0;
    hocclCommCount(intra, &n);
    hocclCommUserRank(intra, &r);
    EXPECT_EQ(n, 3);
    EXPECT_EQ(r, local);
    hocclCommCount(rail, &n);
    hocclCommUserRank(rail, &r);
    EXPECT_EQ(n, 2);
    EXPECT_EQ(r, node);
    int32_t mine = rank, sum = 0;
    ASSERT_EQ(hocclAllReduce(&mine, &sum, 1, hocclInt32, hocclSum, rail, nullptr), hocclSuccess);
    EXPECT_EQ(sum, local + (local + 3));
    EXPECT_EQ(hocclCommNodeInfo(comm, nullptr, &nnodes, &local, &nlocal), hocclInvalidArgument);
    hocclCommDestroy(rail);
    hocclCommDestroy(intra);
  }, &err)) << err;
}

}  // namespace
