// Point-to-point schedules (pairwise.cc): all-to-all, all-to-all-v and the
// sends and receives of a group, as channels of plain send and receive
// steps that the executor and the verifier run like any other schedule.
#pragma once

#include <vector>

#include "algorithms/schedule.h"

namespace hoccl {

// One send or receive of `count` elements with `peer`, from or into `at`.
struct PointOp {
  int peer = 0;
  bool send = false;
  uint64_t count = 0;
  Slice at;
};

// The schedule of key.rank for `ops`, in the order the caller posted them:
// one channel per peer and direction (link 0), the k-th message to a peer
// received by that peer's k-th receive from this rank. Sends to key.rank
// itself become copies into its receives from itself, paired in order
// (counts must match; unpaired ones are dropped, so callers check first).
Schedule buildPointToPoint(const ScheduleKey& key, const std::vector<PointOp>& ops, const char* name);

// AllToAll (key.count per peer) and AllToAllv (key.vlayout), out of place
// or, for AllToAll, in place through a scratch copy of the input.
Schedule buildAllToAll(const ScheduleKey& key);

// AllToAll for executors whose channels are few and costly (a CTA each on
// a GPU): key.nchannels channels, each carrying its part of every block.
// At round k a channel sends its part of the block for rank+k and then
// receives rank-k's, cut into messages of at most key.maxStepCount, so all
// ranks exchange with one peer at a time in step (the shifted pairwise
// exchange). In place, the input is first copied to scratch (each
// channel its own part).
Schedule buildAllToAllShifted(const ScheduleKey& key);

}  // namespace hoccl
