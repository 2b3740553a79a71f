// Recursive doubling: log2(P) exchanges, for small messages where the ring's
// P-1 or 2(P-1) steps are all latency.
//
// With pof2 the largest power of two <= P and rem = P - pof2, the first
// 2 rem ranks pair up (2i, 2i+1): the even one, a remainder rank, hands its
// operand to the odd one, is excluded from the exchanges and receives its
// result at the end (RemainderRanks, phases.h). The pof2 active ranks get
// virtual ranks (odd rank 2i+1 -> i, rank r >= 2 rem -> r - rem) and
// exchange at distance d = 1, 2, 4, ... with virtual rank v ^ d. Partners
// are neighbours first (the same node, when ranks are numbered node by
// node). Virtual rank v stands for the real blocks [first(v), first(v + 1))
// -- two for a remainder pair, one otherwise -- so a run of virtual ranks is
// a run of blocks: every message below is one contiguous range of a buffer.
//
// All-reduce: every exchange swaps the whole partial sum; each rank computes
// received (op) own and its partner own (op) received, the same bits for the
// commutative ops NCCL defines, so all ranks end with identical bits.
// All-gather: before the exchange at distance d a rank holds the blocks of
// its d virtual ranks v & ~(d-1)...; it sends them and receives its
// partner's, into their places in the output.
// Reduce-scatter (recursive halving): at d = pof2/2, pof2/4, ..., 1 a rank
// sends its partial sums of the half of its range that its partner keeps and
// reduces the partner's into the half it keeps (Scratch holds the partial
// sums); it ends with its own block.
//
// Messages carry at most key.maxStepCount elements: each exchange is cut
// into rounds of "send a piece, then receive the partner's", which needs
// room for one message per edge.
#include <algorithm>

#include "algorithms/cost.h"
#include "algorithms/phases.h"
#include "algorithms/registry.h"

