// The TCP transport on its own (NCCL net-plugin semantics), and collectives
// across emulated nodes: ranks as threads with fake node ids, so ranks on
// different "nodes" talk over TCP and ranks on the same one over shm.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <thread>
#include <vector>

#include "src/core/comm.h"
#include "tests/test_util.h"
#include "transport/net/net.h"

using namespace hoccl;

namespace {

struct Pair {
  std::unique_ptr<NetTransport> net;
  void* send = nullptr;
  void* recv = nullptr;
};

// One transport, one connection to itself over loopback.
Pair loopbackPair(int streams) {
  Pair p;
  SocketNetOptions o;
  o.ifnameRule = "lo";
  o.streams = streams;
  EXPECT_TRUE(createSocketTransport(o, &p.net).ok());
  char handle[kNetHandleBytes];
  void* lc = nullptr;
  EXPECT_TRUE(p.net->listen(0, handle, &lc).ok());
  for (int i = 0; i < 100000 && (!p.send || !p.recv); ++i) {
    if (!p.send) {
      EXPECT_TRUE(p.net->connect(0, handle, &p.send).ok());
    }
    if (!p.recv) {
      EXPECT_TRUE(p.net->accept(lc, &p.recv).ok());
    }
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  EXPECT_TRUE(p.net->closeListen(lc).ok());
  return p;
}

void waitDone(NetTransport& net, void* req, int* size = nullptr) {
  int done = 0;
  for (int i = 0; !done; ++i) {
    ASSERT_TRUE(net.test(req, &done, size).ok());
    ASSERT_LT(i, 10000000);
    if (!done) std::this_thread::yield();
  }
}

TEST(SocketTransport, PropertiesAndRegistration) {
  Pair p = loopbackPair(2);
  ASSERT_NE(p.send, nullptr);
  ASSERT_NE(p.recv, nullptr);
  EXPECT_EQ(p.net->devices(), 1);
  NetProperties props;
  ASSERT_TRUE(p.net->getProperties(0, &props).ok());
  EXPECT_EQ(props.ptrSupport, kPtrHost);
  EXPECT_GT(props.maxP2pBytes, 0u);
  EXPECT_GT(props.speedMbps, 0);
  EXPECT_FALSE(p.net->getProperties(1, &props).ok());
  void* mr = nullptr;
  char buf[16];
  EXPECT_FALSE(p.net->regMr(p.send, buf, sizeof buf, kPtrCuda, &mr).ok());
  EXPECT_TRUE(p.net->regMr(p.send, buf, sizeof buf, kPtrHost, &mr).ok());
  p.net->closeSend(p.send);
  p.net->closeRecv(p.recv);
}

// Sizes from 0 to 1 GiB, several streams, FIFO matching with 32 requests
// outstanding in each direction.
TEST(SocketTransport, SizesFromZeroToOneGiB) {
  Pair p = loopbackPair(4);
  std::vector<size_t> sizes = {0, 1, 7, 4096, 256 << 10, (256 << 10) + 3, 3 << 20, size_t(1) << 30};
  for (size_t size : sizes) {
    std::vector<unsigned char> src(size), dst(size + 1, 0xee);
    for (size_t i = 0; i < size; ++i) src[i] = static_cast<unsigned char>(i * 131 + 7);
    void *sreq = nullptr, *rreq = nullptr;
    void* data = dst.data();
    size_t cap = dst.size();
    int tag = 5;
    ASSERT_TRUE(p.net->irecv(p.recv, 1, &data, &cap, &tag, nullptr, &rreq).ok());
    ASSERT_TRUE(p.net->isend(p.send, src.data(), size, 5, nullptr, &sreq).ok());
    ASSERT_NE(sreq, nullptr);
    ASSERT_NE(rreq, nullptr);
    int got = -1;
    waitDone(*p.net, rreq, &got);
    waitDone(*p.net, sreq);
    EXPECT_EQ(static_cast<size_t>(got), size) << size;
    EXPECT_EQ(memcmp(src.data(), dst.data(), size), 0) << size;
    EXPECT_EQ(dst[size], 0xee) << "wrote past the message";
  }
  p.net->closeSend(p.send);
  p.net->closeRecv(p.recv);
}

TEST(SocketTransport, ManyOutstandingRequestsMatchInOrder) {
  Pair p = loopbackPair(3);
  const int n = kNetMaxRequests;
  std::vector<std::vector<int>> src(n), dst(n);
  std::vector<void*> sreq(n), rreq(n);
  // Receives are posted first for half, after the sends for the rest.
  for (int i = 0; i < n; ++i) {
    size_t count = (i % 5 == 0) ? 100000 : static_cast<size_t>(i);
    src[i].resize(count);
    std::iota(src[i].begin(), src[i].end(), i * 1000);
    dst[i].assign(count, -1);
  }
  auto post = [&](int i) {
    void* d = dst[i].data();
    size_t cap = dst[i].size() * sizeof(int);
    int tag = 0;
    ASSERT_TRUE(p.net->irecv(p.recv, 1, &d, &cap, &tag, nullptr, &rreq[i]).ok());
    ASSERT_NE(rreq[i], nullptr);
  };
  for (int i = 0; i < n / 2; ++i) post(i);
  for (int i = 0; i < n; ++i) {
    ASSERT_TRUE(p.net->isend(p.send, src[i].data(), src[i].size() * sizeof(int), 0, nullptr, &sreq[i]).ok());
    ASSERT_NE(sreq[i], nullptr);
  }
  for (int i = n / 2; i < n; ++i) post(i);
  // One receive more than the limit is refused with a null request, not an
  // error. (Sends may run kMaxRecvs times further ahead: one grouped receive
  // takes that many.)
  void* extra = nullptr;
  int x = 0;
  void* xd = &x;
  size_t xcap = sizeof x;
  int xtag = 0;
  ASSERT_TRUE(p.net->irecv(p.recv, 1, &xd, &xcap, &xtag, nullptr, &extra).ok());
  EXPECT_EQ(extra, nullptr);
  // Test in reverse order: completion order does not matter.
  for (int i = n - 1; i >= 0; --i) {
    waitDone(*p.net, rreq[i]);
    EXPECT_EQ(src[i], dst[i]) << i;
  }
  for (int i = 0; i < n; ++i) waitDone(*p.net, sreq[i]);
  p.net->closeSend(p.send);
  p.net->closeRecv(p.recv);
}

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

TEST(SocketTransport, TruncationAndClosedPeerAreErrors) {
  Pair p = loopbackPair(1);
  std::vector<char> big(1000, 1), small(10);
  void *sreq = nullptr, *rreq = nullptr;
  void* d = small.data();
  size_t cap = small.size();
  int tag = 0;
  ASSERT_TRUE(p.net->irecv(p.recv, 1, &d, &cap, &tag, nullptr, &rreq).ok());
  ASSERT_TRUE(p.net->isend(p.send, big.data(), big.size(), 0, nullptr, &sreq).ok());
  int done = 0;
  Status st;
  for (int i = 0; i < 1000000 && st.ok(); ++i) st = p.net->test(rreq, &done, nullptr);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("does not fit"), std::string::npos) << st.message();

  Pair q = loopbackPair(2);
  q.net->closeSend(q.send);
  // A receive posted after the peer closed fails at once or on test.
  void* r2 = nullptr;
  st = q.net->irecv(q.recv, 1, &d, &cap, &tag, nullptr, &r2);
  for (int i = 0; i < 1000000 && st.ok(); ++i) {
    st = q.net->test(r2, &done, nullptr);
    std::this_thread::yield();
  }
  EXPECT_EQ(st.code(), hocclRemoteError);
  EXPECT_NE(st.message().find("closed by the peer"), std::string::npos) << st.message();
  q.net->closeRecv(q.recv);
}

// Ranks as threads on fake nodes: nodes x ranksPerNode, ring over TCP
// between nodes and shared memory inside them.
void runOnFakeNodes(int nodes, int perNode, const std::function<void(hocclComm_t, int)>& body) {
  std::string err;
  ASSERT_TRUE(testutil::runThreadsWithSetup(
      nodes * perNode, [&](int rank) { setThreadHostIdOverride("fake-node-" + std::to_string(rank / perNode)); },
      body, &err))
      << err;
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
          size_t es = testutil::typeSize(type);
          std::vector<char> buf(count * es + 1);
          testutil::fillReduceInput(buf.data(), type, red, rank, 0, count);
          ASSERT_EQ(hocclAllReduce(buf.data(), buf.data(), count, type, red, comm, nullptr), hocclSuccess)
              << hocclGetLastError(comm);
          std::string why;
          EXPECT_EQ(testutil::countReduceErrors(buf.data(), type, red, n, 0, count, &why), 0u)
              << testutil::typeName(type) << " " << testutil::opName(red) << " count " << count << ": " << why;
          if (count != 1009) continue;
          std::vector<char> in(count * n * es), out(count * es);
          testutil::fillReduceInput(in.data(), type, red, rank, 0, count * n);
          ASSERT_EQ(hocclReduceScatter(in.data(), out.data(), count, type, red, comm, nullptr), hocclSuccess);
          EXPECT_EQ(testutil::countReduceErrors(out.data(), type, red, n, rank * count, count), 0u);
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

// Hierarchical and HO-Ring end to end: ranks as threads on fake nodes, the
// algorithm forced through HOCCL_ALGO, every collective they implement
// checked for several types, ops, counts and placements. Uneven nodes too.
struct AlgoCase {
  const char* algo;
  std::vector<int> nodeSizes;
};

class AlgorithmsOnFakeNodes : public ::testing::TestWithParam<AlgoCase> {
 protected:
  void TearDown() override { unsetenv("HOCCL_ALGO"); }
};

TEST_P(AlgorithmsOnFakeNodes, ReductionsAndGathersAreCorrect) {
  const AlgoCase& c = GetParam();
  setenv("HOCCL_ALGO", c.algo, 1);
  std::vector<int> nodeOf;
  for (size_t n = 0; n < c.nodeSizes.size(); ++n)
    for (int i = 0; i < c.nodeSizes[n]; ++i) nodeOf.push_back(static_cast<int>(n));
  const int n = static_cast<int>(nodeOf.size());
  std::string err;
  ASSERT_TRUE(testutil::runThreadsWithSetup(
      n, [&](int rank) { setThreadHostIdOverride("algo-node-" + std::to_string(nodeOf[rank])); },
      [&](hocclComm_t comm, int rank) {
        for (uint64_t count : {1ull, 1009ull, 200003ull})
          for (auto type : {hocclFloat32, hocclInt8, hocclBfloat16})
            for (auto red : {hocclSum, hocclMax, hocclAvg}) {
              bool inPlace = (count + rank) % 2 == 0;
              size_t es = testutil::typeSize(type);
              std::string why;
              std::vector<char> in(count * n * es + 1), out(count * n * es + 1);
              testutil::fillReduceInput(in.data(), type, red, rank, 0, count);
              void* recv = inPlace ? in.data() : out.data();
              ASSERT_EQ(hocclAllReduce(in.data(), recv, count, type, red, comm, nullptr), hocclSuccess)
                  << hocclGetLastError(comm);
              EXPECT_EQ(testutil::countReduceErrors(recv, type, red, n, 0, count, &why), 0u)
                  << c.algo << " AllReduce " << testutil::typeName(type) << " count " << count << ": " << why;
              testutil::fillReduceInput(in.data(), type, red, rank, 0, count * n);
              recv = inPlace ? in.data() + rank * count * es : out.data();
              ASSERT_EQ(hocclReduceScatter(in.data(), recv, count, type, red, comm, nullptr), hocclSuccess)
                  << hocclGetLastError(comm);
              EXPECT_EQ(testutil::countReduceErrors(recv, type, red, n, rank * count, count, &why), 0u)
                  << c.algo << " ReduceScatter " << testutil::typeName(type) << " count " << count << ": " << why;
            }
        const uint64_t count = 50021;
        std::vector<int32_t> mine(count), all(count * n);
        for (uint64_t i = 0; i < count; ++i) mine[i] = static_cast<int32_t>(rank * 1000003 + i);
        ASSERT_EQ(hocclAllGather(mine.data(), all.data(), count, hocclInt32, comm, nullptr), hocclSuccess)
            << hocclGetLastError(comm);
        uint64_t wrong = 0;
        for (int r = 0; r < n; ++r)
          for (uint64_t i = 0; i < count; ++i) wrong += all[r * count + i] != static_cast<int32_t>(r * 1000003 + i);
        EXPECT_EQ(wrong, 0u) << c.algo << " AllGather";
      },
      &err))
      << err;
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, AlgorithmsOnFakeNodes,
    ::testing::Values(AlgoCase{"hierarchical", {2, 2}}, AlgoCase{"hierarchical", {3, 1, 2}},
                      AlgoCase{"horing", {2, 2}}, AlgoCase{"horing", {2, 2, 2}}, AlgoCase{"horing", {3, 1, 2}},
                      AlgoCase{"horing", {1, 1, 1}}),
    [](const auto& info) {
      std::string name = info.param.algo;
      for (int s : info.param.nodeSizes) name += "_" + std::to_string(s);
      return name;
    });

}  // namespace
