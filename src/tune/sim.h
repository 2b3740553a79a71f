// The schedule simulator behind hoccl-sim: runs the schedules the builders
// emit for every rank over the link model of model.h, message piece by
// message piece, and reports when the last rank finishes.
//
// Each channel of each rank runs its steps in order; a step's pieces wait
// for the previous piece of the channel, for the step it depends on, and
// for the matching piece from its receive peer. A piece then takes the
// rank's copy (or reduce) path and, when it is sent, every resource on its
// way (node memory, the node links out and in, the leaves' uplinks), each a
// queue served in order of arrival: flows that share a link share its time.
// Links with a token bucket (burst) start a call with what the previous
// call of a benchmark loop left in it: the simulator repeats the call until
// its time settles and reports that steady state.
// This is the cost model's resource view, applied to real schedules; it is
// exact about which edges exist and when, and slower (P up to a few
// hundred ranks in seconds). The closed-form model (predict) answers for
// any P.
#pragma once

#include <cstdint>
#include <string>

#include "src/tune/model.h"

namespace hoccl {
namespace tune {

struct SimOptions {
  uint64_t pieceBytes = 128 * 1024;  // a message moves in pieces of this size (the executor's slice)
  int maxPiecesPerStep = 64;         // larger pieces above this, to bound the work
  size_t elemBytes = 4;
};

struct SimResult {
  bool ok = false;
  double us = 0;          // when the last rank finishes
  uint64_t pieces = 0;    // pieces simulated
  std::string error;      // a schedule that cannot finish (a receive never matched)
};

// Simulates `algo` for `coll` of `bytes` (nccl-tests "size") on machine m,
// with the key fields the tuner would set.
SimResult simulate(const Machine& m, CollKind coll, AlgoId algo, uint64_t bytes, int nchannels, int pipelineChunks,
                   const SimOptions& opt = SimOptions());

}  // namespace tune
}  // namespace hoccl
