#include "algorithms/phases.h"

#include "algorithms/registry.h"

#include <algorithm>
#include <map>

namespace hoccl {
namespace {

int mod(int64_t a, int n) { return static_cast<int>(((a % n) + n) % n); }

constexpr Slice kNone{};

// Elements [round*maxMsg, round*maxMsg + maxMsg) of a block, clipped to it.
Block piece(const Block& b, uint64_t round, uint64_t maxMsg) {
  if (maxMsg == 0) return b;
  const uint64_t begin = round * maxMsg;
  if (begin >= b.len) return Block{b.src, b.dst, 0};
  return Block{shifted(b.src, begin), shifted(b.dst, begin), std::min(maxMsg, b.len - begin)};
}

uint64_t roundCount(const std::vector<Block>& blocks, uint64_t maxMsg) {
  uint64_t longest = 0;
  for (const Block& b : blocks) longest = std::max(longest, b.len);
  if (longest == 0) return 0;
  return maxMsg == 0 ? 1 : (longest + maxMsg - 1) / maxMsg;
}

// Runs `pass(block)` once per round; block(j) is round r of blocks[j mod n].
template <class Pass>
void inRounds(const SubGroup& g, const std::vector<Block>& blocks, uint64_t maxMsg, Pass pass) {
  const uint64_t rounds = roundCount(blocks, maxMsg);
  for (uint64_t r = 0; r < rounds; ++r) {
    pass([&](int j) { return piece(blocks[mod(j, g.size())], r, maxMsg); });
  }
}

}  // namespace

int SubGroup::at(int i) const { return members[mod(i, size())]; }

// --------------------------------------------------------- ChannelBuilder

void ChannelBuilder::after(Token t) {
  if (t.channel >= 0) pending_ = t;
}

Token ChannelBuilder::done() const {
  if (pending_.channel >= 0) return pending_;
  const std::vector<Step>& steps = s_->channels[ch_].steps;
  if (steps.empty()) return Token{};
  return Token{ch_, static_cast<int>(steps.size()) - 1};
}

void ChannelBuilder::add(int from, int to, bool reduce, Slice src, Slice dst, uint64_t n) {
  if (n == 0) return;
  Step s{.recvPeer = from, .sendPeer = to, .reduce = reduce, .src = src, .dst = dst, .count = n};
  if (pending_.channel >= 0) {
    s.depChannel = pending_.channel;
    s.depStep = pending_.step;
    pending_ = Token{};
  }
  s_->channels[ch_].steps.push_back(s);
}

void ChannelBuilder::copy(Slice src, Slice dst, uint64_t n) {
  if (!sameSlice(src, dst)) add(-1, -1, false, src, dst, n);
}

Slice shifted(Slice s, uint64_t by) {
  if (s.present()) s.offset += by;
  return s;
}

bool sameSlice(Slice a, Slice b) { return a.buf == b.buf && a.offset == b.offset; }

Slice inputSlice(const ScheduleKey& k, uint64_t offset, uint64_t len) {
  if (!k.inPlace) return Slice{Buf::Input, offset};
  switch (k.coll) {
    case CollKind::AllGather: return Slice{Buf::Output, inPlaceOffset(k) + offset};
    case CollKind::ReduceScatter: {
      const uint64_t base = inPlaceOffset(k);
      if (offset >= base && offset + len <= base + k.count) return Slice{Buf::Output, offset - base};
      return Slice{Buf::Input, offset};
    }
    default: return Slice{Buf::Output, offset};
  }
}

// ----------------------------------------------------------- ring phases
//
// Member p of a ring of n: in a reduce-scatter pass block j starts at member
// j+1 and is complete at member j, so member p sends block p-1 first and
// reduces block p last; in an all-gather pass member p sends its own block
// first and receives block p-t at step t.

namespace {

// The reduce-scatter half of one round: n-1 steps, the last of which
// completes block p in its dst and, when `forward`, passes it on as the
// first message of the all-gather half.
template <class BlockOf>
void reduceHalf(ChannelBuilder& ch, const SubGroup& g, BlockOf block, bool forward) {
  const int n = g.size(), p = g.pos;
  const int next = g.at(p + 1), prev = g.at(p - 1);
  Block b = block(p - 1);
  ch.add(-1, next, false, b.src, kNone, b.len);
  for (int s = 1; s <= n - 2; ++s) {
    b = block(p - 1 - s);
    ch.add(prev, next, true, b.src, kNone, b.len);
  }
  b = block(p);
  ch.add(prev, forward ? next : -1, true, b.src, b.dst, b.len);
}

// The all-gather half after this member's own block went out: n-1 receives.
template <class BlockOf>
void gatherHalf(ChannelBuilder& ch, const SubGroup& g, BlockOf block) {
  const int n = g.size(), p = g.pos;
  const int next = g.at(p + 1), prev = g.at(p - 1);
  Block b;
  for (int t = 1; t <= n - 2; ++t) {
    b = block(p - t);
    ch.add(prev, next, false, kNone, b.dst, b.len);
  }
  b = block(p + 1);
  ch.add(prev, -1, false, kNone, b.dst, b.len);
}

}  // namespace

void ringReduceScatter(ChannelBuilder& ch, const SubGroup& g, const std::vector<Block>& blocks, uint64_t maxMsg) {
  inRounds(g, blocks, maxMsg, [&](auto block) {
    if (g.size() == 1) ch.copy(block(0).src, block(0).dst, block(0).len);
    else reduceHalf(ch, g, block, false);
  });
}

void ringAllGather(ChannelBuilder& ch, const SubGroup& g, const std::vector<Block>& blocks, uint64_t maxMsg) {
  inRounds(g, blocks, maxMsg, [&](auto block) {
    const Block b = block(g.pos);
    if (g.size() == 1) {
      ch.copy(b.src, b.dst, b.len);
      return;
    }
    ch.add(-1, g.at(g.pos + 1), false, b.src, sameSlice(b.src, b.dst) ? kNone : b.dst, b.len);
    gatherHalf(ch, g, block);
  });
}

// The last reduction completes block p and starts its all-gather.
void ringAllReduce(ChannelBuilder& ch, const SubGroup& g, const std::vector<Block>& blocks, uint64_t maxMsg) {
  inRounds(g, blocks, maxMsg, [&](auto block) {
    if (g.size() == 1) {
      ch.copy(block(0).src, block(0).dst, block(0).len);
      return;
    }
    reduceHalf(ch, g, block, true);
    gatherHalf(ch, g, block);
  });
}

// --------------------------------------------------------- doubling phase

void doublingAllReduce(ChannelBuilder& ch, const SubGroup& g, Slice src, Slice dst, uint64_t len, uint64_t maxMsg) {
  const int n = g.size(), i = g.pos;
  if (n == 1) {
    ch.copy(src, dst, len);
    return;
  }
  const RemainderRanks rr(n);
  if (rr.excluded(i)) {  // hands its operand to i + 1 and waits for the result
    ch.add(-1, g.at(i + 1), false, src, kNone, len);
    ch.add(g.at(i + 1), -1, false, kNone, dst, len);
    return;
  }
  Slice cur = src;  // where this member's partial sum lives
  if (i < 2 * rr.rem) {
    ch.add(g.at(i - 1), -1, true, src, dst, len);
    cur = dst;
  }
  const int v = rr.virt(i);
  for (int d = 1; d < rr.pof2; d *= 2) {
    pairExchange(ch, g.at(rr.real(v ^ d)), cur, len, cur, dst, len, maxMsg);
    cur = dst;
  }
  if (i < 2 * rr.rem) ch.add(-1, g.at(i - 1), false, dst, kNone, len);
}

void pairExchange(ChannelBuilder& ch, int partner, Slice from, uint64_t myLen, Slice with, Slice into,
                  uint64_t theirLen, uint64_t maxMsg) {
  const uint64_t piece = maxMsg ? maxMsg : std::max<uint64_t>({myLen, theirLen, 1});
  for (uint64_t at = 0; at < myLen || at < theirLen; at += piece) {
    if (at < myLen) ch.add(-1, partner, false, shifted(from, at), kNone, std::min(piece, myLen - at));
    if (at < theirLen)
      ch.add(partner, -1, with.present(), with.present() ? shifted(with, at) : kNone, shifted(into, at),
             std::min(piece, theirLen - at));
  }
}

void appendDoublingCost(const std::vector<int>& members, double bytes, std::vector<CostPhase>* phases) {
  const int n = static_cast<int>(members.size());
  if (n < 2) return;
  const RemainderRanks rr(n);
  auto member = [&](int vr) { return members[rr.real(vr)]; };
  std::vector<CostMessage> remainder;  // excluded rank -> its partner
  for (int i = 0; i < rr.rem; ++i) remainder.push_back({members[2 * i], members[2 * i + 1]});
  if (!remainder.empty()) phases->push_back(exchangePhase(remainder, bytes, true, 1));
  for (int d = 1; d < rr.pof2; d *= 2) {
    std::vector<CostMessage> x;
    for (int v = 0; v < rr.pof2; ++v) x.push_back({member(v), member(v ^ d)});
    phases->push_back(exchangePhase(x, bytes, true, 1));
  }
  if (!remainder.empty()) {
    for (CostMessage& m : remainder) std::swap(m.from, m.to);
    phases->push_back(exchangePhase(remainder, bytes, false, 1));
  }
}

// ---------------------------------------------------- chain and star phases

void chainReduce(ChannelBuilder& ch, const SubGroup& g, Slice src, Slice dst, uint64_t len) {
  const int n = g.size(), i = g.pos;
  if (n == 1) {
    ch.copy(src, dst, len);
  } else if (i == n - 1) {
    ch.add(-1, g.at(i - 1), false, src, kNone, len);
  } else if (i > 0) {
    ch.add(g.at(i + 1), g.at(i - 1), true, src, kNone, len);
  } else {
    ch.add(g.at(1), -1, true, src, dst, len);
  }
}

void chainBroadcast(ChannelBuilder& ch, const SubGroup& g, Slice src, Slice dst, uint64_t len) {
  const int n = g.size(), i = g.pos;
  if (n == 1) {
    ch.copy(src, dst, len);
  } else if (i == 0) {
    ch.add(-1, g.at(1), false, src, sameSlice(src, dst) ? kNone : dst, len);
  } else {
    ch.add(g.at(i - 1), i < n - 1 ? g.at(i + 1) : -1, false, kNone, dst, len);
  }
}

void starGather(ChannelBuilder& ch, const SubGroup& g, const std::vector<Block>& blocks) {
  const int n = g.size(), i = g.pos;
  if (i > 0) {
    ch.add(-1, g.at(0), false, blocks[i].src, kNone, blocks[i].len);
    return;
  }
  ch.copy(blocks[0].src, blocks[0].dst, blocks[0].len);
  for (int j = 1; j < n; ++j) ch.add(g.at(j), -1, false, kNone, blocks[j].dst, blocks[j].len);
}

void starScatter(ChannelBuilder& ch, const SubGroup& g, const std::vector<Block>& blocks) {
  const int n = g.size(), i = g.pos;
  if (i > 0) {
    ch.add(g.at(0), -1, false, kNone, blocks[i].dst, blocks[i].len);
    return;
  }
  ch.copy(blocks[0].src, blocks[0].dst, blocks[0].len);
  for (int j = 1; j < n; ++j) ch.add(-1, g.at(j), false, blocks[j].src, kNone, blocks[j].len);
}

// -------------------------------------------------------------- Hierarchy

bool Hierarchy::even() const {
  for (const std::vector<int>& g : groups) {
    if (g.size() != groups.front().size()) return false;
  }
  return true;
}

SubGroup Hierarchy::group() const { return SubGroup{groups[myGroup], myLocal}; }

SubGroup Hierarchy::rail(int s) const {
  SubGroup r;
  for (int q = 0; q < ngroups(); ++q) r.members.push_back(groups[q][s % size(q)]);
  r.pos = myGroup;
  return r;
}

SubGroup Hierarchy::leaders() const {
  SubGroup r;
  for (const std::vector<int>& g : groups) r.members.push_back(g.front());
  r.pos = myGroup;
  return r;
}

const char* makeHierarchy(const ScheduleKey& key, Hierarchy* h) {
  const int P = key.nranks;
  *h = Hierarchy{};
  h->rank = key.rank;
  if (P < 1 || key.rank < 0 || key.rank >= P) return "rank outside the communicator";
  std::vector<int> groupOf(P, 0), superOf;
  if (key.groups) {
    if (key.groups->groupOf.size() != static_cast<size_t>(P)) return "grouping does not cover every rank";
    groupOf = key.groups->groupOf;
    superOf = key.groups->superOf;
    if (*std::min_element(groupOf.begin(), groupOf.end()) < 0) return "negative group index";
    if (!superOf.empty() && superOf.size() != static_cast<size_t>(key.groups->ngroups())) {
      return "superOf does not match the number of groups";
    }
  }
  // (switch, group) -> members in rank order; empty groups never appear.
  std::map<std::pair<int, int>, std::vector<int>> byKey;
  int switches = 0, lastSwitch = 0;
  for (int r = 0; r < P; ++r) {
    const int g = groupOf[r];
    byKey[{superOf.empty() ? 0 : superOf[g], g}].push_back(r);
  }
  for (auto& [k, members] : byKey) {
    for (size_t i = 0; i < members.size(); ++i) {
      if (members[i] != key.rank) continue;
      h->myGroup = h->ngroups();
      h->myLocal = static_cast<int>(i);
    }
    h->rails = std::max(h->rails, static_cast<int>(members.size()));
    h->groups.push_back(std::move(members));
    if (h->switchOf.empty() || k.first != lastSwitch) ++switches;
    lastSwitch = k.first;
    h->switchOf.push_back(switches - 1);
  }
  return nullptr;
}

bool switchLevel(const Hierarchy& h, int* W, int* n, const char** why) {
  *W = 1;
  *n = h.ngroups();
  *why = nullptr;
  const int switches = h.switchOf.empty() ? 1 : h.switchOf.back() + 1;
  if (switches < 2) return false;
  std::vector<int> per(switches, 0);
  for (int sw : h.switchOf) ++per[sw];
  if (per.front() < 2) {
    *why = "one node per switch";
    return false;
  }
  for (int c : per) {
    if (c != per.front()) {
      *why = "switches have unequal node counts";
      return false;
    }
  }
  if (!h.even()) {
    *why = "nodes have unequal rank counts";
    return false;
  }
  *W = switches;
  *n = per.front();
  return true;
}

Schedule newSchedule(const ScheduleKey& key, const char* algorithm) {
  Schedule s;
  s.key = key;
  s.key.nchannels = std::max(1, key.nchannels);
  s.algorithm = algorithm;
  return s;
}

Schedule oneChannelSchedule(const ScheduleKey& key, const char* algorithm) {
  Schedule s = newSchedule(key, algorithm);
  s.key.nchannels = 1;
  s.channels.resize(1);
  return s;
}

Schedule ringFallback(const ScheduleKey& key, const char* label) {
  Schedule s = buildRing(key);
  s.algorithm = label;
  return s;
}

std::optional<Schedule> groupedFallback(const ScheduleKey& key, const char* rootedLabel, Hierarchy* h) {
  if (key.coll != CollKind::AllReduce && key.coll != CollKind::ReduceScatter && key.coll != CollKind::AllGather)
    return ringFallback(key, rootedLabel);
  if (makeHierarchy(key, h) != nullptr) return ringFallback(key, "ring (fallback: invalid grouping)");
  return std::nullopt;
}

Hierarchy queryHierarchy(const CostQuery& q) {
  ScheduleKey key;
  key.nranks = q.nranks;
  key.groups = q.groups;
  Hierarchy h;
  makeHierarchy(key, &h);
  return h;
}

}  // namespace hoccl
