// Recursive doubling all-reduce: log2(P) exchanges of the whole buffer, for
// small messages where the ring's 2(P-1) steps are all latency.
//
// With p2 the largest power of two <= P and e = P - p2 extra ranks, the
// first 2e ranks pair up (2i, 2i+1): the even one sends its input to the
// odd one, which reduces it and takes part in the exchanges; the even one
// receives the result at the end. The p2 active ranks get virtual ranks
// (odd rank 2i+1 -> i, rank r >= 2e -> r - e) and at distance d = 1, 2, 4,
// ... exchange their partial sums with virtual rank v ^ d. Partners are
// neighbours first (the same node, when ranks are numbered node by node).
//
// Every rank computes received (op) own at each exchange; the partner
// computes own (op) received, the same value for the commutative ops NCCL
// defines, so all ranks end with identical bits. Messages carry at most
// key.maxStepCount elements: each exchange is cut into rounds of "send a
// piece, then receive the partner's", which needs room for one message per
// edge.
#include "algorithms/cost.h"
#include "algorithms/phases.h"
#include "algorithms/registry.h"

namespace hoccl {
Schedule buildDoubling(const ScheduleKey& key) {
  if (key.coll != CollKind::AllReduce) return ringFallback(key, "ring (fallback: doubling is all-reduce only)");
  Schedule s;
  s.key = key;
  s.key.nchannels = 1;
  s.algorithm = "doubling";
  s.channels.resize(1);
  Lane ch(s, 0);
  const int P = key.nranks, r = key.rank;
  const uint64_t n = key.count;
  const Slice in{key.inPlace ? Buf::Output : Buf::Input, 0}, out{Buf::Output, 0};
  if (P == 1) {
    if (!key.inPlace) ch.copy(in, out, n);
    return s;
  }
  int p2 = 1;
  while (p2 * 2 <= P) p2 *= 2;
  const int extra = P - p2;
  const uint64_t piece = key.maxStepCount ? key.maxStepCount : n;
  auto pieces = [&](auto fn) {
    for (uint64_t at = 0; at < n; at += piece) fn(at, std::min(piece, n - at));
  };

  if (r < 2 * extra && r % 2 == 0) {  // folds into r + 1 and waits for the result
    ch.add(-1, r + 1, false, in, Slice{}, n);
    ch.add(r + 1, -1, false, Slice{}, out, n);
    return s;
  }
  Slice cur = in;  // where this rank's partial sum lives
  if (r < 2 * extra) {
    ch.add(r - 1, -1, true, in, out, n);
    cur = out;
  }
  const int v = r < 2 * extra ? r / 2 : r - extra;
  auto real = [&](int vr) { return vr < extra ? 2 * vr + 1 : vr + extra; };
  for (int d = 1; d < p2; d *= 2) {
    const int partner = real(v ^ d);
    pieces([&](uint64_t off, uint64_t len) {
      ch.add(-1, partner, false, shifted(cur, off), Slice{}, len);
      ch.add(partner, -1, true, shifted(cur, off), shifted(out, off), len);
    });
    cur = out;
  }
  if (r < 2 * extra) ch.add(-1, r - 1, false, out, Slice{}, n);
  return s;
}

// The fold, log2(p2) exchanges of the whole buffer, the unfold; one channel.
CostPlan doublingCost(const CostQuery& q) {
  const int P = q.nranks;
  const double M = q.bytes;
  int p2 = 1;
  while (p2 * 2 <= P) p2 *= 2;
  const int extra = P - p2;
  auto real = [&](int v) { return v < extra ? 2 * v + 1 : v + extra; };
  CostPlan plan;
  plan.shape = "doubling";
  std::vector<CostMessage> fold;
  for (int i = 0; i < extra; ++i) fold.push_back({2 * i, 2 * i + 1});
  if (!fold.empty()) plan.phases.push_back(exchangePhase(fold, M, true, 1));
  for (int d = 1; d < p2; d *= 2) {
    std::vector<CostMessage> x;
    for (int v = 0; v < p2; ++v) x.push_back({real(v), real(v ^ d)});
    plan.phases.push_back(exchangePhase(x, M, true, 1));
  }
  if (!fold.empty()) {
    for (CostMessage& f : fold) std::swap(f.from, f.to);
    plan.phases.push_back(exchangePhase(fold, M, false, 1));
  }
  return plan;
}

}  // namespace hoccl
