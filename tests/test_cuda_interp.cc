// The device-plan interpreter (src/exec/cuda/interp.h) run on the host
// (interp_host.h): for every collective, algorithm and shape, the plans of
// the schedules the host executor runs give bit-identical buffers (memcmp)
// to the host executor itself (CollTask, over in-memory connections), for
// every type and op the interpreter has. And it fails cleanly: a message
// of another call or of the wrong size, an abort and a peer that never
// comes each end the run with a message naming rank, channel, step and peer.
#include <gtest/gtest.h>

#include <cstring>
#include <deque>
#include <map>
#include <ostream>
#include <memory>
#include <random>
#include <regex>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "algorithms/executable.h"
#include "algorithms/pairwise.h"
#include "algorithms/registry.h"
#include "src/exec/cuda/interp_host.h"
#include "src/exec/cuda/kernel_names.h"
#include "src/exec/cuda/plan.h"
#include "src/exec/executor.h"
#include "tests/support/rank_buffers.h"
#include "tests/test_shapes.h"

namespace hoccl {

// gtest's name for a CollKind parameter.
void PrintTo(CollKind k, std::ostream* os) { *os << collName(k); }

namespace {

using cuda::DevControl;
using cuda::HostFabric;
using cuda::HostRank;
using cuda::HostRunOptions;
using test_shapes::RankBuffers;

// ---- The host executor over in-memory connections -------------------------
// Unbounded queues, one per (sender, receiver, link): every send succeeds,
// so the ranks can run round-robin in one thread.
using Pipe = std::deque<std::vector<char>>;

class QueueSend : public SendConn {
 public:
  QueueSend(Pipe* p, int peer, size_t slot) : pipe_(p), peer_(peer), slot_(slot) {}
  bool tryAcquire(SlotHeader** h, void** payload) override {
    pending_.assign(sizeof(SlotHeader) + slot_, 0);
    *h = reinterpret_cast<SlotHeader*>(pending_.data());
    *payload = pending_.data() + sizeof(SlotHeader);
    return true;
  }
  void post() override { pipe_->push_back(std::move(pending_)); }
  size_t slotBytes() const override { return slot_; }
  int peer() const override { return peer_; }

 private:
  Pipe* pipe_;
  int peer_;
  size_t slot_;
  std::vector<char> pending_;
};

class QueueRecv : public RecvConn {
 public:
  QueueRecv(Pipe* p, int peer) : pipe_(p), peer_(peer) {}
  bool tryPeek(const SlotHeader** h, const void** payload) override {
    if (pipe_->empty()) return false;
    *h = reinterpret_cast<const SlotHeader*>(pipe_->front().data());
    *payload = pipe_->front().data() + sizeof(SlotHeader);
    return true;
  }
  void release() override { pipe_->pop_front(); }
  int peer() const override { return peer_; }

 private:
  Pipe* pipe_;
  int peer_;
};

class QueueNet {
 public:
  class Rank : public Connections {
   public:
    Rank(QueueNet* net, int rank) : net_(net), rank_(rank) {}
    SendConn* sendConn(int peer, int link) override {
      auto& c = sends_[{peer, link}];
      if (!c) c = std::make_unique<QueueSend>(net_->pipe(rank_, peer, link), peer, net_->slot_);
      return c.get();
    }
    RecvConn* recvConn(int peer, int link) override {
      auto& c = recvs_[{peer, link}];
      if (!c) c = std::make_unique<QueueRecv>(net_->pipe(peer, rank_, link), peer);
      return c.get();
    }

   private:
    QueueNet* net_;
    int rank_;
    std::map<std::pair<int, int>, std::unique_ptr<QueueSend>> sends_;
    std::map<std::pair<int, int>, std::unique_ptr<QueueRecv>> recvs_;
  };
  QueueNet(int nranks, size_t slot) : slot_(slot) {
    for (int r = 0; r < nranks; ++r) ranks_.push_back(std::make_unique<Rank>(this, r));
  }
  Rank* rank(int r) { return ranks_[r].get(); }
  Pipe* pipe(int from, int to, int link) { return &pipes_[std::make_tuple(from, to, link)]; }

