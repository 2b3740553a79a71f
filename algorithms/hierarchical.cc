// Leader-based hierarchical collectives (docs/algorithms.md, the algorithms table),
// composed of flat phases on sub-groups (phases.h) that run in sequence:
//   all-reduce      chain reduce to the group's leader, ring all-reduce
//                   among the leaders, chain broadcast from the leader;
//   reduce-scatter  chain reduce of the whole input to the leader (kept in
//                   Scratch: P*count elements, at leaders only), leaders'
//                   ring reduce-scatter of group-sized blocks (one ring pass
//                   per local index), star scatter of each member's block;
//   all-gather      the mirror: star gather to the leader straight into its
//                   output, leaders' ring all-gather of group-sized blocks,
//                   chain broadcast of the whole output from the leader.
// The leader is a group's lowest rank; leaders are ringed in switch order.
// Uneven groups need nothing special (a column of the leaders' ring where a
// group has no member is simply an empty block).
//
// Channels: key.nchannels of them, each owning a near-equal part of the
// data (of every block for reduce-scatter and all-gather), as ring.cc's
// channels do. The phases of a part run in sequence on its channel;
// chains and stars are one step per message, which the executor pipelines
// in slices; the leaders' ring honours key.maxStepCount.
#include <algorithm>

#include "algorithms/cost.h"
#include "algorithms/phases.h"
#include "algorithms/registry.h"

