// The device path through the public API, run on the host by a fake
// libcuda (support/fake_cuda.h): device memory is host memory the fake
// calls device memory, streams are worker threads, a launch runs the
// host-compiled interpreter. Ranks are threads of this process, or
// processes of this host (their connection memory shared by fd, which the
// fake makes a memfd both map).
//
// Collectives on fake device buffers give bit for bit what the same calls
// give on host buffers, ranks as threads or processes; a call returns while
// its stream is held; a group orders its launches across two streams;
// errors are the API's (mixed buffers, no kernel, point-to-point, ranks on
// other hosts, a driver missing an entry point, a peer process that exits);
// a rank that never calls is ended by an abort or by HOCCL_TIMEOUT, and hocclCommGetAsyncError says which channel, step and
// peer. With the real driver (no GPU here) host calls run as before.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "hoccl.h"
#include "src/base/clock.h"
#include "src/base/config.h"
#include "src/base/cuda_driver.h"
#include "src/base/log.h"
#include "src/exec/dataops.h"
#include "src/exec/cuda/device_api.h"
#include "src/exec/cuda/device_executor.h"
#include "src/exec/cuda/interp.h"
#include "src/tune/tuner.h"
#include "tests/support/fake_cuda.h"
#include "tests/support/fake_cuda_ipc.h"
#include "tests/support/harness.h"
#include "tests/support/rank_buffers.h"

