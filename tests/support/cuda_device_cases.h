// What the fake-driver tests of the device path share (test_cuda_device.cc,
// test_cuda_device_conns.cc, test_cuda_device_net.cc): a call and its
// buffers on the host and on the fake device, running it both ways and
// comparing every byte, ranks as threads with a stream each, the fixture,
// a log capture, and an abort whose launch is held up.
#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "hoccl.h"
#include "base/cuda_device_api.h"
#include "base/log.h"
#include "src/exec/dataops.h"
#include "src/tune/tuner.h"
#include "tests/support/fake_cuda.h"
#include "tests/support/harness.h"
#include "tests/support/rank_buffers.h"

namespace hoccl {
namespace devicetest {

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

inline std::string describe(const Case& c) {
  return std::string(collName(c.coll)) + " " + dtypeName(c.dtype) + " " + redOpName(c.op) + " count " +
         std::to_string(c.count) + (c.inPlace ? " in place" : "") + " root " + std::to_string(c.root);
}

inline ScheduleKey keyOf(const Case& c, int nranks, int rank) {
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
inline void fill(DType t, int rank, void* p, uint64_t n) {
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
inline hocclResult_t callApi(const Case& c, const void* in, void* out, hocclComm_t comm, hocclStream_t stream) {
  const auto t = static_cast<hocclDataType_t>(c.dtype);
  const auto op = static_cast<hocclRedOp_t>(c.op);
  switch (c.coll) {
    case CollKind::AllReduce: return hocclAllReduce(in, out, c.count, t, op, comm, stream);
    case CollKind::ReduceScatter: return hocclReduceScatter(in, out, c.count, t, op, comm, stream);
    case CollKind::AllGather: return hocclAllGather(in, out, c.count, t, comm, stream);
    case CollKind::Broadcast: return hocclBroadcast(in, out, c.count, t, c.root, comm, stream);
    case CollKind::Reduce: return hocclReduce(in, out, c.count, t, op, c.root, comm, stream);
    case CollKind::AllToAll: return hocclAlltoAll(in, out, c.count, t, comm, stream);
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

// Runs `c` on device buffers (on GPU `gpu`, queued on `stream`) and on
// host buffers, then compares every byte.
inline void runAndCompare(FakeCuda* fake, const Case& c, hocclComm_t comm, int rank, int nranks, void* stream,
                          int gpu = 0) {
  Buffers b(fake, c, nranks, rank, gpu);
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

// `c` captured into a CUDA graph on `stream` (the fake runs captured work
// at once, as one replay would), twice: the first capture also sets the
// schedule up. The capture must survive the call and the result match the
// host's; after each, the call runs again outside any capture.
inline void runCapturedAndCompare(FakeCuda* fake, const Case& c, hocclComm_t comm, int rank, int nranks,
                                  void* stream) {
  for (int round = 0; round < 2; ++round) {
    Buffers b(fake, c, nranks, rank);
    fake->setCapture(stream, cuda::kCaptureStatusActive);
    ASSERT_EQ(callApi(c, b.devIn(), b.devOut(), comm, stream), hocclSuccess) << hocclGetLastError(comm);
    EXPECT_EQ(fake->captureStatus(stream), cuda::kCaptureStatusActive) << "the call broke the capture";
    fake->setCapture(stream, cuda::kCaptureStatusNone);
    ASSERT_EQ(callApi(c, b.host.in(), b.host.out(), comm, nullptr), hocclSuccess);
    ASSERT_TRUE(fake->sync(stream));
    EXPECT_TRUE(b.same()) << "round " << round << " rank " << rank;
    runAndCompare(fake, c, comm, rank, nranks, stream);  // outside the capture, after it
  }
}

// Communicators of `n` ranks as threads, made by hocclCommInitRank.
inline std::vector<hocclComm_t> initComms(int n) {
  hocclUniqueId id;
  EXPECT_EQ(hocclGetUniqueId(&id), hocclSuccess);
  std::vector<hocclComm_t> comms(n, nullptr);
  std::vector<std::thread> ts;
  for (int r = 0; r < n; ++r)
    ts.emplace_back([&, r] { EXPECT_EQ(hocclCommInitRank(&comms[r], n, id, r), hocclSuccess); });
  for (auto& t : ts) t.join();
  return comms;
}

inline void onEveryRank(int n, const std::function<void(int)>& body) {
  std::vector<std::thread> ts;
  for (int r = 0; r < n; ++r) ts.emplace_back(body, r);
  for (auto& t : ts) t.join();
}

// Polls hocclCommGetAsyncError until it is not hocclSuccess (up to 20 s).
inline hocclResult_t awaitAsyncError(hocclComm_t comm) {
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

// What hoccl logs while a test runs (setLogSink), by level.
inline std::mutex loggedMu;
inline std::vector<std::pair<LogLevel, std::string>> logged;
inline void takeLine(LogLevel level, uint32_t, const char*, int, const char* msg) {
  std::lock_guard<std::mutex> l(loggedMu);
  logged.emplace_back(level, msg);
}
inline std::vector<std::string> linesAt(LogLevel level) {
  std::lock_guard<std::mutex> l(loggedMu);
  std::vector<std::string> out;
  for (const auto& [at, msg] : logged)
    if (at == level) out.push_back(msg);
  return out;
}

// hocclCommAbort on rank 0 while its launch cannot start: its stream is
// held (busy with earlier work), so the launch outlives the abort's wait
// for it and the executor is given up rather than freed. The abort still
// returns within about 1 s (2 s under load) and warns; for `heldSec` after
// it nothing may touch what it freed (the transport's threads, the
// launch), which a sanitizer build checks; once released, the launch
// stops at its first wait; every other rank gets hocclRemoteError.
// `o`: the ranks (threads) and their hosts.
inline void abortWithItsLaunchHeld(FakeCuda* fake, const testutil::Options& o, double heldSec) {
  const Case c{CollKind::AllReduce, DType::Float32, RedOp::Sum, 50000, false, 0};
  testutil::World world(o);
  ASSERT_EQ(world.initError(), "");
  std::vector<void*> streams;
  for (int r = 0; r < o.ranks; ++r) streams.push_back(fake->createStream());
  // Every edge connected and the plan set up on every rank first.
  ASSERT_TRUE(world.run([&](hocclComm_t comm, int rank) {
    runAndCompare(fake, c, comm, rank, o.ranks, streams[rank]);
  }));
  {
    std::lock_guard<std::mutex> l(loggedMu);
    logged.clear();
  }
  setLogSink(&takeLine, LogLevel::Warn);
  std::atomic<int> queued{0};
  ASSERT_TRUE(world.run([&](hocclComm_t comm, int rank) {
    Buffers b(fake, c, o.ranks, rank);
    if (rank == 0) fake->hold(streams[0]);
    EXPECT_EQ(callApi(c, b.devIn(), b.devOut(), comm, streams[rank]), hocclSuccess) << hocclGetLastError(comm);
    ++queued;
    if (rank != 0) {
      EXPECT_EQ(awaitAsyncError(comm), hocclRemoteError) << hocclGetLastError(comm);
      EXPECT_TRUE(fake->sync(streams[rank], 10)) << "rank " << rank << "'s launch did not stop";
      return;
    }
    while (queued.load() < o.ranks) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    const auto t0 = std::chrono::steady_clock::now();
    EXPECT_EQ(hocclCommAbort(comm), hocclSuccess);
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(2));
    std::this_thread::sleep_for(std::chrono::duration<double>(heldSec));
    fake->release(streams[0]);
    EXPECT_TRUE(fake->sync(streams[0], 10)) << "rank 0's launch did not stop once its stream was released";
  }));
  setLogSink(nullptr, LogLevel::None);
  int leaked = 0;
  for (const std::string& w : linesAt(LogLevel::Warn))
    leaked += w.find("rank 0's device launches did not end within 0.5 s") != std::string::npos ? 1 : 0;
  EXPECT_EQ(leaked, 1) << "the abort did not give up the held launch";
}

}  // namespace devicetest
}  // namespace hoccl
