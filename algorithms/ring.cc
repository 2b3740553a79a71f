// The flat ring: the ring phases of phases.h on the sub-group of all ranks
// in rank order (member r sends to r+1), one ring per channel for
// all-reduce, reduce-scatter and all-gather; the chain phases from the root
// for broadcast and reduce. Each channel owns a near-equal part of the data
// (partStart) and runs independently, so a channel whose part is empty has
// no steps.
//
// Rounds: a ring is a cycle, so messages are bounded by key.maxStepCount.
// An all-reduce round is P messages' worth of the part, cut into P
// near-equal chunks; a reduce-scatter or all-gather round is one message of
// every block. Each round is one pass of the phase with no further limit.
#include <algorithm>

#include "algorithms/cost.h"
#include "algorithms/phases.h"
#include "algorithms/registry.h"

namespace hoccl {
namespace {

Slice in(uint64_t offset) { return Slice{Buf::Input, offset}; }
Slice out(uint64_t offset) { return Slice{Buf::Output, offset}; }

struct Part {
  uint64_t base, len;
};

SubGroup allRanks(const ScheduleKey& k, int first) {
  SubGroup g;
  for (int i = 0; i < k.nranks; ++i) g.members.push_back((first + i) % k.nranks);
  g.pos = (k.rank - first + k.nranks) % k.nranks;
  return g;
}

// Chunk c of the part; after the reduce-scatter half rank r holds chunk r+1,
// which is block r of the phase.
void allReduce(ChannelBuilder& ch, const ScheduleKey& k, Part p) {
  const int P = k.nranks;
  std::vector<Block> blocks(P);
  for (int j = 0; j < P; ++j) {
    const int c = (j + 1) % P;
    const uint64_t at = p.base + partStart(p.len, P, c);
    blocks[j] = Block{in(at), out(at), partSize(p.len, P, c)};
  }
  ringAllReduce(ch, allRanks(k, 0), blocks, 0);
}

// Block j of the input is [j*count, (j+1)*count); rank r reduces block r
// into its output. In place, Output aliases block r: the last step reads it
// and writes it back.
void reduceScatter(ChannelBuilder& ch, const ScheduleKey& k, Part p) {
  std::vector<Block> blocks(k.nranks);
  for (int j = 0; j < k.nranks; ++j)
    blocks[j] = Block{in(uint64_t(j) * k.count + p.base), j == k.rank ? out(p.base) : Slice{}, p.len};
  ringReduceScatter(ch, allRanks(k, 0), blocks, 0);
}

// Block j of the output is rank j's input. In place, Input already is
// block r: naming it as the block's destination sends it without a copy.
void allGather(ChannelBuilder& ch, const ScheduleKey& k, Part p) {
  std::vector<Block> blocks(k.nranks);
  for (int j = 0; j < k.nranks; ++j) {
    const Slice dst = out(uint64_t(j) * k.count + p.base);
    blocks[j] = j == k.rank ? Block{in(p.base), k.inPlace ? in(p.base) : dst, p.len} : Block{Slice{}, dst, p.len};
  }
  ringAllGather(ch, allRanks(k, 0), blocks, 0);
}

// Broadcast: the chain root -> root+1 -> ... -> root-1. Reduce: the chain
// root+1 -> root+2 -> ... -> root, i.e. towards members[0] = root of the
// group root, root-1, root-2, ...
void rooted(ChannelBuilder& ch, const ScheduleKey& k, Part p) {
  const Slice src = in(p.base), dst = out(p.base);
  if (k.coll == CollKind::Broadcast) {
    // In place the root's input is its output: naming it so sends it without a copy.
    chainBroadcast(ch, allRanks(k, k.root), src, k.inPlace && k.rank == k.root ? src : dst, p.len);
    return;
  }
  SubGroup g;
  for (int i = 0; i < k.nranks; ++i) g.members.push_back((k.root - i + k.nranks) % k.nranks);
  g.pos = (k.root - k.rank + k.nranks) % k.nranks;
  chainReduce(ch, g, src, dst, p.len);
}

}  // namespace

Schedule buildRing(const ScheduleKey& key) {
  Schedule s = newSchedule(key, "ring");
  const int nch = s.key.nchannels;
  s.channels.resize(nch);
  if (key.nranks < 1 || key.rank < 0 || key.rank >= key.nranks) return s;
  const bool isRooted = key.coll == CollKind::Broadcast || key.coll == CollKind::Reduce;
  if (isRooted && (key.root < 0 || key.root >= key.nranks)) return s;
  if (key.nranks == 1 && key.inPlace) return s;  // nothing to move
  for (int c = 0; c < nch; ++c) {
    ChannelBuilder ch(s, c);
    const Part part{partStart(key.count, nch, c), partSize(key.count, nch, c)};
    if (part.len == 0) continue;
    if (isRooted) {
      // A chain has no cycle: one step per rank, pipelined by the executor.
      rooted(ch, key, part);
      continue;
    }
    uint64_t round = part.len;
    if (key.maxStepCount > 0)
      round = key.coll == CollKind::AllReduce ? key.maxStepCount * uint64_t(key.nranks) : key.maxStepCount;
    for (uint64_t done = 0; done < part.len; done += round) {
      const Part q{part.base + done, std::min(round, part.len - done)};
      switch (key.coll) {
        case CollKind::AllReduce: allReduce(ch, key, q); break;
        case CollKind::ReduceScatter: reduceScatter(ch, key, q); break;
        default: allGather(ch, key, q); break;
      }
    }
  }
  return s;
}

std::vector<int> ranksInOrder(int P) {
  std::vector<int> v(static_cast<size_t>(P));
  for (int i = 0; i < P; ++i) v[size_t(i)] = i;
  return v;
}

// A reduce-scatter half then an all-gather half of P-1 steps of a P-th each;
// broadcast and reduce are priced as the all-gather and reduce-scatter
// whose bytes their pipelined chains move.
CostPlan ringCost(const CostQuery& q) {
  CollKind coll = q.coll;
  if (coll == CollKind::Broadcast) coll = CollKind::AllGather;
  if (coll == CollKind::Reduce) coll = CollKind::ReduceScatter;
  const int P = q.nranks;
  CostPlan plan;
  plan.shape = "ring";
  if (coll != CollKind::AllGather) plan.phases.push_back(ringsPhase({ranksInOrder(P)}, q.bytes / P, P - 1, true));
  if (coll != CollKind::ReduceScatter) plan.phases.push_back(ringsPhase({ranksInOrder(P)}, q.bytes / P, P - 1, false));
  return plan;
}

}  // namespace hoccl