namespace hoccl {
namespace {

struct Range {
  uint64_t base = 0, len = 0;
};

Slice out(uint64_t offset) { return Slice{Buf::Output, offset}; }

// Calls fn(offset, len) on runs covering elements `r` of each of the P
// blocks of `count` elements: a single run when r is the whole block.
template <class F>
void forRuns(uint64_t count, int P, Range r, F fn) {
  if (r.len == count) {
    fn(0, count * uint64_t(P));
    return;
  }
  for (int b = 0; b < P; ++b) fn(uint64_t(b) * count + r.base, r.len);
}

// The leaders' passes: pass c moves, through a ring of the leaders, the
// block of every group q's member c (rank b), as block(c, q, b) makes it.
template <class MakeBlock, class Ring>
void railPasses(const Hierarchy& h, MakeBlock block, Ring ring) {
  for (int c = 0; c < h.rails; ++c) {
    std::vector<Block> blocks(h.ngroups());
    for (int q = 0; q < h.ngroups(); ++q) {
      const int b = h.owner(q, c);
      if (b >= 0) blocks[q] = block(c, q, b);
    }
    ring(blocks);
  }
}

// How the leaders all-reduce their groups' sums.
enum class LeaderPhase { Ring, Doubling };

void allReduce(ChannelBuilder& ch, const ScheduleKey& k, const Hierarchy& h, Range part, LeaderPhase leaders) {
  const SubGroup group = h.group();
  const Slice dst = out(part.base);
  Slice sum = inputSlice(k, part.base, part.len);  // the group's sum, at the leader
  if (group.size() > 1) {
    chainReduce(ch, group, sum, dst, part.len);
    sum = dst;
  }
  if (h.myLocal == 0 && leaders == LeaderPhase::Doubling) {
    doublingAllReduce(ch, h.leaders(), sum, dst, part.len, k.maxStepCount);
  } else if (h.myLocal == 0) {
    std::vector<Block> blocks(h.ngroups());
    for (int q = 0; q < h.ngroups(); ++q) {
      const uint64_t at = partStart(part.len, h.ngroups(), q);
      blocks[q] = Block{shifted(sum, at), shifted(dst, at), partSize(part.len, h.ngroups(), q)};
    }
    ringAllReduce(ch, h.leaders(), blocks, k.maxStepCount);
  }
  if (group.size() > 1) chainBroadcast(ch, group, dst, dst, part.len);
}

void reduceScatter(ChannelBuilder& ch, const ScheduleKey& k, const Hierarchy& h, Range part) {
  const uint64_t n = k.count;
  const SubGroup group = h.group();
  const bool alone = group.size() == 1;
  // Where the leader keeps its group's sum of rank b's block.
  auto sum = [&](int b) {
    const uint64_t at = uint64_t(b) * n + part.base;
    return alone ? inputSlice(k, at, part.len) : Slice{Buf::Scratch, at};
  };
  if (!alone) {
    forRuns(n, k.nranks, part, [&](uint64_t at, uint64_t len) {
      chainReduce(ch, group, inputSlice(k, at, len), Slice{Buf::Scratch, at}, len);
    });
  }
  if (h.myLocal == 0) {
    railPasses(h, [&](int c, int q, int b) {
      const Slice dst = q != h.myGroup ? Slice{} : c == 0 ? out(part.base) : sum(b);
      return Block{sum(b), dst, part.len};
    }, [&](const std::vector<Block>& blocks) { ringReduceScatter(ch, h.leaders(), blocks, k.maxStepCount); });
  }
  if (!alone) {
    std::vector<Block> blocks(group.size());
    for (int i = 0; i < group.size(); ++i) {
      blocks[i] = Block{i == 0 ? out(part.base) : sum(group.members[i]), out(part.base), part.len};
    }
    starScatter(ch, group, blocks);
  }
}

void allGather(ChannelBuilder& ch, const ScheduleKey& k, const Hierarchy& h, Range part) {
  const uint64_t n = k.count;
  const SubGroup group = h.group();
  const Slice mine = inputSlice(k, part.base, part.len);
  auto blockOf = [&](int b) { return out(uint64_t(b) * n + part.base); };
  if (group.size() > 1) {
    std::vector<Block> blocks(group.size());
    for (int i = 0; i < group.size(); ++i) {
      blocks[i] = Block{i == group.pos ? mine : Slice{}, blockOf(group.members[i]), part.len};
    }
    starGather(ch, group, blocks);
  }
  if (h.myLocal == 0) {
    railPasses(h, [&](int, int, int b) {
      // Gathered into Output already unless the leader is alone.
      return Block{b == h.rank && group.size() == 1 ? mine : blockOf(b), blockOf(b), part.len};
    }, [&](const std::vector<Block>& blocks) { ringAllGather(ch, h.leaders(), blocks, k.maxStepCount); });
  }
  if (group.size() > 1) {
    forRuns(n, k.nranks, part,
            [&](uint64_t at, uint64_t len) { chainBroadcast(ch, group, out(at), out(at), len); });
  }
}

// A chain through every group at once (members[0] is the root), moving
// `bytes` pipelined in slices: one pass over the slowest link, plus a
// latency per hop.
CostPhase chainCost(const Hierarchy& h, double bytes, bool reduce, bool towardsRoot) {
  std::vector<CostMessage> edges;
  int hops = 0;
  for (const std::vector<int>& g : h.groups) {
    for (size_t i = 1; i < g.size(); ++i)
      edges.push_back(towardsRoot ? CostMessage{g[i], g[i - 1]} : CostMessage{g[i - 1], g[i]});
    hops = std::max(hops, int(g.size()) - 1);
  }
  return exchangePhase(edges, bytes, reduce, 0, hops - 1);
}

// A star in every group: the root sends (or receives) one block to (from)
// each member; the root's path serialises them.
CostPhase starCost(const Hierarchy& h, double block, bool scatter) {
  std::vector<CostMessage> edges;
  for (const std::vector<int>& g : h.groups)
    for (size_t i = 1; i < g.size(); ++i) edges.push_back(scatter ? CostMessage{g[0], g[i]} : CostMessage{g[i], g[0]});
  return exchangePhase(edges, block, false);
}

}  // namespace

Schedule buildHierarchical(const ScheduleKey& key) {
  Hierarchy h;
  if (auto ring = groupedFallback(key, "ring (fallback: hierarchical has no broadcast/reduce)", &h)) return *ring;
  Schedule s = newSchedule(key, "hierarchical");
  const int nch = s.key.nchannels;
  s.channels.resize(nch);
  if (key.coll == CollKind::ReduceScatter && h.myLocal == 0 && h.mySize() > 1) {
    s.scratchCount = uint64_t(key.nranks) * key.count;
  }
  for (int c = 0; c < nch; ++c) {
    ChannelBuilder ch(s, c);
    const Range part{partStart(key.count, nch, c), partSize(key.count, nch, c)};
    if (part.len == 0) continue;
    switch (key.coll) {
      case CollKind::AllReduce: allReduce(ch, key, h, part, LeaderPhase::Ring); break;
      case CollKind::ReduceScatter: reduceScatter(ch, key, h, part); break;
      default: allGather(ch, key, h, part); break;
    }
  }
  return s;
}

Schedule buildLeaderDoubling(const ScheduleKey& key) {
  if (key.coll != CollKind::AllReduce) return ringFallback(key, "ring (fallback: leaderdoubling is all-reduce only)");
  Hierarchy h;
  if (auto ring = groupedFallback(key, "ring (fallback: leaderdoubling is all-reduce only)", &h)) return *ring;
  Schedule s = newSchedule(key, "leaderdoubling");
  s.key.nchannels = 1;
  s.channels.resize(1);
  ChannelBuilder ch(s, 0);
  allReduce(ch, key, h, Range{0, key.count}, LeaderPhase::Doubling);
  return s;
}

CostPlan hierarchicalCost(const CostQuery& q) {
  const Hierarchy h = queryHierarchy(q);
  const int N = h.ngroups(), P = q.nranks;
  const double M = q.bytes;
  const std::vector<int> leaders = h.leaders().members;
  CostPlan plan;
  plan.shape = "hierarchical";
  std::vector<CostPhase>& ph = plan.phases;
  if (q.coll == CollKind::AllReduce) {
    ph.push_back(chainCost(h, M, true, true));
    if (N > 1) {
      ph.push_back(ringsPhase({leaders}, M / N, N - 1, true));
      ph.push_back(ringsPhase({leaders}, M / N, N - 1, false));
    }
    ph.push_back(chainCost(h, M, false, false));
  } else if (q.coll == CollKind::ReduceScatter) {
    ph.push_back(chainCost(h, M, true, true));
    if (N > 1) ph.push_back(ringsPhase({leaders}, M / P, h.rails * (N - 1), true));
    ph.push_back(starCost(h, M / P, true));
  } else {
    ph.push_back(starCost(h, M / P, false));
    if (N > 1) ph.push_back(ringsPhase({leaders}, M / P, h.rails * (N - 1), false));
    ph.push_back(chainCost(h, M, false, false));
  }
  return plan;
}

}  // namespace hoccl

namespace hoccl {

// Chain reduce in every group, the leaders' recursive doubling of the whole
// buffer, chain broadcast; one channel.
CostPlan leaderDoublingCost(const CostQuery& q) {
  const Hierarchy h = queryHierarchy(q);
  CostPlan plan;
  plan.shape = "leaderdoubling";
  plan.phases.push_back(chainCost(h, q.bytes, true, true));
  appendDoublingCost(h.leaders().members, q.bytes, &plan.phases);
  plan.phases.push_back(chainCost(h, q.bytes, false, false));
  return plan;
}

}  // namespace hoccl
