#pragma once

#include <string>

namespace pluginharness {

// Drives ncclTunerPlugin_v<version> over every collective, size and a range
// of topologies, as NCCL fills its cost table; 0 when every check passed.
int runTunerCheck(const std::string& plugin, int version);

// Prints, per collective and size, NCCL's default pick and the tuner's.
int printDecisionTable(const std::string& plugin, int version, int nodes, int ranks, const std::string& topoFile);

}  // namespace pluginharness
