// The network-transport contract (NCCL net-plugin semantics) run against
// every transport: TCP always; IB (verbs) where a usable port exists. Where
// none does (any machine without RDMA), the IB cases skip and say why;
// tests/softroce/run.sh runs them for real against Soft-RoCE in a VM.
// With two IB ports the connection goes from the second to the first, so
// it crosses a link; HOCCL_IB_HCA / HOCCL_IB_GID_INDEX pick them as for the
// library.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/net_pair.h"
#include "transport/net/net.h"

using namespace hoccl;

namespace {

enum class Kind { Socket, Ib };

using Pair = testsupport::NetPair;
using testsupport::waitDone;

IbNetOptions ibOptions(int qps) {
  IbNetOptions o;
  o.ifnameRule = "lo";
  o.qpsPerConn = qps;
  if (const char* h = getenv("HOCCL_IB_HCA")) o.hcaRule = h;
  if (const char* g = getenv("HOCCL_IB_GID_INDEX")) o.gidIndex = atoi(g);
  return o;
}

// One transport, one connection to itself (over loopback for TCP; between
// two ports when IB has two). `lanes`: TCP streams or IB QPs.
Pair makePair(Kind kind, int lanes) {
  Pair p;
  if (kind == Kind::Socket) {
    SocketNetOptions o;
    o.ifnameRule = "lo";
    o.streams = lanes;
    EXPECT_TRUE(createSocketTransport(o, &p.net).ok());
  } else {
    Status st = createIbTransport(ibOptions(lanes), &p.net);
    if (!st.ok()) {
      p.unavailable = "no IB transport here: " + st.message();
      return p;
    }
  }
  int recvDev = 0, sendDev = p.net->devices() > 1 ? 1 : 0;
  testsupport::connectToSelf(&p, recvDev, sendDev);
  return p;
}

class NetConformance : public ::testing::TestWithParam<Kind> {};

#define MAKE_PAIR_OR_SKIP(p, lanes)                          \
  Pair p = makePair(GetParam(), lanes);                      \
  if (!p.unavailable.empty()) GTEST_SKIP() << p.unavailable; \
  ASSERT_NE(p.send, nullptr);                                \
  ASSERT_NE(p.recv, nullptr)

TEST_P(NetConformance, PropertiesAndRegistration) {
  MAKE_PAIR_OR_SKIP(p, 2);
  ASSERT_GE(p.net->devices(), 1);
  NetProperties props;
  ASSERT_TRUE(p.net->getProperties(0, &props).ok());
  EXPECT_TRUE(props.ptrSupport & kPtrHost);
  EXPECT_GT(props.maxP2pBytes, 0u);
  EXPECT_GT(props.speedMbps, 0);
  EXPECT_FALSE(props.name.empty());
  EXPECT_FALSE(p.net->getProperties(p.net->devices(), &props).ok());
  void* mr = nullptr;
  std::vector<char> buf(1 << 16);
  EXPECT_FALSE(p.net->regMr(p.send, buf.data(), buf.size(), kPtrCuda, &mr).ok());
  EXPECT_TRUE(p.net->regMr(p.send, buf.data(), buf.size(), kPtrHost, &mr).ok());
  EXPECT_TRUE(p.net->deregMr(p.send, mr).ok());
  p.net->closeSend(p.send);
  p.net->closeRecv(p.recv);
}

// Sizes from 0 to 1 GiB over several lanes, receive posted first; the byte
// after the message must stay untouched.
TEST_P(NetConformance, SizesFromZeroToOneGiB) {
  MAKE_PAIR_OR_SKIP(p, 4);
  std::vector<size_t> sizes = {0, 1, 7, 4096, 64 << 10, 256 << 10, (256 << 10) + 3, 3 << 20, (9 << 20) + 5,
                               size_t(1) << 30};
  for (size_t size : sizes) {
    std::vector<unsigned char> src(size), dst(size + 1, 0xee);
    for (size_t i = 0; i < size; ++i) src[i] = static_cast<unsigned char>(i * 131 + 7 + (i >> 20));
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
    EXPECT_EQ(dst[size], 0xee) << "wrote past the message of " << size;
  }
  p.net->closeSend(p.send);
  p.net->closeRecv(p.recv);
}

// 32 requests outstanding each way, half the receives posted after every
// send, completions tested in reverse: FIFO matching, any completion order.
TEST_P(NetConformance, ManyOutstandingRequestsMatchInOrder) {
  MAKE_PAIR_OR_SKIP(p, 3);
  const int n = kNetMaxRequests;
  std::vector<std::vector<int>> src(n), dst(n);
  std::vector<void*> sreq(n), rreq(n);
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
  // One receive more than the limit is refused with a null request.
  void* extra = nullptr;
  int x = 0;
  void* xd = &x;
  size_t xcap = sizeof x;
  int xtag = 0;
  ASSERT_TRUE(p.net->irecv(p.recv, 1, &xd, &xcap, &xtag, nullptr, &extra).ok());
  EXPECT_EQ(extra, nullptr);
  for (int i = n - 1; i >= 0; --i) {
    waitDone(*p.net, rreq[i]);
    EXPECT_EQ(src[i], dst[i]) << i;
  }
  for (int i = 0; i < n; ++i) waitDone(*p.net, sreq[i]);
  p.net->closeSend(p.send);
  p.net->closeRecv(p.recv);
}

// Buffers registered once and reused for many messages, as the executor's
// staging slots are: every round trip lands where it should.
TEST_P(NetConformance, RegisteredSlotsReusedManyTimes) {
  MAKE_PAIR_OR_SKIP(p, 2);
  const int slots = 4, rounds = 200;
  const size_t slotBytes = 100000;
  std::vector<char> sbuf(slots * slotBytes), rbuf(slots * slotBytes);
  void *smr = nullptr, *rmr = nullptr;
  ASSERT_TRUE(p.net->regMr(p.send, sbuf.data(), sbuf.size(), kPtrHost, &smr).ok());
  ASSERT_TRUE(p.net->regMr(p.recv, rbuf.data(), rbuf.size(), kPtrHost, &rmr).ok());
  long wrong = 0;
  for (int r = 0; r < rounds; ++r) {
    int s = r % slots;
    size_t bytes = 1 + (static_cast<size_t>(r) * 7919) % slotBytes;
    char* out = sbuf.data() + s * slotBytes;
    for (size_t i = 0; i < bytes; ++i) out[i] = static_cast<char>(r + i);
    void* d = rbuf.data() + s * slotBytes;
    size_t cap = slotBytes;
    int tag = 0, got = -1;
    void *rq = nullptr, *sq = nullptr;
    ASSERT_TRUE(p.net->irecv(p.recv, 1, &d, &cap, &tag, &rmr, &rq).ok());
    ASSERT_TRUE(p.net->isend(p.send, out, bytes, 0, smr, &sq).ok());
    waitDone(*p.net, rq, &got);
    waitDone(*p.net, sq);
    ASSERT_EQ(static_cast<size_t>(got), bytes);
    wrong += memcmp(out, d, bytes) != 0;
  }
  EXPECT_EQ(wrong, 0);
  p.net->deregMr(p.send, smr);
  p.net->deregMr(p.recv, rmr);
  p.net->closeSend(p.send);
  p.net->closeRecv(p.recv);
}

TEST_P(NetConformance, TruncationAndClosedPeerAreErrors) {
  MAKE_PAIR_OR_SKIP(p, 1);
  std::vector<char> big(1000, 1), small(10);
  void *sreq = nullptr, *rreq = nullptr;
  void* d = small.data();
  size_t cap = small.size();
  int tag = 0;
  ASSERT_TRUE(p.net->irecv(p.recv, 1, &d, &cap, &tag, nullptr, &rreq).ok());
  ASSERT_TRUE(p.net->isend(p.send, big.data(), big.size(), 0, nullptr, &sreq).ok());
  int done = 0;
  Status st;
  for (int i = 0; i < 10000000 && st.ok(); ++i) {
    st = p.net->test(rreq, &done, nullptr);
    if (st.ok()) std::this_thread::yield();
  }
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("does not fit"), std::string::npos) << st.message();

