#include "algorithms/registry.h"

#include <cctype>

namespace hoccl {

// Defined in each algorithm's file.
CostPlan hierarchicalCost(const CostQuery& q);
CostPlan horingCost(const CostQuery& q);
CostPlan doublingCost(const CostQuery& q);
CostPlan leaderDoublingCost(const CostQuery& q);
CostPlan oneShotCost(const CostQuery& q);
CostPlan oneShotShmCost(const CostQuery& q);

namespace {

bool anyCollective(CollKind) { return true; }

bool unrooted(CollKind c) {
  return c == CollKind::AllReduce || c == CollKind::ReduceScatter || c == CollKind::AllGather;
}

bool allReduceOnly(CollKind c) { return c == CollKind::AllReduce; }

// All but the point-to-point family (all-to-all, send/recv).
bool notPointToPoint(CollKind c) { return unrooted(c) || c == CollKind::Broadcast || c == CollKind::Reduce; }

bool equalsIgnoringCase(const char* a, const char* b) {
  for (; *a && *b; ++a, ++b) {
    if (std::tolower(static_cast<unsigned char>(*a)) != std::tolower(static_cast<unsigned char>(*b))) {
      return false;
    }
  }
  return *a == *b;
}

// One row per algorithm; the position is its AlgoId (named in registry.h,
// so the order is fixed: a new row goes last).
std::vector<AlgoInfo> rows() {
  return {
      {.name = "ring",
       .description = "one ring through all ranks per channel (a pipelined chain for broadcast and reduce)",
       .supports = anyCollective, .build = buildRing, .cost = ringCost},
      {.name = "hierarchical",
       .description = "reduce to a leader per group, ring all-reduce among leaders, broadcast in the group "
                      "(phases in sequence)",
       .supports = unrooted, .build = buildHierarchical, .cost = hierarchicalCost, .grouped = true},
      {.name = "horing",
       .description = "HO-Ring: intra-group reduce-scatter, one rail ring per local index, intra-group "
                      "all-gather, pipelined",
       .supports = unrooted, .build = buildHoRing, .cost = horingCost, .grouped = true, .pipelined = true},
      {.name = "doubling",
       .description = "recursive doubling: log2(P) exchanges (all-reduce: of the whole buffer; all-gather: "
                      "doubling blocks; reduce-scatter: halving blocks), for small messages",
       .supports = unrooted, .build = buildDoubling, .cost = doublingCost, .maxChannels = 1,
       // All-gather and reduce-scatter beat HO-Ring across nodes at 512 B-4 KiB but lose 3x at 32 KiB
       // (every rank of a node crosses the node link at once); the model's per-message latencies, several
       // times the measured ones, put that crossover near 32 KiB. Until they are recalibrated, those two
       // run by HOCCL_ALGO or a tune file rule only (docs/algorithms.md, "Recursive doubling ...").
       .tunerWeighs = allReduceOnly},
      {.name = "leaderdoubling",
       .description = "reduce to a leader per group, recursive doubling among the leaders, broadcast in the "
                      "group: for small all-reduces across nodes",
       .supports = allReduceOnly, .build = buildLeaderDoubling, .cost = leaderDoublingCost, .grouped = true,
       .maxChannels = 1},
      {.name = "oneshot",
       .description = "one-shot: every rank sends its input (all-reduce, all-gather) or each block "
                      "(reduce-scatter) straight to every other, which reduces in rank order; one step of latency, "
                      "for small messages on one node",
       .supports = unrooted, .build = buildOneShot, .cost = oneShotCost, .oneNode = true, .maxChannels = 1},
      {.name = "oneshot_shm", .formerName = "board",
       .description = "one-shot over shared memory (formerly called the board): every rank writes its input once "
                      "to its own slot, which every rank reads in place, in rank order; calls of up to 512 B per "
                      "rank on one node (HOCCL_BOARD_BYTES), host buffers only",
       .supports = notPointToPoint, .build = buildOneShotShm, .cost = oneShotShmCost, .maxChannels = 1,
       .sharedSlotsOnly = true, .maxBytesPerRank = 512},
  };
}

}  // namespace

const std::vector<AlgoInfo>& allAlgorithms() {
  static const std::vector<AlgoInfo> algos = [] {
    std::vector<AlgoInfo> v = rows();
    for (size_t i = 0; i < v.size(); ++i) v[i].id = AlgoId(i);
    return v;
  }();
  return algos;
}

const AlgoInfo* findAlgorithm(const char* name) {
  if (name == nullptr) return nullptr;
  for (const AlgoInfo& a : allAlgorithms()) {
    if (equalsIgnoringCase(a.name, name) || (a.formerName && equalsIgnoringCase(a.formerName, name))) return &a;
  }
  return nullptr;
}

const AlgoInfo& algorithmInfo(AlgoId id) {
  const std::vector<AlgoInfo>& algos = allAlgorithms();
  const size_t i = static_cast<size_t>(id);
  // An id outside the table can only come from a cast; the ring is the safe
  // answer for it.
  return i < algos.size() ? algos[i] : algos.front();
}

std::string algorithmNames() {
  std::string names;
  for (const AlgoInfo& a : allAlgorithms()) names += (names.empty() ? "" : ", ") + std::string(a.name);
  return names;
}

}  // namespace hoccl
