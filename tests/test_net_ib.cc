// The IB transport's own behaviour. Port and GID choice and HOCCL_NET's
// fallback run everywhere; the cases that need a verbs device skip where
// there is none and run in the Soft-RoCE guest (tests/softroce/run.sh):
// the registration cache, a failed work completion's message, and a peer
// process that dies mid-transfer.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "tests/support/net_pair.h"
#include "transport/net/ib/ib_select.h"
#include "transport/net/ib/ib_stats.h"
#include "transport/net/net.h"

using namespace hoccl;
using namespace hoccl::ibnet;

namespace {

TEST(IbHcaRule, NcclSyntax) {
  HcaRule r;
  std::string why;
  ASSERT_TRUE(parseHcaRule("", &r, &why));
  EXPECT_TRUE(hcaSelected(r, "mlx5_0", 1));

  ASSERT_TRUE(parseHcaRule("mlx5_0:1,mlx5_1", &r, &why)) << why;
  EXPECT_TRUE(hcaSelected(r, "mlx5_0", 1));
  EXPECT_FALSE(hcaSelected(r, "mlx5_0", 2));
  EXPECT_TRUE(hcaSelected(r, "mlx5_1", 2));
  EXPECT_TRUE(hcaSelected(r, "mlx5_10", 1)) << "names are prefixes without '='";
  EXPECT_FALSE(hcaSelected(r, "rxe0", 1));

  ASSERT_TRUE(parseHcaRule("=mlx5_1", &r, &why));
  EXPECT_TRUE(hcaSelected(r, "mlx5_1", 1));
  EXPECT_FALSE(hcaSelected(r, "mlx5_10", 1));

  ASSERT_TRUE(parseHcaRule("^mlx5_1:2", &r, &why));
  EXPECT_TRUE(hcaSelected(r, "mlx5_1", 1));
  EXPECT_FALSE(hcaSelected(r, "mlx5_1", 2));
  EXPECT_TRUE(hcaSelected(r, "rxe0", 1));

  ASSERT_TRUE(parseHcaRule("^=rxe", &r, &why));
  EXPECT_TRUE(hcaSelected(r, "rxe0", 1));
  ASSERT_TRUE(parseHcaRule("=^rxe0", &r, &why));
  EXPECT_FALSE(hcaSelected(r, "rxe0", 1));
  EXPECT_TRUE(hcaSelected(r, "rxe1", 1));

  EXPECT_FALSE(parseHcaRule("^", &r, &why));
  EXPECT_FALSE(parseHcaRule("mlx5_0:x", &r, &why));
  EXPECT_NE(why.find("port"), std::string::npos) << why;
  EXPECT_FALSE(parseHcaRule("mlx5_0,,mlx5_1", &r, &why));
  EXPECT_FALSE(parseHcaRule(":1", &r, &why));
}

GidEntry gid(int index, const char* text, const char* type) {
  GidEntry g;
  g.index = index;
  // "a:b:c..." as 8 groups of 16 bits, written out in full.
  unsigned v[8] = {0};
  sscanf(text, "%x:%x:%x:%x:%x:%x:%x:%x", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6], &v[7]);
  for (int i = 0; i < 8; ++i) {
    g.raw[2 * i] = static_cast<uint8_t>(v[i] >> 8);
    g.raw[2 * i + 1] = static_cast<uint8_t>(v[i]);
  }
  g.type = type;
  return g;
}

