// Flat phases on sub-groups: the pieces hierarchical schedules are made of.
//
// A phase appends one rank's steps of a flat collective over an ordered list
// of member ranks (ring reduce-scatter / all-gather / all-reduce, chain
// reduce / broadcast, star gather / scatter) to one channel. It works on
// blocks the caller places anywhere in the rank's buffers, so one ring
// reduce-scatter serves a node's shards, a rail's blocks or the leaders'
// group-sized blocks alike. hierarchical.cc and horing.cc only decide which
// phase runs on which sub-group, on which slices, on which channel, after
// what; they contain no ring loop of their own.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "algorithms/cost.h"
#include "algorithms/schedule.h"

namespace hoccl {

// Ordered member ranks (ring order; chain and star phases take members[0]
// as the root) and this rank's position among them.
struct SubGroup {
  std::vector<int> members;
  int pos = 0;
  int size() const { return static_cast<int>(members.size()); }
  int at(int i) const;  // member i, taken modulo size()
};

// "Step `step` of channel `channel` of this rank has run"; none when
// channel < 0.
struct Token {
  int channel = -1;
  int step = -1;
};

// Appends steps to one channel. Zero-element steps are dropped: every phase
// derives its message sizes from data both ends of an edge share, so both
// drop the same messages and FIFO matching is unchanged. A dependency given
// to after() is attached to the next step actually emitted, so a phase with
// nothing to do on this rank passes it through to done().
class ChannelBuilder {
 public:
  ChannelBuilder(Schedule& s, int channel) : s_(&s), ch_(channel) {}
  // The next step emitted waits for `t`; a none token changes nothing. A
  // later after() before any step is emitted replaces the earlier token:
  // the dependency belongs to the work that next emits a step, and work
  // that emitted nothing on this rank needed none.
  void after(Token t);
  // Completes when everything emitted so far, and what it waited for, ran.
  Token done() const;
  void add(int from, int to, bool reduce, Slice src, Slice dst, uint64_t n);
  void copy(Slice src, Slice dst, uint64_t n);  // omitted when src is dst

 private:
  Schedule* s_;
  int ch_;
  Token pending_;
};

// One block of a phase as this rank sees it: where its operand lives (src)
// and where the block's result goes (dst). Every member must give block j
// the same len. Which fields a phase reads is said at each phase.
struct Block {
  Slice src;
  Slice dst;
  uint64_t len = 0;
};

Slice shifted(Slice s, uint64_t by);
bool sameSlice(Slice a, Slice b);
// Input[offset] of this rank, named as Output where an in-place call aliases
// the whole range [offset, offset+len) into the output, so that phases can
// see a copy would be a no-op.
Slice inputSlice(const ScheduleKey& k, uint64_t offset, uint64_t len);

// Ring phases over g.members (member i sends to member i+1). blocks.size()
// must be g.size(). Messages carry at most maxMsg elements (0: unlimited):
// blocks are cut into rounds and the ring runs once per round, so that each
// edge needs room for two messages (see ScheduleKey::maxStepCount).
//
// Reduce-scatter: member j ends with block j reduced over all members, in
// blocks[j].dst. Reads blocks[*].src.
void ringReduceScatter(ChannelBuilder& ch, const SubGroup& g, const std::vector<Block>& blocks, uint64_t maxMsg);
// All-gather: block j, found in member j's blocks[j].src, lands in
// blocks[j].dst of every member.
void ringAllGather(ChannelBuilder& ch, const SubGroup& g, const std::vector<Block>& blocks, uint64_t maxMsg);
// All-reduce: every member ends with blocks[j].dst = sum over members of
// blocks[j].src, for all j; src may equal dst (in place). Reduce-scatter and
// all-gather fused per round: 2n-1 steps for n members.
void ringAllReduce(ChannelBuilder& ch, const SubGroup& g, const std::vector<Block>& blocks, uint64_t maxMsg);

inline int largestPowerOfTwoUpTo(int n) {
  int p2 = 1;
  while (p2 * 2 <= n) p2 *= 2;
  return p2;
}

// Recursive doubling's ranks when n is not a power of two, named as in
// MPICH (pof2, rem, and the remainder ranks that sit out): with pof2 the
// largest power of two <= n and rem = n - pof2, members 2i and 2i+1
// (i < rem) pair up, the even one handing its operand to the odd one and
// being excluded from the exchanges; the pof2 others take part as virtual
// ranks 0..pof2-1 (odd 2i+1 -> i, member m >= 2*rem -> m - rem). Virtual
// rank v stands for members [first(v), first(v + 1)).
struct RemainderRanks {
  int P, pof2, rem;
  explicit RemainderRanks(int n) : P(n), pof2(largestPowerOfTwoUpTo(n)), rem(n - largestPowerOfTwoUpTo(n)) {}
  bool excluded(int m) const { return m < 2 * rem && m % 2 == 0; }  // hands its operand to m + 1
  int virt(int m) const { return m < 2 * rem ? m / 2 : m - rem; }
  int real(int v) const { return v < rem ? 2 * v + 1 : v + rem; }
  int first(int v) const { return v < rem ? 2 * v : v + rem; }  // v <= pof2
};

// One exchange with `partner`: myLen elements go out of `from`, theirLen
// come into `into` (reduced with `with` when present), in rounds of "send
// a piece of at most maxMsg (0: unlimited), then receive the partner's",
// which needs room for one message per edge.
void pairExchange(ChannelBuilder& ch, int partner, Slice from, uint64_t myLen, Slice with, Slice into,
                  uint64_t theirLen, uint64_t maxMsg);

// Recursive doubling all-reduce over g.members (positions are the virtual
// ranks): every member ends with dst = the reduction of every member's src
// (src may equal dst). With pof2 the largest power of two <= n and
// rem = n - pof2, members 2i and 2i+1 (i < rem) first handle the remainder
// (RemainderRanks): the even one sends its src to the
// odd one, takes no part in the exchanges and receives the result at the
// end. Members exchange partial sums at distance 1, 2, 4, ... (neighbours
// first); each computes received (op) own and its partner own (op)
// received, the same bits for the commutative ops. Messages carry at most
// maxMsg elements (0: unlimited), sent before the partner's is received, so
// each edge needs room for one message. log2(pof2) exchanges + 2 when rem > 0.
void doublingAllReduce(ChannelBuilder& ch, const SubGroup& g, Slice src, Slice dst, uint64_t len, uint64_t maxMsg);
// Its cost phases over those member ranks, for `bytes` each: the
// remainder's hand-over, each exchange, the result's return to it.
void appendDoublingCost(const std::vector<int>& members, double bytes, std::vector<CostPhase>* phases);

// Chain and star phases have no cycle, so they emit one step per message of
// any size (the executor pipelines it in slices, as for ring.cc's chains).
//
// Chain reduce towards members[0]: members[n-1] -> ... -> members[0], which
// stores the sum of every member's src into dst.
void chainReduce(ChannelBuilder& ch, const SubGroup& g, Slice src, Slice dst, uint64_t len);
// Chain broadcast members[0] -> members[1] -> ...: src of members[0] lands in
// dst of every member (members[0] copies it when dst is not src).
void chainBroadcast(ChannelBuilder& ch, const SubGroup& g, Slice src, Slice dst, uint64_t len);
// Star gather to members[0]: blocks[i].src of member i lands in the root's
// blocks[i].dst (the root copies its own block when needed).
void starGather(ChannelBuilder& ch, const SubGroup& g, const std::vector<Block>& blocks);
// Star scatter from members[0]: the root's blocks[i].src lands in member i's
// blocks[i].dst.
void starScatter(ChannelBuilder& ch, const SubGroup& g, const std::vector<Block>& blocks);

// The two-level view of key.groups that hierarchical builders work from.
// Groups are the non-empty groups of key.groups, members in rank order,
// ordered by (switch, group index) so that a ring through one member of
// each group enters and leaves every switch once.
//
// Rails: S = the largest group size; rail s (0 <= s < S) is served in group q
// by member s mod size(q). With equal groups that is the member with local
// index s; with unequal ones a member of a small group serves several rails,
// and in rail s >= size(q) it is a guest: it carries the rail's traffic but
// owns no block of it.
struct Hierarchy {
  std::vector<std::vector<int>> groups;
  int rank = 0;
  int myGroup = 0;  // index into groups
  int myLocal = 0;  // index into groups[myGroup]
  int rails = 1;    // S
  std::vector<int> switchOf;  // per group: its switch, numbered 0.. in group order