 private:
  size_t slot_;
  std::map<std::tuple<int, int, int>, Pipe> pipes_;
  std::vector<std::unique_ptr<Rank>> ranks_;
};

// ---- Cases ------------------------------------------------------------------
struct Case {
  CollKind coll = CollKind::AllReduce;
  AlgoId algo = AlgoId::Ring;
  int nranks = 2;
  int nchannels = 1;
  uint64_t count = 0;
  bool inPlace = false;
  DType dtype = DType::Float32;
  RedOp op = RedOp::Sum;
  size_t slotBytes = 256;
  int lanes = 1;
  int root = 0;
  // Bytes from a 16-byte boundary at which the input and the output start
  // (multiples of the element size; in place, the buffer's shift is inShift).
  size_t inShift = 0, outShift = 0;

  std::string name() const {
    return std::string(collName(coll)) + " " + algorithmInfo(algo).name + " P=" + std::to_string(nranks) +
           " ch=" + std::to_string(nchannels) + " n=" + std::to_string(count) + (inPlace ? " in-place " : " ") +
           dtypeName(dtype) + " " + redOpName(op) + " slot=" + std::to_string(slotBytes) +
           " lanes=" + std::to_string(lanes) + " root=" + std::to_string(root) +
           (inShift || outShift ? " in+" + std::to_string(inShift) + " out+" + std::to_string(outShift) : "");
  }
};

// Groups for the grouped algorithms: nodes of up to 4 ranks, the last one
// smaller when P is not a multiple (3 ranks: nodes of 2 and 1).
std::shared_ptr<const Grouping> groupsFor(int P) {
  if (P == 3) return test_shapes::sized({2, 1}, "2+1").groups;
  const int G = P >= 8 ? 4 : P >= 4 ? 2 : 1;
  return test_shapes::rect(P / G, G).groups;
}

std::vector<Schedule> schedulesFor(const Case& c) {
  const size_t esize = dtypeSize(c.dtype);
  std::vector<Schedule> out;
  for (int r = 0; r < c.nranks; ++r) {
    ScheduleKey k = test_shapes::makeKey(c.coll, c.nranks, c.count, c.inPlace, c.nchannels, c.root);
    k.rank = r;
    // As api.cc sets it: half the slots of a connection.
    k.maxStepCount = uint64_t(cuda::kDevSlots / 2) * (c.slotBytes / esize);
    k.groups = groupsFor(c.nranks);
    if (c.coll == CollKind::AllToAll) {
      Schedule s = buildAllToAll(k);
      markZeroCopyEligible(&s);
      out.push_back(std::move(s));
    } else {
      out.push_back(buildExecutable(algorithmInfo(c.algo), k, c.nranks > 1));
    }
  }
  return out;
}

void fillRandom(uint8_t* p, uint64_t n, DType t, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> u(-2.0, 2.0);
  for (uint64_t i = 0; i < n; ++i) {
    switch (t) {
      case DType::Float32: {
        const float f = float(u(rng));
        std::memcpy(p + 4 * i, &f, 4);
        break;
      }
      case DType::Float64: {
        const double d = u(rng);
        std::memcpy(p + 8 * i, &d, 8);
        break;
      }
      case DType::Float16:
      case DType::Bfloat16: {
        const uint16_t h = t == DType::Float16 ? floatToHalf(float(u(rng))) : floatToBf16(float(u(rng)));
        std::memcpy(p + 2 * i, &h, 2);
        break;
      }
      default: {
        const size_t e = dtypeSize(t);
        const uint64_t v = rng();
        std::memcpy(p + e * i, &v, e);
      }
    }
  }
}

// Each rank's memory (rank_buffers.h), random values of the case's type.
std::vector<RankBuffers> makeBuffers(const Case& c, const ScheduleKey& k0) {
  const size_t e = dtypeSize(c.dtype);
  std::vector<RankBuffers> out = test_shapes::layOutRanks(k0, e);
  test_shapes::shiftBuffers(&out, k0, c.inShift, c.outShift);
  std::mt19937_64 rng(c.count * 1315423911u + uint64_t(c.nranks) * 2654435761u + uint64_t(c.dtype));
  for (RankBuffers& b : out) fillRandom(b.mem.data(), (b.mem.size() - 1) / e, c.dtype, rng);
  return out;
}

// Runs the host executor; "" or what went wrong.
std::string runExecutor(const Case& c, const std::vector<Schedule>& scheds, std::vector<RankBuffers>* bufs) {
  QueueNet net(c.nranks, c.slotBytes);
  std::vector<CollCall> calls(c.nranks);  // the tasks refer to their calls and schedules
  std::vector<std::unique_ptr<CollTask>> tasks;
  for (int r = 0; r < c.nranks; ++r) {
    CollCall& call = calls[r];
    call.coll = c.coll;
    call.sendbuff = (*bufs)[r].in();
    call.recvbuff = (*bufs)[r].out();
    call.count = c.count;
    call.dtype = c.dtype;
    call.op = c.op;
    call.root = c.root;
    call.opSeq = 1;
    tasks.push_back(std::make_unique<CollTask>(call, scheds[r], net.rank(r), nullptr, c.slotBytes, true, 0, 0));
  }
  for (;;) {
    bool all = true, moved = false;
    for (auto& t : tasks) {
      Status st = t->progress(&moved);
      if (!st.ok()) return "executor: " + st.message();
      all = all && t->done();
    }
    if (all) return "";
    if (!moved) return "executor stalled: " + tasks[0]->describeWait();
  }
}

struct InterpRun {
  Status status;
  DevControl control{};
};

InterpRun runInterp(const Case& c, const std::vector<Schedule>& scheds, std::vector<RankBuffers>* bufs,
                    const std::vector<uint64_t>& calls = {}, const std::vector<bool>& present = {},
                    uint64_t timeoutNs = 60'000'000'000ull) {
  HostFabric fabric(c.slotBytes);
  std::vector<HostRank> ranks(c.nranks);
  InterpRun out;
  for (int r = 0; r < c.nranks; ++r) {
    cuda::DevPlan plan;
    out.status = cuda::flattenSchedule(scheds[r], &plan);
    if (!out.status.ok()) return out;
    ranks[r].image = plan.image();
    ranks[r].input = (*bufs)[r].in();
    ranks[r].output = (*bufs)[r].out();
    ranks[r].call = calls.empty() ? cuda::callHash(uint8_t(c.coll), c.count, c.dtype, c.op, c.root, 1) : calls[r];
    ranks[r].run = present.empty() || present[r];
  }
  HostRunOptions opt;
  opt.dtype = c.dtype;
  opt.op = c.op;
  opt.lanes = c.lanes;
  opt.timeoutNs = timeoutNs;
  out.status = cuda::runPlansOnHost(ranks, &fabric, opt, &out.control);
  return out;
}

// Runs both and compares every byte of every rank's memory; "" if equal.
std::string compareRun(const Case& c) {
  const std::vector<Schedule> scheds = schedulesFor(c);
  std::vector<RankBuffers> ref = makeBuffers(c, scheds[0].key), got = ref;
  const std::string err = runExecutor(c, scheds, &ref);
  if (!err.empty()) return err;
  const InterpRun run = runInterp(c, scheds, &got);
  if (!run.status.ok()) return "interpreter: " + run.status.message();
  const size_t e = dtypeSize(c.dtype);
  for (int r = 0; r < c.nranks; ++r) {
    if (std::memcmp(ref[r].mem.data(), got[r].mem.data(), ref[r].mem.size()) == 0) continue;
    size_t i = 0;
    while (ref[r].mem[i] == got[r].mem[i]) ++i;
    return "rank " + std::to_string(r) + " differs first at byte " + std::to_string(i) + " (element " +
           std::to_string(i / e) + " of its memory)";
  }
  return "";
}

// Every type and op the interpreter has.
std::vector<std::pair<DType, RedOp>> typeOps() {
  std::vector<std::pair<DType, RedOp>> v;
  for (int t = 0; t < kNumDTypes; ++t)
    for (RedOp op : {RedOp::Sum, RedOp::Prod, RedOp::Max, RedOp::Min, RedOp::Avg})
      if (cuda::interpSupports(DType(t), op)) v.push_back({DType(t), op});
  return v;
}

// The host interpreter runs exactly the (type, op) pairs the device image
// has a kernel for (kernel_names.h), so each kernel has its host reference.
TEST(CudaInterp, SupportsExactlyThePairsWithAKernel) {
  int n = 0;
  for (int t = 0; t < kNumDTypes; ++t)
    for (int op = 0; op <= int(RedOp::PreMulSum); ++op) {
      const bool kernel = !cuda::interpKernelName(DType(t), RedOp(op)).empty();
      EXPECT_EQ(cuda::interpSupports(DType(t), RedOp(op)), kernel)
          << dtypeName(DType(t)) << " " << redOpName(RedOp(op));
      n += kernel;
    }
  EXPECT_EQ(n, 50);
}

bool reduces(CollKind k) {
  return k == CollKind::AllReduce || k == CollKind::ReduceScatter || k == CollKind::Reduce;
}

// ---- Bit-exact against the host executor ----------------------------------
// Under ThreadSanitizer (tools/sanitize.sh tsan) each case costs ~20x: the
// matrix runs every 7th case there (7 is prime to the rotations below, so
// every type, op and slot size still occurs) and large counts up to 4 ranks.
#if defined(__SANITIZE_THREAD__)
#define HOCCL_TEST_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define HOCCL_TEST_TSAN 1
#endif
#endif
#ifdef HOCCL_TEST_TSAN
constexpr int kMatrixStride = 7, kLargeMaxRanks = 4;
#else
constexpr int kMatrixStride = 1, kLargeMaxRanks = 8;
#endif

class CudaInterpMatrix : public ::testing::TestWithParam<CollKind> {};

// Every algorithm that runs the collective (not its ring fallback) x P in
// {1,2,3,4,8} x channels {1,2,4} x counts {0,1,7,1000} x in/out of place;
// type, op, slot size (64 B to 4 KiB: steps cut into many messages, rings
// wrapping) and root turn from case to case.
TEST_P(CudaInterpMatrix, MatchesHostExecutorBitForBit) {
  const CollKind coll = GetParam();
  const auto tops = typeOps();
  ASSERT_EQ(tops.size(), 50u);
  const size_t slots[] = {64, 256, 4096};
  int n = 0;
  for (const AlgoInfo& algo : allAlgorithms()) {
    // The device never runs oneshot_shm (the tuner falls back from it for
    // device buffers: test_tune.cc), and its schedule has no steps.
    if (!algo.supports(coll) || algo.sharedSlotsOnly) continue;
    for (int P : {1, 2, 3, 4, 8})
      for (int ch : {1, 2, 4}) {
        if (algo.maxChannels && ch > algo.maxChannels) continue;
        for (uint64_t count : {0, 1, 7, 1000})
          for (bool inPlace : {false, true}) {
            Case c;
            c.coll = coll;
            c.algo = algo.id;
            c.nranks = P;
            c.nchannels = ch;
            c.count = count;
            c.inPlace = inPlace;
            std::tie(c.dtype, c.op) = tops[(n * 7 + int(coll)) % tops.size()];
            if (!reduces(coll)) c.op = RedOp::Sum;
            c.slotBytes = slots[n % 3];
            c.root = (n / 3) % P;
            if (n++ % kMatrixStride) continue;
            const std::string diff = compareRun(c);
            ASSERT_EQ(diff, "") << c.name();
          }
      }
  }
  EXPECT_GE(n, 100);  // cases enumerated (every kMatrixStride-th run)
}

INSTANTIATE_TEST_SUITE_P(Collectives, CudaInterpMatrix,
                         ::testing::Values(CollKind::AllReduce, CollKind::ReduceScatter, CollKind::AllGather,
                                           CollKind::Broadcast, CollKind::Reduce, CollKind::AllToAll),
                         [](const auto& info) { return std::string(collName(info.param)); });

// ~100k elements: every collective and algorithm on 2, 4 and 8 ranks.
TEST(CudaInterp, LargeCountsMatchHostExecutor) {
  int n = 0;
  for (CollKind coll : {CollKind::AllReduce, CollKind::ReduceScatter, CollKind::AllGather, CollKind::Broadcast,
                        CollKind::Reduce})
    for (AlgoId algo : {AlgoId::Ring, AlgoId::Hierarchical, AlgoId::HoRing})
      for (int P : {2, 4, 8}) {
        if (!algorithmInfo(algo).supports(coll) || P > kLargeMaxRanks) continue;
        Case c;
        c.coll = coll;
        c.algo = algo;
        c.nranks = P;
        c.nchannels = 2;
        // Per rank for reduce-scatter and all-gather: keep the total near 100k.
        c.count = coll == CollKind::ReduceScatter || coll == CollKind::AllGather ? 100003 / P : 100003;
        c.inPlace = n % 2;
        c.dtype = n % 3 == 0 ? DType::Float32 : n % 3 == 1 ? DType::Bfloat16 : DType::Int64;
        c.op = reduces(coll) ? RedOp(n % 5) : RedOp::Sum;
        c.slotBytes = 4096;
        c.root = P - 1;
        ++n;
        const std::string diff = compareRun(c);
        ASSERT_EQ(diff, "") << c.name();
      }
}

// Every type x op, on a ring all-reduce and a hierarchical reduce-scatter.
TEST(CudaInterp, EveryTypeAndOpMatchesHostExecutor) {
  for (const auto& [t, op] : typeOps())
    for (int variant = 0; variant < 2; ++variant) {
      Case c;
      c.coll = variant ? CollKind::ReduceScatter : CollKind::AllReduce;
      c.algo = variant ? AlgoId::Hierarchical : AlgoId::Ring;
      c.nranks = variant ? 4 : 3;
      c.nchannels = 2;
      c.count = 1007;
      c.inPlace = variant;
      c.dtype = t;
      c.op = op;
      c.slotBytes = 128;
      const std::string diff = compareRun(c);
      ASSERT_EQ(diff, "") << c.name();
    }
}

// Several threads per channel, as a CTA: the leader's waits reach the other
// lanes through the barrier and the shared words.
TEST(CudaInterp, LanesAsThreadsMatchHostExecutor) {
  for (AlgoId algo : {AlgoId::Ring, AlgoId::HoRing})
    for (int lanes : {2, 3}) {
      Case c;
      c.algo = algo;
      c.nranks = 4;
      c.nchannels = 2;
      c.count = 1000 + uint64_t(lanes);
      c.lanes = lanes;
      c.dtype = lanes == 2 ? DType::Float16 : DType::Float64;
      c.slotBytes = 64;
      const std::string diff = compareRun(c);
      ASSERT_EQ(diff, "") << c.name();
    }
}

// ---- 16-byte vectors: every alignment and tail -------------------------------
// The data loops move 16 bytes at a time where the buffers' offsets agree
// (interp_vec.h). Buffers starting 0, one element, 16 - one element and
// mismatched byte offsets past a 16-byte boundary, schedule offsets of odd
// counts (chunks of 1-byte elements start at every byte offset), counts
// under a vector, one over, and odd: the head, vector and tail of every
// loop (reduce, copy, avg's division), each against the host executor.
TEST(CudaInterp, EveryAlignmentAndTailMatchesHostExecutor) {
  const CollKind colls[] = {CollKind::AllReduce, CollKind::AllGather, CollKind::Broadcast,
                            CollKind::ReduceScatter, CollKind::Reduce};
  const uint64_t counts[] = {1, 17, 1001, 250};
  const RedOp ops[] = {RedOp::Avg, RedOp::Sum, RedOp::Max, RedOp::Prod, RedOp::Min};
  int n = 0;
  for (int t = 0; t < kNumDTypes; ++t) {
    if (!cuda::interpSupports(DType(t), RedOp::Sum)) continue;
    const size_t e = dtypeSize(DType(t));
    const std::pair<size_t, size_t> shifts[] = {{0, 0}, {e, e}, {16 - e, 16 - e}, {e, 0}, {0, 16 - e}};
    for (const auto& [in, out] : shifts)
      for (CollKind coll : colls) {
        Case c;
        c.coll = coll;
        c.algo = AlgoId::Ring;
        c.nranks = 2 + n % 2;
        c.nchannels = 1 + (n / 2) % 2;
        c.count = counts[n % 4];
        c.inPlace = (n / 4) % 2;
        c.dtype = DType(t);
        c.op = reduces(coll) ? ops[n % 5] : RedOp::Sum;
        c.slotBytes = n % 3 ? 64 : 4096;
        c.lanes = 1 + 2 * ((n / 3) % 2);
        c.root = c.nranks - 1;
        c.inShift = in;
        c.outShift = out;
        ++n;
        if (n % kMatrixStride) continue;
        const std::string diff = compareRun(c);
        ASSERT_EQ(diff, "") << c.name();
      }
  }
  EXPECT_EQ(n, 10 * 5 * 5);
}

// ---- Failures end the run -------------------------------------------------
Case smallAllReduce(int P) {
  Case c;
  c.nranks = P;
  c.nchannels = 2;
  c.count = 1000;
  return c;
}

TEST(CudaInterp, HeaderOfAnotherCallStopsTheRun) {
  const Case c = smallAllReduce(3);
  const auto scheds = schedulesFor(c);
  auto bufs = makeBuffers(c, scheds[0].key);
  std::vector<uint64_t> calls(3, cuda::callHash(uint8_t(c.coll), c.count, c.dtype, c.op, c.root, 1));
  calls[1] = cuda::callHash(uint8_t(c.coll), c.count, c.dtype, c.op, c.root, 2);  // one call ahead
  const InterpRun run = runInterp(c, scheds, &bufs, calls);
  EXPECT_EQ(run.status.code(), hocclInvalidUsage);
  EXPECT_EQ(run.control.code, uint32_t(cuda::kDevMismatch));
  EXPECT_EQ(run.control.what, uint32_t(cuda::kWhatCall));
  // Rank 1 rejects rank 0's message, or a rank rejects rank 1's.
  EXPECT_TRUE(run.control.rank == 1 || run.control.peer == 1) << run.status.message();
  EXPECT_NE(run.status.message().find("belongs to another call"), std::string::npos) << run.status.message();
}

// Rank 1 runs the plan of a 1001-element call under the same call hash:
// the first message between them has the wrong size.
TEST(CudaInterp, MessageOfTheWrongSizeStopsTheRun) {
  Case c = smallAllReduce(2), odd = c;
  odd.count = c.count + 1;
  const auto scheds = schedulesFor(c), oddScheds = schedulesFor(odd);
  auto bufs = makeBuffers(c, scheds[0].key), oddBufs = makeBuffers(odd, oddScheds[0].key);
  const std::vector<Schedule> mixed = {scheds[0], oddScheds[1]};
  std::vector<RankBuffers> mixedBufs = {bufs[0], oddBufs[1]};
  const InterpRun run = runInterp(c, mixed, &mixedBufs);
  EXPECT_EQ(run.status.code(), hocclInvalidUsage);
  EXPECT_EQ(run.control.code, uint32_t(cuda::kDevMismatch));
  EXPECT_EQ(run.control.what, uint32_t(cuda::kWhatBytes));
  EXPECT_EQ(run.control.peer, 1 - run.control.rank);
  EXPECT_NE(run.control.expected, run.control.got);
  EXPECT_NE(run.status.message().find("bytes, expected"), std::string::npos) << run.status.message();
}

// The wait a missing rank leaves behind: the step of `channel` that first
// receives from `peer`.
int firstReceive(const Schedule& s, int channel, int peer) {
  const auto& steps = s.channels[channel].steps;
  for (size_t i = 0; i < steps.size(); ++i)
    if (steps[i].recvPeer == peer) return int(i);
  return -1;
}

TEST(CudaInterp, PeerThatNeverComesTimesOutNamingChannelStepAndPeer) {
  const Case c = smallAllReduce(2);
  const auto scheds = schedulesFor(c);
  auto bufs = makeBuffers(c, scheds[0].key);
  const InterpRun run = runInterp(c, scheds, &bufs, {}, {true, false}, 200'000'000);  // rank 1 never runs
  ASSERT_EQ(run.status.code(), hocclTimeout) << run.status.message();
  const DevControl& k = run.control;
  EXPECT_EQ(k.rank, 0);
  EXPECT_EQ(k.peer, 1);
  EXPECT_EQ(k.what, uint32_t(cuda::kWhatRecv));
  ASSERT_TRUE(k.channel == 0 || k.channel == 1);
  EXPECT_EQ(k.step, firstReceive(scheds[0], k.channel, 1));
  const std::regex want("rank 0 channel [01] step [0-9]+: timed out, waiting to receive from rank 1 .*");
  EXPECT_TRUE(std::regex_search(run.status.message(), want)) << run.status.message();
}

// Two ranks of `scheds` on `bufs`, of which only rank 0 runs (rank 1 never
// comes), every message carrying `call`.
template <class Bufs>
std::vector<HostRank> rankZeroAlone(const std::vector<Schedule>& scheds, Bufs& bufs, uint64_t call) {
  std::vector<HostRank> ranks(2);
  for (int r = 0; r < 2; ++r) {
    cuda::DevPlan plan;
    EXPECT_TRUE(cuda::flattenSchedule(scheds[r], &plan).ok());
    ranks[r].image = plan.image();
    ranks[r].input = bufs[r].in();
    ranks[r].output = bufs[r].out();
    ranks[r].call = call;
    ranks[r].run = r == 0;
  }
  return ranks;
}

TEST(CudaInterp, AbortWordStopsARunMidway) {
  const Case c = smallAllReduce(2);
  const auto scheds = schedulesFor(c);
  auto bufs = makeBuffers(c, scheds[0].key);
  // Rank 1 never comes and the timeout is far away: only the abort ends it.
  HostFabric fabric(c.slotBytes);
  cuda::DevConnMem* first = fabric.conn(0, 1, 0);  // made before the run's threads look it up
  std::vector<HostRank> ranks = rankZeroAlone(scheds, bufs, 7);
  HostRunOptions opt;
  opt.timeoutNs = 3600'000'000'000ull;
  DevControl control{};
  Status st;
  std::thread runner([&] { st = cuda::runPlansOnHost(ranks, &fabric, opt, &control); });
  // Rank 0 has sent its first message: it is running, and will wait for rank 1.
  while (__atomic_load_n(&first->tail, __ATOMIC_ACQUIRE) == 0) std::this_thread::yield();
  __atomic_store_n(&control.abort, 1u, __ATOMIC_RELEASE);
  runner.join();
  EXPECT_EQ(st.code(), hocclRemoteError) << st.message();
  EXPECT_EQ(control.code, uint32_t(cuda::kDevAborted));
  EXPECT_EQ(control.rank, 0);
  EXPECT_NE(st.message().find("aborted"), std::string::npos) << st.message();
}

// A launch that begins after its communicator was aborted (queued on the
// stream behind the launch the abort stopped) sends nothing: its first step
// is a send whose slot is free, which before any wait would have reached a
// peer still inside the aborted call, as a message of another call.
TEST(CudaInterp, ALaunchThatStartsAfterAnAbortSendsNothing) {
  const Case c = smallAllReduce(2);
  const auto scheds = schedulesFor(c);
  auto bufs = makeBuffers(c, scheds[0].key);
  HostFabric fabric(c.slotBytes);
  std::vector<cuda::DevConnMem*> edges = {fabric.conn(0, 1, 0), fabric.conn(1, 0, 0)};
  // Rank 0 alone: were it to send, nobody would take it.
  std::vector<HostRank> ranks = rankZeroAlone(scheds, bufs, 8);
  HostRunOptions opt;
  opt.keepControl = true;
  DevControl control{};
  control.abort = 1;
  const Status st = cuda::runPlansOnHost(ranks, &fabric, opt, &control);
  EXPECT_EQ(st.code(), hocclRemoteError) << st.message();
  EXPECT_EQ(control.code, uint32_t(cuda::kDevAborted));
  EXPECT_EQ(control.what, uint32_t(cuda::kWhatStart));
  EXPECT_NE(st.message().find("aborted before this launch began"), std::string::npos) << st.message();
  for (cuda::DevConnMem* m : edges) EXPECT_EQ(__atomic_load_n(&m->tail, __ATOMIC_ACQUIRE), 0u) << "a message was sent";
}

}  // namespace
}  // namespace hoccl
