// Host driver of the device-plan interpreter (interp_host.h).
#include "src/exec/cuda/interp_host.h"

#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>

#include "src/exec/cuda/plan.h"

namespace hoccl::cuda {
namespace {

// A barrier of a channel's lane threads (sense-reversing; waiters yield:
// the host has fewer cores than threads).
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
    while (gen_.load(std::memory_order_acquire) == gen) std::this_thread::yield();
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
  static uint32_t load32(const uint32_t* p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
  static bool cas32(uint32_t* p, uint32_t expected, uint32_t v) {
    return __atomic_compare_exchange_n(p, &expected, v, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
  }
  static uint64_t nowNs() {
    return uint64_t(std::chrono::duration_cast<std::chrono::nanoseconds>(
                        std::chrono::steady_clock::now().time_since_epoch())
                        .count());
  }
  static void relax() { std::this_thread::yield(); }

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
}

struct Table {
  ChannelFn fn[kNumDTypes][4] = {};
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
  if (int(t) >= kNumDTypes || int(op) > int(RedOp::Min)) return nullptr;
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
    e.mem->data = e.slots.get();
    e.mem->slotBytes = slotBytes_;
  }
  return e.mem.get();
}

bool interpSupports(DType t, RedOp op) { return channelFn(t, op) != nullptr; }

uint64_t callHash(uint8_t coll, uint64_t count, DType t, RedOp op, int root, uint64_t opSeq) {
  const uint64_t words[] = {coll, count, uint64_t(t), uint64_t(op), uint64_t(uint32_t(root)), opSeq};
  uint64_t h = 1469598103934665603ull;  // FNV-1a over the words' bytes
  for (uint64_t w : words)
    for (int b = 0; b < 8; ++b) h = (h ^ ((w >> (8 * b)) & 0xff)) * 1099511628211ull;
  return h;
}

std::string describeFailure(const DevControl& k) {
  static const char* const kCodes[] = {"ok", "aborted", "header mismatch", "timed out", "unsupported step",
                                       "stopped"};
  const char* code = k.code < 6 ? kCodes[k.code] : "unknown failure";
  std::string where = "rank " + std::to_string(k.rank) + " channel " + std::to_string(k.channel) + " step " +
                      std::to_string(k.step);
  const std::string peer = std::to_string(k.peer), want = std::to_string(k.expected),
                    got = std::to_string(k.got);
  std::string what;
  switch (k.what) {
    case kWhatRecv:
      what = "waiting to receive from rank " + peer + " (message " + want + " on this connection, " + got +
             " arrived)";
      break;
    case kWhatSend:
      what = "waiting for a free slot to send to rank " + peer + " (" + got + " of the messages sent were taken, " +
             want + " needed)";
      break;
    case kWhatDep: what = "waiting for channel " + peer + " to complete step " + std::to_string(k.expected - 1); break;
    case kWhatCall: what = "message from rank " + peer + " belongs to another call (hash " + got + ", expected " + want + ")"; break;
    case kWhatBytes: what = "message from rank " + peer + " has " + got + " bytes, expected " + want; break;
    case kWhatSeq: what = "message from rank " + peer + " is number " + got + ", expected " + want; break;
    case kWhatPart: what = "point-to-point buffers are not supported"; break;
    default: what = "?"; break;
  }
  return std::string("device plan interpreter: ") + where + ": " + code + ", " + what;
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
  std::memset(static_cast<void*>(control), 0, sizeof *control);
  std::vector<RankRun> runs(ranks.size());
  for (size_t r = 0; r < ranks.size(); ++r) {
    RankRun& rr = runs[r];
    HOCCL_TRY(readRankPlan(ranks[r].image, int(r), int(ranks.size()), slice, &rr.rp));
    const DevPlanHeader& h = rr.rp.plan.header;
    for (const PlanEdge& e : rr.rp.edges) rr.conns.push_back(fabric->conn(e.from, e.to, e.link));
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
  // A channel's lanes share a barrier and the leader's four words.
  struct Group {
    SpinBarrier bar;
    uint64_t shared[4] = {};
    explicit Group(uint32_t n) : bar(n) {}
  };
  std::vector<std::unique_ptr<Group>> groups;
  std::vector<std::thread> threads;
  const uint32_t lanes = uint32_t(opt.lanes);
  for (size_t r = 0; r < ranks.size(); ++r) {
    if (!ranks[r].run) continue;
    for (uint32_t c = 0; c < runs[r].rp.plan.header.nchannels; ++c) {
      groups.push_back(std::make_unique<Group>(lanes));
      Group* g = groups.back().get();
      for (uint32_t l = 0; l < lanes; ++l)
        threads.emplace_back([fn, g, l, lanes, c, args = &runs[r].args] {
          HostLanes hl(l, lanes, &g->bar, g->shared);
          fn(*args, c, hl);
        });
    }
  }
  for (std::thread& t : threads) t.join();
  return runStatus(*control);
}

Status runStatus(const DevControl& k) {
  if (k.code == kDevOk) return Status();
  const hocclResult_t rc = k.code == kDevMismatch    ? hocclInvalidUsage
                           : k.code == kDevTimeout   ? hocclTimeout
                           : k.code == kDevAborted   ? hocclRemoteError
                                                     : hocclInvalidArgument;
  return Status(rc, describeFailure(k));
}

Status readRankPlan(const std::vector<uint8_t>& image, int rank, int nranks, uint64_t sliceElems, RankPlan* out) {
  out->edges.clear();
  HOCCL_TRY(readPlanImage(image.data(), image.size(), &out->plan));
  const DevPlan& p = out->plan;
  const DevPlanHeader& h = p.header;
  if (h.rank != rank || h.nranks != nranks)
    return errorf(hocclInvalidArgument, "device plan interpreter: plan %d is rank %d of %d", rank, h.rank, h.nranks);
  if (h.maxStepCount > uint64_t(kDevSlots / 2) * sliceElems)
    return errorf(hocclInvalidArgument,
                  "device plan interpreter: rank %d's steps may carry %llu elements, more than half of "
                  "the %u slots of %llu", rank, static_cast<unsigned long long>(h.maxStepCount), kDevSlots,
                  static_cast<unsigned long long>(sliceElems));
  for (size_t c = 0; c < p.channels.size(); ++c) {
    const DevChannel& ch = p.channels[c];
    const int link = ch.link >= 0 ? ch.link : int(c);
    for (uint32_t i = 0; i < ch.nconns; ++i) {
      const DevConn& cn = p.conns[ch.firstConn + i];
      out->edges.push_back(cn.send ? PlanEdge{rank, cn.peer, link} : PlanEdge{cn.peer, rank, link});
    }
  }
  return Status();
}

}  // namespace hoccl::cuda