namespace hoccl {
namespace {

using fakecuda::FakeCuda;
using test_shapes::RankBuffers;

// One call: what each rank passes.
struct Case {
  CollKind coll = CollKind::AllReduce;
  DType dtype = DType::Float32;
  RedOp op = RedOp::Sum;
  uint64_t count = 0;
  bool inPlace = false;
  int root = 0;
};

std::string describe(const Case& c) {
  return std::string(collName(c.coll)) + " " + dtypeName(c.dtype) + " " + redOpName(c.op) + " count " +
         std::to_string(c.count) + (c.inPlace ? " in place" : "") + " root " + std::to_string(c.root);
}

ScheduleKey keyOf(const Case& c, int nranks, int rank) {
  ScheduleKey k;
  k.coll = c.coll;
  k.nranks = nranks;
  k.rank = rank;
  k.count = c.count;
  k.root = c.root;
  k.inPlace = c.inPlace && c.count > 0;
  return k;
}

// Small values every type holds exactly, different per rank and element.
void fill(DType t, int rank, void* p, uint64_t n) {
  for (uint64_t i = 0; i < n; ++i) {
    const int v = int((i * 13 + uint64_t(rank) * 7) % 11) - 5 + (t == DType::Uint8 || t == DType::Uint32 ? 5 : 0);
    switch (t) {
      case DType::Int8: static_cast<int8_t*>(p)[i] = int8_t(v); break;
      case DType::Uint8: static_cast<uint8_t*>(p)[i] = uint8_t(v); break;
      case DType::Int32: static_cast<int32_t*>(p)[i] = v; break;
      case DType::Uint32: static_cast<uint32_t*>(p)[i] = uint32_t(v); break;
      case DType::Int64: static_cast<int64_t*>(p)[i] = v; break;
      case DType::Uint64: static_cast<uint64_t*>(p)[i] = uint64_t(v); break;
      case DType::Float16: static_cast<uint16_t*>(p)[i] = floatToHalf(float(v) * 0.75f); break;
      case DType::Bfloat16: static_cast<uint16_t*>(p)[i] = floatToBf16(float(v) * 0.75f); break;
      case DType::Float32: static_cast<float*>(p)[i] = float(v) * 0.3f; break;
      case DType::Float64: static_cast<double*>(p)[i] = double(v) * 0.3; break;
      default: break;
    }
  }
}

// The C API call for `c` on this rank's buffers.
hocclResult_t callApi(const Case& c, const void* in, void* out, hocclComm_t comm, hocclStream_t stream) {
  const auto t = static_cast<hocclDataType_t>(c.dtype);
  const auto op = static_cast<hocclRedOp_t>(c.op);
  switch (c.coll) {
    case CollKind::AllReduce: return hocclAllReduce(in, out, c.count, t, op, comm, stream);
    case CollKind::ReduceScatter: return hocclReduceScatter(in, out, c.count, t, op, comm, stream);
    case CollKind::AllGather: return hocclAllGather(in, out, c.count, t, comm, stream);
    case CollKind::Broadcast: return hocclBroadcast(in, out, c.count, t, c.root, comm, stream);
    case CollKind::Reduce: return hocclReduce(in, out, c.count, t, op, c.root, comm, stream);
    default: return hocclInvalidArgument;
  }
}

// One rank's buffers on the host and on the fake device, filled alike.
struct Buffers {
  RankBuffers host;
  void* device = nullptr;
  FakeCuda* fake = nullptr;
  // On GPU `device` of the fake (0: the default one).
  Buffers(FakeCuda* f, const Case& c, int nranks, int rank, int gpu = 0) : fake(f) {
    const ScheduleKey k = keyOf(c, nranks, rank);
    host = test_shapes::layOutRanks(k, dtypeSize(c.dtype))[rank];
    std::memset(host.mem.data(), 0x5c, host.mem.size());
    fill(c.dtype, rank, host.mem.data() + host.inOff, inputCount(k));
    device = gpu ? fake->allocOn(gpu, host.mem.size()) : fake->alloc(host.mem.size());
    std::memcpy(device, host.mem.data(), host.mem.size());
  }
  ~Buffers() { fake->free(device); }
  const void* devIn() const { return static_cast<const char*>(device) + host.inOff; }
  void* devOut() { return static_cast<char*>(device) + host.outOff; }
  bool same() const { return std::memcmp(device, host.mem.data(), host.mem.size()) == 0; }
};

// Runs `c` on device buffers (queued on `stream`) and on host buffers,
// then compares every byte.
void runAndCompare(FakeCuda* fake, const Case& c, hocclComm_t comm, int rank, int nranks, void* stream) {
  Buffers b(fake, c, nranks, rank);
  ASSERT_EQ(callApi(c, b.devIn(), b.devOut(), comm, stream), hocclSuccess)
      << describe(c) << ": " << hocclGetLastError(comm);
  ASSERT_EQ(callApi(c, b.host.in(), b.host.out(), comm, nullptr), hocclSuccess)
      << describe(c) << ": " << hocclGetLastError(comm);
  ASSERT_TRUE(fake->sync(stream)) << describe(c) << ": the stream did not finish";
  hocclResult_t async = hocclInternalError;
  ASSERT_EQ(hocclCommGetAsyncError(comm, &async), hocclSuccess);
  ASSERT_EQ(async, hocclSuccess) << describe(c) << ": " << hocclGetLastError(comm);
  EXPECT_TRUE(b.same()) << describe(c) << " rank " << rank << ": device and host results differ";
}

// Communicators of `n` ranks as threads, made by hocclCommInitRank.
std::vector<hocclComm_t> initComms(int n) {
  hocclUniqueId id;
  EXPECT_EQ(hocclGetUniqueId(&id), hocclSuccess);
  std::vector<hocclComm_t> comms(n, nullptr);
  std::vector<std::thread> ts;
  for (int r = 0; r < n; ++r)
    ts.emplace_back([&, r] { EXPECT_EQ(hocclCommInitRank(&comms[r], n, id, r), hocclSuccess); });
  for (auto& t : ts) t.join();
  return comms;
}

void onEveryRank(int n, const std::function<void(int)>& body) {
  std::vector<std::thread> ts;
  for (int r = 0; r < n; ++r) ts.emplace_back(body, r);
  for (auto& t : ts) t.join();
}

// Polls hocclCommGetAsyncError until it is not hocclSuccess (up to 20 s).
hocclResult_t awaitAsyncError(hocclComm_t comm) {
  hocclResult_t async = hocclSuccess;
  for (int i = 0; i < 2000 && async == hocclSuccess; ++i) {
    if (hocclCommGetAsyncError(comm, &async) != hocclSuccess) return hocclInternalError;
    if (async == hocclSuccess) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return async;
}

// Device calls run the schedule the host would pick for the same call (not
// the device rule of Tuner::chooseForDevice, test_tune.cc), so that results
// compare bit for bit with the host's even where sums are not exact.
class CudaDeviceTest : public ::testing::Test {
 protected:
  CudaDeviceTest() { tune::Tuner::hostChoicesOnDeviceForTesting(true); }
  ~CudaDeviceTest() override { tune::Tuner::hostChoicesOnDeviceForTesting(false); }
  std::unique_ptr<FakeCuda> fake = std::make_unique<FakeCuda>();
};

// n ranks as threads, each with a stream of its own on the fake; a rank
// left waiting fails after 60 s instead of hanging.
struct RanksWithStreams {
  testutil::World world;
  std::vector<void*> streams;
  RanksWithStreams(FakeCuda* fake, int n) : world(options(n)) {
    for (int r = 0; r < n; ++r) streams.push_back(fake->createStream());
  }
  static testutil::Options options(int n) {
    testutil::Options o;
    o.ranks = n;
    o.timeoutSec = 60;
    return o;
  }
};

TEST_F(CudaDeviceTest, CollectivesMatchTheHostBitForBit) {
  const CollKind colls[] = {CollKind::AllReduce, CollKind::ReduceScatter, CollKind::AllGather, CollKind::Broadcast,
                            CollKind::Reduce};
  const DType types[] = {DType::Float32, DType::Int32, DType::Float16, DType::Bfloat16, DType::Float64,
                         DType::Uint8, DType::Int64};
  const RedOp ops[] = {RedOp::Sum, RedOp::Max, RedOp::Prod, RedOp::Min, RedOp::Avg};
  const uint64_t counts[] = {0, 1, 37, 1000, 100003};
  for (int nranks : {2, 3, 4}) {
    std::vector<Case> cases;
    int i = 0;
    for (CollKind coll : colls)
      for (uint64_t count : counts)
        for (bool inPlace : {false, true}) {
          Case c{coll, types[i % 7], ops[i % 5], count, inPlace, i % nranks};
          if (count == 100003) c.dtype = DType::Float32;
          cases.push_back(c);
          ++i;
        }
    // Every type and op once, on all-reduce.
    for (DType t : types)
      for (RedOp op : ops) cases.push_back(Case{CollKind::AllReduce, t, op, 257, (int(t) + int(op)) % 2 == 0, 0});
    testutil::Options o;
    o.ranks = nranks;
    testutil::World world(o);
    ASSERT_EQ(world.initError(), "");
    std::vector<void*> streams;
    for (int r = 0; r < nranks; ++r) streams.push_back(fake->createStream());
    ASSERT_TRUE(world.run([&](hocclComm_t comm, int rank) {
      for (const Case& c : cases) runAndCompare(fake.get(), c, comm, rank, nranks, streams[rank]);
      int device = -2;
      EXPECT_EQ(hocclCommCuDevice(comm, &device), hocclSuccess);
      EXPECT_EQ(device, 0);
    }));
  }
  // One module per communicator: 2 + 3 + 4.
  EXPECT_EQ(fake->moduleLoads(), 9);
  // Every rank on the one GPU: its counters need only GPU scope.
  EXPECT_EQ(fake->lastFlags(), cuda::kArgOneGpu);
}

// A channel is a CTA on the device: calls take more of them as they grow,
// never more than half the GPU's multiprocessors divided among the ranks on it,
// HOCCL_DEVICE_CHANNELS fixes the number within that cap, the config's
// minCTAs and maxCTAs bound it, and a GPU with
// fewer multiprocessors than ranks is refused by name. Each size's results
// still equal the host path's bit for bit.
TEST_F(CudaDeviceTest, ChannelsGrowWithSizeWithinTheGpusMultiprocessors) {
  const int n = 2;
  fake->setMultiprocessors(20);  // 5 per rank and call, two calls on the GPU at once
  int minCTAs = 0, maxCTAs = 0;  // hocclConfig_t's (0: unset)
  auto gridsFor = [&](const std::vector<uint64_t>& counts) {
    std::vector<int> grids;
    testutil::Options o;
    o.ranks = n;
    o.minCTAs = minCTAs;
    o.maxCTAs = maxCTAs;
    testutil::World world(o);
    EXPECT_EQ(world.initError(), "");
    std::vector<void*> streams;
    for (int r = 0; r < n; ++r) streams.push_back(fake->createStream());
    for (uint64_t count : counts) {
      const Case c{CollKind::AllReduce, DType::Float32, RedOp::Sum, count, false, 0};
      EXPECT_TRUE(world.run([&](hocclComm_t comm, int rank) { runAndCompare(fake.get(), c, comm, rank, n, streams[rank]); }));
      grids.push_back(fake->lastGrid());
    }
    return grids;
  };
  // 2 ranks: a channel per 2 x 128 KiB ring chunks (kChannelChunk), at most 5.
  EXPECT_EQ(gridsFor({1000, 100000, 1 << 20}), (std::vector<int>{1, 2, 5}));
  setenv("HOCCL_DEVICE_CHANNELS", "3", 1);
  reloadSettingsForTesting();
  EXPECT_EQ(gridsFor({100000, 1 << 20}), (std::vector<int>{3, 3}));  // (small ones: an algorithm of one channel)
  setenv("HOCCL_DEVICE_CHANNELS", "9", 1);  // above the cap: the cap
  reloadSettingsForTesting();
  EXPECT_EQ(gridsFor({1 << 20}), (std::vector<int>{5}));
  unsetenv("HOCCL_DEVICE_CHANNELS");
  reloadSettingsForTesting();
  // The config's CTA bounds: maxCTAs caps a large call, minCTAs raises a
  // small ring call (oneshot and doubling stay one channel).
  maxCTAs = 2;
  EXPECT_EQ(gridsFor({1 << 20}), (std::vector<int>{2}));
  maxCTAs = 0;
  minCTAs = 4;
  EXPECT_EQ(gridsFor({100000, 1 << 20}), (std::vector<int>{4, 5}));
  minCTAs = 0;

  fake->setMultiprocessors(3);
  testutil::Options o;
  o.ranks = n;
  testutil::World world(o);
  ASSERT_EQ(world.initError(), "");
  std::vector<void*> streams;
  for (int r = 0; r < n; ++r) streams.push_back(fake->createStream());
  ASSERT_TRUE(world.run([&](hocclComm_t comm, int rank) {
    Buffers b(fake.get(), Case{CollKind::AllReduce, DType::Float32, RedOp::Sum, 64, false, 0}, n, rank);
    EXPECT_EQ(hocclAllReduce(b.devIn(), b.devOut(), 64, hocclFloat32, hocclSum, comm, streams[rank]),
              hocclInvalidUsage);
    EXPECT_NE(std::string(hocclGetLastError(comm)).find("fewer multiprocessors than twice the ranks"), std::string::npos)
        << hocclGetLastError(comm);
  }));
}

// Ranks whose channel bounds differ would build different schedules: the
// first device call refuses on every rank, naming both settings.
TEST_F(CudaDeviceTest, ChannelBoundsThatDifferAcrossRanksAreRefused) {
  const int n = 2;
  hocclUniqueId id;
  ASSERT_EQ(hocclGetUniqueId(&id), hocclSuccess);
  std::vector<void*> streams;
  for (int r = 0; r < n; ++r) streams.push_back(fake->createStream());
  onEveryRank(n, [&](int rank) {
    hocclConfig_t config = HOCCL_CONFIG_INITIALIZER;
    config.timeoutSec = 60;
    if (rank == 1) config.maxCTAs = 2;
    hocclComm_t comm = nullptr;
    ASSERT_EQ(hocclCommInitRankConfig(&comm, n, id, rank, &config), hocclSuccess);
    Buffers b(fake.get(), Case{CollKind::AllReduce, DType::Float32, RedOp::Sum, 1000, false, 0}, n, rank);
    EXPECT_EQ(hocclAllReduce(b.devIn(), b.devOut(), 1000, hocclFloat32, hocclSum, comm, streams[rank]),
              hocclInvalidUsage);
    const std::string msg = hocclGetLastError(comm);
    EXPECT_NE(msg.find("0 / 0 / 2"), std::string::npos) << msg;
    EXPECT_NE(msg.find("0 / 0 / 0"), std::string::npos) << msg;
    EXPECT_NE(msg.find("must be the same on every rank"), std::string::npos) << msg;
    hocclCommDestroy(comm);
  });
}

// What hoccl logs while a test runs (setLogSink), by level.
std::mutex loggedMu;
std::vector<std::pair<LogLevel, std::string>> logged;
void takeLine(LogLevel level, uint32_t, const char*, int, const char* msg) {
  std::lock_guard<std::mutex> l(loggedMu);
  logged.emplace_back(level, msg);
}
std::vector<std::string> linesAt(LogLevel level) {
  std::lock_guard<std::mutex> l(loggedMu);
  std::vector<std::string> out;
  for (const auto& [at, msg] : logged)
    if (at == level) out.push_back(msg);
  return out;
}

// Ranks of one process on different GPUs: each enables peer access to the
// other's GPU before connecting, and results still match the host. Where
// the driver refuses peer access for a pair, the pair's connections stage
// through mapped host memory instead (more of it is live), counters are
// of system scope, and results still match.
TEST_F(CudaDeviceTest, RanksOnTwoGpusOfOneProcessUsePeerAccessOrStage) {
  fake->setDevices(2);
  const int n = 2;
  const Case c{CollKind::AllReduce, DType::Float32, RedOp::Sum, 5000, false, 0};
  int hostBlocks[2] = {0, 0};
  for (bool refuse : {false, true}) {
    if (refuse) fake->refusePeerAccess(1, 0);
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
      ASSERT_EQ(staged.size(), 1u) << "one warning, from the rank that cannot write";
      EXPECT_NE(staged[0].find("rank 1"), std::string::npos) << staged[0];
      EXPECT_NE(staged[0].find("rank 0's GPU"), std::string::npos) << staged[0];
      EXPECT_NE(staged[0].find("has no peer access to GPU 0"), std::string::npos) << staged[0];
    } else {
      EXPECT_TRUE(staged.empty()) << staged[0];
    }
    hostBlocks[refuse] = fake->hostLive();
    EXPECT_EQ(fake->lastFlags(), 0u) << "two GPUs: system scope";
    const int enables = fake->peerEnables() - enablesBefore;
    EXPECT_EQ(enables, refuse ? 1 : 2) << "each rank enables the other's GPU where the driver allows";
  }
  // Each rank's control block either way; with the refusal, rank 0's
  // receiving end of rank 1's edge (rank 1 cannot write into GPU 0) too.
  EXPECT_GT(hostBlocks[1], hostBlocks[0]) << "no connection was staged through host memory";
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
  testutil::Options o;
  o.ranks = 3;
  o.mode = testutil::Mode::Processes;
  o.timeoutSec = 60;
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

TEST_F(CudaDeviceTest, TheCallReturnsBeforeItsStreamRuns) {
  const int n = 3;
  testutil::Options o;
  o.ranks = n;
  testutil::World world(o);
  std::vector<void*> streams;
  for (int r = 0; r < n; ++r) streams.push_back(fake->createStream());
  const Case c{CollKind::AllReduce, DType::Float32, RedOp::Sum, 4096, false, 0};
  std::vector<std::unique_ptr<Buffers>> bufs;
  for (int r = 0; r < n; ++r) bufs.push_back(std::make_unique<Buffers>(fake.get(), c, n, r));
  const int launchesBefore = fake->launches();
  ASSERT_TRUE(world.run([&](hocclComm_t comm, int rank) {
    fake->hold(streams[rank]);
    Buffers& b = *bufs[rank];
    ASSERT_EQ(callApi(c, b.devIn(), b.devOut(), comm, streams[rank]), hocclSuccess) << hocclGetLastError(comm);
    EXPECT_TRUE(fake->busy(streams[rank]));
    EXPECT_TRUE(b.same()) << "the output changed before the stream ran";
  }));
  EXPECT_EQ(fake->launches() - launchesBefore, n);
  ASSERT_TRUE(world.run([&](hocclComm_t comm, int rank) {
    Buffers& b = *bufs[rank];
    ASSERT_EQ(callApi(c, b.host.in(), b.host.out(), comm, nullptr), hocclSuccess);
    EXPECT_FALSE(b.same());
    fake->release(streams[rank]);
    ASSERT_TRUE(fake->sync(streams[rank]));
    EXPECT_TRUE(b.same()) << "rank " << rank;
  }));
}

TEST_F(CudaDeviceTest, AGroupOnTwoStreamsRunsInCallOrder) {
  const int n = 2;
  testutil::Options o;
  o.ranks = n;
  testutil::World world(o);
  std::vector<void*> a, b;
  for (int r = 0; r < n; ++r) {
    a.push_back(fake->createStream());
    b.push_back(fake->createStream());
  }
  const Case first{CollKind::AllReduce, DType::Float32, RedOp::Sum, 3000, false, 0};
  const Case second{CollKind::AllGather, DType::Int32, RedOp::Sum, 777, true, 0};
  ASSERT_TRUE(world.run([&](hocclComm_t comm, int rank) {
    Buffers x(fake.get(), first, n, rank), y(fake.get(), second, n, rank);
    fake->hold(a[rank]);
    ASSERT_EQ(hocclGroupStart(), hocclSuccess);
    ASSERT_EQ(callApi(first, x.devIn(), x.devOut(), comm, a[rank]), hocclSuccess);
    ASSERT_EQ(callApi(second, y.devIn(), y.devOut(), comm, b[rank]), hocclSuccess);
    ASSERT_EQ(hocclGroupEnd(), hocclSuccess) << hocclGetLastError(comm);
    // The second launch waits for the first, held on the other stream.
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    EXPECT_TRUE(fake->busy(b[rank])) << "the launch on stream b did not wait for the one on stream a";
    EXPECT_TRUE(y.same());
    fake->release(a[rank]);
    ASSERT_EQ(callApi(first, x.host.in(), x.host.out(), comm, nullptr), hocclSuccess);
    ASSERT_EQ(callApi(second, y.host.in(), y.host.out(), comm, nullptr), hocclSuccess);
    ASSERT_TRUE(fake->sync(a[rank]) && fake->sync(b[rank]));
    EXPECT_TRUE(x.same()) << "rank " << rank;
    EXPECT_TRUE(y.same()) << "rank " << rank;
  }));
}

// A call captured into a CUDA graph (the fake runs captured work at once,
// as one replay would). Its first setup (allocations, the module load) runs
// while the stream is captured in the global mode without breaking the
// capture, and the event that orders the communicator's launches is waited
// on and recorded as external nodes, so that a launch outside the graph and
// the watchdog's poll afterwards can still use it.
TEST_F(CudaDeviceTest, ACallCapturedIntoAGraphKeepsTheCaptureRules) {
  const int n = 2;
  RanksWithStreams ranks(fake.get(), n);
  const std::vector<void*>& streams = ranks.streams;
  const Case c{CollKind::AllReduce, DType::Float32, RedOp::Sum, 5000, false, 0};
  ASSERT_TRUE(ranks.world.run([&](hocclComm_t comm, int rank) {
    for (int round = 0; round < 2; ++round) {  // the first sets the schedule up under capture
      Buffers b(fake.get(), c, n, rank);
      fake->setCapture(streams[rank], cuda::kCaptureStatusActive);
      ASSERT_EQ(callApi(c, b.devIn(), b.devOut(), comm, streams[rank]), hocclSuccess) << hocclGetLastError(comm);
      EXPECT_EQ(fake->captureStatus(streams[rank]), cuda::kCaptureStatusActive) << "the call broke the capture";
      fake->setCapture(streams[rank], cuda::kCaptureStatusNone);
      ASSERT_EQ(callApi(c, b.host.in(), b.host.out(), comm, nullptr), hocclSuccess);
      ASSERT_TRUE(fake->sync(streams[rank]));
      EXPECT_TRUE(b.same()) << "round " << round << " rank " << rank;
      runAndCompare(fake.get(), c, comm, rank, n, streams[rank]);  // outside the capture, after it
    }
  }));
}

TEST_F(CudaDeviceTest, ACallOnAStreamWhoseCaptureBrokeIsRefusedSayingSo) {
  const int n = 2;
  RanksWithStreams ranks(fake.get(), n);
  const std::vector<void*>& streams = ranks.streams;
  const Case c{CollKind::AllReduce, DType::Float32, RedOp::Sum, 100, false, 0};
  ASSERT_TRUE(ranks.world.run([&](hocclComm_t comm, int rank) {
    Buffers b(fake.get(), c, n, rank);
    fake->setCapture(streams[rank], cuda::kCaptureStatusInvalidated);
    EXPECT_EQ(callApi(c, b.devIn(), b.devOut(), comm, streams[rank]), hocclInvalidUsage);
    const std::string msg = hocclGetLastError(comm);
    EXPECT_NE(msg.find("capture into a CUDA graph was invalidated"), std::string::npos) << msg;
    fake->setCapture(streams[rank], cuda::kCaptureStatusNone);
  }));
}

// A watchdog thread polls hocclCommGetAsyncError (as PyTorch's does) while
// the ranks make their first device calls and more (run under TSan too).
TEST_F(CudaDeviceTest, AWatchdogMayPollWhileCallsRun) {
  const int n = 2;
  std::vector<hocclComm_t> comms = initComms(n);
  std::vector<void*> streams;
  for (int r = 0; r < n; ++r) streams.push_back(fake->createStream());
  std::atomic<bool> done{false};
  std::thread watchdog([&] {
    while (!done.load()) {
      for (hocclComm_t comm : comms) {
        hocclResult_t async = hocclInternalError;
        EXPECT_EQ(hocclCommGetAsyncError(comm, &async), hocclSuccess);
        EXPECT_EQ(async, hocclSuccess);
      }
      std::this_thread::yield();
    }
  });
  onEveryRank(n, [&](int r) {
    for (uint64_t count : {1000u, 20000u, 1000u, 77u})
      runAndCompare(fake.get(), Case{CollKind::AllReduce, DType::Float32, RedOp::Sum, count, false, 0}, comms[r], r,
                    n, streams[r]);
  });
  done = true;
  watchdog.join();
  for (hocclComm_t comm : comms) EXPECT_EQ(hocclCommDestroy(comm), hocclSuccess);
}

// One thread drives every rank in a group: each communicator's first call
// exchanges connection addresses with the others, so each is set up on a
// thread of its own.
TEST_F(CudaDeviceTest, OneThreadDrivesEveryRankInAGroup) {
  const int n = 3;
  std::vector<hocclComm_t> comms = initComms(n);
  std::vector<void*> streams;
  for (int r = 0; r < n; ++r) streams.push_back(fake->createStream());
  const Case c{CollKind::ReduceScatter, DType::Bfloat16, RedOp::Max, 5000, false, 0};
  std::vector<std::unique_ptr<Buffers>> bufs;
  for (int r = 0; r < n; ++r) bufs.push_back(std::make_unique<Buffers>(fake.get(), c, n, r));
  ASSERT_EQ(hocclGroupStart(), hocclSuccess);
  for (int r = 0; r < n; ++r)
    ASSERT_EQ(callApi(c, bufs[r]->devIn(), bufs[r]->devOut(), comms[r], streams[r]), hocclSuccess);
  ASSERT_EQ(hocclGroupEnd(), hocclSuccess) << hocclGetLastError(comms[0]);
  ASSERT_EQ(hocclGroupStart(), hocclSuccess);
  for (int r = 0; r < n; ++r)
    ASSERT_EQ(callApi(c, bufs[r]->host.in(), bufs[r]->host.out(), comms[r], nullptr), hocclSuccess);
  ASSERT_EQ(hocclGroupEnd(), hocclSuccess) << hocclGetLastError(comms[0]);
  for (int r = 0; r < n; ++r) {
    ASSERT_TRUE(fake->sync(streams[r]));
    EXPECT_TRUE(bufs[r]->same()) << "rank " << r;
  }
  for (hocclComm_t comm : comms) EXPECT_EQ(hocclCommDestroy(comm), hocclSuccess);
}

TEST_F(CudaDeviceTest, CallsTheDevicePathCannotRunAreRefused) {
  testutil::Options o;
  o.ranks = 2;
  testutil::World world(o);
  ASSERT_TRUE(world.run([&](hocclComm_t comm, int rank) {
    void* d = fake->alloc(4096);
    std::vector<char> h(4096);
    EXPECT_EQ(hocclAllReduce(d, h.data(), 16, hocclFloat32, hocclSum, comm, nullptr), hocclInvalidUsage);
    EXPECT_NE(std::string(hocclGetLastError(comm)).find("both must be one kind"), std::string::npos);
    EXPECT_EQ(hocclAllReduce(d, d, 16, hocclFloat8e4m3, hocclSum, comm, nullptr), hocclInvalidArgument);
    EXPECT_NE(std::string(hocclGetLastError(comm)).find("no device kernel for f8e4m3 sum"), std::string::npos)
        << hocclGetLastError(comm);
    hocclRedOp_t premul;
    float scalar = 2;
    ASSERT_EQ(hocclRedOpCreatePreMulSum(&premul, &scalar, hocclFloat32, hocclScalarHostImmediate, comm), hocclSuccess);
    EXPECT_EQ(hocclAllReduce(d, d, 16, hocclFloat32, premul, comm, nullptr), hocclInvalidArgument);
    EXPECT_NE(std::string(hocclGetLastError(comm)).find("PreMulSum"), std::string::npos) << hocclGetLastError(comm);
    EXPECT_EQ(hocclRedOpDestroy(premul, comm), hocclSuccess);
    EXPECT_EQ(hocclAlltoAll(d, static_cast<char*>(d) + 1024, 16, hocclFloat32, comm, nullptr), hocclInvalidUsage);
    EXPECT_NE(std::string(hocclGetLastError(comm)).find("point-to-point and all-to-all"), std::string::npos);
    EXPECT_EQ(hocclSend(d, 16, hocclFloat32, 1 - rank, comm, nullptr), hocclInvalidUsage);
    // None of them broke the communicator: a host call runs.
    std::vector<float> x(8, 1.0f);
    EXPECT_EQ(hocclAllReduce(x.data(), x.data(), 8, hocclFloat32, hocclSum, comm, nullptr), hocclSuccess);
    EXPECT_EQ(x[7], 2.0f);
    fake->free(d);
  }));
}

TEST_F(CudaDeviceTest, ADriverMissingAnEntryPointIsNamed) {
  fake.reset();
  fake = std::make_unique<FakeCuda>(std::set<std::string>{"cuLaunchKernel", "cuEventRecord"});
  testutil::Options o;
  o.ranks = 2;
  testutil::World world(o);
  ASSERT_TRUE(world.run([&](hocclComm_t comm, int) {
    void* d = fake->alloc(256);
    EXPECT_EQ(hocclAllReduce(d, d, 16, hocclFloat32, hocclSum, comm, nullptr), hocclSystemError);
    EXPECT_NE(std::string(hocclGetLastError(comm)).find("unusable driver: cuLaunchKernel, cuEventRecord missing"),
              std::string::npos)
        << hocclGetLastError(comm);
    fake->free(d);
  }));
}

// Every rank makes one call (connections set up), then ranks 0 and 1 make
// a second while rank 2 never does.
struct Stuck {
  FakeCuda* fake;
  std::vector<hocclComm_t> comms;
  std::vector<void*> streams;
  std::vector<std::unique_ptr<Buffers>> bufs;
  Case c{CollKind::AllReduce, DType::Float32, RedOp::Sum, 50000, false, 0};
  explicit Stuck(FakeCuda* f) : fake(f), comms(initComms(3)) {
    for (int r = 0; r < 3; ++r) {
      streams.push_back(fake->createStream());
      bufs.push_back(std::make_unique<Buffers>(fake, c, 3, r));
    }
    onEveryRank(3, [&](int r) {
      ASSERT_EQ(callApi(c, bufs[r]->devIn(), bufs[r]->devOut(), comms[r], streams[r]), hocclSuccess);
      ASSERT_TRUE(fake->sync(streams[r]));
    });
    for (int r = 0; r < 2; ++r)
      EXPECT_EQ(callApi(c, bufs[r]->devIn(), bufs[r]->devOut(), comms[r], streams[r]), hocclSuccess)
          << hocclGetLastError(comms[r]);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    EXPECT_TRUE(fake->busy(streams[0]) && fake->busy(streams[1])) << "the launches did not wait for rank 2";
  }
};

TEST_F(CudaDeviceTest, AbortingTheRankThatNeverCallsStopsTheOthers) {
  Stuck s(fake.get());
  ASSERT_EQ(hocclCommAbort(s.comms[2]), hocclSuccess);
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(awaitAsyncError(s.comms[r]), hocclRemoteError) << hocclGetLastError(s.comms[r]);
    EXPECT_TRUE(fake->sync(s.streams[r], 10)) << "rank " << r << "'s launch did not stop";
    EXPECT_NE(std::string(hocclGetLastError(s.comms[r])).find("abort"), std::string::npos)
        << hocclGetLastError(s.comms[r]);
    EXPECT_EQ(hocclCommDestroy(s.comms[r]), hocclSuccess);
  }
}

TEST_F(CudaDeviceTest, AbortingAWaitingRankStopsItsLaunch) {
  Stuck s(fake.get());
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_EQ(hocclCommAbort(s.comms[0]), hocclSuccess);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(2));
  EXPECT_TRUE(fake->sync(s.streams[0], 5)) << "rank 0's launch did not stop";
  EXPECT_EQ(awaitAsyncError(s.comms[1]), hocclRemoteError) << hocclGetLastError(s.comms[1]);
  EXPECT_TRUE(fake->sync(s.streams[1], 10));
  EXPECT_EQ(hocclCommDestroy(s.comms[1]), hocclSuccess);
  EXPECT_EQ(hocclCommDestroy(s.comms[2]), hocclSuccess);
}

TEST_F(CudaDeviceTest, ATimeoutNamesChannelStepAndPeer) {
  testutil::Options o;
  o.ranks = 3;
  o.timeoutSec = 1;
  testutil::World world(o);
  std::vector<void*> streams;
  for (int r = 0; r < 3; ++r) streams.push_back(fake->createStream());
  const Case c{CollKind::AllReduce, DType::Float32, RedOp::Sum, 50000, false, 0};
  ASSERT_TRUE(world.run([&](hocclComm_t comm, int rank) { runAndCompare(fake.get(), c, comm, rank, 3, streams[rank]); }));
  ASSERT_TRUE(world.run([&](hocclComm_t comm, int rank) {
    if (rank == 2) return;  // never calls
    Buffers b(fake.get(), c, 3, rank);
    ASSERT_EQ(callApi(c, b.devIn(), b.devOut(), comm, streams[rank]), hocclSuccess);
    ASSERT_TRUE(fake->sync(streams[rank], 20)) << "the launch did not time out";
    const hocclResult_t async = awaitAsyncError(comm);
    const std::string msg = hocclGetLastError(comm);
    // The first rank to time out says so; the other may hear of it first.
    // (Plain searches: std::regex is not safe to compile on several
    // threads at once under ThreadSanitizer's eyes.)
    if (async == hocclTimeout) {
      const size_t at = msg.find("rank " + std::to_string(rank) + " channel ");
      ASSERT_NE(at, std::string::npos) << msg;
      const size_t step = msg.find(" step ", at), timedOut = msg.find(": timed out, waiting ", at);
      EXPECT_TRUE(step != std::string::npos && timedOut != std::string::npos && step < timedOut) << msg;
      EXPECT_TRUE(msg.find("to receive from rank ", at) != std::string::npos ||
                  msg.find("for a free slot to send to rank ", at) != std::string::npos)
          << msg;
    } else {
      EXPECT_EQ(async, hocclRemoteError) << msg;
    }
  }));
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
    testutil::Options o;
    o.ranks = nranks;
    o.mode = testutil::Mode::Processes;
    o.timeoutSec = 60;  // a hang becomes an error
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

TEST_F(CudaDeviceTest, RanksOnDifferentHostsAreRefused) {
  testutil::Options o;
  o.ranks = 2;
  o.nodeSizes = {1, 1};
  o.net = testutil::Net::Socket;
  o.mode = testutil::Mode::Processes;
  std::string error;
  EXPECT_TRUE(testutil::spawn(o, [&](hocclComm_t comm, int) {
    void* d = fake->alloc(256);
    EXPECT_EQ(hocclAllReduce(d, d, 16, hocclFloat32, hocclSum, comm, nullptr), hocclInvalidUsage);
    const std::string msg = hocclGetLastError(comm);
    EXPECT_NE(msg.find("are on different hosts"), std::string::npos) << msg;
  }, &error)) << error;
}

// A rank that exits instead of making its call: the other's call fails
// naming it, long before its timeout would end a hang. (A peer that exits
// in the middle of the fd exchange itself: test_cuda_vmm.cc.)
TEST_F(CudaDeviceTest, APeerProcessThatExitsBeforeItsCallIsNamed) {
  testutil::Options o;
  o.ranks = 2;
  o.mode = testutil::Mode::Processes;
  o.timeoutSec = 60;
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

// Without a usable driver (none here, or the toolkit's stub library where
// the build found it) no pointer is device memory: host calls run as before.
TEST(CudaDeviceRealDriver, HostCallsRunAsBefore) {
#ifdef HOCCL_TEST_CUDA_STUB
  const cuda::Driver stub = cuda::loadDriver(HOCCL_TEST_CUDA_STUB);
  ASSERT_EQ(stub.state, cuda::DriverState::Stub) << stub.status;
  cuda::setProcessDriverForTesting(&stub);
  struct Restore {
    ~Restore() { cuda::setProcessDriverForTesting(nullptr); }
  } restore;
#endif
  const cuda::Driver& d = cuda::processDriver();
  if (d.usable()) GTEST_SKIP() << "a usable CUDA driver: " << d.status;
  ASSERT_TRUE(testutil::runThreads(2, [&](hocclComm_t comm, int rank) {
    std::vector<float> x(1000, float(rank + 1));
    EXPECT_EQ(hocclAllReduce(x.data(), x.data(), x.size(), hocclFloat32, hocclSum, comm, nullptr), hocclSuccess);
    EXPECT_EQ(x[999], 3.0f);
    int device = 0;
    EXPECT_EQ(hocclCommCuDevice(comm, &device), hocclSuccess);
    EXPECT_EQ(device, -1);
    EXPECT_EQ(cuda::memoryKind(d, x.data()), cuda::MemoryKind::Host);
  }));
}

}  // namespace
}  // namespace hoccl
