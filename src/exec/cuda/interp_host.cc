// Host driver of the device-plan interpreter (interp_host.h).
#include "src/exec/cuda/interp_host.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>

#include "src/exec/cuda/plan.h"

namespace hoccl::cuda {
namespace {

static_assert(kCollAllReduce == uint8_t(CollKind::AllReduce) && kCollReduceScatter == uint8_t(CollKind::ReduceScatter) &&
                  kCollReduce == uint8_t(CollKind::Reduce),
              "dev_plan.h's DevColl must number collectives as CollKind does");

// A pause between polls on the host, which has fewer cores than the
// threads that poll (a fake GPU's lanes: channels x lanes threads per rank).
// A wait starts with yields, so that a peer lane that is about to answer is
// met at once; then it sleeps, 20 us at first and doubling to 1 ms. With
// yields alone (or a short sleep now and then), 8 ranks' lanes kept 40-60
// threads runnable on 2 cores at a million context switches a second:
// a proxy or socket thread with work waited its turn behind all of them (a
// call took seconds), and a process's heartbeat thread went unscheduled for
// up to 4.8 s, so that peers called a live process silent. A pause more
// than 200 us after the last one (the thread did work between) begins a
// new wait.
inline void hostPause() {
  constexpr uint32_t kYields = 64;
  constexpr int64_t kFirstSleepUs = 20, kMaxSleepUs = 1000, kNewWaitNs = 200000;
  thread_local uint32_t polls = 0;
  thread_local int64_t sleepUs = kFirstSleepUs;
  thread_local std::chrono::steady_clock::time_point last{};
  const auto now = std::chrono::steady_clock::now();
  if (now - last > std::chrono::nanoseconds(kNewWaitNs)) {
    polls = 0;
    sleepUs = kFirstSleepUs;
  }
  if (++polls <= kYields) {
    std::this_thread::yield();
  } else {
    std::this_thread::sleep_for(std::chrono::microseconds(sleepUs));
    sleepUs = std::min(2 * sleepUs, kMaxSleepUs);
  }
  last = std::chrono::steady_clock::now();
}

// A barrier of a channel's lane threads (sense-reversing; waiters pause).
class SpinBarrier {
 public:
  explicit SpinBarrier(uint32_t n) : n_(n) {}
  void wait() {
    const uint32_t gen = gen_.load(std::memory_order_acquire);
    if (count_.fetch_add(1, std::memory_order_acq_rel) + 1 == n_) {
      count_.store(0, std::memory_order_relaxed);
      gen_.store(gen + 1, std::memory_order_release);
      return;
    }
    while (gen_.load(std::memory_order_acquire) == gen) hostPause();
  }

