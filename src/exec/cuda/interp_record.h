// The host side of a device-plan interpreter run, shared by the device
// executor and the host driver of the interpreter (interp_host): a rank's
// plan read and checked with the connections it uses, the call hash every
// message header carries, and what a run's DevControl says, in words and
// as a Status.
#pragma once

#include <string>
#include <vector>

#include "base/error.h"
#include "src/exec/cuda/interp.h"
#include "src/exec/cuda/plan.h"
#include "src/exec/dataops.h"

namespace hoccl::cuda {

// A hash of what every rank's headers must agree on.
uint64_t callHash(uint8_t coll, uint64_t count, DType t, RedOp op, int root, uint64_t opSeq);

// "device plan interpreter: rank 1 channel 0 step 3: timed out, waiting to
// receive from rank 2 (...)".
std::string describeFailure(const DevControl& k);

// The outcome a run's control record says: Status() when every channel
// completed, else hocclInvalidUsage (header mismatch), hocclTimeout,
// hocclRemoteError (aborted) or hocclInvalidArgument, with describeFailure.
Status runStatus(const DevControl& k);

// One rank's plan, read and checked for a run of `nranks` ranks with
// messages of `sliceElems` elements (its steps must fit in half the slots),
// and the edge each of its connections uses, in the plan's order: what a
// driver of the interpreter, host threads here or a GPU in the tests,
// builds the rank's InterpArgs from.
struct RankPlan {
  DevPlan plan;
  std::vector<DeviceEdge> edges;
};
Status readRankPlan(const std::vector<uint8_t>& image, int rank, int nranks, uint64_t sliceElems, RankPlan* out);

}  // namespace hoccl::cuda
