// The device path on the fake driver (support/cuda_device_cases.h): how
// ranks connect. Ranks of one process on two GPUs use peer access or
// stage through host memory; HOCCL_P2P_DISABLE stages every pair, as
// threads and as processes; ranks in separate processes share connection
// memory by VMM fds or legacy IPC handles; an executor keeps a bounded
// number of plans; device calls take the device rule's algorithm.
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "hoccl.h"
#include "base/clock.h"
#include "base/config.h"
#include "base/cuda_device_api.h"
#include "base/log.h"
#include "src/exec/cuda/device_executor.h"
#include "src/exec/cuda/interp.h"
#include "src/tune/tuner.h"
#include "tests/support/cuda_device_cases.h"
#include "tests/support/fake_cuda.h"
#include "tests/support/fake_cuda_ipc.h"
#include "tests/support/fake_cuda_vmm.h"
#include "tests/support/fake_nvml.h"
#include "tests/support/harness.h"

namespace hoccl {
namespace {

using namespace devicetest;

// Ranks of one process on different GPUs: each enables peer access to the
// other's GPU before connecting, and results still match the host. Where
// the driver refuses peer access for a pair, the pair's connections stage
// through mapped host memory instead (more of it is live), counters are
// of system scope, and results still match.
TEST_F(CudaDeviceTest, RanksOnTwoGpusOfOneProcessUsePeerAccessOrStage) {
  fake->setDevices(2);
  const int n = 2;
  const Case c{CollKind::AllReduce, DType::Float32, RedOp::Sum, 5000, false, 0};
  int hostBlocks[3] = {0, 0, 0};
  for (int mode : {0, 1, 2}) {  // peer access both ways; GPU 1 refused it; and GPU 0's self-test fails too
    const bool refuse = mode > 0;
    if (mode == 1) fake->refusePeerAccess(1, 0);
    if (mode == 2) fake->corruptDeviceCopies(true);
    RanksWithStreams ranks(fake.get(), n);
    ASSERT_EQ(ranks.world.initError(), "");
    const std::vector<void*>& streams = ranks.streams;
    const int enablesBefore = fake->peerEnables();
    logged.clear();
    setLogSink(&takeLine, LogLevel::Warn);
    ASSERT_TRUE(ranks.world.run([&](hocclComm_t comm, int rank) {
      Buffers b(fake.get(), c, n, rank, rank);
      ASSERT_EQ(callApi(c, b.devIn(), b.devOut(), comm, streams[rank]), hocclSuccess) << hocclGetLastError(comm);
      ASSERT_EQ(callApi(c, b.host.in(), b.host.out(), comm, nullptr), hocclSuccess);
      ASSERT_TRUE(fake->sync(streams[rank]));
      hocclResult_t async = hocclInternalError;
      ASSERT_EQ(hocclCommGetAsyncError(comm, &async), hocclSuccess);
      EXPECT_EQ(async, hocclSuccess) << hocclGetLastError(comm);
      EXPECT_TRUE(b.same()) << "rank " << rank << (refuse ? ", staged" : "");
      int device = -1;
      EXPECT_EQ(hocclCommCuDevice(comm, &device), hocclSuccess);
      EXPECT_EQ(device, rank);
    }));
    setLogSink(nullptr, LogLevel::None);
    std::vector<std::string> staged;
    for (const std::string& w : linesAt(LogLevel::Warn))
      if (w.find("stage through host memory") != std::string::npos) staged.push_back(w);
    if (refuse) {
      ASSERT_EQ(staged.size(), size_t(mode)) << "one warning per rank that cannot write";
      if (staged[0].find("rank 1 (GPU") == std::string::npos) std::swap(staged[0], staged.back());  // rank 1's first
      EXPECT_NE(staged[0].find("rank 1"), std::string::npos) << staged[0];
      EXPECT_NE(staged[0].find("rank 0's GPU"), std::string::npos) << staged[0];
      EXPECT_NE(staged[0].find("has no peer access to GPU 0"), std::string::npos) << staged[0];
      if (mode == 2) {
        EXPECT_NE(staged[1].find("rank 0 (GPU Fake GPU 0 (host threads)) cannot write into rank 1's GPU (Fake GPU 1 "
                                 "(host threads)): the peer-access self-test from GPU 0 to GPU 1 failed: of 16384 "
                                 "words"), std::string::npos) << staged[1];
      }
    } else {
      EXPECT_TRUE(staged.empty()) << staged[0];
    }
    hostBlocks[mode] = fake->hostLive();
    EXPECT_EQ(fake->lastFlags(), 0u) << "two GPUs: system scope";
    const int enables = fake->peerEnables() - enablesBefore;
    EXPECT_EQ(enables, refuse ? 1 : 2) << "each rank enables the other's GPU where the driver allows";
  }
  fake->corruptDeviceCopies(false);
  // Each rank's control block either way; with the refusal, rank 0's
  // receiving end of rank 1's edge (rank 1 cannot write into GPU 0) too;
  // with the failed test, rank 1's end of rank 0's edge as well.
  EXPECT_GT(hostBlocks[1], hostBlocks[0]) << "no connection was staged through host memory";
  EXPECT_GT(hostBlocks[2], hostBlocks[1]) << "the pair whose self-test failed was not staged";
}

// HOCCL_P2P_DISABLE=1 stages every connection between ranks through host
// memory, even on one GPU: ranks as threads and as processes (a memfd
// registered in both, fake_cuda.h; a test of its own, since a process
// with threads running may not fork under TSan) still match the host bit
// for bit, and counters are of system scope.
const Case kStagedCases[] = {{CollKind::AllReduce, DType::Float32, RedOp::Sum, 100003, false, 0},
                             {CollKind::ReduceScatter, DType::Bfloat16, RedOp::Sum, 257, false, 0},
                             {CollKind::AllGather, DType::Int32, RedOp::Sum, 1000, true, 0},
                             {CollKind::Broadcast, DType::Uint8, RedOp::Sum, 1000, false, 1}};

TEST_F(CudaDeviceTest, WithP2PDisabledEveryConnectionStagesAndResultsMatch) {
  setenv("HOCCL_P2P_DISABLE", "1", 1);
  reloadSettingsForTesting();
  const int n = 3;
  const int before = fake->hostLive();
  {
    RanksWithStreams ranks(fake.get(), n);
    ASSERT_EQ(ranks.world.initError(), "");
    for (const Case& c : kStagedCases)
      ASSERT_TRUE(ranks.world.run([&](hocclComm_t comm, int rank) {
        runAndCompare(fake.get(), c, comm, rank, n, ranks.streams[rank]);
      }));
    EXPECT_EQ(fake->lastFlags(), 0u) << "host memory between ranks: system scope";
    EXPECT_GT(fake->hostLive(), before + n) << "more than the control blocks: connections in host memory";
  }
  unsetenv("HOCCL_P2P_DISABLE");
  reloadSettingsForTesting();
}

TEST_F(CudaDeviceTest, WithP2PDisabledProcessesStageThroughSharedHostMemory) {
  setenv("HOCCL_P2P_DISABLE", "1", 1);
  reloadSettingsForTesting();
  testutil::Options o = testutil::inProcesses(3);
  std::string error;
  EXPECT_TRUE(testutil::spawn(o, [&](hocclComm_t comm, int rank) {
    void* stream = fake->createStream();
    for (const Case& c : kStagedCases) runAndCompare(fake.get(), c, comm, rank, o.ranks, stream);
    EXPECT_EQ(fake->vmmLive(), 0) << "rank " << rank << ": VMM was used although every pair is staged";
    EXPECT_GT(fake->hostLive(), 1) << "rank " << rank << ": nothing registered";
  }, &error)) << error;
  unsetenv("HOCCL_P2P_DISABLE");
  reloadSettingsForTesting();
}

// An executor keeps at most kMaxDevicePlans plans (here 3): calls of many
// sizes free the least recently launched plan's device memory, and a size
// whose plan was freed is set up again on every rank at the same call.
// Results match the host throughout; live device memory stays bounded.
TEST_F(CudaDeviceTest, PlansBeyondTheCapAreFreedAndSetUpAgainWhenCalled) {
  const int n = 2;
  const std::vector<uint64_t> counts = {100, 200, 300, 400, 500, 600, 100, 700, 200};
  auto liveAfter = [&](size_t cap) {
    cuda::setPlanCapForTesting(cap);
    RanksWithStreams ranks(fake.get(), n);
    EXPECT_EQ(ranks.world.initError(), "");
    const int before = fake->deviceLive();
    for (uint64_t count : counts) {
      const Case c{CollKind::AllReduce, DType::Float32, RedOp::Sum, count, false, 0};
      EXPECT_TRUE(ranks.world.run([&](hocclComm_t comm, int rank) {
        runAndCompare(fake.get(), c, comm, rank, n, ranks.streams[rank]);
      })) << count;
    }
    cuda::setPlanCapForTesting(0);
    return fake->deviceLive() - before;
  };
  const int capped = liveAfter(3), uncapped = liveAfter(0);
  // 7 sizes, each a plan of 3 blocks per rank (image, connection table,
  // counters; a ring all-reduce has no scratch): 3 plans kept against 7,
  // on each of the 2 ranks. The connections are the same either way.
  EXPECT_EQ(uncapped - capped, 2 * 3 * 4) << "capped " << capped << " blocks live, uncapped " << uncapped;
  EXPECT_GT(capped, 2 * 3 * 3);

  // A plan launched into a CUDA graph is kept whatever the cap: the graph
  // may replay it at any time. Cap 1: the captured plan and the latest.
  cuda::setPlanCapForTesting(1);
  RanksWithStreams ranks(fake.get(), n);
  ASSERT_EQ(ranks.world.initError(), "");
  const int before = fake->deviceLive();
  const Case captured{CollKind::AllReduce, DType::Float32, RedOp::Sum, 5000, false, 0};
  ASSERT_TRUE(ranks.world.run([&](hocclComm_t comm, int rank) {
    Buffers b(fake.get(), captured, n, rank);
    fake->setCapture(ranks.streams[rank], cuda::kCaptureStatusActive);
    ASSERT_EQ(callApi(captured, b.devIn(), b.devOut(), comm, ranks.streams[rank]), hocclSuccess);
    fake->setCapture(ranks.streams[rank], cuda::kCaptureStatusNone);
    ASSERT_TRUE(fake->sync(ranks.streams[rank]));
  }));
  const int onePlan = fake->deviceLive() - before;
  for (uint64_t count : {6000, 7000, 8000}) {
    const Case c{CollKind::AllReduce, DType::Float32, RedOp::Sum, count, false, 0};
    ASSERT_TRUE(ranks.world.run([&](hocclComm_t comm, int rank) {
      runAndCompare(fake.get(), c, comm, rank, n, ranks.streams[rank]);
    }));
  }
  EXPECT_EQ(fake->deviceLive() - before, onePlan + 2 * 3) << "the captured plan and the latest, on each rank";
  cuda::setPlanCapForTesting(0);
}

// Without the test hook, device calls take the device rule's algorithm
// (doubling for a small all-reduce, the ring for a small reduce-scatter,
// where the host model picks oneshot for both on one node: test_tune.cc):
// rank 0 logs the pick, and whole-number results equal the host's (any
// order of sums).
TEST_F(CudaDeviceTest, DeviceCallsTakeTheDeviceRulesAlgorithm) {
  tune::Tuner::hostChoicesOnDeviceForTesting(false);
  const int n = 4;
  RanksWithStreams ranks(fake.get(), n);
  ASSERT_EQ(ranks.world.initError(), "");
  logged.clear();
  setLogSink(&takeLine, LogLevel::Info);
  const Case cases[] = {{CollKind::AllReduce, DType::Int32, RedOp::Sum, 1000, false, 0},
                        {CollKind::ReduceScatter, DType::Int32, RedOp::Sum, 16, false, 0}};
  for (const Case& c : cases)
    EXPECT_TRUE(ranks.world.run([&](hocclComm_t comm, int rank) {
      runAndCompare(fake.get(), c, comm, rank, n, ranks.streams[rank]);
    }));
  setLogSink(nullptr, LogLevel::None);
  const std::vector<std::string> infos = linesAt(LogLevel::Info);
  auto said = [&](const std::string& what) {
    for (const std::string& m : infos)
      if (m.find(what) != std::string::npos) return true;
    return false;
  };
  EXPECT_TRUE(said("AllReduce of 4000 bytes: doubling")) << "no device pick logged for the all-reduce";
  EXPECT_TRUE(said("(device rule: doubling up to 256 KiB)"));
  EXPECT_TRUE(said("ReduceScatter of 256 bytes: ring")) << "no device pick logged for the reduce-scatter";
}

// Ranks in different processes of this host: connection memory is a VMM
// allocation of the receiver, exported as an fd to the sender, which the
// fake makes a memfd both processes map (fake_cuda_vmm.h).
// With HOCCL_DEVICE_IPC=legacy the same goes through cuIpc handles over
// the bootstrap instead (fake_cuda_ipc.h): no VMM memory is made.
TEST_F(CudaDeviceTest, RanksInSeparateProcessesMatchTheHostBitForBit) {
  for (const auto& [nranks, legacy] : {std::pair{2, false}, {3, false}, {2, true}, {3, true}}) {
    SCOPED_TRACE(legacy ? "legacy IPC" : "VMM");
    setenv("HOCCL_DEVICE_IPC", legacy ? "legacy" : "auto", 1);
    reloadSettingsForTesting();
    testutil::Options o = testutil::inProcesses(nranks);
    std::string error;
    EXPECT_TRUE(testutil::spawn(o, [&](hocclComm_t comm, int rank) {
      void* stream = fake->createStream();
      const Case cases[] = {{CollKind::AllReduce, DType::Float32, RedOp::Sum, 100003, false, 0},
                            {CollKind::AllReduce, DType::Int32, RedOp::Max, 1000, true, 0},
                            {CollKind::ReduceScatter, DType::Bfloat16, RedOp::Sum, 257, false, 0},
                            {CollKind::AllGather, DType::Float64, RedOp::Sum, 37, false, 0},
                            {CollKind::Broadcast, DType::Uint8, RedOp::Sum, 1000, false, 1}};
      for (const Case& c : cases) runAndCompare(fake.get(), c, comm, rank, nranks, stream);
      if (legacy) {
        EXPECT_EQ(fake->vmmLive(), 0) << "rank " << rank;
        EXPECT_GT(fakecuda::ipc::openLive(), 0) << "rank " << rank << " opened no handle";
      }
    }, &error)) << nranks << " ranks: " << error;
  }
  unsetenv("HOCCL_DEVICE_IPC");
  reloadSettingsForTesting();
}

// Ranks in different processes on different GPUs, each process seeing
// both GPUs or, as under CUDA_VISIBLE_DEVICES=rank, only its own. Before a
// rank writes into the other's GPU it maps a buffer of that GPU and copies
// 64 KiB into it and back (HOCCL_P2P_CHECK). Where that passes the pair
// connects by VMM, whether the process sees the GPU or not: no warning, no
// host memory staged. Where rank 1's copies come back damaged, only rank
// 1's connections into rank 0 stage, with one warning naming the test;
// the same where rank 1 cannot map memory of rank 0's GPU at all, and
// with legacy IPC handles. With HOCCL_P2P_CHECK=0 a GPU the process does
// not see is reached directly if NVML (which sees every GPU) says P2P
// works, and staged both ways, each naming why, if NVML says no or there
// is no NVML. Results match the host bit for bit every time.
TEST_F(CudaDeviceTest, ProcessesOnTwoGpusTestThePathBeforeWritingDirectly) {
  struct Mode {
    bool ownGpuOnly, rank1Corrupts, rank1CannotMap, check, legacy;
    int nvml;  // 0: none; 1: a fake NVML that says P2P works; 2: one that says no
    int warnings[2];  // per rank
    const char* reason;
  };
  const char* damaged = "the peer-path self-test into its GPU memory failed: of 16384 words";
  const char* unmappable = "its GPU memory could not be mapped here: cuMemImportFromShareableHandle";
  const Mode modes[] = {
      {false, false, false, true, false, 0, {0, 0}, ""},
      {true, false, false, true, false, 0, {0, 0}, ""},
      {true, true, false, true, false, 0, {0, 1}, damaged},
      {true, false, true, true, false, 0, {0, 1}, unmappable},
      {true, true, false, true, true, 0, {0, 1}, damaged},
      {true, false, false, false, false, 0, {1, 1}, "is not visible to this process (CUDA_VISIBLE_DEVICES?), and NVML "
                                                    "could not say whether it is reachable (no NVML"},
      {true, false, false, false, false, 1, {0, 0}, ""},
      {true, false, false, false, false, 2, {1, 1}, "NVML says NVML_P2P_STATUS_IOH_TOPOLOGY_NOT_SUPPORTED"}};
  for (const Mode& m : modes) {
    SCOPED_TRACE(std::string(m.ownGpuOnly ? "own GPU only" : "both GPUs") + (m.rank1Corrupts ? ", rank 1 corrupts" : "") +
                 (m.rank1CannotMap ? ", rank 1 cannot map" : "") + (m.check ? "" : ", HOCCL_P2P_CHECK=0") +
                 (m.legacy ? ", legacy IPC" : "") + (m.nvml ? m.nvml == 1 ? ", NVML yes" : ", NVML no" : ""));
    setenv("HOCCL_P2P_CHECK", m.check ? "1" : "0", 1);
    setenv("HOCCL_DEVICE_IPC", m.legacy ? "legacy" : "auto", 1);
    reloadSettingsForTesting();
    testutil::Options o = testutil::inProcesses(2);
    std::string error;
    EXPECT_TRUE(testutil::spawn(o, [&](hocclComm_t comm, int rank) {
      fake->setDevices(m.ownGpuOnly ? 1 : 2);
      if (m.ownGpuOnly) fake->setFirstDevice(rank);
      fake->corruptDeviceCopies(m.rank1Corrupts && rank == 1);
      fakecuda::vmm::refuseImports(m.rank1CannotMap && rank == 1);
      if (m.nvml) fakenvml::install({"Fake GPU 0 (host threads)", "Fake GPU 1 (host threads)"});
      if (m.nvml == 2) fakenvml::state().p2p = {{{0, 1}, 3}, {{1, 0}, 3}};  // IOH topology not supported
      const int gpu = m.ownGpuOnly ? 0 : rank;
      void* stream = fake->createStream();
      logged.clear();
      setLogSink(&takeLine, LogLevel::Warn);
      for (const Case& c : kStagedCases) runAndCompare(fake.get(), c, comm, rank, o.ranks, stream, gpu);
      setLogSink(nullptr, LogLevel::None);
      std::vector<std::string> staged;
      for (const std::string& w : linesAt(LogLevel::Warn))
        if (w.find("stage through host memory") != std::string::npos) staged.push_back(w);
      ASSERT_EQ(int(staged.size()), m.warnings[rank]) << "rank " << rank << (staged.empty() ? "" : ": " + staged[0]);
      if (!staged.empty()) {
        EXPECT_NE(staged[0].find(std::string("rank ") + std::to_string(rank) + " (GPU Fake GPU " +
                                 std::to_string(rank)), std::string::npos) << staged[0];
        EXPECT_NE(staged[0].find(m.reason), std::string::npos) << staged[0];
      }
      const bool stagedHere = m.warnings[0] + m.warnings[1] > 0;  // either end of a staged pair registers it
      if (stagedHere) {
        EXPECT_GT(fake->hostLive(), 1) << "rank " << rank << ": no connection staged";
      } else {
        EXPECT_EQ(fake->hostLive(), 1) << "rank " << rank << ": host memory besides the control block";
      }
      if (m.legacy) {  // opened by the rank that writes directly
        EXPECT_TRUE(m.warnings[rank] > 0 || fakecuda::ipc::openLive() > 0) << "rank " << rank << ": none opened";
      } else if (!(m.warnings[0] && m.warnings[1])) {
        EXPECT_GT(fake->vmmLive(), 0) << "rank " << rank << ": no connection by VMM";
      }
    }, &error)) << error;
  }
  unsetenv("HOCCL_P2P_CHECK");
  unsetenv("HOCCL_DEVICE_IPC");
  reloadSettingsForTesting();
}

// A rank that exits instead of making its call: the other's call fails
// naming it, long before its timeout would end a hang. (A peer that exits
// in the middle of the fd exchange itself: test_cuda_vmm.cc.)
TEST_F(CudaDeviceTest, APeerProcessThatExitsBeforeItsCallIsNamed) {
  testutil::Options o = testutil::inProcesses(2);
  std::string error;
  testutil::spawn(o, [&](hocclComm_t comm, int rank) {
    if (rank == 1) _exit(0);
    void* d = fake->alloc(4096);
    const double t0 = nowSec();
    EXPECT_NE(hocclAllReduce(d, d, 1000, hocclFloat32, hocclSum, comm, fake->createStream()), hocclSuccess);
    hocclResult_t async = hocclSuccess;
    hocclCommGetAsyncError(comm, &async);
    const std::string msg = hocclGetLastError(comm);
    EXPECT_NE(msg.find("rank 1"), std::string::npos) << msg;
    EXPECT_LT(nowSec() - t0, 30.0) << msg;
  }, &error);
}

}  // namespace
}  // namespace hoccl