TEST(IbGid, AutomaticChoice) {
  // The Soft-RoCE guest: one link-local RoCE v2 GID.
  EXPECT_EQ(chooseGidIndex({gid(0, "fe80:0:0:0:c6ab:40ff:fe2e:9f6a", "RoCE v2")}, true), 0);
  // A typical RoCE NIC: v1 and v2 of the link-local and of an IPv4 address.
  std::vector<GidEntry> t = {gid(0, "fe80:0:0:0:1:2:3:4", "IB/RoCE v1"), gid(1, "fe80:0:0:0:1:2:3:4", "RoCE v2"),
                             gid(2, "0:0:0:0:0:ffff:a00:1", "IB/RoCE v1"), gid(3, "0:0:0:0:0:ffff:a00:1", "RoCE v2")};
  EXPECT_EQ(chooseGidIndex(t, true), 3);
  // Global IPv6 v2 beats link-local v2.
  t = {gid(1, "fe80:0:0:0:1:2:3:4", "RoCE v2"), gid(4, "2001:db8:0:0:0:0:0:1", "RoCE v2")};
  EXPECT_EQ(chooseGidIndex(t, true), 4);
  // Only v1: take it rather than nothing.
  EXPECT_EQ(chooseGidIndex({gid(5, "fe80:0:0:0:1:2:3:4", "IB/RoCE v1")}, true), 5);
  EXPECT_EQ(chooseGidIndex({}, true), -1);
  // InfiniBand: index 0.
  EXPECT_EQ(chooseGidIndex({gid(0, "fe80:0:0:0:2:c903:0:1", "IB/RoCE v1")}, false), 0);
  EXPECT_EQ(gidText(gid(0, "fe80:0:0:0:1:2:3:4", "").raw), "fe80::1:2:3:4");
}

IbNetOptions ibOptions() {
  IbNetOptions o;
  o.ifnameRule = "lo";
  if (const char* h = getenv("HOCCL_IB_HCA")) o.hcaRule = h;
  return o;
}

// HOCCL_NET=auto takes IB when it can and otherwise says why it did not;
// HOCCL_NET=ib without IB is an error that says why.
TEST(NetSelection, AutoFallsBackToSocketsSayingWhy) {
  std::unique_ptr<NetTransport> probe;
  Status ib = createIbTransport(ibOptions(), &probe);
  probe.reset();
  NetChoice c;
  c.socket.ifnameRule = "lo";
  c.ib = ibOptions();
  std::unique_ptr<NetTransport> net;
  std::string chosen;
  ASSERT_TRUE(createNetTransport(c, &net, &chosen).ok());
  if (ib.ok()) {
    EXPECT_STREQ(net->name(), "IB");
  } else {
    EXPECT_FALSE(ib.message().empty());
    EXPECT_STREQ(net->name(), "Socket");
    EXPECT_NE(chosen.find("IB unavailable: " + ib.message()), std::string::npos) << chosen;
    c.mode = "ib";
    net.reset();
    Status st = createNetTransport(c, &net, &chosen);
    EXPECT_FALSE(st.ok());
    EXPECT_NE(st.message().find("IB is unavailable"), std::string::npos) << st.message();
  }
  c.mode = "socket";
  net.reset();
  ASSERT_TRUE(createNetTransport(c, &net, &chosen).ok());
  EXPECT_STREQ(net->name(), "Socket");
  // A malformed HCA rule is reported, not silently replaced by TCP.
  c.mode = "auto";
  c.ib.hcaRule = "mlx5_0:zero";
  net.reset();
  Status bad = createNetTransport(c, &net, &chosen);
  EXPECT_EQ(bad.code(), hocclInvalidArgument) << bad.message();
}

