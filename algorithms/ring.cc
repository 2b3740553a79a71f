// Ring schedules: one ring r -> r+1 per channel for all-reduce, reduce-scatter
// and all-gather; a pipelined chain for broadcast and reduce. Each channel
// owns a near-equal part of the data (partStart) and runs independently, so
// a channel whose part is empty has no steps. Steps that would move zero
// elements are omitted on both sides of an edge: both sides compute the same
// chunk sizes, so the FIFO matching of the remaining messages is unchanged.
#include <algorithm>

#include "algorithms/registry.h"

namespace hoccl {
namespace {

// Emits the steps of one channel; every helper skips zero-element steps.
class Emitter {
 public:
  explicit Emitter(Channel& ch) : ch_(ch) {}

  void add(int32_t from, int32_t to, bool reduce, Slice src, Slice dst, uint64_t n) {
    if (n == 0) return;
    Step s;
    s.recvPeer = from;
    s.sendPeer = to;
    s.reduce = reduce;
    s.src = src;
    s.dst = dst;
    s.count = n;
    ch_.steps.push_back(s);
  }

 private:
  Channel& ch_;
};

Slice at(Buf b, uint64_t offset) { return Slice{b, offset}; }
constexpr Slice kNone{};

int mod(int64_t a, int n) { return static_cast<int>(((a % n) + n) % n); }

// One element range [base, base+len) of the data handled by one channel.
struct Part {
  uint64_t base;
  uint64_t len;
};

Part channelPart(uint64_t count, int nchannels, int c) {
  return Part{partStart(count, nchannels, c), partSize(count, nchannels, c)};
}

// Ring all-reduce of part p: reduce-scatter (P-1 messages) then all-gather
// (P-1 messages). After the reduce-scatter rank r holds chunk r+1 reduced.
void allReduce(Emitter& e, const ScheduleKey& k, Part p) {
  const int P = k.nranks, r = k.rank;
  if (P == 1) {
    if (!k.inPlace) e.add(-1, -1, false, at(Buf::Input, p.base), at(Buf::Output, p.base), p.len);
    return;
  }
  const int next = mod(r + 1, P), prev = mod(r - 1, P);
  auto off = [&](int chunk) { return p.base + partStart(p.len, P, chunk); };
  auto size = [&](int chunk) { return partSize(p.len, P, chunk); };

  int c = r;
  e.add(-1, next, false, at(Buf::Input, off(c)), kNone, size(c));
  for (int s = 1; s <= P - 2; ++s) {
    c = mod(r - s, P);
    e.add(prev, next, true, at(Buf::Input, off(c)), kNone, size(c));
  }
  c = mod(r + 1, P);
  e.add(prev, next, true, at(Buf::Input, off(c)), at(Buf::Output, off(c)), size(c));
  for (int t = 1; t <= P - 2; ++t) {
    c = mod(r + 1 - t, P);
    e.add(prev, next, false, kNone, at(Buf::Output, off(c)), size(c));
  }
  c = mod(r + 2, P);
  e.add(prev, -1, false, kNone, at(Buf::Output, off(c)), size(c));
}

// Ring reduce-scatter: block j of the input is [j*count, (j+1)*count); the
// channel handles [base, base+len) of every block. Rank r starts with block
// r-1 and ends by reducing block r into its output.
void reduceScatter(Emitter& e, const ScheduleKey& k, Part p) {
  const int P = k.nranks, r = k.rank;
  auto in = [&](int block) { return at(Buf::Input, static_cast<uint64_t>(block) * k.count + p.base); };
  if (P == 1) {
    if (!k.inPlace) e.add(-1, -1, false, in(0), at(Buf::Output, p.base), p.len);
    return;
  }
  const int next = mod(r + 1, P), prev = mod(r - 1, P);
  e.add(-1, next, false, in(mod(r - 1, P)), kNone, p.len);
  for (int s = 1; s <= P - 2; ++s) e.add(prev, next, true, in(mod(r - 1 - s, P)), kNone, p.len);
  // In place, Output aliases in(r): the step reads it and writes it back.
  e.add(prev, -1, true, in(r), at(Buf::Output, p.base), p.len);
}

// Ring all-gather: block j of the output is rank j's input.
void allGather(Emitter& e, const ScheduleKey& k, Part p) {
  const int P = k.nranks, r = k.rank;
  auto out = [&](int block) { return at(Buf::Output, static_cast<uint64_t>(block) * k.count + p.base); };
  const Slice own = at(Buf::Input, p.base);
  if (P == 1) {
    if (!k.inPlace) e.add(-1, -1, false, own, out(0), p.len);
    return;
  }
  const int next = mod(r + 1, P), prev = mod(r - 1, P);
  // In place, Input already is out(r): send it without copying.
  e.add(-1, next, false, own, k.inPlace ? kNone : out(r), p.len);
  for (int t = 1; t <= P - 2; ++t) e.add(prev, next, false, kNone, out(mod(r - t, P)), p.len);
  e.add(prev, -1, false, kNone, out(mod(r + 1, P)), p.len);
}

// Pipelined chain root -> root+1 -> ... -> root-1, one step per rank.
void broadcast(Emitter& e, const ScheduleKey& k, Part p) {
  const int P = k.nranks, r = k.rank;
  const Slice in = at(Buf::Input, p.base), out = at(Buf::Output, p.base);
  if (P == 1) {
    if (!k.inPlace) e.add(-1, -1, false, in, out, p.len);
    return;
  }
  const int pos = mod(r - k.root, P);
  const int next = pos == P - 1 ? -1 : mod(r + 1, P);
  if (pos == 0) {
    e.add(-1, next, false, in, k.inPlace ? kNone : out, p.len);
  } else {
    e.add(mod(r - 1, P), next, false, kNone, out, p.len);
  }
}

// Chain root+1 -> root+2 -> ... -> root; the root reduces into its output.
void reduce(Emitter& e, const ScheduleKey& k, Part p) {
  const int P = k.nranks, r = k.rank;
  const Slice in = at(Buf::Input, p.base), out = at(Buf::Output, p.base);
  if (P == 1) {
    if (!k.inPlace) e.add(-1, -1, false, in, out, p.len);
    return;
  }
  const int pos = mod(r - k.root - 1, P);
  const int prev = mod(r - 1, P), next = mod(r + 1, P);
  if (pos == 0) {
    e.add(-1, next, false, in, kNone, p.len);
  } else if (pos < P - 1) {
    e.add(prev, next, true, in, kNone, p.len);
  } else {
    e.add(prev, -1, true, in, out, p.len);
  }
}

}  // namespace

Schedule buildRing(const ScheduleKey& key) {
  Schedule s;
  s.key = key;
  s.algorithm = "ring";
  const int nch = key.nchannels < 1 ? 1 : key.nchannels;
  s.key.nchannels = nch;
  s.channels.resize(nch);
  if (key.nranks < 1 || key.rank < 0 || key.rank >= key.nranks) return s;
  const bool rooted = key.coll == CollKind::Broadcast || key.coll == CollKind::Reduce;
  if (rooted && (key.root < 0 || key.root >= key.nranks)) return s;
  for (int c = 0; c < nch; ++c) {
    Emitter e(s.channels[c]);
    const Part p = channelPart(key.count, nch, c);
    if (p.len == 0) continue;
    if (key.coll == CollKind::Broadcast || key.coll == CollKind::Reduce) {
      // A chain has no cycle: one step per rank, pipelined by the executor.
      if (key.coll == CollKind::Broadcast) broadcast(e, key, p);
      else reduce(e, key, p);
      continue;
    }
    // Rounds: all-reduce messages are a P-th of the round, reduce-scatter
    // and all-gather messages a whole round of one block.
    uint64_t round = p.len;
    if (key.maxStepCount > 0) {
      uint64_t perMessage = key.maxStepCount;
      round = key.coll == CollKind::AllReduce ? perMessage * static_cast<uint64_t>(key.nranks) : perMessage;
    }
    for (uint64_t done = 0; done < p.len; done += round) {
      const Part q{p.base + done, std::min(round, p.len - done)};
      switch (key.coll) {
        case CollKind::AllReduce: allReduce(e, key, q); break;
        case CollKind::ReduceScatter: reduceScatter(e, key, q); break;
        case CollKind::AllGather: allGather(e, key, q); break;
        default: break;
      }
    }
  }
  return s;
}

}  // namespace hoccl
