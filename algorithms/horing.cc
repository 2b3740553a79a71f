// HO-Ring (docs/algorithms.md, "HO-Ring") composed of flat ring phases
// (phases.h) on sub-groups:
//   intra  ring reduce-scatter inside each group: member i ends with the
//          group's sum of shard i;
//   rail   S concurrent rail rings, rail s through the member serving it in
//          every group (groups in switch order), each all-reducing shard s
//          (reduce-scatter: reducing / all-gather: gathering its blocks);
//   gather ring all-gather inside each group.
// All-reduce = intra, rail, gather; reduce-scatter = intra, rail;
// all-gather = rail, gather.
//
// Channels. The data is cut into key.nchannels near-equal parts, as
// ring.cc's channels cut it; part c has one channel per phase, numbered
// c * phases + phase in the order above (all-reduce 3 per part, the others
// 2). Phases run concurrently on their channels: each part is cut
// into pipeline chunks, and chunk k of a phase waits (depChannel/depStep)
// only for chunk k of the phase before it on this rank, so the group works
// on chunk k+1 while the rails carry chunk k. A phase that is trivial on
// every rank (one group: no rails; groups of one: no intra phases) is left
// out, so N = 1 and G = 1 build exactly a plain ring.
//
// Data layout. All-reduce: a chunk is cut into S shards; member i of a group
// of G reduces shards i, i+G, ... and serves those rails. Reduce-scatter:
// the member serving rail s needs, for every group q, the group's sum of the
// block of rank (q, s) (rank with local index s in group q), because the
// rail's reduce-scatter leaves block (q, s) at position q. So the intra
// reduce-scatter runs on blocks in that permuted order, one ring pass per
// (G rails, group q) column, and keeps the sums in Output (its own block)
// and Scratch (the others: (N-1)*count elements when groups are even).
// All-gather mirrors it with no scratch: the rails gather straight into
// Output, then the group passes the blocks around.
//
// Uneven groups run HO-Ring, not a ring: S is the largest group, and a
// member of a smaller group serves rails s = its index mod its group size;
// in a rail s beyond its group's size it is a guest (owns no block, carries
// traffic). Its NIC carries proportionally more, which is the smaller
// group's share of the work.
#include <algorithm>

#include "algorithms/phases.h"
#include "algorithms/registry.h"

namespace hoccl {
namespace {

struct Range {
  uint64_t base = 0, len = 0;
};

Range partOf(Range r, uint64_t parts, uint64_t i) {
  return Range{r.base + partStart(r.len, parts, i), partSize(r.len, parts, i)};
}

Slice out(uint64_t offset) { return Slice{Buf::Output, offset}; }

// The blocks of a ring pass over `whole` cut into n parts:
// part j goes from src(part) to the output at the part's offset.
template <typename Src>
std::vector<Block> partBlocks(Range whole, int n, Src src) {
  std::vector<Block> blocks(n);
  for (int j = 0; j < n; ++j) {
    const Range r = partOf(whole, n, j);
    blocks[j] = Block{src(r), out(r.base), r.len};
  }
  return blocks;
}
Slice outPart(Range r) { return out(r.base); }

// The channels of one part's phases, in pipeline order; absent ones are null.
struct PhaseChannels {
  ChannelBuilder* intra = nullptr;   // reduce-scatter inside the group
  ChannelBuilder* swRS = nullptr;    // switch level: reduce-scatter among a rail's servers under one switch
  ChannelBuilder* rail = nullptr;    // the rail ring (with a switch level: across switches)
  ChannelBuilder* swAG = nullptr;    // switch level: all-gather among a rail's servers under one switch
  ChannelBuilder* gather = nullptr;  // all-gather inside the group
};

class Builder {
 public:
  Builder(const ScheduleKey& key, const Hierarchy& h, Schedule& s)
      : k_(key), h_(h), s_(s), S_(h.rails), G_(h.mySize()), N_(h.ngroups()), maxMsg_(key.maxStepCount) {
    const char* why = nullptr;
    sw_ = switchLevel(h, &W_, &n_, &why);
    myW_ = h.myGroup / n_;
    myJ_ = h.myGroup % n_;
  }

  // Phases present on every rank (see the top of the file).
  bool hasIntra() const { return S_ > 1; }
  bool hasRail() const { return N_ > 1 || !hasIntra(); }
  bool plainRing() const { return k_.coll == CollKind::AllReduce && !(hasIntra() && N_ > 1) && !sw_; }
  // One part's phase channels, created on channels first.. in order.
  PhaseChannels phaseChannels(std::vector<ChannelBuilder>& store, int first);
  int phases() const;
  // Scratch slots for group sums of blocks other than this rank's own.
  void planScratch();
  void allReduce(Range chunk, const PhaseChannels& l);
  void reduceScatter(Range chunk, const PhaseChannels& l);
  void allGather(Range chunk, const PhaseChannels& l);

