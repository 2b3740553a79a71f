// The device path (src/exec/cuda/device_executor.h) on a real GPU, through
// the public API (CTest label `gpu`; skips without a usable GPU): two ranks
// as threads share device 0, each with its own stream. The driver's entry
// points resolve; an all-reduce on device buffers is queued, completes on
// its stream and gives, bit for bit, what the same call gives on host
// buffers. Where the embedded image has no interpreter kernel of that name
// yet, the test stops there and says so (the path ran up to the lookup).
// Ranks that are processes of their own: the last test.
#include <gtest/gtest.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "hoccl.h"
#include "base/config.h"
#include "base/cuda_device_api.h"
#include "base/cuda_driver.h"
#include "tests/support/cuda_gpu.h"
#include "tests/support/harness.h"
#include "transport/p2p/ipc.h"
#include "transport/p2p/peer_access.h"

namespace hoccl::gputest {
namespace {

// kRanks ranks all-reduce n floats in place on device buffers, then on
// host buffers; the two must agree bit for bit. (With fractions they
// would not always: the device may cut the data into more channels than
// the host, and a ring's order of additions follows the cut.)
void allReduceMatchesTheHost(Gpu* g, int kRanks, size_t n) {
  Arena mem(*g);
  std::vector<std::vector<float>> host(kRanks), out(kRanks);
  std::vector<DevPtr> dev(kRanks);
  for (int r = 0; r < kRanks; ++r) {
    host[r].resize(n);
    // Whole numbers: every order of the sums gives the same bits, so the
    // device's channels (more than the host's) do not change the result.
    for (size_t i = 0; i < n; ++i) host[r][i] = float(int(i % 17) - 8) + float(r * 3);
    dev[r] = mem.alloc(n * sizeof(float));
    mem.upload(dev[r], host[r].data(), n * sizeof(float));
    out[r].assign(n, -1.0f);
  }
  ASSERT_TRUE(mem.ok()) << mem.error();
  std::mutex mu;
  std::string missingKernel;
  ASSERT_TRUE(testutil::runThreads(kRanks, [&](hocclComm_t comm, int rank) {
    void* d = reinterpret_cast<void*>(dev[rank]);
    const hocclResult_t rc = hocclAllReduce(d, d, n, hocclFloat32, hocclSum, comm, g->streams[rank]);
    const std::string err = hocclGetLastError(comm);
    if (rc == hocclInvalidArgument && err.find("have no hocclInterp_f32_sum") != std::string::npos) {
      std::lock_guard<std::mutex> lock(mu);
      missingKernel = err;
      return;
    }
    ASSERT_EQ(rc, hocclSuccess) << err;
    ASSERT_EQ(g->check(g->cu.streamSynchronize(g->streams[rank]), "cuStreamSynchronize"), "");
    hocclResult_t async = hocclInternalError;
    ASSERT_EQ(hocclCommGetAsyncError(comm, &async), hocclSuccess);
    EXPECT_EQ(async, hocclSuccess) << hocclGetLastError(comm);
    int device = -1;
    EXPECT_EQ(hocclCommCuDevice(comm, &device), hocclSuccess);
    EXPECT_EQ(device, 0);
    ASSERT_EQ(hocclAllReduce(host[rank].data(), host[rank].data(), n, hocclFloat32, hocclSum, comm, nullptr),
              hocclSuccess);
  }));
  if (!missingKernel.empty()) GTEST_SKIP() << "ran up to the kernel lookup: " << missingKernel;
  for (int r = 0; r < kRanks; ++r) {
    mem.download(out[r].data(), dev[r], n * sizeof(float));
    ASSERT_TRUE(mem.ok()) << mem.error();
    EXPECT_EQ(std::memcmp(out[r].data(), host[r].data(), n * sizeof(float)), 0) << "rank " << r;
  }
}

TEST(GpuDevicePath, AllReduceOnDeviceBuffersMatchesTheHost) {
  HOCCL_GPU_OR_SKIP(g);
  cuda::DeviceApi api;
  const Status resolved = cuda::resolveDeviceApi(cuda::processDriver(), &api);
  ASSERT_TRUE(resolved.ok()) << resolved.message();
  allReduceMatchesTheHost(g, 2, 100003);
}

// The peer-access self-test's driver calls on a real GPU (this machine has
// one: the GPU is its own "peer"): the pattern comes back intact, and the
// calling thread's context is the same afterwards.
TEST(GpuDevicePath, PeerSelfTestRunsOnTheDriver) {
  HOCCL_GPU_OR_SKIP(g);
  cuda::DeviceApi api;
  const Status resolved = cuda::resolveDeviceApi(cuda::processDriver(), &api);
  ASSERT_TRUE(resolved.ok()) << resolved.message();
  for (int i = 0; i < 3; ++i) EXPECT_EQ(cuda::peerSelfTest(api, 0, 0, g->context), "") << "round " << i;
  cuda::CuHandle now = nullptr;
  ASSERT_EQ(api.ctxGetCurrent(&now), 0);
  EXPECT_EQ(now, g->context);
}

// The self-test between processes writes through a VMM mapping: here the
// GPU's own VMM memory, made and mapped as a connection's would be, takes
// the same round trip and comes back intact.
TEST(GpuDevicePath, RoundTripThroughVmmMemoryRunsOnTheDriver) {
  HOCCL_GPU_OR_SKIP(g);
  cuda::DeviceApi api;
  const Status resolved = cuda::resolveDeviceApi(cuda::processDriver(), &api);
  ASSERT_TRUE(resolved.ok()) << resolved.message();
  if (!api.vmm.usable()) GTEST_SKIP() << "this driver lacks VMM: " << api.vmmMissing;
  ASSERT_EQ(api.ctxSetCurrent(g->context), 0);
  cuda::VmmMapping m;
  size_t granularity = 0;
  const Status made = cuda::vmmCreate(api.vmm, 0, size_t(2) << 20, cuda::kMemHandleTypePosixFd, &m, &granularity);
  ASSERT_TRUE(made.ok()) << made.message();
  bool stuck = false;
  EXPECT_EQ(cuda::copyRoundTrip(api, m.base + cuda::ipcSlotsOffset(), 0x5a5a, 5, &stuck), "");
  EXPECT_FALSE(stuck);
  cuda::vmmRelease(api.vmm, &m);
}

// 16 MiB per rank: the call spreads over many channels (CTAs), up to the
// GPU's multiprocessors shared by 4 ranks (HOCCL_DEVICE_CHANNELS=auto).
TEST(GpuDevicePath, ALargeAllReduceOnManyChannelsMatchesTheHost) {
  HOCCL_GPU_OR_SKIP(g);
  allReduceMatchesTheHost(g, 4, (size_t(1) << 22) + 5);
}

// HOCCL_P2P_DISABLE=1: every connection between ranks lives in host memory
// that the GPU reads and writes over PCIe (the path of GPU pairs without
// peer access), counters of system scope. Still the host's bits.
TEST(GpuDevicePath, ConnectionsStagedThroughHostMemoryMatchTheHost) {
  HOCCL_GPU_OR_SKIP(g);
  setenv("HOCCL_P2P_DISABLE", "1", 1);
  reloadSettingsForTesting();
  allReduceMatchesTheHost(g, 2, 100003);
  allReduceMatchesTheHost(g, 3, (size_t(1) << 20) + 3);
  unsetenv("HOCCL_P2P_DISABLE");
  reloadSettingsForTesting();
}

// The rank threads of one test meet here between phases.
class ThreadBarrier {
 public:
  explicit ThreadBarrier(int n) : n_(n) {}
  void wait() {
    std::unique_lock<std::mutex> lock(mu_);
    const int round = round_;
    if (++arrived_ == n_) {
      arrived_ = 0;
      ++round_;
      cv_.notify_all();
    } else {
      cv_.wait(lock, [&] { return round_ != round; });
    }
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int n_, arrived_ = 0, round_ = 0;
};

// An all-reduce captured into a CUDA graph in the global mode (as
// torch.cuda.graph captures), its first call of that shape included, so its
// setup runs during the capture; the graph is replayed three times with new
// inputs, then the same call runs outside the graph. Every result is the
// exact sum (whole numbers).
TEST(GpuDevicePath, AnAllReduceCapturedInAGraphReplaysWithNewInputs) {
  HOCCL_GPU_OR_SKIP(g);
  const int kRanks = 2;
  const size_t n = 300007;
  Arena mem(*g);
  std::vector<DevPtr> in(kRanks), out(kRanks);
  for (int r = 0; r < kRanks; ++r) {
    in[r] = mem.alloc(n * sizeof(float));
    out[r] = mem.alloc(n * sizeof(float));
  }
  ASSERT_TRUE(mem.ok()) << mem.error();
  auto value = [](size_t i, int rank, int round) { return float(int(i % 17) - 8 + rank * 3 + round); };
  ThreadBarrier barrier(kRanks);
  ASSERT_TRUE(testutil::runThreads(kRanks, [&](hocclComm_t comm, int rank) {
    // A rank whose part failed still meets every barrier, so that none
    // waits for it forever; its peers' kernels end at HOCCL_TIMEOUT.
    bool live = true;
    auto cu = [&](int rc, const char* what) {
      const std::string e = g->check(rc, what);
      EXPECT_EQ(e, "") << "rank " << rank;
      return e.empty();
    };
    Handle stream = g->streams[rank];
    void* din = reinterpret_cast<void*>(in[rank]);
    void* dout = reinterpret_cast<void*>(out[rank]);
    std::vector<float> host(n), got(n);
    auto upload = [&](int round) {
      for (size_t i = 0; i < n; ++i) host[i] = value(i, rank, round);
      return cu(g->cu.memcpyHtoD(in[rank], host.data(), n * sizeof(float)), "cuMemcpyHtoD");
    };
    auto check = [&](int round) {
      if (!cu(g->cu.streamSynchronize(stream), "cuStreamSynchronize") ||
          !cu(g->cu.memcpyDtoH(got.data(), out[rank], n * sizeof(float)), "cuMemcpyDtoH"))
        return false;
      for (size_t i = 0; i < n; ++i) {
        float want = 0;
        for (int r = 0; r < kRanks; ++r) want += value(i, r, round);
        if (got[i] != want) {
          ADD_FAILURE() << "round " << round << " rank " << rank << ": element " << i << " is " << got[i]
                        << ", not " << want;
          return false;
        }
      }
      return true;
    };
    live = cu(g->cu.ctxSetCurrent(g->context), "cuCtxSetCurrent");
    // Uploads, downloads and graph launches wait at the barrier for every
    // rank's capture to end: a synchronous copy while another thread
    // captures in the global mode would break that capture.
    Handle graph = nullptr, exec = nullptr;
    if (live && cu(g->cu.streamBeginCapture(stream, kCaptureModeGlobal), "cuStreamBeginCapture")) {
      const hocclResult_t rc = hocclAllReduce(din, dout, n, hocclFloat32, hocclSum, comm, stream);
      EXPECT_EQ(rc, hocclSuccess) << "rank " << rank << ": " << hocclGetLastError(comm);
      live = cu(g->cu.streamEndCapture(stream, &graph), "cuStreamEndCapture") && rc == hocclSuccess;
    } else {
      live = false;
    }
    barrier.wait();
    live = live && cu(g->cu.graphInstantiateWithFlags(&exec, graph, 0), "cuGraphInstantiateWithFlags");
    for (int round = 0; round < 3; ++round) {
      live = live && upload(round);
      barrier.wait();  // no rank's replay reads an input of the previous round
      live = live && cu(g->cu.graphLaunch(exec, stream), "cuGraphLaunch") && check(round);
      barrier.wait();
    }
    // Outside the graph, after it.
    live = live && upload(3);
    barrier.wait();
    if (live) {
      EXPECT_EQ(hocclAllReduce(din, dout, n, hocclFloat32, hocclSum, comm, stream), hocclSuccess)
          << hocclGetLastError(comm);
      check(3);
      hocclResult_t async = hocclInternalError;
      EXPECT_EQ(hocclCommGetAsyncError(comm, &async), hocclSuccess);
      EXPECT_EQ(async, hocclSuccess) << hocclGetLastError(comm);
    }
    if (exec) g->cu.graphExecDestroy(exec);
    if (graph) g->cu.graphDestroy(graph);
  }));
}

// A TCP port of 127.0.0.1 that was free a moment ago (0 if none).
int freePort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  int port = 0;
  if (fd >= 0 && bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0)
    port = ntohs(a.sin_port);
  if (fd >= 0) close(fd);
  return port;
}

// Ranks in separate processes on the one GPU: their connections are VMM
// allocations exported as POSIX fds (transport/p2p/ipc.h). Each rank is
// test_cuda_gpu_rank (tests/gpu_rank.cc), started next to this program
// with posix_spawn: a child forked after this process opened the GPU could
// not use it. Each compares every case with the host path bit for bit.
// Then again with HOCCL_P2P_DISABLE=1: connections in host shared memory
// (a memfd each process registers with the driver); and with
// HOCCL_DEVICE_IPC=legacy: cuMemAlloc memory opened by cuIpc handles; and
// HOCCL_DEVICE_IPC=fabric: VMM memory as fabric handles where an IMEX
// channel permits them, else every rank refused by name (gpu_rank.cc).
TEST(GpuDevicePath, RanksInSeparateProcessesMatchTheHost) {
  HOCCL_GPU_OR_SKIP(g);
  char self[4096];
  const ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
  ASSERT_GT(len, 0);
  self[len] = 0;
  std::string bin(self);
  bin = bin.substr(0, bin.rfind('/') + 1) + "test_cuda_gpu_rank";
  ASSERT_EQ(access(bin.c_str(), X_OK), 0) << bin << " is not there: it is built with test_cuda_gpu";
  // How connections are shared: VMM fds, host memory (staged), legacy IPC,
  // fabric handles.
  for (const auto& [nranks, how] : {std::pair{2, "fd"}, {3, "fd"}, {2, "staged"}, {3, "staged"}, {2, "legacy"},
                                    {3, "legacy"}, {2, "fabric"}}) {
    const std::string mode = how;
    SCOPED_TRACE(std::to_string(nranks) + " processes, connections by " + mode);
    setenv("HOCCL_P2P_DISABLE", mode == "staged" ? "1" : "0", 1);
    setenv("HOCCL_DEVICE_IPC", mode == "staged" ? "fd" : mode.c_str(), 1);
    const int port = freePort();
    ASSERT_GT(port, 0);
    const std::string id = "127.0.0.1:" + std::to_string(port);
    setenv("HOCCL_COMM_ID", id.c_str(), 1);
    setenv("HOCCL_TIMEOUT", "60", 0);  // a hang becomes an error naming the step
    std::vector<pid_t> pids;
    for (int r = 0; r < nranks; ++r) {
      const std::string rank = std::to_string(r), size = std::to_string(nranks);
      char* args[] = {const_cast<char*>(bin.c_str()), const_cast<char*>(rank.c_str()),
                      const_cast<char*>(size.c_str()), nullptr};
      pid_t pid = -1;
      const int rc = posix_spawn(&pid, bin.c_str(), nullptr, nullptr, args, environ);
      ASSERT_EQ(rc, 0) << "posix_spawn " << bin << ": " << strerror(rc);
      pids.push_back(pid);
    }
    unsetenv("HOCCL_COMM_ID");
    unsetenv("HOCCL_P2P_DISABLE");
    unsetenv("HOCCL_DEVICE_IPC");
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(180);
    std::vector<int> status(nranks, -1);
    int left = nranks;
    while (left > 0 && std::chrono::steady_clock::now() < deadline) {
      for (int r = 0; r < nranks; ++r) {
        int st = 0;
        if (status[r] == -1 && waitpid(pids[r], &st, WNOHANG) == pids[r]) {
          status[r] = st;
          --left;
        }
      }
      if (left > 0) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    for (int r = 0; r < nranks; ++r) {
      if (status[r] == -1) {
        kill(pids[r], SIGKILL);
        waitpid(pids[r], nullptr, 0);
        ADD_FAILURE() << "rank " << r << " still ran after 180 s";
      } else if (!WIFEXITED(status[r]) || WEXITSTATUS(status[r]) != 0) {
        ADD_FAILURE() << "rank " << r << (WIFSIGNALED(status[r]) ? " died of signal " : " exited with ")
                      << (WIFSIGNALED(status[r]) ? WTERMSIG(status[r]) : WEXITSTATUS(status[r]))
                      << " (its message is printed above)";
      }
    }
    if (HasFailure()) return;
  }
}

}  // namespace
}  // namespace hoccl::gputest
