// One-shot all-reduce: every rank sends its whole input to every other rank,
// then reduces all P inputs itself. One message latency, where recursive
// doubling pays log2(P) and the ring 2(P-1), for P-1 messages of the whole
// buffer per rank: an algorithm for small messages.
//
// Every rank adds the inputs in the same order, rank 0's first, then 1, 2,
// ... P-1, so all ranks end with the same bits. Its own input enters at its
// turn through a local reduce (Output = Input (op) Output); an in-place call
// first copies its input to Scratch, because receiving rank 0's input into
// Output overwrites it. Sends go first: they only need a free slot, and a
// rank's receives wait for its peers' sends.
//
// Messages carry at most key.maxStepCount elements: the buffer is cut into
// pieces and the exchange runs once per piece, so each edge holds at most two
// messages (a fast rank's next piece, and the one its peer has not taken).
#include <algorithm>

#include "algorithms/cost.h"
#include "algorithms/phases.h"
#include "algorithms/registry.h"

namespace hoccl {

Schedule buildOneShot(const ScheduleKey& key) {
  if (key.coll != CollKind::AllReduce) return ringFallback(key, "ring (fallback: oneshot is all-reduce only)");
  Schedule s = oneChannelSchedule(key, "oneshot");
  Lane ch(s, 0);
  const int P = key.nranks, r = key.rank;
  const uint64_t n = key.count;
  const Slice in = inputSlice(key, 0, n), out{Buf::Output, 0};
  if (P == 1) {
    ch.copy(in, out, n);
    return s;
  }
  const uint64_t piece = key.maxStepCount ? std::min<uint64_t>(key.maxStepCount, n) : n;
  // In place, receiving rank 0's input into Output overwrites this rank's
  // own: it is copied to Scratch first, and sent from there (where nothing
  // overwrites it, so the executor may lend it by reference).
  const bool inPlace = sameSlice(in, out);
  if (inPlace) s.scratchCount = n;
  for (uint64_t off = 0; off < n; off += piece) {
    const uint64_t len = std::min(piece, n - off);
    const Slice dst = shifted(out, off);
    const Slice own = inPlace ? Slice{Buf::Scratch, off} : shifted(in, off);
    if (inPlace) ch.copy(dst, own, len);
    for (int k = 1; k < P; ++k) ch.add(-1, (r + k) % P, false, own, Slice{}, len);
    if (r == 0) {
      if (!inPlace) ch.copy(own, dst, len);  // in place, Output holds it already
    } else {
      ch.add(0, -1, false, Slice{}, dst, len);
    }
    for (int k = 1; k < P; ++k) {
      if (k == r) {
        ch.add(-1, -1, true, own, dst, len);  // dst = own (op) dst
      } else {
        ch.add(k, -1, true, dst, dst, len);  // dst = received (op) dst
      }
    }
  }
  return s;
}

// One exchange: every rank sends the whole buffer to every other; one channel.
CostPlan oneShotCost(const CostQuery& q) {
  CostPlan plan;
  plan.shape = "oneshot";
  std::vector<CostMessage> all;
  for (int a = 0; a < q.nranks; ++a)
    for (int b = 0; b < q.nranks; ++b)
      if (a != b) all.push_back({a, b});
  if (!all.empty()) plan.phases.push_back(exchangePhase(all, q.bytes, true, 1));
  return plan;
}

}  // namespace hoccl
