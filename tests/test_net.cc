// The TCP transport's own features (grouped receives), and collectives
// across emulated nodes: ranks as threads with fake node ids, so ranks on
// different "nodes" talk over TCP and ranks on the same one over shm.
#include <gtest/gtest.h>

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <tuple>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <functional>
#include <numeric>
#include <thread>
#include <vector>

#include "src/check/values.h"
#include "src/comm/comm.h"
#include "tests/support/harness.h"
#include "tests/support/net_pair.h"
#include "transport/net/net.h"

using namespace hoccl;

namespace {

using Pair = testsupport::NetPair;
using testsupport::waitDone;

// One transport, one connection to itself over loopback.
Pair loopbackPair(int streams) {
  Pair p;
  SocketNetOptions o;
  o.ifnameRule = "lo";
  o.streams = streams;
  EXPECT_TRUE(createSocketTransport(o, &p.net).ok());
  testsupport::connectToSelf(&p, 0, 0);
  return p;
}

// The contract every transport keeps (sizes, outstanding requests, errors)
// is tested for TCP and IB alike in test_net_conformance.cc.

// One irecv of 3 buffers takes 3 sends, each into the buffer whose tag it
// carries, whatever order they were sent in; test reports each size.
TEST(SocketTransport, GroupedReceiveMatchesTagsWithinTheGroup) {
  Pair p = loopbackPair(2);
  NetProperties props;
  ASSERT_TRUE(p.net->getProperties(0, &props).ok());
  ASSERT_GE(props.maxRecvs, 3);
  std::vector<char> a(100, 'a'), b(300000, 'b'), c(0), d(7, 'd');
  std::vector<char> ra(200), rb(400000), rc(8), rd(7);
  void* data[3] = {ra.data(), rb.data(), rc.data()};
  size_t caps[3] = {ra.size(), rb.size(), rc.size()};
  int tags[3] = {10, 11, 12};
  void* rreq = nullptr;
  ASSERT_TRUE(p.net->irecv(p.recv, 3, data, caps, tags, nullptr, &rreq).ok());
  void* rreq2 = nullptr;
  void* data2 = rd.data();
  size_t cap2 = rd.size();
  int tag2 = 10;
  ASSERT_TRUE(p.net->irecv(p.recv, 1, &data2, &cap2, &tag2, nullptr, &rreq2).ok());
  void* s[4] = {};
  ASSERT_TRUE(p.net->isend(p.send, c.data(), c.size(), 12, nullptr, &s[0]).ok());
  ASSERT_TRUE(p.net->isend(p.send, b.data(), b.size(), 11, nullptr, &s[1]).ok());
  ASSERT_TRUE(p.net->isend(p.send, a.data(), a.size(), 10, nullptr, &s[2]).ok());
  ASSERT_TRUE(p.net->isend(p.send, d.data(), d.size(), 10, nullptr, &s[3]).ok());
  int got[3] = {-1, -1, -1};
  waitDone(*p.net, rreq, got);
  EXPECT_EQ(got[0], 100);
  EXPECT_EQ(got[1], 300000);
  EXPECT_EQ(got[2], 0);
  EXPECT_TRUE(std::equal(a.begin(), a.end(), ra.begin()));
  EXPECT_TRUE(std::equal(b.begin(), b.end(), rb.begin()));
  int got2 = -1;
  waitDone(*p.net, rreq2, &got2);
  EXPECT_EQ(got2, 7);
  EXPECT_EQ(rd, d);
  for (void* r : s) waitDone(*p.net, r);
  p.net->closeSend(p.send);
  p.net->closeRecv(p.recv);
}

// A transport whose consumer polls (consumerPolls): a message that arrives
// while the consumer says it sleeps must wake it through the notifier,
// without a test() call; one that arrives while it polls is read by test().
TEST(SocketTransport, WakesASleepingConsumerAndServesAPollingOne) {
  std::mutex mu;
  std::condition_variable cv;
  int notified = 0;
  auto notify = [](void* arg) {
    auto* st = static_cast<std::tuple<std::mutex*, std::condition_variable*, int*>*>(arg);
    std::lock_guard<std::mutex> lock(*std::get<0>(*st));
    ++*std::get<2>(*st);
    std::get<1>(*st)->notify_all();
  };
  std::tuple<std::mutex*, std::condition_variable*, int*> state{&mu, &cv, &notified};
  Pair p;
  SocketNetOptions o;
  o.ifnameRule = "lo";
  o.consumerPolls = true;
  o.notify = notify;
  o.notifyArg = &state;
  ASSERT_TRUE(createSocketTransport(o, &p.net).ok());
  testsupport::connectToSelf(&p, 0, 0);
  for (int round = 0; round < 3; ++round) {
    uint64_t in = 0, out = 0x1234500 + round;
    void* data = &in;
    size_t cap = sizeof in;
    int tag = 0;
    void* rreq = nullptr;
    void* sreq = nullptr;
    ASSERT_TRUE(p.net->irecv(p.recv, 1, &data, &cap, &tag, nullptr, &rreq).ok());
    ASSERT_NE(rreq, nullptr);
    p.net->consumerWaiting(true);
    int before;
    {
      std::lock_guard<std::mutex> lock(mu);
      before = notified;
    }
    std::thread sender([&] {
      usleep(20000);  // after the consumer went to sleep
      EXPECT_TRUE(p.net->isend(p.send, &out, sizeof out, 0, nullptr, &sreq).ok());
    });
    {
      std::unique_lock<std::mutex> lock(mu);
      EXPECT_TRUE(cv.wait_for(lock, std::chrono::seconds(10), [&] { return notified > before; }))
          << "round " << round << ": the sleeping consumer was not woken";
    }
    p.net->consumerWaiting(false);
    sender.join();
    int got = -1;
    waitDone(*p.net, rreq, &got);
    EXPECT_EQ(got, 8);
    EXPECT_EQ(in, out);
    waitDone(*p.net, sreq);
    // Polling, not sleeping: test() alone reads the next message.
    void* rreq2 = nullptr;
    ASSERT_TRUE(p.net->irecv(p.recv, 1, &data, &cap, &tag, nullptr, &rreq2).ok());
    ASSERT_TRUE(p.net->isend(p.send, &out, sizeof out, 0, nullptr, &sreq).ok());
    waitDone(*p.net, rreq2, &got);
    EXPECT_EQ(got, 8);
    waitDone(*p.net, sreq);
  }
  p.net->closeSend(p.send);
  p.net->closeRecv(p.recv);
}

// Two transports standing for two ranks, each with a connection to the
// other; pairControl puts both directions' headers on one socket. The
// higher "rank" pairs and sends before the lower one pairs (its messages
// wait on the socket the lower one's send side reads back from), then both
// directions carry inline and split messages, and an orderly close on one
// side reads as a goodbye, not a lost peer, on both of the other's comms.
TEST(SocketTransport, PairedDirectionsShareOneControlSocket) {
  SocketNetOptions o;
  o.ifnameRule = "lo";
  o.streams = 2;
  std::unique_ptr<NetTransport> lo, hi;
  ASSERT_TRUE(createSocketTransport(o, &lo).ok());
  ASSERT_TRUE(createSocketTransport(o, &hi).ok());
  auto link = [](NetTransport& from, NetTransport& to, void** send, void** recv) {
    char handle[kNetHandleBytes];
    void* lc = nullptr;
    ASSERT_TRUE(to.listen(0, handle, &lc).ok());
    for (int i = 0; i < 200000 && (!*send || !*recv); ++i) {
      if (!*send) {
        ASSERT_TRUE(from.connect(0, handle, send).ok());
      }
      if (!*recv) {
        ASSERT_TRUE(to.accept(lc, recv).ok());
      }
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
    ASSERT_TRUE(to.closeListen(lc).ok());
  };
  void *loSend = nullptr, *hiRecv = nullptr, *hiSend = nullptr, *loRecv = nullptr;
  link(*lo, *hi, &loSend, &hiRecv);
  link(*hi, *lo, &hiSend, &loRecv);
  ASSERT_TRUE(loSend && hiRecv && hiSend && loRecv);
  ASSERT_TRUE(hi->pairControl(hiSend, hiRecv, false).ok());
  // Sizes: inline, empty, split over both streams, inline again.
  const std::vector<size_t> sizes = {8, 0, 300000, 4096, 24};
  auto pattern = [](size_t n, int seed) {
    std::vector<char> v(n);
    for (size_t i = 0; i < n; ++i) v[i] = static_cast<char>(i * 31 + seed);
    return v;
  };
  std::vector<std::vector<char>> early;
  std::vector<void*> earlyReqs;
  for (size_t i = 0; i < sizes.size(); ++i) {
    early.push_back(pattern(sizes[i], 100 + static_cast<int>(i)));
    void* r = nullptr;
    ASSERT_TRUE(hi->isend(hiSend, early[i].data(), early[i].size(), 0, nullptr, &r).ok());
    ASSERT_NE(r, nullptr);
    earlyReqs.push_back(r);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // lo's progress thread sees them first
  ASSERT_TRUE(lo->pairControl(loSend, loRecv, true).ok());
  auto receive = [&](NetTransport& net, void* recv, const std::vector<char>& want) {
    std::vector<char> got(want.size() + 16, 'x');
    void* data = got.data();
    size_t cap = got.size();
    int tag = 0;
    void* r = nullptr;
    ASSERT_TRUE(net.irecv(recv, 1, &data, &cap, &tag, nullptr, &r).ok());
    int n = -1;
    waitDone(net, r, &n);
    ASSERT_EQ(n, static_cast<int>(want.size()));
    EXPECT_TRUE(std::equal(want.begin(), want.end(), got.begin()));
  };
  for (const auto& m : early) receive(*lo, loRecv, m);
  for (void* r : earlyReqs) waitDone(*hi, r);
  for (int round = 0; round < 20; ++round) {
    const size_t n = sizes[round % sizes.size()];
    std::vector<char> a = pattern(n, round), b = pattern(n + 3, -round);
    void *ra = nullptr, *rb = nullptr;
    ASSERT_TRUE(lo->isend(loSend, a.data(), a.size(), 0, nullptr, &ra).ok());
    ASSERT_TRUE(hi->isend(hiSend, b.data(), b.size(), 0, nullptr, &rb).ok());
    receive(*hi, hiRecv, a);
    receive(*lo, loRecv, b);
    waitDone(*lo, ra);
    waitDone(*hi, rb);
  }
  EXPECT_TRUE(hi->closeSend(hiSend).ok());
  EXPECT_TRUE(hi->closeRecv(hiRecv).ok());
  // lo notices the close (its receive side reads the shared socket): a
  // receive posted now fails. The close was in order: neither of lo's comms
  // reports a lost peer.
  std::vector<char> sink(8);
  void* data = sink.data();
  size_t cap = sink.size();
  int tag = 0, done = 0;
  void* r = nullptr;
  ASSERT_TRUE(lo->irecv(loRecv, 1, &data, &cap, &tag, nullptr, &r).ok());
  Status st;
  for (int i = 0; i < 10000 && st.ok() && !done; ++i) {
    st = lo->test(r, &done, nullptr);
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_FALSE(st.ok()) << "the receive after the peer's close did not fail";
  EXPECT_TRUE(lo->health(loSend).ok()) << lo->health(loSend).message();
  EXPECT_TRUE(lo->health(loRecv).ok()) << lo->health(loRecv).message();
  EXPECT_TRUE(lo->closeSend(loSend).ok());
  EXPECT_TRUE(lo->closeRecv(loRecv).ok());
}

// Pairing refuses a send side that has already sent on its own socket.
TEST(SocketTransport, PairingAfterUseIsRefused) {
  Pair p = loopbackPair(1);
  uint64_t v = 7;
  void* r = nullptr;
  ASSERT_TRUE(p.net->isend(p.send, &v, sizeof v, 0, nullptr, &r).ok());
  Status st = p.net->pairControl(p.send, p.recv, false);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("paired after use"), std::string::npos) << st.message();
  p.net->closeSend(p.send);
  p.net->closeRecv(p.recv);
}

// TCP never touches GPU memory: it offers host memory only, refuses a
// dma-buf by name, and has nothing to flush after a receive.
TEST(SocketTransport, OffersHostMemoryOnlyAndHasNothingToFlush) {
  Pair p = loopbackPair(1);
  NetProperties props;
  ASSERT_TRUE(p.net->getProperties(0, &props).ok());
  EXPECT_EQ(props.ptrSupport, kPtrHost);
  char buf[64];
  void* mh = reinterpret_cast<void*>(1);
  Status st = p.net->regMrDmaBuf(p.recv, buf, sizeof buf, kPtrCuda | kPtrDmabuf, 0, 3, &mh);
  EXPECT_EQ(st.code(), hocclInvalidUsage);
  EXPECT_NE(st.message().find("does not register dma-bufs"), std::string::npos) << st.message();
  EXPECT_EQ(mh, nullptr);
  void* d = buf;
  int size = sizeof buf;
  void* req = reinterpret_cast<void*>(1);
  EXPECT_TRUE(p.net->iflush(p.recv, 1, &d, &size, nullptr, &req).ok());
  EXPECT_EQ(req, nullptr);
  p.net->closeSend(p.send);
  p.net->closeRecv(p.recv);
}

// Ranks as threads on fake nodes: nodes x ranksPerNode, ring over TCP
// between nodes and shared memory inside them.
void runOnFakeNodes(int nodes, int perNode, const testutil::Body& body) {
  testutil::Options o;
  o.ranks = nodes * perNode;
  o.nodeSizes.assign(nodes, perNode);
  o.net = testutil::Net::Socket;
  o.nodePrefix = "fake-node";
  std::string err;
  ASSERT_TRUE(testutil::spawn(o, body, &err)) << err;
}

// A communicator across nodes keeps polling longer before it sleeps than
// one inside a node: sleeping through a network round trip wakes a rank
// late and makes its peers sleep too. HOCCL_SPIN, when set, is the budget
// for both.
TEST(FakeNodesPolicy, ACommunicatorAcrossNodesSpinsLonger) {
  runOnFakeNodes(2, 2, [&](hocclComm_t comm, int) {
    EXPECT_TRUE(comm->usesNetwork());
    EXPECT_GE(comm->policy.remoteSpinIters, comm->policy.spinIters);
    if (comm->policy.yieldWhileSpinning) {
      EXPECT_GT(comm->policy.remoteSpinIters, comm->policy.spinIters);
    }
  });
  setenv("HOCCL_SPIN", "77", 1);
  reloadSettingsForTesting();
  runOnFakeNodes(2, 1, [&](hocclComm_t comm, int) {
    EXPECT_EQ(comm->policy.spinIters, 77);
    EXPECT_EQ(comm->policy.remoteSpinIters, 77);
  });
  unsetenv("HOCCL_SPIN");
  reloadSettingsForTesting();
}

// HOCCL_SLICE_BYTES=auto: a communicator that spans nodes moves 512 KiB
// slices, one inside a node 128 KiB; a split chooses for its own members
// (here one per node), and a size that is set holds for both.
TEST(FakeNodesPolicy, ACommunicatorAcrossNodesMovesLargerSlices) {
  auto check = [](uint64_t across, uint64_t inside) {
    runOnFakeNodes(2, 2, [&](hocclComm_t comm, int rank) {
      EXPECT_EQ(comm->settings.sliceBytes, across);
      hocclComm_t node = nullptr;
      ASSERT_EQ(hocclCommSplit(comm, rank / 2, rank, &node, nullptr), hocclSuccess) << hocclGetLastError(comm);
      EXPECT_FALSE(node->usesNetwork());
      EXPECT_EQ(node->settings.sliceBytes, inside);
      hocclComm_t single = nullptr;  // a split of the node's communicator: one rank, one node
      ASSERT_EQ(hocclCommSplit(node, rank % 2, rank, &single, nullptr), hocclSuccess) << hocclGetLastError(node);
      EXPECT_EQ(single->settings.sliceBytes, inside) << "a split of a one-node communicator is still one node";
      EXPECT_EQ(hocclCommDestroy(single), hocclSuccess);
      hocclComm_t rail = nullptr;  // one rank per node: across nodes again
      ASSERT_EQ(hocclCommSplit(comm, rank % 2, rank, &rail, nullptr), hocclSuccess) << hocclGetLastError(comm);
      EXPECT_TRUE(rail->usesNetwork());
      EXPECT_EQ(rail->settings.sliceBytes, across);
      // Calls agree on the slice across the split's ranks.
      float x = float(rank), sum = 0;
      ASSERT_EQ(hocclAllReduce(&x, &sum, 1, hocclFloat, hocclSum, rail, nullptr), hocclSuccess);
      EXPECT_EQ(sum, float(rank % 2 + rank % 2 + 2));
      EXPECT_EQ(hocclCommDestroy(rail), hocclSuccess);
      EXPECT_EQ(hocclCommDestroy(node), hocclSuccess);
    });
  };
  check(512u << 10, 128u << 10);
  setenv("HOCCL_SLICE_BYTES", "256K", 1);
  reloadSettingsForTesting();
  check(256u << 10, 256u << 10);
  unsetenv("HOCCL_SLICE_BYTES");
  reloadSettingsForTesting();
}

// A group of few ranks still yields the core between polls when its
// parent's ranks, or another live communicator's, outnumber the cores on
// this machine: they all run there. (PaRO's rail group, one rank per node,
// polled busily on 2 cores shared with 6 more ranks.) With the process on
// one core, 4 ranks outnumber it and one does not.
TEST(FakeNodesPolicy, ASmallGroupCountsTheOtherRanksOnTheMachine) {
  cpu_set_t saved, one;
  ASSERT_EQ(sched_getaffinity(0, sizeof saved, &saved), 0);
  int cpu = 0;
  while (!CPU_ISSET(cpu, &saved)) ++cpu;
  CPU_ZERO(&one);
  CPU_SET(cpu, &one);
  ASSERT_EQ(sched_setaffinity(0, sizeof one, &one), 0);  // the rank threads inherit it
  auto alone = [](hocclComm_t* out) {
    hocclUniqueId id;
    ASSERT_EQ(hocclGetUniqueId(&id), hocclSuccess);
    ASSERT_EQ(hocclCommInitRank(out, 1, id, 0), hocclSuccess);
  };
  runOnFakeNodes(2, 2, [&](hocclComm_t comm, int rank) {
    EXPECT_EQ(comm->sharingMachine, 4);
    EXPECT_TRUE(comm->policy.yieldWhileSpinning);
    hocclComm_t split = nullptr, fresh = nullptr;
    ASSERT_EQ(hocclCommSplit(comm, rank, 0, &split, nullptr), hocclSuccess) << hocclGetLastError(comm);
    EXPECT_EQ(split->sharingMachine, 4);  // its parent's count
    EXPECT_TRUE(split->policy.yieldWhileSpinning);
    alone(&fresh);
    EXPECT_EQ(fresh->sharingMachine, 1);  // its own; it waits as the live ones say
    EXPECT_TRUE(fresh->policy.yieldWhileSpinning);
    EXPECT_EQ(hocclCommDestroy(fresh), hocclSuccess);
    EXPECT_EQ(hocclCommDestroy(split), hocclSuccess);
  });
  hocclComm_t last = nullptr;
  alone(&last);  // every other communicator is gone: one rank on one core polls busily
  if (last) {
    EXPECT_FALSE(last->policy.yieldWhileSpinning);
    EXPECT_EQ(hocclCommDestroy(last), hocclSuccess);
  }
  ASSERT_EQ(sched_setaffinity(0, sizeof saved, &saved), 0);
}

class FakeNodes : public ::testing::TestWithParam<std::pair<int, int>> {};

TEST_P(FakeNodes, EveryTypeAndOpAcrossNodes) {
  auto [nodes, perNode] = GetParam();
  const int n = nodes * perNode;
  runOnFakeNodes(nodes, perNode, [&](hocclComm_t comm, int rank) {
    for (uint64_t count : {0ull, 1ull, 1009ull, 300007ull})
      for (int t = 0; t < hocclNumTypes; ++t)
        for (int op = 0; op < hocclNumOps; ++op) {
          auto type = static_cast<hocclDataType_t>(t);
          auto red = static_cast<hocclRedOp_t>(op);
          size_t es = checkvals::typeSize(type);
          std::vector<char> buf(count * es + 1);
          checkvals::fillReduceInput(buf.data(), type, red, rank, 0, count);
          ASSERT_EQ(hocclAllReduce(buf.data(), buf.data(), count, type, red, comm, nullptr), hocclSuccess)
              << hocclGetLastError(comm);
          std::string why;
          EXPECT_EQ(checkvals::countReduceErrors(buf.data(), type, red, n, 0, count, &why), 0u)
              << checkvals::typeName(type) << " " << checkvals::opName(red) << " count " << count << ": " << why;
          if (count != 1009) continue;
          std::vector<char> in(count * n * es), out(count * es);
          checkvals::fillReduceInput(in.data(), type, red, rank, 0, count * n);
          ASSERT_EQ(hocclReduceScatter(in.data(), out.data(), count, type, red, comm, nullptr), hocclSuccess);
          EXPECT_EQ(checkvals::countReduceErrors(out.data(), type, red, n, rank * count, count), 0u);
        }
    std::vector<int32_t> mine(777, rank), all(777 * n);
    ASSERT_EQ(hocclAllGather(mine.data(), all.data(), 777, hocclInt32, comm, nullptr), hocclSuccess) << hocclGetLastError(comm);
    for (int r = 0; r < n; ++r) EXPECT_EQ(all[r * 777 + 776], r);
  });
}

INSTANTIATE_TEST_SUITE_P(Shapes, FakeNodes, ::testing::Values(std::make_pair(2, 1), std::make_pair(2, 2), std::make_pair(4, 2)),
                         [](const auto& info) {
                           return std::to_string(info.param.first) + "nodes_x" + std::to_string(info.param.second);
                         });

}  // namespace

namespace {

// Init of one rank with `config` must fail as an invalid argument; returns
// the last error, which should say why.
std::string oneRankInitError(hocclConfig_t* config) {
  hocclUniqueId id;
  EXPECT_EQ(hocclGetUniqueId(&id), hocclSuccess);
  hocclComm_t comm = nullptr;
  EXPECT_EQ(hocclCommInitRankConfig(&comm, 1, id, 0, config), hocclInvalidArgument);
  return hocclGetLastError(nullptr);
}

// config->algorithm: per communicator, over HOCCL_ALGO, at init and at split.
// Ranks as threads on two fake nodes of 2 so hierarchical and horing build
// their own schedules (not the ring fallback of a single node).
struct ConfigAlgorithm : ::testing::Test {
  void TearDown() override {
    unsetenv("HOCCL_ALGO");
    reloadSettingsForTesting();
  }
  // Runs body(rank) on 4 threads, each on fake node rank / 2.
  static void onFourRanks(const std::function<void(int)>& body) {
    std::vector<std::thread> threads;
    for (int r = 0; r < 4; ++r)
      threads.emplace_back([&, r] {
        setThreadHostIdOverride("cfg-node-" + std::to_string(r / 2));
        body(r);
      });
    for (auto& t : threads) t.join();
  }
  // The algorithm that built the all-reduce schedule `comm` holds.
  static std::string scheduleAlgorithm(hocclComm_t comm) {
    for (const auto& kv : comm->schedules)
      if (std::get<0>(kv.first) == static_cast<int>(CollKind::AllReduce)) return kv.second->algorithm;
    return "(none)";
  }
};

TEST_F(ConfigAlgorithm, InitAndSplitOverrideTheEnvironment) {
  setenv("HOCCL_ALGO", "ring", 1);
  reloadSettingsForTesting();  // the environment under the configs
  hocclUniqueId id;
  ASSERT_EQ(hocclGetUniqueId(&id), hocclSuccess);
  std::vector<std::string> parentAlgo(4), subAlgo(4), parentBuilt(4), subBuilt(4);
  std::vector<float> parentSum(4, -1), subSum(4, -1);
  onFourRanks([&](int rank) {
    hocclConfig_t config = HOCCL_CONFIG_INITIALIZER;
    config.algorithm = "hierarchical";
    hocclComm_t comm = nullptr;
    ASSERT_EQ(hocclCommInitRankConfig(&comm, 4, id, rank, &config), hocclSuccess) << hocclGetLastError(nullptr);
    hocclConfig_t splitConfig = HOCCL_CONFIG_INITIALIZER;
    splitConfig.algorithm = "horing";
    hocclComm_t sub = nullptr;
    ASSERT_EQ(hocclCommSplit(comm, 0, rank, &sub, &splitConfig), hocclSuccess) << hocclGetLastError(comm);
    std::vector<float> in(1000, static_cast<float>(rank + 1)), out(1000, 0);
    ASSERT_EQ(hocclAllReduce(in.data(), out.data(), in.size(), hocclFloat, hocclSum, comm, nullptr), hocclSuccess);
    parentSum[rank] = out[999];
    ASSERT_EQ(hocclAllReduce(in.data(), out.data(), in.size(), hocclFloat, hocclSum, sub, nullptr), hocclSuccess);
    subSum[rank] = out[999];
    parentAlgo[rank] = comm->algo ? comm->algo->name : "auto";
    subAlgo[rank] = sub->algo ? sub->algo->name : "auto";
    parentBuilt[rank] = scheduleAlgorithm(comm);
    subBuilt[rank] = scheduleAlgorithm(sub);
    hocclCommDestroy(sub);
    hocclCommDestroy(comm);
  });
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ(parentAlgo[r], "hierarchical") << r;
    EXPECT_EQ(subAlgo[r], "horing") << r;
    EXPECT_EQ(parentBuilt[r], "hierarchical") << r;
    EXPECT_EQ(subBuilt[r], "horing") << r;
    EXPECT_EQ(parentSum[r], 10.0f) << r;
    EXPECT_EQ(subSum[r], 10.0f) << r;
  }
}

TEST_F(ConfigAlgorithm, UnknownNameIsANamedError) {
  hocclConfig_t config = HOCCL_CONFIG_INITIALIZER;
  config.algorithm = "bogus";
  const std::string why = oneRankInitError(&config);
  EXPECT_NE(why.find("config->algorithm=\"bogus\""), std::string::npos) << why;
  // A caller built against a header without the field passes a smaller
  // size: the field is not read.
  config.size = offsetof(hocclConfig_t, algorithm);
  hocclUniqueId id;
  hocclComm_t comm = nullptr;
  ASSERT_EQ(hocclGetUniqueId(&id), hocclSuccess);
  ASSERT_EQ(hocclCommInitRankConfig(&comm, 1, id, 0, &config), hocclSuccess) << hocclGetLastError(nullptr);
  EXPECT_EQ(comm->algo, nullptr);
  hocclCommDestroy(comm);
}

// Members of one split that ask for different algorithms would build
// different schedules; every member gets an error at the split, none hangs.
TEST_F(ConfigAlgorithm, SplitMembersMustAgree) {
  hocclUniqueId id;
  ASSERT_EQ(hocclGetUniqueId(&id), hocclSuccess);
  std::vector<hocclResult_t> differ(4), invalid(4);
  std::vector<std::string> differWhy(4), invalidWhy(4);
  std::vector<float> after(4, -1);
  onFourRanks([&](int rank) {
    hocclComm_t comm = nullptr;
    ASSERT_EQ(hocclCommInitRank(&comm, 4, id, rank), hocclSuccess) << hocclGetLastError(nullptr);
    hocclConfig_t config = HOCCL_CONFIG_INITIALIZER;
    config.algorithm = rank == 3 ? "ring" : "horing";
    hocclComm_t sub = nullptr;
    differ[rank] = hocclCommSplit(comm, 0, rank, &sub, &config);
    differWhy[rank] = hocclGetLastError(comm);
    if (sub) hocclCommDestroy(sub);
    sub = nullptr;
    config.algorithm = rank == 1 ? "no-such" : "ring";
    invalid[rank] = hocclCommSplit(comm, 0, rank, &sub, &config);
    invalidWhy[rank] = hocclGetLastError(comm);
    if (sub) hocclCommDestroy(sub);
    // The parent is unharmed.
    float v = 1, sum = 0;
    ASSERT_EQ(hocclAllReduce(&v, &sum, 1, hocclFloat, hocclSum, comm, nullptr), hocclSuccess);
    after[rank] = sum;
    hocclCommDestroy(comm);
  });
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ(differ[r], hocclInvalidUsage) << r;
    EXPECT_NE(differWhy[r].find("different algorithms"), std::string::npos) << differWhy[r];
    if (r == 1) {
      EXPECT_EQ(invalid[r], hocclInvalidArgument);
      EXPECT_NE(invalidWhy[r].find("\"no-such\" names no algorithm"), std::string::npos) << invalidWhy[r];
    } else {
      EXPECT_EQ(invalid[r], hocclInvalidUsage) << r;
      EXPECT_NE(invalidWhy[r].find("rank 1 passed an invalid config"), std::string::npos) << invalidWhy[r];
    }
    EXPECT_EQ(after[r], 4.0f) << r;
  }
}

}  // namespace