  int ngroups() const { return static_cast<int>(groups.size()); }
  int size(int q) const { return static_cast<int>(groups[q].size()); }
  int mySize() const { return size(myGroup); }
  bool even() const;
  bool serves(int s) const { return s % mySize() == myLocal; }
  // Rank with local index s in group q, or -1 when group q is smaller.
  int owner(int q, int s) const { return s < size(q) ? groups[q][s] : -1; }
  SubGroup group() const;      // this rank's group, leader (lowest rank) first
  SubGroup rail(int s) const;  // the rail's servers in group order; serves(s)
  SubGroup leaders() const;    // every group's first member, in group order
};

// Fills *h from key.groups (null: one group of all ranks). Returns the
// reason as a static string when the grouping does not describe
// key.nranks ranks, else nullptr.
const char* makeHierarchy(const ScheduleKey& key, Hierarchy* h);

// HO-Ring's switch level (docs/algorithms.md, "Switch level"): a rail is itself
// run as an HO-Ring over switches when there are W >= 2 switches of the same
// number n >= 2 of groups each and every group has the same size. Returns
// true and fills W and n then; else false and, where switches were given
// but cannot be used, *why (a static string).
bool switchLevel(const Hierarchy& h, int* W, int* n, const char** why);

// The schedule of `key` by `algorithm` (a static string), before any
// channel: key.nchannels raised to at least 1.
Schedule newSchedule(const ScheduleKey& key, const char* algorithm);
// The same with exactly one (empty) channel: the one-channel all-reduces
// (doubling, oneshot).
Schedule oneChannelSchedule(const ScheduleKey& key, const char* algorithm);

// buildRing(key) labelled "ring (fallback: <why>)"; `label` is that whole
// static string.
Schedule ringFallback(const ScheduleKey& key, const char* label);

// The common start of the grouped builders (hierarchical, HO-Ring): the ring
// that runs instead, labelled `rootedLabel` for broadcast and reduce and
// "ring (fallback: invalid grouping)" when key.groups does not describe
// key.nranks ranks; or nothing, with *h filled from key.groups.
std::optional<Schedule> groupedFallback(const ScheduleKey& key, const char* rootedLabel, Hierarchy* h);

// HO-Ring with an explicit number of pipeline chunks per channel (0: the
// default policy buildHoRing uses); for tests and the tuner.
Schedule buildHoRingPipelined(const ScheduleKey& key, int pipelineChunks);

// HO-Ring's pipeline depth until the tuner picks it: chunks of at least
// this many elements moved per rank, at most kMaxPipelineChunks
// (horing.cc; its cost plan, horing_cost.cc, follows the same policy).
inline constexpr uint64_t kElemsPerPipelineChunk = uint64_t{1} << 15;
inline constexpr int kMaxPipelineChunks = 4;

// The hierarchy of a cost query's grouping, as the builders see it.
Hierarchy queryHierarchy(const CostQuery& q);

}  // namespace hoccl
