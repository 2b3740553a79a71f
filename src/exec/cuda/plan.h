// Flattening a Schedule into the device plan (dev_plan.h) and back.
//
// flattenSchedule turns one rank's schedule into the image a device
// executor uploads once per cached schedule; readPlanImage checks an image
// (every index and buffer in range: it is also what the fuzzer feeds) and
// unflattenPlan rebuilds the Schedule from it, so tests can verify that a
// plan says exactly what the schedule said (round trip, then the verifier).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "algorithms/schedule.h"
#include "base/error.h"
#include "src/exec/cuda/dev_plan.h"

namespace hoccl::cuda {

struct DevPlan {
  DevPlanHeader header{};
  std::vector<DevChannel> channels;
  std::vector<DevConn> conns;
  std::vector<DevStep> steps;

  // The bytes to upload: header, channels, connections, steps (planLayout).
  std::vector<uint8_t> image() const;
};

// Fails (hocclInvalidArgument, naming the limit) when the schedule does not
// fit the plan's fields: more than INT16_MAX connections on a channel, more
// than UINT32_MAX steps, channels or parts.
Status flattenSchedule(const Schedule& s, DevPlan* out);

// Reads and checks an image: magic, version, sizes, every channel's steps
// and connections inside the arrays, every step's connections inside its
// channel, buffers and flags known, dependencies naming an existing step of
// another channel, offsets + counts not overflowing. Errors say which
// channel and step is wrong.
Status readPlanImage(const uint8_t* data, size_t size, DevPlan* out);

// The Schedule a plan describes (key fields from the header; algorithm "").
Schedule unflattenPlan(const DevPlan& plan);

}  // namespace hoccl::cuda