namespace hoccl {
namespace {

void doublingAllGather(ChannelBuilder& ch, const ScheduleKey& key) {
  const RemainderRanks rr(key.nranks);
  const int r = key.rank;
  const uint64_t c = key.count;
  auto out = [&](int block) { return Slice{Buf::Output, uint64_t(block) * c}; };
  ch.copy(inputSlice(key, 0, c), out(r), c);
  if (rr.P == 1) return;
  if (rr.excluded(r)) {
    ch.add(-1, r + 1, false, out(r), Slice{}, c);
    ch.add(r + 1, -1, false, Slice{}, out(0), uint64_t(rr.P) * c);
    return;
  }
  if (r < 2 * rr.rem) ch.add(r - 1, -1, false, Slice{}, out(r - 1), c);
  const int v = rr.virt(r);
  for (int d = 1; d < rr.pof2; d *= 2) {
    const int mine = v & ~(d - 1), theirs = (v ^ d) & ~(d - 1);
    const uint64_t myLen = uint64_t(rr.first(mine + d) - rr.first(mine)) * c;
    const uint64_t theirLen = uint64_t(rr.first(theirs + d) - rr.first(theirs)) * c;
    pairExchange(ch, rr.real(v ^ d), out(rr.first(mine)), myLen, Slice{}, out(rr.first(theirs)), theirLen,
                 key.maxStepCount);
  }
  if (r < 2 * rr.rem) ch.add(-1, r - 1, false, out(0), Slice{}, uint64_t(rr.P) * c);
}

void halvingReduceScatter(ChannelBuilder& ch, Schedule& s, const ScheduleKey& key) {
  const RemainderRanks rr(key.nranks);
  const int r = key.rank;
  const uint64_t c = key.count;
  const Slice result{Buf::Output, 0};
  if (rr.P == 1) {
    ch.copy(inputSlice(key, 0, c), result, c);
    return;
  }
  const uint64_t all = uint64_t(rr.P) * c;
  if (rr.excluded(r)) {
    ch.add(-1, r + 1, false, inputSlice(key, 0, all), Slice{}, all);
    ch.add(r + 1, -1, false, Slice{}, result, c);
    return;
  }
  s.scratchCount = all;  // partial sums, by block
  auto acc = [&](int block) { return Slice{Buf::Scratch, uint64_t(block) * c}; };
  // Where the partial sum of block j lives: the input until this rank has
  // reduced something into it.
  bool inScratch = false;
  auto cur = [&](int block, uint64_t len) {
    return inScratch ? acc(block) : inputSlice(key, uint64_t(block) * c, len);
  };
  if (r < 2 * rr.rem) {
    ch.add(r - 1, -1, true, inputSlice(key, 0, all), acc(0), all);
    inScratch = true;
  }
  const int v = rr.virt(r);
  for (int d = rr.pof2 / 2; d >= 1; d /= 2) {
    const int keep = v & ~(d - 1), give = (v ^ d) & ~(d - 1);
    const uint64_t keepLen = uint64_t(rr.first(keep + d) - rr.first(keep)) * c;
    const uint64_t giveLen = uint64_t(rr.first(give + d) - rr.first(give)) * c;
    pairExchange(ch, rr.real(v ^ d), cur(rr.first(give), giveLen), giveLen, cur(rr.first(keep), keepLen),
                 acc(rr.first(keep)), keepLen, key.maxStepCount);
    inScratch = true;
  }
  if (r < 2 * rr.rem) ch.add(-1, r - 1, false, acc(r - 1), Slice{}, c);
  ch.copy(acc(r), result, c);
}

}  // namespace

Schedule buildDoubling(const ScheduleKey& key) {
  if (key.coll != CollKind::AllReduce && key.coll != CollKind::AllGather && key.coll != CollKind::ReduceScatter)
    return ringFallback(key, "ring (fallback: doubling is for all-reduce, all-gather and reduce-scatter)");
  Schedule s = oneChannelSchedule(key, "doubling");
  ChannelBuilder ch(s, 0);
  if (key.coll == CollKind::AllGather) {
    doublingAllGather(ch, key);
    return s;
  }
  if (key.coll == CollKind::ReduceScatter) {
    halvingReduceScatter(ch, s, key);
    return s;
  }
  const int P = key.nranks, r = key.rank;
  const uint64_t n = key.count;
  const Slice in{key.inPlace ? Buf::Output : Buf::Input, 0}, out{Buf::Output, 0};
  SubGroup all;
  for (int i = 0; i < P; ++i) all.members.push_back(i);
  all.pos = r;
  doublingAllReduce(ch, all, in, out, n, key.maxStepCount);
  return s;
}

// The remainder's hand-over, log2(pof2) exchanges, the result's return to
// the remainder; one channel. All-reduce exchanges the whole buffer each
// time; all-gather d blocks at distance d, reduce-scatter d blocks at
// d = pof2/2 ... 1 (a remainder pair's virtual rank
// counts as its larger share).
CostPlan doublingCost(const CostQuery& q) {
  CostPlan plan;
  plan.shape = "doubling";
  std::vector<int> all;
  for (int i = 0; i < q.nranks; ++i) all.push_back(i);
  if (q.coll == CollKind::AllReduce) {
    appendDoublingCost(all, q.bytes, &plan.phases);
    return plan;
  }
  const RemainderRanks rr(q.nranks);
  if (rr.P < 2) return plan;
  const double block = q.bytes / q.nranks, span = rr.rem ? 2 : 1;  // blocks per virtual rank, at most
  const bool reduce = q.coll == CollKind::ReduceScatter;
  std::vector<CostMessage> handOver, giveBack;  // between the remainder's pairs
  for (int i = 0; i < rr.rem; ++i) {
    handOver.push_back({2 * i, 2 * i + 1});
    giveBack.push_back({2 * i + 1, 2 * i});
  }
  if (!handOver.empty()) plan.phases.push_back(exchangePhase(handOver, reduce ? q.bytes : block, reduce, 1));
  std::vector<int> distances;
  for (int d = 1; d < rr.pof2; d *= 2) distances.push_back(d);
  if (reduce) std::reverse(distances.begin(), distances.end());
  for (int d : distances) {
    std::vector<CostMessage> x;
    for (int v = 0; v < rr.pof2; ++v) x.push_back({rr.real(v), rr.real(v ^ d)});
    plan.phases.push_back(exchangePhase(x, block * span * d, reduce, 1));
  }
  if (!giveBack.empty()) plan.phases.push_back(exchangePhase(giveBack, reduce ? block : q.bytes, false, 1));
  return plan;
}

}  // namespace hoccl
