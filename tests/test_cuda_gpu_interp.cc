// The device-plan interpreter kernels (hocclInterp_<type>_<op>,
// kernel_names.h) on a real GPU (CTest label `gpu`; skips without one,
// saying why): float sum across plans and shapes, and every other type and
// op once. Several ranks share
// the one GPU: each rank is its own launch on its own stream, one CTA per
// channel, all launched before any is waited for (the channels wait on each
// other, so every CTA must be resident: checked against the occupancy).
// Plans, buffers, scratch and connection memory are in device memory,
// built as interp_host.cc builds them for host threads (readRankPlan), and
// every byte of every rank's memory must equal what the host interpreter
// gives on the same plans and inputs (which test_cuda_interp.cc holds bit
// for bit to the host executor). Then the two ways a run ends early: a
// peer that never comes (the bounded wait's error, not a hang) and the
// abort word set by the host through mapped memory while the kernel spins.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <ostream>
#include <random>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "algorithms/executable.h"
#include "algorithms/registry.h"
#include "src/exec/cuda/interp_host.h"
#include "src/exec/cuda/kernel_names.h"
#include "tests/support/cuda_gpu_run.h"

namespace hoccl::gputest {
namespace {

using cuda::DevConnMem;
using cuda::DevControl;
using cuda::DeviceEdge;

struct Case {
  CollKind coll = CollKind::AllReduce;
  AlgoId algo = AlgoId::Ring;
  int nranks = 2;
  int nchannels = 2;
  uint64_t count = 1000;
  bool inPlace = false;
  size_t slotBytes = 256;
  unsigned threads = 256;  // per CTA (the kernel allows 512)
  DType dtype = DType::Float32;
  RedOp op = RedOp::Sum;
  size_t inShift = 0, outShift = 0;  // bytes past a 16-byte boundary (rank_buffers.h)
  bool oneGpu = false;               // GPU-scope counters (kArgOneGpu)

