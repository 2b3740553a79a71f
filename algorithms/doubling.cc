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
  Schedule s = oneChannelSchedule(key, "doubling");
  Lane ch(s, 0);
  const int P = key.nranks, r = key.rank;
  const uint64_t n = key.count;
  const Slice in{key.inPlace ? Buf::Output : Buf::Input, 0}, out{Buf::Output, 0};
  SubGroup all;
  for (int i = 0; i < P; ++i) all.members.push_back(i);
  all.pos = r;
  doublingAllReduce(ch, all, in, out, n, key.maxStepCount);
  return s;
}

// The fold, log2(p2) exchanges of the whole buffer, the unfold; one channel.
CostPlan doublingCost(const CostQuery& q) {
  std::vector<int> all;
  for (int i = 0; i < q.nranks; ++i) all.push_back(i);
  CostPlan plan;
  plan.shape = "doubling";
  appendDoublingCost(all, q.bytes, &plan.phases);
  return plan;
}

}  // namespace hoccl
