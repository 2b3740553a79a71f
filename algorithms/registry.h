// Every algorithm hoccl can run: one row each (registry.cc) with its name,
// description, the collectives it runs, its schedule builder, its cost plan
// for the tuner's model (cost.h) and what the tuner may vary. Tools list
// them, users force one by name (HOCCL_ALGO, hocclConfig_t.algorithm), the
// tuner ranks them and the verifier tests sweep them, all from the rows:
// adding an algorithm is its file plus its row.
#pragma once

#include <string>
#include <vector>

#include "algorithms/cost.h"
#include "algorithms/schedule.h"

namespace hoccl {

// An algorithm's position in allAlgorithms(); the first four are named.
enum class AlgoId : int { Ring = 0, Hierarchical = 1, HoRing = 2, Doubling = 3, LeaderDoubling = 4, OneShot = 5 };

struct AlgoInfo {
  AlgoId id = AlgoId::Ring;  // its row's position (set by allAlgorithms())
  const char* name;         // as accepted by HOCCL_ALGO / --algo
  const char* description;  // one line for hoccl-info
  bool (*supports)(CollKind coll);
  // The schedule of key.rank; for a collective it does not support it
  // returns the ring's, labelled "ring (fallback: ...)".
  Schedule (*build)(const ScheduleKey& key);
  // The phases the cost model prices, for a collective it supports (the
  // model prices the ring's for the others).
  CostPlan (*cost)(const CostQuery& q);
  // A candidate for the tuner only where ranks span several nodes (on one
  // node it would run a ring under another name).
  bool grouped = false;
  // A candidate for the tuner only where all ranks share one node: its
  // messages per rank grow with the ranks (P-1 each), which a network's
  // per-message costs make a poor trade at scale. Forced, it runs anywhere.
  bool oneNode = false;
  // ScheduleKey::pipelineChunks applies: the tuner weighs tune::kPipelineDepths
  // and the verifier sweep covers them.
  bool pipelined = false;
  int maxChannels = 0;  // the most channels it uses; 0: any
  // The collectives the tuner weighs it for (null: all it supports); the
  // others run it when forced (HOCCL_ALGO) or by a tune file's rule.
  bool (*tunerWeighs)(CollKind coll) = nullptr;
};

const std::vector<AlgoInfo>& allAlgorithms();
const AlgoInfo* findAlgorithm(const char* name);  // case-insensitive; nullptr if unknown
const AlgoInfo& algorithmInfo(AlgoId id);
std::string algorithmNames();  // "ring, hierarchical, ...", in row order

// Ring (and chain for broadcast/reduce) builders, algorithms/ring.cc.
Schedule buildRing(const ScheduleKey& key);

// Leader-based hierarchical all-reduce / reduce-scatter / all-gather,
// algorithms/hierarchical.cc; HO-Ring, algorithms/horing.cc. Both read
// key.groups and fall back to buildRing (saying so in Schedule::algorithm)
// for broadcast, reduce and groupings that do not describe key.nranks ranks.
Schedule buildHierarchical(const ScheduleKey& key);
Schedule buildHoRing(const ScheduleKey& key);

// Recursive doubling all-reduce and all-gather, recursive halving
// reduce-scatter (algorithms/doubling.cc); broadcast and reduce fall back
// to buildRing.
Schedule buildDoubling(const ScheduleKey& key);
// Hierarchical all-reduce with recursive doubling among the leaders
// (hierarchical.cc): for small messages across nodes.
Schedule buildLeaderDoubling(const ScheduleKey& key);
// One-shot all-reduce, reduce-scatter and all-gather (algorithms/oneshot.cc):
// one exchange among all ranks, each rank reducing what it receives itself;
// broadcast and reduce fall back to buildRing.
Schedule buildOneShot(const ScheduleKey& key);

// The ring's cost plan, which the others fall back to (ring.cc).
CostPlan ringCost(const CostQuery& q);

}  // namespace hoccl
