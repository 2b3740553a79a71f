// Every algorithm hoccl can run: one row each (registry.cc) with its name,
// description, the collectives it runs, its schedule builder, its cost plan
// for the tuner's model (cost.h) and what the tuner may vary. Tools list
// them, users force one by name (HOCCL_ALGO, hocclConfig_t.algorithm), the
// tuner ranks them and the verifier tests sweep them, all from the rows:
// adding an algorithm is its file plus its row.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "algorithms/cost.h"
#include "algorithms/schedule.h"

namespace hoccl {

// An algorithm's position in allAlgorithms().
enum class AlgoId : int {
  Ring = 0,
  Hierarchical = 1,
  HoRing = 2,
  Doubling = 3,
  LeaderDoubling = 4,
  OneShot = 5,
  OneShotShm = 6,
};

struct AlgoInfo {
  AlgoId id = AlgoId::Ring;  // its row's position (set by allAlgorithms())
  const char* name;         // as accepted by HOCCL_ALGO / --algo
  // An earlier name findAlgorithm also accepts (null: none), so settings
  // written before the rename keep working; tools list `name` only.
  const char* formerName = nullptr;
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
  // Runs only over one-shot slots in shared memory (OneShotSlots,
  // transport/connection.h), which a communicator has only where all its
  // ranks share one node; its schedule has no steps (Schedule::oneShotShm)
  // and every call puts at most maxBytesPerRank bytes of input in each
  // rank's slot (oneShotShmBytesPerRank). The cost model never ranks it:
  // the tuner takes it by a rule of its own where it fits and the call is
  // on host buffers (src/tune/tuner.h), and a forced or ruled choice of it
  // that does not fit falls back to the model's pick, saying why. The
  // verifier cannot check a schedule with no steps: tests/test_oneshot_shm.cc
  // and the collective matrix run it instead.
  bool sharedSlotsOnly = false;
  uint64_t maxBytesPerRank = 0;  // 0: no limit
};

const std::vector<AlgoInfo>& allAlgorithms();
// Case-insensitive, by name or former name; nullptr if unknown.
const AlgoInfo* findAlgorithm(const char* name);
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

// One-shot over shared memory (algorithms/oneshot_shm.cc): the schedule
// with no steps (Schedule::oneShotShm) that the executor runs over the
// communicator's one-shot slots (src/exec/oneshot_shm.cc), for all-reduce,
// all-gather, reduce-scatter, broadcast and reduce; the others fall back to
// buildRing. The bytes each rank puts in its slot for a call of NCCL size
// `bytes` (tune::Prediction's meaning) on `nranks` ranks: all-gather's send
// buffer is 1/nranks of it, the other collectives' input is all of it; 0
// for the collectives it does not run.
Schedule buildOneShotShm(const ScheduleKey& key);
uint64_t oneShotShmBytesPerRank(CollKind coll, int nranks, uint64_t bytes);

// The ring's cost plan, which the others fall back to (ring.cc).
CostPlan ringCost(const CostQuery& q);

}  // namespace hoccl
