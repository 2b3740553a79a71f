// Device buffers across hosts on the fake driver: the network proxy
// (transport/net/net_device.h). Ranks with different host ids, as threads
// or processes, run every collective on fake device buffers over TCP and
// must give what the host path gives, bit for bit, with the slots in
// mapped host memory (HOCCL_NET_DEVICE_PATH=host), in GPU memory copied
// through host frames (copy), and with the two ends of a connection on
// different paths. Failures end every rank with an error naming the peer.
#include <gtest/gtest.h>
#include <dirent.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstring>
#include <chrono>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "hoccl.h"
#include "base/clock.h"
#include "base/config.h"
#include "base/cuda_device_api.h"
#include "tests/support/cuda_device_cases.h"
#include "tests/support/dmabuf_net.h"
#include "transport/net/net_device.h"
#include "tests/support/fake_cuda.h"
#include "tests/support/harness.h"

namespace hoccl {
namespace {

using namespace devicetest;

// Every collective, with counts that fill several slots, none, and a
// ragged tail; in and out of place; integer and floating types.
const Case kNetCases[] = {
    {CollKind::AllReduce, DType::Float32, RedOp::Sum, 100003, false, 0},
    {CollKind::AllReduce, DType::Int32, RedOp::Max, 1000, true, 0},
    {CollKind::AllReduce, DType::Float64, RedOp::Avg, 333, false, 0},
    {CollKind::AllReduce, DType::Float32, RedOp::Sum, 0, false, 0},
    {CollKind::ReduceScatter, DType::Bfloat16, RedOp::Sum, 2570, false, 0},
    {CollKind::ReduceScatter, DType::Int64, RedOp::Min, 77, true, 0},
    {CollKind::AllGather, DType::Float64, RedOp::Sum, 3700, false, 0},
    {CollKind::AllGather, DType::Uint8, RedOp::Sum, 1001, true, 0},
    {CollKind::Broadcast, DType::Uint8, RedOp::Sum, 100000, false, 1},
    {CollKind::Reduce, DType::Float16, RedOp::Sum, 4099, false, 1},
    {CollKind::AllToAll, DType::Int32, RedOp::Sum, 1234, false, 0},
};

struct Shape {
  std::vector<int> nodeSizes;
  int leaves;
  const char* algorithm;  // "" : the tuner's (host) choice
};

class CudaDeviceNetTest : public CudaDeviceTest {
 protected:
  // Ranks as processes on emulated hosts of nodeSizes ranks each, over TCP.
  static testutil::Options hostsAsProcesses(std::vector<int> nodeSizes) {
    testutil::Options o;
    o.ranks = 0;
    for (int n : nodeSizes) o.ranks += n;
    o.nodeSizes = std::move(nodeSizes);
    o.net = testutil::Net::Socket;
    o.mode = testutil::Mode::Processes;
    o.timeoutSec = 60;
    return o;
  }
  // Two hosts of one rank each, as threads, on data path `path` (every
  // thread shares the environment).
  static testutil::Options twoHostsAsThreads(const char* path) {
    setenv("HOCCL_NET_DEVICE_PATH", path, 1);
    reloadSettingsForTesting();
    testutil::Options o;
    o.ranks = 2;
    o.nodeSizes = {1, 1};
    o.net = testutil::Net::Socket;
    o.timeoutSec = 60;
    return o;
  }
  ~CudaDeviceNetTest() override {
    unsetenv("HOCCL_NET_DEVICE_PATH");
    reloadSettingsForTesting();
    cuda::NetDeviceConnections::wrapForTesting = nullptr;
  }
  // Runs every case on `shape` and compares with the host path. `path(r)`:
  // rank r's HOCCL_NET_DEVICE_PATH.
  void runShape(const Shape& s, testutil::Mode mode, const std::function<const char*(int)>& path) {
    testutil::Options o;
    for (int n : s.nodeSizes) o.ranks += n;
    o.ranks -= 1;
    o.nodeSizes = s.nodeSizes;
    o.leaves = s.leaves;
    o.algorithm = s.algorithm;
    o.net = testutil::Net::Socket;
    o.mode = mode;
    o.timeoutSec = 60;
    // Threads share one environment: every rank takes rank 0's path.
    setenv("HOCCL_NET_DEVICE_PATH", path(0), 1);
    reloadSettingsForTesting();
    o.beforeInit = [&](int rank) {
      if (mode == testutil::Mode::Threads) return;
      setenv("HOCCL_NET_DEVICE_PATH", path(rank), 1);
      reloadSettingsForTesting();
    };
    SCOPED_TRACE(o.describe());
    std::string error;
    EXPECT_TRUE(testutil::spawn(o, [&](hocclComm_t comm, int rank) {
      void* stream = fake->createStream();
      for (const Case& c : kNetCases) {
        if (c.coll == CollKind::AllToAll && std::string(s.algorithm) != "" && std::string(s.algorithm) != "ring")
          continue;  // all-to-all has one algorithm
        runAndCompare(fake.get(), c, comm, rank, o.ranks, stream);
        if (::testing::Test::HasFatalFailure()) return;
      }
      EXPECT_EQ(fake->lastFlags(), 0u) << "connections through host memory: system scope";
    }, &error)) << error;
  }
};

const char* hostPath(int) { return "host"; }
const char* copyPath(int) { return "copy"; }
const char* mixedPath(int r) { return r % 2 ? "copy" : "host"; }
const char* gdrPath(int) { return "gdr"; }
const char* gdrMixedPath(int r) { return r % 3 == 0 ? "gdr" : r % 3 == 1 ? "host" : "copy"; }

// GPUDirect RDMA (HOCCL_NET_DEVICE_PATH=gdr) over a transport that maps the
// fake driver's dma-bufs (tests/support/dmabuf_net.h): the frames are GPU
// memory registered by fd, the proxy writes headers into them and reads
// them out by copy, flushes every receive, and every collective gives what
// the host path gives, with both ends on gdr and with gdr facing host and
// copy on the other end of a connection.
TEST_F(CudaDeviceNetTest, GdrPathMatchesTheHostPathOverADmaBufTransport) {
  cuda::NetDeviceConnections::wrapForTesting = testsupport::wrapWithDmabuf;
  const testsupport::DmabufNetCounts before = testsupport::dmabufNetCounts();
  runShape({{2, 2}, 1, ""}, testutil::Mode::Threads, gdrPath);
  const testsupport::DmabufNetCounts after = testsupport::dmabufNetCounts();
  EXPECT_GT(after.registrations, before.registrations) << "no frames registered as dma-bufs";
  EXPECT_GT(after.transfers, before.transfers) << "nothing sent or received through a dma-buf";
  EXPECT_GT(after.flushes, before.flushes) << "no receive into GPU frames was flushed";
}

// Its own test: processes fork, which ThreadSanitizer refuses while the
// threads of a run of threads are still winding down.
TEST_F(CudaDeviceNetTest, GdrFacingHostAndCopyAsProcessesMatchesTheHostPath) {
  cuda::NetDeviceConnections::wrapForTesting = testsupport::wrapWithDmabuf;
  runShape({{2, 2}, 1, "horing"}, testutil::Mode::Processes, gdrMixedPath);
}

// Asked for where it cannot run (TCP registers no dma-buf), gdr is an error
// on the first call across hosts that names the path and the reason.
TEST_F(CudaDeviceNetTest, GdrWhereTheNetworkCannotIsANamedError) {
  testutil::World world(twoHostsAsThreads("gdr"));
  ASSERT_EQ(world.initError(), "");
  std::vector<void*> streams = {fake->createStream(), fake->createStream()};
  ASSERT_TRUE(world.run([&](hocclComm_t comm, int rank) {
    void* d = fake->alloc(1 << 20);
    hocclResult_t rc = hocclAllReduce(d, d, 1000, hocclFloat32, hocclSum, comm, streams[rank]);
    if (rc == hocclSuccess) {
      EXPECT_TRUE(fake->sync(streams[rank], 30));
      rc = awaitAsyncError(comm);
    }
    const std::string msg = hocclGetLastError(comm);
    EXPECT_EQ(rc, hocclInvalidUsage) << msg;
    EXPECT_NE(msg.find("HOCCL_NET_DEVICE_PATH=gdr"), std::string::npos) << msg;
    EXPECT_NE(msg.find("does not register dma-bufs"), std::string::npos) << msg;
    fake->free(d);
  }));
}

TEST_F(CudaDeviceNetTest, TwoHostsAsThreadsMatchTheHostPathOnEveryDataPath) {
  for (auto path : {hostPath, copyPath}) {
    SCOPED_TRACE(path(1));
    runShape({{1, 1}, 1, ""}, testutil::Mode::Threads, path);
  }
}

TEST_F(CudaDeviceNetTest, TwoHostsAsProcessesMatchTheHostPath) {
  runShape({{1, 1}, 1, ""}, testutil::Mode::Processes, mixedPath);
}

// Every algorithm that runs across nodes, on the shapes of the emulated
// cluster: 2 nodes x 2 ranks, 2 x 4, and 4 x 2 under two leaf switches.
// Inside a node the edges are p2p (raw pointers between threads), between
// nodes they go through the proxy: HO-Ring's intra and rail phases, and
// the hierarchical leaders' ring, run on both kinds at once.
TEST_F(CudaDeviceNetTest, EveryAlgorithmOnEveryShapeMatchesTheHostPath) {
  const Shape shapes[] = {{{2, 2}, 1, ""},
                          {{2, 2}, 1, "ring"},
                          {{2, 2}, 1, "hierarchical"},
                          {{2, 2}, 1, "horing"},
                          {{2, 2}, 1, "doubling"},
                          {{2, 2}, 1, "leaderdoubling"},
                          {{4, 4}, 1, "horing"},
                          {{4, 4}, 1, "hierarchical"},
                          {{2, 2, 2, 2}, 2, "horing"},
                          {{2, 2, 2, 2}, 2, "ring"},
                          {{2, 2, 2, 2}, 2, "leaderdoubling"}};
  for (const Shape& s : shapes) runShape(s, testutil::Mode::Threads, hostPath);
}

TEST_F(CudaDeviceNetTest, HoRingAsProcessesOnMixedPathsMatchesTheHostPath) {
  runShape({{2, 2}, 1, "horing"}, testutil::Mode::Processes, mixedPath);
  runShape({{2, 2, 2, 2}, 2, "horing"}, testutil::Mode::Processes, copyPath);
}

// A call captured into a CUDA graph across hosts (the fake runs captured
// work at once, as one replay would): the first capture sets up the
// proxy's connections (their memory, its stream) without breaking the
// capture, on both data paths; the proxy moves the replay's messages with
// no host call of the communicator, and calls outside the graph follow.
TEST_F(CudaDeviceNetTest, ACallCapturedIntoAGraphRunsAcrossHosts) {
  for (const char* path : {"host", "copy"}) {
    SCOPED_TRACE(path);
    testutil::World world(twoHostsAsThreads(path));
    ASSERT_EQ(world.initError(), "");
    std::vector<void*> streams = {fake->createStream(), fake->createStream()};
    const Case c{CollKind::AllReduce, DType::Float32, RedOp::Sum, 70000, false, 0};
    ASSERT_TRUE(world.run([&](hocclComm_t comm, int rank) {
      runCapturedAndCompare(fake.get(), c, comm, rank, 2, streams[rank]);
    }));
  }
}

// Failures across hosts end every rank's call with an error that names
// what happened, well within the timeout (60 s here): a rank killed on
// the other host, a rank that aborts instead of calling, and calls whose
// counts differ between the hosts.
class CudaDeviceNetFaultTest : public CudaDeviceNetTest {
 protected:
  // Runs `body` on 2 hosts x 2 ranks as processes, after one all-reduce
  // that connects every edge.
  // `killed`: the rank that kills itself (-1: none).
  void onTwoHosts(const std::function<void(hocclComm_t, int, void*)>& body, int killed = -1) {
    testutil::Options o = hostsAsProcesses({2, 2});
    std::string error;
    const bool ok = testutil::spawn(o, [&](hocclComm_t comm, int rank) {
      void* stream = fake->createStream();
      runAndCompare(fake.get(), {CollKind::AllReduce, DType::Float32, RedOp::Sum, 50000, false, 0}, comm, rank, 4,
                    stream);
      // Every rank has checked the warm-up before any fault starts.
      int one = 1;
      ASSERT_EQ(hocclAllReduce(&one, &one, 1, hocclInt32, hocclSum, comm, nullptr), hocclSuccess);
      body(comm, rank, stream);
    }, &error);
    if (killed < 0) {
      EXPECT_TRUE(ok) << error;
    } else {  // only that rank's death is reported
      EXPECT_FALSE(ok);
      EXPECT_NE(error.find("rank " + std::to_string(killed)), std::string::npos) << error;
      EXPECT_EQ(error.find("failures are printed"), std::string::npos) << error;
    }
  }
  // The error of a call that should fail: its return code, else the
  // communicator's asynchronous error once its stream has stopped.
  static hocclResult_t outcome(FakeCuda* fake, hocclResult_t rc, hocclComm_t comm, void* stream) {
    if (rc != hocclSuccess) return rc;
    EXPECT_TRUE(fake->sync(stream, 30)) << "the launch did not stop";
    return awaitAsyncError(comm);
  }
};

TEST_F(CudaDeviceNetFaultTest, ARankKilledOnTheOtherHostIsNamed) {
  onTwoHosts([&](hocclComm_t comm, int rank, void* stream) {
    if (rank == 3) raise(SIGKILL);
    void* d = fake->alloc(1 << 20);
    const double t0 = nowSec();
    const hocclResult_t rc = outcome(fake.get(), hocclAllReduce(d, d, 200000, hocclFloat32, hocclSum, comm, stream),
                                     comm, stream);
    const std::string msg = hocclGetLastError(comm);
    EXPECT_NE(rc, hocclSuccess);
    EXPECT_NE(msg.find("rank 3"), std::string::npos) << "rank " << rank << ": " << msg;
    EXPECT_LT(nowSec() - t0, 20.0) << msg;
    fake->free(d);
    _exit(::testing::Test::HasFailure() ? 1 : 0);  // rank 3 never reaches destroy
  }, 3);
}

TEST_F(CudaDeviceNetFaultTest, ARankThatAbortsInsteadOfCallingStopsEveryHost) {
  onTwoHosts([&](hocclComm_t comm, int rank, void* stream) {
    if (rank == 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      EXPECT_EQ(hocclCommAbort(comm), hocclSuccess);
      _exit(::testing::Test::HasFailure() ? 1 : 0);
    }
    void* d = fake->alloc(1 << 20);
    const double t0 = nowSec();
    const hocclResult_t rc = outcome(fake.get(), hocclAllReduce(d, d, 200000, hocclFloat32, hocclSum, comm, stream),
                                     comm, stream);
    EXPECT_NE(rc, hocclSuccess);
    EXPECT_LT(nowSec() - t0, 20.0) << hocclGetLastError(comm);
    fake->free(d);
    _exit(::testing::Test::HasFailure() ? 1 : 0);
  });
}

// An abort that cannot wait for its launch gives the executor up and frees
// the communicator: the network proxy, which asks the communicator for
// peers' abort notices every 0.1 s while a launch may run, must have
// stopped first (it went on reading the freed communicator: a sanitizer
// build reports it within the 0.3 s held here), and its network closed
// (a progress thread left running made ThreadSanitizer refuse the fork
// of the next test that spawns processes).
TEST_F(CudaDeviceNetTest, AnAbortWhoseLaunchCannotStartStopsTheProxyFirst) {
  testutil::Options o;
  o.ranks = 2;
  o.nodeSizes = {1, 1};
  o.net = testutil::Net::Socket;
  o.timeoutSec = 60;
  abortWithItsLaunchHeld(fake.get(), o, 0.3);
}

// hoccl's threads of this process ("hoccl-proxy", "hoccl-net", ...), by name.
std::vector<std::string> hocclThreads() {
  std::vector<std::string> names;
  if (DIR* d = opendir("/proc/self/task")) {
    while (dirent* e = readdir(d)) {
      if (e->d_name[0] == '.') continue;
      char name[64] = {};
      if (FILE* f = fopen(("/proc/self/task/" + std::string(e->d_name) + "/comm").c_str(), "r")) {
        if (fgets(name, sizeof name, f)) name[strcspn(name, "\n")] = 0;
        fclose(f);
      }
      if (strncmp(name, "hoccl-", 6) == 0) names.push_back(name);
    }
    closedir(d);
  }
  return names;
}

// The network proxy and its transport's progress thread run while the
// communicator lives and end with hocclCommDestroy: none is left behind.
TEST_F(CudaDeviceNetTest, DestroyLeavesNoProxyOrNetworkThread) {
  testutil::Options o = hostsAsProcesses({1, 1});
  std::string error;
  EXPECT_TRUE(testutil::spawn(o, [&](hocclComm_t comm, int) {
    void* stream = fake->createStream();
    void* d = fake->alloc(1 << 20);
    ASSERT_EQ(hocclAllReduce(d, d, 100000, hocclFloat32, hocclSum, comm, stream), hocclSuccess);
    ASSERT_TRUE(fake->sync(stream, 30));
    const std::vector<std::string> running = hocclThreads();
    EXPECT_NE(std::find(running.begin(), running.end(), "hoccl-proxy"), running.end())
        << "no network proxy thread while the communicator lives";
    ASSERT_EQ(hocclCommDestroy(comm), hocclSuccess);
    std::vector<std::string> left = hocclThreads();
    for (int i = 0; i < 200 && !left.empty(); ++i) {  // up to 2 s for threads on their way out
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      left = hocclThreads();
    }
    std::string names;
    for (const std::string& n : left) names += " " + n;
    EXPECT_TRUE(left.empty()) << "threads left after hocclCommDestroy:" << names;
    fake->free(d);
    _exit(::testing::Test::HasFailure() ? 1 : 0);  // the communicator is gone: skip the harness's destroy
  }, &error)) << error;
}

TEST_F(CudaDeviceNetFaultTest, CountsThatDifferBetweenHostsFailOnEveryRank) {
  onTwoHosts([&](hocclComm_t comm, int rank, void* stream) {
    void* d = fake->alloc(1 << 20);
    const size_t count = rank < 2 ? 100000 : 100004;
    const double t0 = nowSec();
    const hocclResult_t rc =
        outcome(fake.get(), hocclAllReduce(d, d, count, hocclFloat32, hocclSum, comm, stream), comm, stream);
    const std::string msg = hocclGetLastError(comm);
    EXPECT_NE(rc, hocclSuccess) << "rank " << rank;
    EXPECT_TRUE(msg.find("mismatch") != std::string::npos || msg.find("bytes") != std::string::npos ||
                msg.find("count") != std::string::npos)
        << "rank " << rank << ": " << msg;
    EXPECT_LT(nowSec() - t0, 20.0) << msg;
    fake->free(d);
    _exit(::testing::Test::HasFailure() ? 1 : 0);
  });
}

}  // namespace
}  // namespace hoccl