 private:
  const uint32_t n_;
  std::atomic<uint32_t> count_{0};
  std::atomic<uint32_t> gen_{0};
};

// The lane policy of interp.h for host threads.
class HostLanes {
 public:
  HostLanes(uint32_t lane, uint32_t lanes, SpinBarrier* bar, uint64_t* shared)
      : lane_(lane), lanes_(lanes), bar_(bar), shared_(shared) {}
  uint32_t lane() const { return lane_; }
  uint32_t lanes() const { return lanes_; }
  void sync() {
    if (lanes_ > 1) bar_->wait();
  }
  uint64_t* shared() { return shared_; }
  static uint64_t load(const uint64_t* p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
  static uint64_t loadRelaxed(const uint64_t* p) { return __atomic_load_n(p, __ATOMIC_RELAXED); }
  static void store(uint64_t* p, uint64_t v) { __atomic_store_n(p, v, __ATOMIC_RELEASE); }
  static uint64_t fetchAdd(uint64_t* p, uint64_t v) { return __atomic_fetch_add(p, v, __ATOMIC_ACQ_REL); }
  static void storeRelaxed(uint64_t* p, uint64_t v) { __atomic_store_n(p, v, __ATOMIC_RELAXED); }
  static uint32_t load32(const uint32_t* p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
  static bool cas32(uint32_t* p, uint32_t expected, uint32_t v) {
    return __atomic_compare_exchange_n(p, &expected, v, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
  }
  static uint64_t nowNs() {
    return uint64_t(std::chrono::duration_cast<std::chrono::nanoseconds>(
                        std::chrono::steady_clock::now().time_since_epoch())
                        .count());
  }
  static void relax() { hostPause(); }
  // A poll yields or sleeps up to 1 ms (hostPause), so 1024 of them (the
  // GPU's count) would last a second or more: an abort or a peer's failure
  // would be seen that late, past hocclCommAbort's 0.5 s wait. Every 16th
  // poll looks up instead (a relaxed load and a clock read: cheap beside
  // the pause), at most about 16 ms apart.
  static constexpr uint32_t kPollShift = 4;

 private:
  uint32_t lane_, lanes_;
  SpinBarrier* bar_;
  uint64_t* shared_;
};

using ChannelFn = uint32_t (*)(const InterpArgs&, uint32_t, HostLanes&);

template <class T>
constexpr void fillRow(ChannelFn* row) {
  row[int(RedOp::Sum)] = &runChannel<T, Op<OpKind::Sum, T>, HostLanes>;
  row[int(RedOp::Prod)] = &runChannel<T, Op<OpKind::Prod, T>, HostLanes>;
  row[int(RedOp::Max)] = &runChannel<T, Op<OpKind::Max, T>, HostLanes>;
  row[int(RedOp::Min)] = &runChannel<T, Op<OpKind::Min, T>, HostLanes>;
  row[int(RedOp::Avg)] = &runChannel<T, Op<OpKind::Avg, T>, HostLanes>;
}

struct Table {
  ChannelFn fn[kNumDTypes][kNumRedOps] = {};
  constexpr Table() {
    fillRow<int8_t>(fn[int(DType::Int8)]);
    fillRow<uint8_t>(fn[int(DType::Uint8)]);
    fillRow<int32_t>(fn[int(DType::Int32)]);
    fillRow<uint32_t>(fn[int(DType::Uint32)]);
    fillRow<int64_t>(fn[int(DType::Int64)]);
    fillRow<uint64_t>(fn[int(DType::Uint64)]);
    fillRow<Half>(fn[int(DType::Float16)]);
    fillRow<float>(fn[int(DType::Float32)]);
    fillRow<double>(fn[int(DType::Float64)]);
    fillRow<Bf16>(fn[int(DType::Bfloat16)]);
  }
};
constexpr Table kTable;

ChannelFn channelFn(DType t, RedOp op) {
  if (int(t) >= kNumDTypes || int(op) >= kNumRedOps) return nullptr;
  return kTable.fn[int(t)][int(op)];
}

// One rank's state for the run.
struct RankRun {
  RankPlan rp;
  std::vector<DevConnMem*> conns;
  std::unique_ptr<uint64_t[]> stepsDone;
  std::unique_ptr<char[]> scratch;
  InterpArgs args{};
};

}  // namespace

HostFabric::HostFabric(size_t slotBytes) : slotBytes_((slotBytes + 15) & ~size_t(15)) {}

DevConnMem* HostFabric::conn(int from, int to, int link) {
  Edge& e = edges_[std::make_tuple(from, to, link)];
  if (!e.mem) {
    e.mem = std::make_unique<DevConnMem>();
    std::memset(static_cast<void*>(e.mem.get()), 0, sizeof(DevConnMem));
    e.slots = std::make_unique<uint8_t[]>(kDevSlots * slotBytes_);
    e.mem->dataOffset = reinterpret_cast<uintptr_t>(e.slots.get()) - reinterpret_cast<uintptr_t>(e.mem.get());
    e.mem->slotBytes = slotBytes_;
  }
  return e.mem.get();
}

bool interpSupports(DType t, RedOp op) { return channelFn(t, op) != nullptr; }


void runLaunchOnHost(DType t, RedOp op, const InterpArgs& a, uint32_t nchannels, int lanes) {
  const ChannelFn fn = channelFn(t, op);
  if (!fn || lanes < 1) return;  // callers check interpSupports
  // A channel's lanes share a barrier and the leader's four words.
  struct Group {
    SpinBarrier bar;
    uint64_t shared[4] = {};
    explicit Group(uint32_t n) : bar(n) {}
  };
  std::vector<std::unique_ptr<Group>> groups;
  std::vector<std::thread> threads;
  const uint32_t n = uint32_t(lanes);
  for (uint32_t c = 0; c < nchannels; ++c) {
    groups.push_back(std::make_unique<Group>(n));
    Group* g = groups.back().get();
    for (uint32_t l = 0; l < n; ++l)
      threads.emplace_back([fn, g, l, n, c, &a] {
        HostLanes hl(l, n, &g->bar, g->shared);
        fn(a, c, hl);
      });
  }
  for (std::thread& t : threads) t.join();
}

Status runPlansOnHost(const std::vector<HostRank>& ranks, HostFabric* fabric, const HostRunOptions& opt,
                      DevControl* control) {
  const ChannelFn fn = channelFn(opt.dtype, opt.op);
  if (!fn)
    return errorf(hocclInvalidArgument, "device plan interpreter: no %s %s", dtypeName(opt.dtype),
                  redOpName(opt.op));
  const size_t esize = dtypeSize(opt.dtype);
  const uint64_t slotElems = fabric->slotBytes() / esize;
  const uint64_t slice = opt.sliceElems ? opt.sliceElems : slotElems;
  if (slice == 0 || slice > slotElems || opt.lanes < 1)
    return errorf(hocclInvalidArgument, "device plan interpreter: %llu elements per message, slots hold %llu",
                  static_cast<unsigned long long>(slice), static_cast<unsigned long long>(slotElems));
  if (!opt.keepControl) std::memset(static_cast<void*>(control), 0, sizeof *control);
  std::vector<RankRun> runs(ranks.size());
  for (size_t r = 0; r < ranks.size(); ++r) {
    RankRun& rr = runs[r];
    HOCCL_TRY(readRankPlan(ranks[r].image, int(r), int(ranks.size()), slice, &rr.rp));
    const DevPlanHeader& h = rr.rp.plan.header;
    for (const DeviceEdge& e : rr.rp.edges) rr.conns.push_back(fabric->conn(e.from, e.to, e.link));
    rr.stepsDone = std::make_unique<uint64_t[]>(h.nchannels + 1);  // zeroed
    if (h.scratchCount) rr.scratch = std::make_unique<char[]>(h.scratchCount * esize);
    InterpArgs& a = rr.args;
    a.image = ranks[r].image.data();
    a.input = const_cast<char*>(static_cast<const char*>(ranks[r].input));
    a.output = static_cast<char*>(ranks[r].output);
    a.scratch = rr.scratch.get();
    a.conns = rr.conns.data();
    a.stepsDone = rr.stepsDone.get();
    a.control = control;
    a.call = ranks[r].call;
    a.sliceElems = slice;
    a.timeoutNs = opt.timeoutNs;
  }
  // Every rank's launch at once, as every rank's GPU (or stream) would.
  std::vector<std::thread> threads;
  for (size_t r = 0; r < ranks.size(); ++r) {
    if (!ranks[r].run) continue;
    threads.emplace_back([&opt, args = &runs[r].args, n = runs[r].rp.plan.header.nchannels] {
      runLaunchOnHost(opt.dtype, opt.op, *args, n, opt.lanes);
    });
  }
  for (std::thread& t : threads) t.join();
  HOCCL_TRY(runStatus(*control));
  // A launch that ends well leaves its steps-done counters zero for the
  // plan's next launch (its last channel zeroes them; the device executor
  // zeroes them only once).
  for (size_t r = 0; r < ranks.size(); ++r) {
    const uint32_t nch = runs[r].rp.plan.header.nchannels;
    for (uint32_t c = 0; ranks[r].run && c <= nch; ++c)
      if (runs[r].stepsDone[c] != 0)
        return errorf(hocclInternalError, "device plan interpreter: rank %zu's steps-done counter %u is %llu after "
                      "the launch, not 0", r, c, static_cast<unsigned long long>(runs[r].stepsDone[c]));
  }
  return Status();
}

}  // namespace hoccl::cuda
