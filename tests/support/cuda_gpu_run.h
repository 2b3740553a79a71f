// One run of a device-plan interpreter kernel on the GPU for the `gpu`
// tests (test_cuda_gpu_interp.cc): every rank of a call on the one device,
// each its own launch on its own stream, one CTA per channel. Its memory is
// laid out as interp_host.cc lays it out for host threads, from the same
// readRankPlan: the plan image, the rank's buffers, scratch, a "steps done"
// counter per channel, a table of connection pointers (one DevConnMem and
// its slots per sender, receiver and link) and one DevControl for all.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "src/exec/cuda/interp_host.h"
#include "tests/support/cuda_gpu.h"
#include "tests/support/rank_buffers.h"

namespace hoccl::gputest {

// One rank's memory as the host sees it: input and output inside `mem`.
using test_shapes::RankBuffers;

struct GpuRunShape {
  int nranks = 1;
  size_t slotBytes = 256;    // a multiple of 16
  uint64_t sliceElems = 64;  // elements per message, at most a slot
  size_t elemBytes = 4;      // the element type's size (the scratch's elements)
  unsigned threads = 256;    // per CTA (the kernel allows 512)
  uint64_t call = 0;         // the call's hash (cuda::callHash)
  // The control record and the connections (counters and headers; not
  // their slots) in pinned host memory mapped into the device, so the host
  // can watch the run and abort it; else everything is device memory.
  bool mapped = false;
  // Launch with kArgOneGpu: GPU-scope counters (every rank here is on the
  // one GPU; not with `mapped`, whose counters the host reads).
  bool oneGpu = false;
};

class GpuRun {
 public:
  GpuRun(Gpu* g, const GpuRunShape& shape) : g_(g), s_(shape), mem_(*g) {}

  // Uploads every rank's plan and buffers and builds its InterpArgs, all
  // done before it returns; "" or why not.
  std::string setUp(const std::vector<std::vector<uint8_t>>& images, const std::vector<RankBuffers>& bufs,
                    uint64_t timeoutNs);
  // "" when the CTAs of the ranks in `present` can all be resident at once
  // (the channels wait on each other), else why not.
  std::string checkOccupancy(Handle fn, const std::vector<bool>& present) const;
  // Launches rank r's plan on stream r (nothing when it has no channel).
  std::string launch(Handle fn, int r);
  // Waits for every stream, then reads the control record.
  std::string finish(cuda::DevControl* control);
  // Reads every rank's memory back into `bufs`.
  std::string download(std::vector<RankBuffers>* bufs);

  // With `mapped`: the control record, and the connection of edge `e` as
  // the host sees them (null for an edge no plan uses).
  cuda::DevControl* hostControl() const { return control_; }
  const cuda::DevConnMem* hostConn(const cuda::DeviceEdge& e) const;

 private:
  using EdgeKey = std::tuple<int, int, int>;
  DevPtr conn(const cuda::DeviceEdge& e);

  Gpu* g_;
  GpuRunShape s_;
  Arena mem_;
  DevPtr controlDev_ = 0;
  cuda::DevControl* control_ = nullptr;
  std::map<EdgeKey, DevPtr> conns_;
  std::map<EdgeKey, const cuda::DevConnMem*> hostConns_;
  std::vector<cuda::InterpArgs> args_;
  std::vector<unsigned> channels_;
  std::vector<DevPtr> memory_;
};

}  // namespace hoccl::gputest