  std::string name() const {
    return std::string(collName(coll)) + " " + algorithmInfo(algo).name + " P=" + std::to_string(nranks) +
           " ch=" + std::to_string(nchannels) + " n=" + std::to_string(count) + (inPlace ? " in-place" : "") +
           " slot=" + std::to_string(slotBytes) + " threads=" + std::to_string(threads) + " " + kernel() +
           (inShift || outShift ? " in+" + std::to_string(inShift) + " out+" + std::to_string(outShift) : "") +
           (oneGpu ? " gpu-scope" : "");
  }
  std::string kernel() const { return cuda::interpKernelName(dtype, op); }
  uint64_t slice() const { return slotBytes / dtypeSize(dtype); }
  uint64_t call() const { return cuda::callHash(uint8_t(coll), count, dtype, op, 0, 1); }
  GpuRunShape shape(bool mapped) const {
    GpuRunShape s;
    s.nranks = nranks;
    s.slotBytes = slotBytes;
    s.sliceElems = slice();
    s.elemBytes = dtypeSize(dtype);
    s.threads = threads;
    s.call = call();
    s.mapped = mapped;
    s.oneGpu = oneGpu;
    return s;
  }
};

std::vector<Schedule> schedulesFor(const Case& c) {
  std::vector<Schedule> out;
  for (int r = 0; r < c.nranks; ++r) {
    ScheduleKey k;
    k.coll = c.coll;
    k.nranks = c.nranks;
    k.rank = r;
    k.count = c.count;
    k.inPlace = c.inPlace;
    k.nchannels = c.nchannels;
    k.maxStepCount = uint64_t(cuda::kDevSlots / 2) * c.slice();  // half the slots, as api.cc sets it
    out.push_back(buildExecutable(algorithmInfo(c.algo), k, c.nranks > 1));
  }
  return out;
}

std::vector<std::vector<uint8_t>> imagesOf(const std::vector<Schedule>& scheds) {
  std::vector<std::vector<uint8_t>> out;
  for (const Schedule& s : scheds) {
    cuda::DevPlan plan;
    EXPECT_TRUE(cuda::flattenSchedule(s, &plan).ok());
    out.push_back(plan.image());
  }
  return out;
}

// Each rank's memory (rank_buffers.h), random values of the case's type
// everywhere: finite floats in [-2, 2) (NaN payloads are where a GPU and a
// CPU may differ in bits), integers of every bit pattern.
std::vector<RankBuffers> makeBuffers(const Case& c, const std::vector<Schedule>& scheds) {
  const size_t e = dtypeSize(c.dtype);
  std::vector<RankBuffers> out = test_shapes::layOutRanks(scheds[0].key, e);
  test_shapes::shiftBuffers(&out, scheds[0].key, c.inShift, c.outShift);
  std::mt19937_64 rng(c.count * 31 + uint64_t(c.nranks) + 1000 * uint64_t(c.dtype));
  std::uniform_real_distribution<float> u(-2.0f, 2.0f);
  for (RankBuffers& b : out)
    for (size_t i = 0; i + e <= b.mem.size(); i += e) {
      uint64_t bits = rng();
      const float f = u(rng);
      if (c.dtype == DType::Float32) std::memcpy(&bits, &f, 4);
      if (c.dtype == DType::Float64) {
        const double d = f;
        std::memcpy(&bits, &d, 8);
      }
      if (c.dtype == DType::Float16) bits = floatToHalf(f);
      if (c.dtype == DType::Bfloat16) bits = floatToBf16(f);
      std::memcpy(&b.mem[i], &bits, e);
    }
  return out;
}

// The host interpreter on copies of `bufs`: the expected memory.
std::vector<RankBuffers> onHost(const Case& c, const std::vector<std::vector<uint8_t>>& images,
                                std::vector<RankBuffers> bufs) {
  cuda::HostFabric fabric(c.slotBytes);
  std::vector<cuda::HostRank> ranks(c.nranks);
  for (int r = 0; r < c.nranks; ++r) {
    ranks[r].image = images[r];
    ranks[r].input = bufs[r].mem.data() + bufs[r].inOff;
    ranks[r].output = bufs[r].mem.data() + bufs[r].outOff;
    ranks[r].call = c.call();
  }
  cuda::HostRunOptions opt;
  opt.dtype = c.dtype;
  opt.op = c.op;
  opt.sliceElems = c.slice();
  DevControl control{};
  const Status st = cuda::runPlansOnHost(ranks, &fabric, opt, &control);
  EXPECT_TRUE(st.ok()) << "host interpreter: " << st.message();
  return bufs;
}

// ---- Bit-exact against the host interpreter --------------------------------
// Runs case c with kernel fn, every rank's launch before any is waited for,
// and compares every byte of every rank's memory with the host
// interpreter's on the same plans and inputs.
void runAndCompare(Gpu* g, Handle fn, const Case& c) {
  SCOPED_TRACE(c.name());
  const std::vector<Schedule> scheds = schedulesFor(c);
  const auto images = imagesOf(scheds);
  std::vector<RankBuffers> got = makeBuffers(c, scheds);
  const std::vector<RankBuffers> want = onHost(c, images, got);
  GpuRun run(g, c.shape(false));
  ASSERT_EQ(run.setUp(images, got, 20'000'000'000ull), "");
  ASSERT_EQ(run.checkOccupancy(fn, std::vector<bool>(c.nranks, true)), "");
  for (int r = 0; r < c.nranks; ++r) ASSERT_EQ(run.launch(fn, r), "");
  DevControl control{};
  ASSERT_EQ(run.finish(&control), "");
  const Status st = cuda::runStatus(control);
  ASSERT_TRUE(st.ok()) << st.message();
  ASSERT_EQ(run.download(&got), "");
  for (int r = 0; r < c.nranks; ++r) {
    const auto& a = want[r].mem;
    const auto& b = got[r].mem;
    const auto diff = std::mismatch(a.begin(), a.end(), b.begin());
    ASSERT_TRUE(diff.first == a.end()) << "rank " << r << " differs first at byte " << (diff.first - a.begin());
  }
}

struct Algo {
  CollKind coll;
  AlgoId algo;
};
// gtest's (and so ctest's) name for a parameter.
void PrintTo(const Algo& a, std::ostream* os) { *os << collName(a.coll) << " " << algorithmInfo(a.algo).name; }

class GpuInterp : public ::testing::TestWithParam<Algo> {};

// P in {1, 2, 4} x counts {0, 1, 1000, 100000} x in and out of place; slot
// size and threads per CTA turn from case to case.
TEST_P(GpuInterp, MatchesTheHostInterpreterBitForBit) {
  HOCCL_GPU_OR_SKIP(g);
  std::string why;
  Handle fn = g->function(cuda::interpKernelName(DType::Float32, RedOp::Sum).c_str(), &why);
  ASSERT_NE(fn, nullptr) << why;
  const size_t slots[] = {256, 4096, 65536};
  const unsigned threads[] = {256, 64, 512};
  int n = 0;
  for (int P : {1, 2, 4})
    for (uint64_t count : {0, 1, 1000, 100000})
      for (bool inPlace : {false, true}) {
        Case c;
        c.coll = GetParam().coll;
        c.algo = GetParam().algo;
        c.nranks = P;
        c.nchannels = algorithmInfo(c.algo).maxChannels == 1 ? 1 : 2;
        c.count = count;
        c.inPlace = inPlace;
        c.slotBytes = slots[n % 3];
        c.threads = threads[(n / 3) % 3];
        c.oneGpu = n % 2 == 1;
        ++n;
        runAndCompare(g, fn, c);
        if (HasFatalFailure()) return;
      }
}

INSTANTIATE_TEST_SUITE_P(Plans, GpuInterp,
                         ::testing::Values(Algo{CollKind::AllReduce, AlgoId::Ring},
                                           Algo{CollKind::AllReduce, AlgoId::Doubling},
                                           Algo{CollKind::ReduceScatter, AlgoId::Ring},
                                           Algo{CollKind::AllGather, AlgoId::Ring},
                                           Algo{CollKind::AllReduce, AlgoId::OneShot},
                                           Algo{CollKind::ReduceScatter, AlgoId::OneShot},
                                           Algo{CollKind::AllGather, AlgoId::OneShot}),
                         [](const auto& info) {
                           return std::string(collName(info.param.coll)) + "_" + algorithmInfo(info.param.algo).name;
                         });

// Every type x op kernel the image has (kernel_names.h), once on an
// all-reduce of 3 ranks (16-byte vectors and odd tails), once on an
// in-place reduce-scatter whose buffers start one element past a 16-byte
// boundary (heads, and avg's division from a misaligned start), and once on
// a oneshot all-reduce of 4 ranks (the local reduce step, dst = src op dst).
TEST(GpuInterpKernels, EveryTypeAndOpMatchesTheHostInterpreter) {
  HOCCL_GPU_OR_SKIP(g);
  int kernels = 0;
  for (int t = 0; t < kNumDTypes; ++t)
    for (int op = 0; op < kNumRedOps; ++op) {
      if (!cuda::interpSupports(DType(t), RedOp(op))) continue;
      ++kernels;
      for (int variant = 0; variant < 3; ++variant) {
        Case c;
        c.dtype = DType(t);
        c.op = RedOp(op);
        c.coll = variant == 1 ? CollKind::ReduceScatter : CollKind::AllReduce;
        if (variant == 2) {
          c.algo = AlgoId::OneShot;
          c.nchannels = 1;
        }
        c.nranks = variant == 1 ? 2 : variant == 2 ? 4 : 3;
        c.count = variant == 1 ? 333 : 1001;
        c.inPlace = variant == 1;
        c.inShift = c.outShift = variant == 1 ? dtypeSize(c.dtype) : 0;
        c.slotBytes = 4096;
        c.oneGpu = variant != 0;
        std::string why;
        Handle fn = g->function(c.kernel().c_str(), &why);
        ASSERT_NE(fn, nullptr) << c.kernel() << ": " << why;
        runAndCompare(g, fn, c);
        if (HasFatalFailure()) return;
      }
    }
  EXPECT_EQ(kernels, 50);
}

// ---- Runs that end early ---------------------------------------------------
// Rank 1 is never launched: rank 0's first receive from it times out, and
// the record names rank 0, the channel, that step and peer 1.
TEST(GpuInterpFailures, PeerThatNeverComesEndsWithTheBoundedWaitError) {
  HOCCL_GPU_OR_SKIP(g);
  std::string why;
  Handle fn = g->function(cuda::interpKernelName(DType::Float32, RedOp::Sum).c_str(), &why);
  ASSERT_NE(fn, nullptr) << why;
  const Case c;  // all-reduce, ring, 2 ranks, 2 channels
  const std::vector<Schedule> scheds = schedulesFor(c);
  GpuRun run(g, c.shape(false));
  ASSERT_EQ(run.setUp(imagesOf(scheds), makeBuffers(c, scheds), 200'000'000), "");
  ASSERT_EQ(run.launch(fn, 0), "");
  DevControl k{};
  ASSERT_EQ(run.finish(&k), "");
  const Status st = cuda::runStatus(k);
  ASSERT_EQ(st.code(), hocclTimeout) << st.message();
  EXPECT_EQ(k.rank, 0);
  EXPECT_EQ(k.peer, 1);
  EXPECT_EQ(k.what, uint32_t(cuda::kWhatRecv));
  ASSERT_TRUE(k.channel == 0 || k.channel == 1) << k.channel;
  int first = -1;
  const auto& steps = scheds[0].channels[k.channel].steps;
  for (size_t i = 0; i < steps.size() && first < 0; ++i)
    if (steps[i].recvPeer == 1) first = int(i);
  EXPECT_EQ(k.step, first);
  EXPECT_TRUE(std::regex_search(st.message(), std::regex("rank 0 channel [01] step [0-9]+: timed out, waiting to "
                                                         "receive from rank 1")))
      << st.message();
}

// Rank 1 never comes and the bound is far off: once rank 0 has posted its
// first message (seen through the mapped counter), the host sets the abort
// word and the kernel must stop with "aborted". The control record is in
// mapped host memory, as the design's monitor block will be, so the
// failure's compare-and-swap is a system-scope atomic on host memory.
TEST(GpuInterpFailures, AbortWordSetByTheHostStopsTheKernel) {
  HOCCL_GPU_OR_SKIP(g);
  std::string why;
  Handle fn = g->function(cuda::interpKernelName(DType::Float32, RedOp::Sum).c_str(), &why);
  ASSERT_NE(fn, nullptr) << why;
  const Case c;
  const std::vector<Schedule> scheds = schedulesFor(c);
  GpuRun run(g, c.shape(true));
  ASSERT_EQ(run.setUp(imagesOf(scheds), makeBuffers(c, scheds), 60'000'000'000ull), "");
  const DevConnMem* first = run.hostConn(DeviceEdge{0, 1, 0});
  ASSERT_NE(first, nullptr);
  ASSERT_EQ(run.launch(fn, 0), "");
  // Until rank 0 has sent, or its kernel has ended (it cannot spin forever).
  for (int polls = 1; __atomic_load_n(&first->tail, __ATOMIC_ACQUIRE) == 0; ++polls) {
    if (polls % 1024 == 0 && g->cu.streamQuery(g->streams[0]) != kCudaErrorNotReady) break;
    std::this_thread::yield();
  }
  const bool sent = __atomic_load_n(&first->tail, __ATOMIC_ACQUIRE) > 0;
  __atomic_store_n(&run.hostControl()->abort, 1u, __ATOMIC_RELEASE);
  DevControl k{};
  ASSERT_EQ(run.finish(&k), "");
  EXPECT_TRUE(sent) << "rank 0 ended before its first message: " << cuda::describeFailure(k);
  const Status st = cuda::runStatus(k);
  EXPECT_EQ(st.code(), hocclRemoteError) << st.message();
  EXPECT_EQ(k.code, uint32_t(cuda::kDevAborted)) << st.message();
  EXPECT_EQ(k.rank, 0);
  EXPECT_NE(st.message().find("aborted"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace hoccl::gputest
