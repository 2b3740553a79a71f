// Every algorithm hoccl can run, registered with an id, a name and a
// description so tools can list them and users can force one by name.
#pragma once

#include <vector>

#include "algorithms/schedule.h"

namespace hoccl {

enum class AlgoId : int { Ring = 0, Hierarchical = 1, HoRing = 2, Doubling = 3 };

struct AlgoInfo {
  AlgoId id;
  const char* name;         // as accepted by HOCCL_ALGO / --algo
  const char* description;  // one line for hoccl-info
  bool (*supports)(CollKind coll);
  Schedule (*build)(const ScheduleKey& key);
};

const std::vector<AlgoInfo>& allAlgorithms();
const AlgoInfo* findAlgorithm(const char* name);  // case-insensitive; nullptr if unknown
const AlgoInfo& algorithmInfo(AlgoId id);

// Ring (and chain for broadcast/reduce) builders, algorithms/ring.cc.
Schedule buildRing(const ScheduleKey& key);

// Leader-based hierarchical all-reduce / reduce-scatter / all-gather,
// algorithms/hierarchical.cc; HO-Ring, algorithms/horing.cc. Both read
// key.groups and fall back to buildRing (saying so in Schedule::algorithm)
// for broadcast, reduce and groupings that do not describe key.nranks ranks.
Schedule buildHierarchical(const ScheduleKey& key);
Schedule buildHoRing(const ScheduleKey& key);

// Recursive doubling all-reduce (algorithms/doubling.cc); other
// collectives fall back to buildRing.
Schedule buildDoubling(const ScheduleKey& key);

}  // namespace hoccl