  Pair q = makePair(GetParam(), 2);
  ASSERT_NE(q.send, nullptr);
  q.net->closeSend(q.send);
  // A receive posted after the peer closed fails at once or on test.
  void* r2 = nullptr;
  st = q.net->irecv(q.recv, 1, &d, &cap, &tag, nullptr, &r2);
  for (int i = 0; i < 10000000 && st.ok(); ++i) {
    st = q.net->test(r2, &done, nullptr);
    std::this_thread::yield();
  }
  EXPECT_EQ(st.code(), hocclRemoteError);
  EXPECT_NE(st.message().find("closed by the peer"), std::string::npos) << st.message();
  // The peer said goodbye: an orderly close, not a lost connection.
  st = q.net->health(q.recv);
  EXPECT_TRUE(st.ok()) << st.message();
  q.net->closeRecv(q.recv);

  // The other way round: the receiver closes, the idle sender stays healthy.
  Pair o = makePair(GetParam(), 1);
  ASSERT_NE(o.send, nullptr);
  o.net->closeRecv(o.recv);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  st = o.net->health(o.send);
  EXPECT_TRUE(st.ok()) << st.message();
  o.net->closeSend(o.send);
}

// A peer process that exits without closing its connection (as kill -9
// does): health() says so while no request is pending, which is how
// hocclCommGetAsyncError learns of a death between calls. Both ends.
TEST(SocketHealth, PeerProcessThatExitsIsReported) {
  for (bool peerSends : {true, false}) {
    SCOPED_TRACE(peerSends ? "the peer is the sender" : "the peer is the receiver");
    SocketNetOptions opt;
    opt.ifnameRule = "lo";
    std::unique_ptr<NetTransport> net;
    ASSERT_TRUE(createSocketTransport(opt, &net).ok());
    char handle[kNetHandleBytes];
    void* lc = nullptr;
    void* mine = nullptr;
    if (peerSends) ASSERT_TRUE(net->listen(0, handle, &lc).ok());
    else {
      // The child listens and passes its handle through a pipe.
      int fds[2];
      ASSERT_EQ(pipe(fds), 0);
      pid_t child = fork();
      ASSERT_GE(child, 0);
      if (child == 0) {
        std::unique_ptr<NetTransport> cnet;
        if (!createSocketTransport(opt, &cnet).ok() || !cnet->listen(0, handle, &lc).ok()) _exit(3);
        if (write(fds[1], handle, sizeof handle) != static_cast<ssize_t>(sizeof handle)) _exit(4);
        void* r = nullptr;
        for (int i = 0; i < 100000 && !r; ++i) {
          if (!cnet->accept(lc, &r).ok()) _exit(5);
          usleep(100);
        }
        _exit(r ? 0 : 6);  // without closing anything
      }
      ASSERT_EQ(read(fds[0], handle, sizeof handle), static_cast<ssize_t>(sizeof handle));
      close(fds[0]);
      close(fds[1]);
      for (int i = 0; i < 100000 && !mine; ++i) {
        ASSERT_TRUE(net->connect(0, handle, &mine).ok());
        usleep(100);
      }
      int status = 0;
      ASSERT_EQ(waitpid(child, &status, 0), child);
      ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
    }
    if (peerSends) {
      pid_t child = fork();
      ASSERT_GE(child, 0);
      if (child == 0) {
        std::unique_ptr<NetTransport> cnet;
        void* s = nullptr;
        if (!createSocketTransport(opt, &cnet).ok()) _exit(3);
        for (int i = 0; i < 100000 && !s; ++i) {
          if (!cnet->connect(0, handle, &s).ok()) _exit(4);
          usleep(100);
        }
        _exit(s ? 0 : 5);
      }
      for (int i = 0; i < 100000 && !mine; ++i) {
        ASSERT_TRUE(net->accept(lc, &mine).ok());
        usleep(100);
      }
      int status = 0;
      ASSERT_EQ(waitpid(child, &status, 0), child);
      ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
      net->closeListen(lc);
    }
    ASSERT_NE(mine, nullptr);
    Status st;
    for (int i = 0; i < 1000 && st.ok(); ++i) {
      st = net->health(mine);
      if (st.ok()) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    EXPECT_EQ(st.code(), hocclRemoteError);
    EXPECT_NE(st.message().find("without a goodbye"), std::string::npos) << st.message();
    if (peerSends) net->closeRecv(mine);
    else net->closeSend(mine);
  }
}

INSTANTIATE_TEST_SUITE_P(Transports, NetConformance, ::testing::Values(Kind::Socket, Kind::Ib),
                         [](const auto& info) { return info.param == Kind::Socket ? "Socket" : "IB"; });

}  // namespace