 private:
  Slice in(Range r) const { return inputSlice(k_, r.base, r.len); }
  Slice inBlock(int b, Range r) const { return inputSlice(k_, uint64_t(b) * k_.count + r.base, r.len); }
  Slice outBlock(int b, Range r) const { return out(uint64_t(b) * k_.count + r.base); }
  // Where this rank keeps its group's sum of chunk r of the block of rank
  // owner(q, s), for rail s it serves.
  Slice held(int s, int q, Range r) const {
    const int b = h_.owner(q, s);
    if (G_ == 1) return inBlock(b, r);
    return sum(s, q, r);
  }
  // Where the switch level leaves its sum of the same (the group's sum when
  // there is no switch level); never the caller's input.
  Slice sum(int s, int q, Range r) const {
    if (h_.owner(q, s) == h_.rank) return out(r.base);
    return Slice{Buf::Scratch, slot_[size_t(s) * N_ + q] * k_.count + r.base};
  }
  bool needsSum(int s, int q) const {
    const int b = h_.owner(q, s);
    if (b < 0 || b == h_.rank) return false;
    return G_ > 1 || (sw_ && q % n_ == myJ_);
  }
  // Rail s's servers under this rank's switch (switch level only), and
  // those with this rank's index under its switch, one per switch.
  SubGroup swGroup(int s) const { return railMembers(s, n_, myW_ * n_, 1, myJ_); }
  SubGroup topGroup(int s) const { return railMembers(s, W_, myJ_, n_, myW_); }
  // Members first, first + stride, ... (count of them) of rail s; this
  // rank is the one at `pos`.
  SubGroup railMembers(int s, int count, int first, int stride, int pos) const {
    const SubGroup r = h_.rail(s);
    SubGroup g;
    for (int i = 0; i < count; ++i) g.members.push_back(r.members[size_t(first + i * stride)]);
    g.pos = pos;
    return g;
  }
  // Group passes of the intra phases: member i of the group reduces
  // (gathers) shards i, i+G, ...: one ring pass per G shards.
  void groupPasses(ChannelBuilder& ch, bool reduce, Range chunk);