// The communicator and the NCCL net plugin take their network choice from
// this one function; every HOCCL_NET, HOCCL_SOCKET_* and HOCCL_IB_* setting
// reaches the transport it configures.
TEST(NetSelection, ChoiceFromSettings) {
  Settings s;
  s.net = "socket";
  s.socketIfname = "=eth1";
  s.socketStreams = 3;
  s.timeoutSec = 42;
  s.ibHca = "^mlx5_1";
  s.ibGidIndex = 3;
  s.ibQpsPerConn = 2;
  s.ibTimeout = 17;
  s.ibRetryCnt = 5;
  NetChoice c = netChoiceFrom(s);
  EXPECT_EQ(c.mode, "socket");
  EXPECT_EQ(c.socket.ifnameRule, "=eth1");
  EXPECT_EQ(c.socket.streams, 3);
  EXPECT_EQ(c.socket.timeoutSec, 42);
  EXPECT_EQ(c.ib.hcaRule, "^mlx5_1");
  EXPECT_EQ(c.ib.gidIndex, 3);
  EXPECT_EQ(c.ib.qpsPerConn, 2);
  EXPECT_EQ(c.ib.timeout, 17);
  EXPECT_EQ(c.ib.retryCnt, 5);
  EXPECT_EQ(c.ib.ifnameRule, "=eth1");  // IB's side channel follows the socket rule
  EXPECT_EQ(c.ib.timeoutSec, 42);
  // What only the caller knows stays unset.
  EXPECT_EQ(c.socket.notify, nullptr);
  EXPECT_EQ(c.ib.notify, nullptr);
  EXPECT_EQ(c.socket.localAddr.u.sa.sa_family, AF_UNSPEC);
}

// A connected IB pair within this process, or a skip saying why not.
using IbPair = testsupport::NetPair;

std::string connectPair(IbPair* p, int qps = 1, bool flushHost = false) {
  IbNetOptions o = ibOptions();
  o.qpsPerConn = qps;
  o.flushHost = flushHost;
  Status st = createIbTransport(o, &p->net);
  if (!st.ok()) return "no IB transport here: " + st.message();
  testsupport::connectToSelf(p, 0, p->net->devices() > 1 ? 1 : 0);
  return "";
}

// Waits for a request; returns its status (ok once done).
Status waitFor(NetTransport& net, void* req, double seconds, int* size = nullptr) {
  auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  int done = 0;
  while (std::chrono::steady_clock::now() < end) {
    Status st = net.test(req, &done, size);
    if (!st.ok() || done) return st;
    std::this_thread::yield();
  }
  return Status(hocclTimeout, "request still not complete");
}

TEST(IbTransport, RegistrationCacheSharesAndReleases) {
  IbPair p;
  std::string skip = connectPair(&p);
  if (!skip.empty()) GTEST_SKIP() << skip;
  ASSERT_NE(p.send, nullptr);
  ASSERT_NE(p.recv, nullptr);
  IbRegistrationStats s0, s;
  ASSERT_TRUE(ibRegistrationStats(*p.net, 0, &s0));
  std::vector<char> buf(1 << 20, 'x'), dst(1 << 20);
  void *a = nullptr, *b = nullptr, *c = nullptr;
  ASSERT_TRUE(p.net->regMr(p.recv, buf.data(), buf.size(), kPtrHost, &a).ok());
  ASSERT_TRUE(p.net->regMr(p.recv, buf.data(), buf.size(), kPtrHost, &b).ok());
  ASSERT_TRUE(p.net->regMr(p.recv, buf.data() + 4096, 1000, kPtrHost, &c).ok());
  ASSERT_TRUE(ibRegistrationStats(*p.net, 0, &s));
  EXPECT_EQ(s.registrations - s0.registrations, 1u) << "one range, registered once";
  EXPECT_EQ(s.hits - s0.hits, 2u);
  EXPECT_EQ(s.live - s0.live, 1);
  EXPECT_EQ(a, b);
  EXPECT_EQ(a, c);
  p.net->deregMr(p.recv, a);
  p.net->deregMr(p.recv, b);
  ASSERT_TRUE(ibRegistrationStats(*p.net, 0, &s));
  EXPECT_EQ(s.live - s0.live, 1) << "still held by the third user";
  // A receive without a handle inside the held range reuses it; one outside
  // registers for the request and lets go when it completes.
  void* d = buf.data() + 8192;
  size_t cap = 100;
  int tag = 0;
  void *rq = nullptr, *sq = nullptr;
  ASSERT_TRUE(p.net->irecv(p.recv, 1, &d, &cap, &tag, nullptr, &rq).ok());
  ASSERT_TRUE(ibRegistrationStats(*p.net, 0, &s));
  EXPECT_EQ(s.registrations - s0.registrations, 1u);
  char msg[100];
  memset(msg, 'm', sizeof msg);
  ASSERT_TRUE(p.net->isend(p.send, msg, sizeof msg, 0, nullptr, &sq).ok());
  ASSERT_TRUE(waitFor(*p.net, rq, 60).ok());
  ASSERT_TRUE(waitFor(*p.net, sq, 60).ok());
  EXPECT_EQ(memcmp(buf.data() + 8192, msg, sizeof msg), 0);
  p.net->deregMr(p.recv, c);
  IbRegistrationStats s1;
  ASSERT_TRUE(ibRegistrationStats(*p.net, p.net->devices() > 1 ? 1 : 0, &s1));
  ASSERT_TRUE(ibRegistrationStats(*p.net, 0, &s));
  EXPECT_EQ(s.live, s0.live) << "every registration released";
  if (p.net->devices() > 1) {
    EXPECT_EQ(s1.live, 0) << "the sender's temporary registration was released";
  }
  p.net->closeSend(p.send);
  p.net->closeRecv(p.recv);
}

