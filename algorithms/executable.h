// What a rank actually runs for one collective: the algorithm's schedule,
// then the zero-count sync steps that let every rank check the call, then
// the zero-copy marks that let the executor pass values by reference.
// hocclComm::prepare and the verifier tests both call buildExecutable, so
// the schedules verified are the schedules executed.
#pragma once

#include "algorithms/registry.h"
#include "algorithms/schedule.h"

namespace hoccl {

// `syncSteps`: add the sync steps (hoccl does when it checks calls,
// HOCCL_CHECK_CALLS=1, and there is more than one rank). A schedule with no
// steps (Schedule::oneShotShm) is returned as built.
Schedule buildExecutable(const AlgoInfo& algo, const ScheduleKey& key, bool syncSteps);

// A rank whose schedule receives nothing (a broadcast root, the head of a
// reduce chain, any rank of a zero-count call) could not notice a call that
// differs on other ranks. Each such rank gets one zero-count message from
// its ring predecessor, which carries the predecessor's call signature in
// its header. The predecessor learns the need by building its successor's
// schedule (a pure function), so no extra message is needed to agree on it.
// Does nothing for one rank.
void addSyncSteps(const AlgoInfo& algo, const ScheduleKey& key, Schedule* s);

}  // namespace hoccl
