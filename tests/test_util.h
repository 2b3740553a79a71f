// Test harness: ranks as threads of this process, each with its own
// communicator; data helpers come from perf/common/values.h.
#pragma once

#include <functional>
#include <string>

#include "hoccl.h"
#include "perf/common/values.h"

namespace testutil {

using namespace benchvals;

// Runs body(comm, rank) on nranks threads, each with its own communicator
// made from one unique id. Returns false (and sets *error) if init failed.
bool runThreads(int nranks, const std::function<void(hocclComm_t, int)>& body, std::string* error = nullptr);
// The same, calling setup(rank) in each thread before its communicator is
// created (tests set per-thread overrides there).
bool runThreadsWithSetup(int nranks, const std::function<void(int)>& setup,
                         const std::function<void(hocclComm_t, int)>& body, std::string* error = nullptr);

}  // namespace testutil