// iflush's loopback read (the GPU flush of GPUDirect RDMA receives), run on
// host memory: with flushHost the transport flushes a host registration as
// it would a GPU one, so the queue pair that reads the device's own memory
// back is made, posted to and completed here; without it (the default, as
// on a real host buffer) there is nothing to flush and no request.
TEST(IbTransport, FlushReadsTheReceivedBufferBackThroughALoopback) {
  for (bool flushHost : {false, true}) {
    SCOPED_TRACE(flushHost ? "flushHost" : "default");
    IbPair p;
    std::string skip = connectPair(&p, 1, flushHost);
    if (!skip.empty()) GTEST_SKIP() << skip;
    std::vector<char> buf(1 << 16), src(1 << 16);
    for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<char>(i * 7);
    void *rmr = nullptr, *smr = nullptr;
    ASSERT_TRUE(p.net->regMr(p.recv, buf.data(), buf.size(), kPtrHost, &rmr).ok());
    ASSERT_TRUE(p.net->regMr(p.send, src.data(), src.size(), kPtrHost, &smr).ok());
    for (int round = 0; round < 3; ++round) {
      void* d = buf.data();
      size_t cap = buf.size();
      int tag = 0;
      void *rq = nullptr, *sq = nullptr;
      ASSERT_TRUE(p.net->irecv(p.recv, 1, &d, &cap, &tag, &rmr, &rq).ok());
      ASSERT_TRUE(p.net->isend(p.send, src.data(), src.size(), 0, smr, &sq).ok());
      int got = 0;
      ASSERT_TRUE(waitFor(*p.net, rq, 60, &got).ok());
      ASSERT_TRUE(waitFor(*p.net, sq, 60).ok());
      EXPECT_EQ(got, static_cast<int>(src.size()));
      void* fq = nullptr;
      int size = got;
      Status st = p.net->iflush(p.recv, 1, &d, &size, &rmr, &fq);
      ASSERT_TRUE(st.ok()) << st.message();
      if (!flushHost) {
        EXPECT_EQ(fq, nullptr) << "host memory needs no flush";
        continue;
      }
      ASSERT_NE(fq, nullptr) << "a flush was asked for";
      st = waitFor(*p.net, fq, 60);
      EXPECT_TRUE(st.ok()) << st.message();
      // A buffer that received nothing is not flushed.
      int none = 0;
      void* fq0 = nullptr;
      ASSERT_TRUE(p.net->iflush(p.recv, 1, &d, &none, &rmr, &fq0).ok());
      EXPECT_EQ(fq0, nullptr);
    }
    EXPECT_EQ(memcmp(buf.data(), src.data(), src.size()), 0);
    void* fq = nullptr;
    int size = 1;
    void* d = buf.data();
    EXPECT_EQ(p.net->iflush(p.send, 1, &d, &size, &rmr, &fq).code(), hocclInvalidArgument) << "a send comm";
    p.net->deregMr(p.recv, rmr);
    p.net->deregMr(p.send, smr);
    p.net->closeSend(p.send);
    p.net->closeRecv(p.recv);
  }
}