namespace {

// config->netName takes NCCL's names over HOCCL_NET; an unknown one is a
// named error.
TEST(ConfigNet, UnknownNameIsANamedError) {
  hocclConfig_t config = HOCCL_CONFIG_INITIALIZER;
  config.netName = "carrier-pigeon";
  const std::string why = oneRankInitError(&config);
  EXPECT_NE(why.find("config->netName=\"carrier-pigeon\""), std::string::npos) << why;
}

// Where no verbs port is active, "IB" between two nodes fails at init (as
// HOCCL_NET=ib does) instead of falling back to TCP as the default would:
// the name reaches the choice of network. "Socket" is every TCP case of
// test_coll_matrix.cc.
TEST(ConfigNet, IbWithoutAPortFailsInit) {
  if (testutil::ibUnavailable().empty()) GTEST_SKIP() << "an IB port is active here";
  testutil::Options o;
  o.ranks = 2;
  o.nodeSizes = {1, 1};
  o.net = testutil::Net::Ib;
  o.nodePrefix = "net-node";
  o.timeoutSec = 30;
  std::string err;
  EXPECT_FALSE(testutil::spawn(o, [](hocclComm_t, int) {}, &err));
  EXPECT_NE(err.find("IB is unavailable"), std::string::npos) << err;
  o.net = testutil::Net::Socket;
  EXPECT_TRUE(testutil::spawn(o, [](hocclComm_t, int) {}, &err)) << err;
}

}  // namespace
