// One-shot collectives for small messages: one message latency, where
// recursive doubling pays log2(P) and the ring P-1 or 2(P-1), for P-1
// messages per rank.
//
// All-reduce: every rank sends its whole input to every other rank, then
// reduces all P inputs itself. Every rank adds them in the same order, rank
// 0's first, then 1, 2, ... P-1, so all ranks end with the same bits. Its own
// input enters at its turn through a local reduce (Output = Input (op)
// Output); an in-place call first copies its input to Scratch, because
// receiving rank 0's input into Output overwrites it.
//
// Reduce-scatter: every rank sends input block j to rank j, and reduces the P
// blocks it receives in rank order, its own at its turn (in place, its own
// block is its output: copied to Scratch first, as above).
//
// All-gather: every rank sends its input to every other rank, which receives
// it straight into its place in the output.
//
// Sends go first: they only need a free slot, and a rank's receives wait for
// its peers' sends. Messages carry at most key.maxStepCount elements: the
// buffer is cut into pieces and the exchange runs once per piece, so each
// edge holds at most two messages (a fast rank's next piece, and the one its
// peer has not taken).
#include <algorithm>

#include "algorithms/cost.h"
#include "algorithms/phases.h"
#include "algorithms/registry.h"

namespace hoccl {

namespace {

// Output[dst] = the reduction over ranks 0..P-1, in that order, of what rank
// k sends (k != r) and of `own` (this rank's operand) at its turn: steps that
// receive from every other rank. Only rank 0's `own` may be dst itself
// (the copy is then omitted).
void reduceInRankOrder(ChannelBuilder& ch, int P, int r, Slice own, Slice dst, uint64_t len) {
  if (r == 0) ch.copy(own, dst, len);
  else ch.add(0, -1, false, Slice{}, dst, len);
  for (int k = 1; k < P; ++k) {
    if (k == r) ch.add(-1, -1, true, own, dst, len);  // dst = own (op) dst
    else ch.add(k, -1, true, dst, dst, len);           // dst = received (op) dst
  }
}

uint64_t pieceOf(const ScheduleKey& key) {
  return key.maxStepCount ? std::min<uint64_t>(key.maxStepCount, key.count) : key.count;
}

void allReduce(Schedule& s, const ScheduleKey& key) {
  ChannelBuilder ch(s, 0);
  const int P = key.nranks, r = key.rank;
  const uint64_t n = key.count;
  const Slice in = inputSlice(key, 0, n), out{Buf::Output, 0};
  // In place, receiving rank 0's input into Output overwrites this rank's
  // own: it is copied to Scratch first, and sent from there (where nothing
  // overwrites it, so the executor may send it by reference).
  const bool inPlace = sameSlice(in, out);
  if (inPlace) s.scratchCount = n;
  const uint64_t piece = pieceOf(key);
  for (uint64_t off = 0; off < n; off += piece) {
    const uint64_t len = std::min(piece, n - off);
    const Slice dst = shifted(out, off);
    const Slice own = inPlace ? Slice{Buf::Scratch, off} : shifted(in, off);
    if (inPlace) ch.copy(dst, own, len);
    for (int k = 1; k < P; ++k) ch.add(-1, (r + k) % P, false, own, Slice{}, len);
    // In place, rank 0's operand is in Output already.
    reduceInRankOrder(ch, P, r, inPlace && r == 0 ? dst : own, dst, len);
  }
}

void reduceScatter(Schedule& s, const ScheduleKey& key) {
  ChannelBuilder ch(s, 0);
  const int P = key.nranks, r = key.rank;
  const uint64_t n = key.count;
  const Slice out{Buf::Output, 0};
  // Block j of the input; in place, block r is the output itself.
  auto block = [&](int j, uint64_t off, uint64_t len) { return inputSlice(key, uint64_t(j) * n + off, len); };
  const bool inPlace = sameSlice(block(r, 0, n), out);
  if (inPlace && r != 0) s.scratchCount = n;
  const uint64_t piece = pieceOf(key);
  for (uint64_t off = 0; off < n; off += piece) {
    const uint64_t len = std::min(piece, n - off);
    const Slice dst = shifted(out, off);
    // In place, rank 0's operand is its output; the others' is copied away.
    const Slice own = !inPlace ? block(r, off, len) : r == 0 ? dst : Slice{Buf::Scratch, off};
    if (inPlace) ch.copy(dst, own, len);  // omitted for rank 0 (own is dst)
    for (int k = 1; k < P; ++k) {
      const int to = (r + k) % P;
      ch.add(-1, to, false, block(to, off, len), Slice{}, len);
    }
    reduceInRankOrder(ch, P, r, own, dst, len);
  }
}

void allGather(Schedule& s, const ScheduleKey& key) {
  ChannelBuilder ch(s, 0);
  const int P = key.nranks, r = key.rank;
  const uint64_t n = key.count;
  const uint64_t piece = pieceOf(key);
  for (uint64_t off = 0; off < n; off += piece) {
    const uint64_t len = std::min(piece, n - off);
    // In place the input is Output block r: the copy is omitted.
    const Slice own = inputSlice(key, off, len);
    for (int k = 1; k < P; ++k) ch.add(-1, (r + k) % P, false, own, Slice{}, len);
    ch.copy(own, Slice{Buf::Output, uint64_t(r) * n + off}, len);
    for (int k = 1; k < P; ++k) {
      const int from = (r + k) % P;
      ch.add(from, -1, false, Slice{}, Slice{Buf::Output, uint64_t(from) * n + off}, len);
    }
  }
}

}  // namespace

Schedule buildOneShot(const ScheduleKey& key) {
  const CollKind c = key.coll;
  if (c != CollKind::AllReduce && c != CollKind::ReduceScatter && c != CollKind::AllGather)
    return ringFallback(key, "ring (fallback: oneshot is all-reduce, reduce-scatter and all-gather only)");
  Schedule s = oneChannelSchedule(key, "oneshot");
  if (key.nranks == 1) {
    ChannelBuilder(s, 0).copy(inputSlice(key, 0, key.count), Slice{Buf::Output, 0}, key.count);
    return s;
  }
  if (c == CollKind::AllReduce) allReduce(s, key);
  else if (c == CollKind::ReduceScatter) reduceScatter(s, key);
  else allGather(s, key);
  return s;
}

// One exchange: every rank sends every other the whole buffer (all-reduce)
// or one block of it (reduce-scatter, all-gather); one channel.
CostPlan oneShotCost(const CostQuery& q) {
  CostPlan plan;
  plan.shape = "oneshot";
  std::vector<CostMessage> all;
  for (int a = 0; a < q.nranks; ++a)
    for (int b = 0; b < q.nranks; ++b)
      if (a != b) all.push_back({a, b});
  const bool whole = q.coll == CollKind::AllReduce, reduce = q.coll != CollKind::AllGather;
  const double bytes = whole ? q.bytes : q.bytes / q.nranks;
  if (!all.empty()) plan.phases.push_back(exchangePhase(all, bytes, reduce, 1, 0, reduce));
  return plan;
}

}  // namespace hoccl