// GPU memory on a device the probe found unable to take it (rxe, the one
// verbs device this project runs, registers no dma-buf): the properties do
// not offer it, and registering it anyway is refused with the probe's reason.
TEST(IbTransport, GpuMemoryIsOfferedOnlyWhereTheProbePassed) {
  IbPair p;
  std::string skip = connectPair(&p);
  if (!skip.empty()) GTEST_SKIP() << skip;
  NetProperties props;
  ASSERT_TRUE(p.net->getProperties(0, &props).ok());
  EXPECT_TRUE(props.ptrSupport & kPtrHost);
  char fake[4096];
  void* mh = nullptr;
  if (!(props.ptrSupport & kPtrDmabuf)) {
    Status st = p.net->regMrDmaBuf(p.recv, fake, sizeof fake, kPtrCuda | kPtrDmabuf, 0, 0, &mh);
    EXPECT_EQ(st.code(), hocclInvalidUsage) << st.message();
    EXPECT_NE(st.message().find("cannot register dma-bufs"), std::string::npos) << st.message();
    EXPECT_NE(st.message().find(props.gdrWhy), std::string::npos) << st.message() << " / " << props.gdrWhy;
    EXPECT_EQ(mh, nullptr);
  } else {
    EXPECT_TRUE(props.ptrSupport & kPtrCuda) << "a dma-buf device serves CUDA memory";
    Status st = p.net->regMrDmaBuf(p.recv, fake, sizeof fake, kPtrCuda | kPtrDmabuf, 0, -1, &mh);
    EXPECT_EQ(st.code(), hocclInvalidArgument) << "fd -1: " << st.message();
  }
  if (!(props.ptrSupport & kPtrCuda)) {
    Status st = p.net->regMr(p.recv, fake, sizeof fake, kPtrCuda, &mh);
    EXPECT_EQ(st.code(), hocclInvalidUsage) << st.message();
    EXPECT_NE(st.message().find("nvidia_peermem"), std::string::npos) << st.message();
  }
  p.net->closeSend(p.send);
  p.net->closeRecv(p.recv);
}

// A receive buffer deregistered after it was announced: the sender's RDMA
// write fails with a remote access error, and the message says what
// happened, where, and what to check.
TEST(IbTransport, FailedCompletionIsExplained) {
  IbPair p;
  std::string skip = connectPair(&p, 2);
  if (!skip.empty()) GTEST_SKIP() << skip;
  std::vector<char> buf(1 << 16), src(1 << 16, 's');
  void* mr = nullptr;
  ASSERT_TRUE(p.net->regMr(p.recv, buf.data(), buf.size(), kPtrHost, &mr).ok());
  void* d = buf.data();
  size_t cap = buf.size();
  int tag = 0;
  void *rq = nullptr, *sq = nullptr;
  ASSERT_TRUE(p.net->irecv(p.recv, 1, &d, &cap, &tag, &mr, &rq).ok());
  p.net->deregMr(p.recv, mr);
  ASSERT_TRUE(p.net->isend(p.send, src.data(), src.size(), 0, nullptr, &sq).ok());
  Status st = waitFor(*p.net, sq, 120);
  ASSERT_FALSE(st.ok());
  ASSERT_NE(st.code(), hocclTimeout) << "the failure never surfaced";
  const std::string& m = st.message();
  for (const char* part : {"IBV_WC_REM_ACCESS_ERR", "vendor_err", "QP 0x", "remote QP", "local GID", "remote GID",
                           "pid", "hint:"})
    EXPECT_NE(m.find(part), std::string::npos) << "missing \"" << part << "\" in: " << m;
  p.net->closeSend(p.send);
  p.net->closeRecv(p.recv);
}

