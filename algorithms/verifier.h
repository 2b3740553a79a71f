// Symbolic verifier: runs the schedules of all ranks of one collective
// without data and checks that
//   - every message sent is received, by the matching channel and step, with
//     the same element count (no deadlock with `slotsPerEdge` messages of
//     buffering per directed edge and channel; steps are atomic). A ring
//     needs 2: the message the next rank is consuming plus the one being
//     produced (NCCL sizes its chunk to half the buffer for this reason).
//     0 means unbounded buffering;
//   - nothing is read before it is written (output and scratch start
//     undefined; input holds this rank's contribution);
//   - every output element ends holding exactly the contributions the
//     collective defines (each rank's element exactly once for reductions,
//     the right rank's element for gathers and broadcast), in place and out
//     of place (in-place buffers alias as NCCL defines);
//   - reductions only combine the same element index and never count a
//     contribution twice; no step writes the input buffer unless it aliases
//     the output;
//   - zero-count messages (sync steps) pair up like any other;
//   - ranks may differ in placement (some in place, some not);
//   - every step marked `zeroCopyEligible` keeps the contract the executor
//     relies on to send it by reference: its value lives in the sender's buffers, and
//     no step of the sender overwrites it before the receiving step has
//     completed, whatever the timing (verifier_zerocopy.cc).
#pragma once

#include <string>
#include <vector>

#include "algorithms/registry.h"
#include "algorithms/schedule.h"

namespace hoccl {

struct VerifyResult {
  bool ok = true;
  std::string error;  // first problem found, naming rank, channel, step
};

// `schedules[r]` is rank r's schedule; all share one key apart from `rank`.
VerifyResult verifySchedules(const std::vector<Schedule>& schedules, int slotsPerEdge = 2);

// Builds the schedule of every rank with `build` and verifies them.
VerifyResult verifyBuilder(Schedule (*build)(const ScheduleKey&), ScheduleKey key,
                           int slotsPerEdge = 2);

// Builds what hocclComm::prepare hands the executor (buildExecutable:
// schedule, sync steps when `syncSteps`, zero-copy marks) for every rank and
// verifies it. Rank r's call is in place when inPlace[r]; an empty vector
// means key.inPlace for every rank.
VerifyResult verifyExecutable(const AlgoInfo& algo, ScheduleKey key, bool syncSteps,
                              const std::vector<bool>& inPlace = {}, int slotsPerEdge = 2);

// Races between the channels of one rank, which verifySchedules cannot
// see (it runs one interleaving): "" if every two steps of different
// channels that touch overlapping memory, one of them writing, are ordered
// by channel order and dependencies; else the first such pair. Quadratic
// in the steps: for tests on small schedules (verifier_races.cc).
std::string firstUnorderedConflict(const Schedule& s);

}  // namespace hoccl