  const ScheduleKey& k_;
  const Hierarchy& h_;
  Schedule& s_;
  const int S_, G_, N_;
  const uint64_t maxMsg_;
  bool sw_ = false;
  int W_ = 1, n_ = 1, myW_ = 0, myJ_ = 0;
  std::vector<uint64_t> slot_;  // [s * N + q]
};

int Builder::phases() const {
  if (k_.coll == CollKind::AllReduce) {
    if (sw_) return hasIntra() ? 5 : 3;
    return hasIntra() && N_ > 1 ? 3 : 1;
  }
  return hasIntra() + (hasRail() ? (sw_ ? 2 : 1) : 0);
}

PhaseChannels Builder::phaseChannels(std::vector<ChannelBuilder>& v, int first) {
  for (int i = 0; i < phases(); ++i) v.emplace_back(s_, first + i);
  PhaseChannels l;
  size_t i = 0;
  if (plainRing()) {
    l.rail = &v[0];
    return l;
  }
  const bool ag = k_.coll == CollKind::AllGather, rs = k_.coll == CollKind::ReduceScatter;
  if (hasIntra() && !ag) l.intra = &v[i++];
  if (hasRail()) {
    if (sw_ && !ag) l.swRS = &v[i++];
    l.rail = &v[i++];
    if (sw_ && !rs) l.swAG = &v[i++];
  }
  if (hasIntra() && !rs) l.gather = &v[i++];
  return l;
}

void Builder::planScratch() {
  if (k_.coll != CollKind::ReduceScatter) return;
  slot_.assign(size_t(S_) * N_, 0);
  uint64_t slots = 0;
  for (int s = 0; s < S_; ++s) {
    if (!h_.serves(s)) continue;
    for (int q = 0; q < N_; ++q) {
      if (needsSum(s, q)) slot_[size_t(s) * N_ + q] = slots++;
    }
  }
  s_.scratchCount = slots * k_.count;
}

void Builder::groupPasses(ChannelBuilder& ch, bool reduce, Range chunk) {
  for (int first = 0; G_ > 1 && first < S_; first += G_) {
    std::vector<Block> blocks(G_);
    for (int i = 0; i < G_ && first + i < S_; ++i) {
      const Range r = partOf(chunk, S_, first + i);
      blocks[i] = Block{reduce ? in(r) : out(r.base), out(r.base), r.len};
    }
    if (reduce) ringReduceScatter(ch, h_.group(), blocks, maxMsg_);
    else ringAllGather(ch, h_.group(), blocks, maxMsg_);
  }
}

void Builder::allReduce(Range chunk, const PhaseChannels& l) {
  if (plainRing()) {  // one group, or groups of one: a plain ring
    const SubGroup ring = N_ == 1 ? h_.group() : h_.rail(0);
    ringAllReduce(*l.rail, ring, partBlocks(chunk, ring.size(), [&](Range r) { return in(r); }), maxMsg_);
    return;
  }
  auto shard = [&](int s) { return partOf(chunk, S_, s); };
  // Before the rails, this rank's shards are in its output (after the
  // group's reduce-scatter) or still in its input (groups of one).
  auto operand = [&](Range r) { return G_ > 1 ? out(r.base) : in(r); };
  if (l.intra) groupPasses(*l.intra, true, chunk);
  if (!sw_) {
    if (l.intra) l.rail->after(l.intra->done());
    for (int s = 0; s < S_; ++s) {
      if (h_.serves(s)) ringAllReduce(*l.rail, h_.rail(s), partBlocks(shard(s), N_, operand), maxMsg_);
    }
    if (l.gather) {
      l.gather->after(l.rail->done());
      groupPasses(*l.gather, false, chunk);
    }
    return;
  }
  // Switch level: the shard's part j is reduced over the switch by the
  // server with index j under it, all-reduced across the switches by the
  // servers with index j, and gathered back under each switch.
  if (l.intra) l.swRS->after(l.intra->done());
  for (int s = 0; s < S_; ++s) {
    if (h_.serves(s)) ringReduceScatter(*l.swRS, swGroup(s), partBlocks(shard(s), n_, operand), maxMsg_);
  }
  l.rail->after(l.swRS->done());
  for (int s = 0; s < S_; ++s) {
    if (h_.serves(s)) ringAllReduce(*l.rail, topGroup(s), partBlocks(partOf(shard(s), n_, myJ_), W_, outPart), maxMsg_);
  }
  l.swAG->after(l.rail->done());
  for (int s = 0; s < S_; ++s) {
    if (h_.serves(s)) ringAllGather(*l.swAG, swGroup(s), partBlocks(shard(s), n_, outPart), maxMsg_);
  }
  if (l.gather) {
    l.gather->after(l.swAG->done());
    groupPasses(*l.gather, false, chunk);
  }
}

// `chunk` is the same element range of every rank's block.
void Builder::reduceScatter(Range chunk, const PhaseChannels& l) {
  if (l.intra && G_ > 1) {
    for (int first = 0; first < S_; first += G_) {
      for (int q = 0; q < N_; ++q) {
        std::vector<Block> blocks(G_);
        for (int i = 0; i < G_ && first + i < S_; ++i) {
          const int s = first + i, b = h_.owner(q, s);
          if (b < 0) continue;
          blocks[i] = Block{inBlock(b, chunk), i == h_.myLocal ? held(s, q, chunk) : Slice{}, chunk.len};
        }
        ringReduceScatter(*l.intra, h_.group(), blocks, maxMsg_);
      }
    }
  }
  if (!l.rail) return;
  if (l.swRS) {
    // Server j under each switch sums, over the switch, the blocks of the
    // ranks (w, j) of every switch w: one ring pass per switch w.
    if (l.intra) l.swRS->after(l.intra->done());
    for (int s = 0; s < S_; ++s) {
      if (!h_.serves(s)) continue;
      for (int w = 0; w < W_; ++w) {
        std::vector<Block> blocks(n_);
        for (int j = 0; j < n_; ++j) {
          const int q = w * n_ + j;
          blocks[j] = Block{held(s, q, chunk), j == myJ_ ? sum(s, q, chunk) : Slice{}, chunk.len};
        }
        ringReduceScatter(*l.swRS, swGroup(s), blocks, maxMsg_);
      }
    }
    l.rail->after(l.swRS->done());
    for (int s = 0; s < S_; ++s) {
      if (!h_.serves(s)) continue;
      std::vector<Block> blocks(W_);
      for (int w = 0; w < W_; ++w) {
        const int q = w * n_ + myJ_;
        blocks[w] = Block{sum(s, q, chunk), w == myW_ ? out(chunk.base) : Slice{}, chunk.len};
      }
      ringReduceScatter(*l.rail, topGroup(s), blocks, maxMsg_);
    }
    return;
  }
  if (l.intra) l.rail->after(l.intra->done());
  for (int s = 0; s < S_; ++s) {
    if (!h_.serves(s)) continue;
    std::vector<Block> blocks(N_);
    for (int q = 0; q < N_; ++q) {
      if (h_.owner(q, s) < 0) continue;  // a guest's position owns no block
      blocks[q] = Block{held(s, q, chunk), q == h_.myGroup ? out(chunk.base) : Slice{}, chunk.len};
    }
    ringReduceScatter(*l.rail, h_.rail(s), blocks, maxMsg_);
  }
}

void Builder::allGather(Range chunk, const PhaseChannels& l) {
  const Slice mine = in(chunk);
  if (l.rail && l.swAG) {
    // Across the switches among the servers with this rank's index, then
    // under each switch, one ring pass per switch.
    for (int s = 0; s < S_; ++s) {
      if (!h_.serves(s)) continue;
      std::vector<Block> blocks(W_);
      for (int w = 0; w < W_; ++w) {
        const int b = h_.owner(w * n_ + myJ_, s);
        blocks[w] = Block{b == h_.rank ? mine : outBlock(b, chunk), outBlock(b, chunk), chunk.len};
      }
      ringAllGather(*l.rail, topGroup(s), blocks, maxMsg_);
    }
    l.swAG->after(l.rail->done());
    for (int s = 0; s < S_; ++s) {
      if (!h_.serves(s)) continue;
      for (int w = 0; w < W_; ++w) {
        std::vector<Block> blocks(n_);
        for (int j = 0; j < n_; ++j) {
          const int b = h_.owner(w * n_ + j, s);
          blocks[j] = Block{outBlock(b, chunk), outBlock(b, chunk), chunk.len};
        }
        ringAllGather(*l.swAG, swGroup(s), blocks, maxMsg_);
      }
    }
  } else if (l.rail) {
    for (int s = 0; s < S_; ++s) {
      if (!h_.serves(s)) continue;
      std::vector<Block> blocks(N_);
      for (int q = 0; q < N_; ++q) {
        const int b = h_.owner(q, s);
        if (b >= 0) blocks[q] = Block{b == h_.rank ? mine : outBlock(b, chunk), outBlock(b, chunk), chunk.len};
      }
      ringAllGather(*l.rail, h_.rail(s), blocks, maxMsg_);
    }
  }
  if (!l.gather || G_ == 1) return;
  if (l.rail) l.gather->after((l.swAG ? l.swAG : l.rail)->done());
  for (int first = 0; first < S_; first += G_) {
    for (int q = 0; q < N_; ++q) {
      std::vector<Block> blocks(G_);
      for (int i = 0; i < G_ && first + i < S_; ++i) {
        const int b = h_.owner(q, first + i);
        if (b < 0) continue;
        // Without rails this rank's own block is still in its input.
        const Slice src = b == h_.rank && !l.rail ? mine : outBlock(b, chunk);
        blocks[i] = Block{src, outBlock(b, chunk), chunk.len};
      }
      ringAllGather(*l.gather, h_.group(), blocks, maxMsg_);
    }
  }
}

int defaultChunks(const ScheduleKey& key, uint64_t len) {
  const uint64_t moved = key.coll == CollKind::AllReduce ? len : len * uint64_t(key.nranks);
  const uint64_t chunks = std::clamp<uint64_t>(moved / kElemsPerPipelineChunk, 1, kMaxPipelineChunks);
  return static_cast<int>(std::min<uint64_t>(chunks, std::max<uint64_t>(len, 1)));
}

}  // namespace

Schedule buildHoRingPipelined(const ScheduleKey& key, int pipelineChunks) {
  Hierarchy h;
  if (auto ring = groupedFallback(key, "ring (fallback: horing has no broadcast/reduce)", &h)) return *ring;
  Schedule s = newSchedule(key, "horing");
  const int nch = s.key.nchannels;
  Builder b(key, h, s);
  const int phases = b.phases();
  s.channels.resize(size_t(nch) * phases);
  b.planScratch();
  for (int c = 0; c < nch; ++c) {
    const Range part{partStart(key.count, nch, c), partSize(key.count, nch, c)};
    std::vector<ChannelBuilder> store;
    store.reserve(size_t(phases));
    const PhaseChannels chans = b.phaseChannels(store, c * phases);
    const int chunks = pipelineChunks > 0 ? pipelineChunks : defaultChunks(key, part.len);
    for (int k = 0; k < chunks; ++k) {
      const Range chunk = partOf(part, chunks, k);
      if (chunk.len == 0) continue;
      switch (key.coll) {
        case CollKind::AllReduce: b.allReduce(chunk, chans); break;
        case CollKind::ReduceScatter: b.reduceScatter(chunk, chans); break;
        default: b.allGather(chunk, chans); break;
      }
    }
  }
  return s;
}

Schedule buildHoRing(const ScheduleKey& key) { return buildHoRingPipelined(key, key.pipelineChunks); }

}  // namespace hoccl
