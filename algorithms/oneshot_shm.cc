// One-shot over shared memory (oneshot_shm, formerly "the board"): each
// rank writes its input once to its own slot in memory every rank of the
// communicator maps, then reads every rank's slot in place, in rank order
// (src/exec/oneshot_shm.cc runs it; OneShotSlots, transport/connection.h).
// There is nothing for a schedule to say step by step, so the schedule is
// the key and a flag; the registry row (registry.h, sharedSlotsOnly) tells
// the tuner where the slots exist and how much they hold.
#include "algorithms/cost.h"
#include "algorithms/phases.h"
#include "algorithms/registry.h"

namespace hoccl {

namespace {

bool runsOnSlots(CollKind c) {
  return c == CollKind::AllReduce || c == CollKind::AllGather || c == CollKind::ReduceScatter ||
         c == CollKind::Broadcast || c == CollKind::Reduce;
}

}  // namespace

uint64_t oneShotShmBytesPerRank(CollKind coll, int nranks, uint64_t bytes) {
  if (!runsOnSlots(coll)) return 0;
  return coll == CollKind::AllGather && nranks > 0 ? bytes / uint64_t(nranks) : bytes;
}

Schedule buildOneShotShm(const ScheduleKey& key) {
  if (!runsOnSlots(key.coll))
    return ringFallback(key, "ring (fallback: oneshot_shm is for all-reduce, all-gather, reduce-scatter, broadcast "
                             "and reduce)");
  Schedule s;
  s.key = key;
  s.algorithm = "oneshot_shm";
  s.oneShotShm = true;
  return s;
}

// What a rank reads from the slots, priced as messages into it: every
// rank's whole input (all-reduce), its block of each (reduce-scatter), each
// rank's input (all-gather), the root's input (broadcast) or, at the root,
// every rank's (reduce). A root's cost is every root's: rank 0 stands in.
// No pass of its own per reader (CostPhase::staged): the writer copies its
// input into its slot once, whoever reads it.
CostPlan oneShotShmCost(const CostQuery& q) {
  CostPlan plan;
  plan.shape = "oneshot_shm";
  const int P = q.nranks;
  std::vector<CostMessage> reads;
  for (int to = 0; to < P; ++to)
    for (int from = 0; from < P; ++from) {
      if (from == to) continue;
      if (q.coll == CollKind::Broadcast && from != 0) continue;
      if (q.coll == CollKind::Reduce && to != 0) continue;
      reads.push_back({from, to});
    }
  const bool blocks = q.coll == CollKind::ReduceScatter || q.coll == CollKind::AllGather;
  const double bytes = blocks && P > 0 ? q.bytes / P : q.bytes;
  if (!reads.empty()) plan.phases.push_back(exchangePhase(reads, bytes, collReduces(q.coll), 1));
  return plan;
}

}  // namespace hoccl