// A peer process killed in the middle of a transfer: the survivor's receive
// fails with a remote error within seconds, no hang.
TEST(IbTransport, PeerKilledMidTransferFailsTheSurvivor) {
  {
    std::unique_ptr<NetTransport> probe;
    Status st = createIbTransport(ibOptions(), &probe);
    if (!st.ok()) GTEST_SKIP() << "no IB transport here: " << st.message();
  }
  int pipefd[2];
  ASSERT_EQ(pipe(pipefd), 0);
  const size_t bytes = size_t(32) << 20;
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // The sender, on the last port: connect, start a big send, die soon.
    close(pipefd[1]);
    char handle[kNetHandleBytes];
    if (read(pipefd[0], handle, sizeof handle) != static_cast<ssize_t>(sizeof handle)) _exit(2);
    std::unique_ptr<NetTransport> net;
    if (!createIbTransport(ibOptions(), &net).ok()) _exit(3);
    void* comm = nullptr;
    for (int i = 0; i < 2000000 && !comm; ++i) {
      if (!net->connect(net->devices() - 1, handle, &comm).ok()) _exit(4);
      if (!comm) usleep(50);
    }
    // Keep sending until killed, so the kill lands mid-transfer however
    // fast the link is.
    std::vector<char> data(bytes, 'k');
    std::vector<void*> reqs;
    auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(300);
    while (std::chrono::steady_clock::now() < until) {
      for (size_t i = 0; i < reqs.size();) {
        int done = 0;
        if (!net->test(reqs[i], &done, nullptr).ok()) _exit(6);
        if (done) reqs.erase(reqs.begin() + static_cast<long>(i));
        else ++i;
      }
      void* req = nullptr;
      if (reqs.size() < 4 && !net->isend(comm, data.data(), data.size(), 0, nullptr, &req).ok()) _exit(5);
      if (req) reqs.push_back(req);
    }
    kill(getpid(), SIGKILL);
  }
  close(pipefd[0]);
  std::unique_ptr<NetTransport> net;
  ASSERT_TRUE(createIbTransport(ibOptions(), &net).ok());
  char handle[kNetHandleBytes];
  void* lc = nullptr;
  ASSERT_TRUE(net->listen(0, handle, &lc).ok());
  ASSERT_EQ(write(pipefd[1], handle, sizeof handle), static_cast<ssize_t>(sizeof handle));
  close(pipefd[1]);
  void* comm = nullptr;
  for (int i = 0; i < 2000000 && !comm; ++i) {
    ASSERT_TRUE(net->accept(lc, &comm).ok());
    if (!comm) usleep(50);
  }
  net->closeListen(lc);
  ASSERT_NE(comm, nullptr);
  std::vector<char> dst(bytes);
  auto t0 = std::chrono::steady_clock::now();
  Status st;
  for (int n = 0; st.ok() && n < 100000; ++n) {
    void* d = dst.data();
    size_t cap = dst.size();
    int tag = 0;
    void* rq = nullptr;
    st = net->irecv(comm, 1, &d, &cap, &tag, nullptr, &rq);
    if (st.ok()) st = waitFor(*net, rq, 60);
  }
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  int wst = 0;
  waitpid(child, &wst, 0);
  ASSERT_TRUE(WIFSIGNALED(wst) && WTERMSIG(wst) == SIGKILL) << "the sender did not get far enough (exit "
                                                            << (WIFEXITED(wst) ? WEXITSTATUS(wst) : -1) << ")";
  EXPECT_EQ(st.code(), hocclRemoteError) << st.message();
  // Killed, so no goodbye came: the message must say so rather than report
  // an orderly close.
  EXPECT_NE(st.message().find("without a goodbye"), std::string::npos) << st.message();
  EXPECT_LT(secs, 60) << "the survivor took too long to notice";
  net->closeRecv(comm);
}

}  // namespace
