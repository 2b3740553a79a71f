// NCCL's cost table as NCCL fills it before calling a tuner: every entry
// IGNORE (-1), then an estimate in microseconds for each combination NCCL
// supports for this collective, hardware and environment. The estimates
// follow the shape of NCCL's default model (ncclTopoTuneModel: a latency
// per algorithm and protocol plus bytes over a bus bandwidth, with NCCL's
// protocol factors) for nodes joined by one NIC each; they stand in for
// "what NCCL would pick without a tuner" in the decision table.
#pragma once

#include <cstddef>

#include "hoccl_nccl/tuner.h"

namespace pluginharness {

struct TableScenario {
  const char* name = "default";
  bool noLL128 = false;       // NCCL_PROTO=^LL128
  bool ringOnly = false;      // NCCL_ALGO=ring
  bool nvls = false;          // NVLS offered for all-reduce (NVSwitch systems)
  double nicGBps = 50;        // one 400 Gbit/s NIC per node
};

struct CostTable {
  float cost[NCCL_NUM_ALGORITHMS][NCCL_NUM_PROTOCOLS];
};

// coll is an ncclFunc_t value; types NCCL does not tune (send/recv, ...)
// get a table with only ring/simple valid, as NCCL never asks for them.
CostTable fillLikeNccl(int coll, size_t nBytes, int nRanks, int nNodes, const TableScenario& s);

// NCCL's choice: lowest entry >= 0, ties to the lowest (algo, proto).
bool pickLikeNccl(const CostTable& t, int* algo, int* proto);

const char* algoLabel(int algo);
const char* protoLabel(int proto);

// NCCL's default latency constants (the v5 constants struct NCCL passes).
ncclTunerConstants_v5_t defaultConstants();

}  // namespace pluginharness
