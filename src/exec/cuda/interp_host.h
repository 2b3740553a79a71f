// The device-plan interpreter (interp.h) run on the host: every rank of a
// call as threads of this process, each channel as `lanes` threads (the
// CTA a GPU would give it), connections in host memory under acquire /
// release atomics. What the CUDA executor will run, checked here without a
// GPU: tests compare its results bit for bit with the host executor's and
// run it under ThreadSanitizer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "base/error.h"
#include "src/exec/cuda/interp_record.h"
#include "src/exec/cuda/interp.h"
#include "src/exec/cuda/plan.h"
#include "src/exec/dataops.h"

namespace hoccl::cuda {

// Connection memory for ranks that share an address space: one DevConnMem
// and its slots per (sender, receiver, link), made on first use.
class HostFabric {
 public:
  // `slotBytes`: payload bytes of each slot, rounded up to 16.
  explicit HostFabric(size_t slotBytes);
  DevConnMem* conn(int from, int to, int link);
  size_t slotBytes() const { return slotBytes_; }

 private:
  struct Edge {
    std::unique_ptr<DevConnMem> mem;
    std::unique_ptr<uint8_t[]> slots;
  };
  size_t slotBytes_;
  std::map<std::tuple<int, int, int>, Edge> edges_;
};

// One rank's part of a run.
struct HostRank {
  std::vector<uint8_t> image;  // DevPlan::image() of the rank's schedule
  const void* input = nullptr;
  void* output = nullptr;
  uint64_t call = 0;           // the call's hash (callHash), written in and checked against headers
  bool run = true;             // false: the rank never arrives (tests of the bounded wait)
};

struct HostRunOptions {
  DType dtype = DType::Float32;
  RedOp op = RedOp::Sum;
  int lanes = 1;                          // threads per channel
  uint64_t timeoutNs = 60'000'000'000ull; // longest wait
  // Elements per message; 0: as many as a slot holds. The schedules'
  // maxStepCount must be at most kDevSlots / 2 messages (as the host
  // executor's is at most half its slots).
  uint64_t sliceElems = 0;
  // Tests: start from the control block as given (an abort already set, as
  // a launch queued behind an aborted one finds it) instead of zeroing it.
  bool keepControl = false;
};

// True for the types and ops the host driver instantiates: every integer
// type, fp16, bf16, float and double, with sum, prod, max, min and avg
// (the kernels the device image has, kernel_names.h).
bool interpSupports(DType t, RedOp op);

// Runs every rank's plan to its end. `control` is shared by all ranks
// (zeroed here; a caller may set control->abort from another thread while
// the run goes on). Each rank's scratch is allocated here. Returns the
// first failure recorded, its message naming rank, channel, step and peer
// (describeFailure); after a run without one, hocclInternalError if a rank's
// steps-done counters were not left zero for the next launch.
Status runPlansOnHost(const std::vector<HostRank>& ranks, HostFabric* fabric, const HostRunOptions& opt,
                      DevControl* control);


// Runs channels [0, nchannels) of one rank's launch (InterpArgs as a kernel
// gets them) on host threads, `lanes` per channel, the lane policy a CTA
// gives the kernel; returns once every channel has ended (the outcome is
// in a.control). What a GPU's grid of nchannels CTAs would do.
void runLaunchOnHost(DType t, RedOp op, const InterpArgs& a, uint32_t nchannels, int lanes);

}  // namespace hoccl::cuda
