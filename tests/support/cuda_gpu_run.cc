#include "tests/support/cuda_gpu_run.h"

#include <cstring>

namespace hoccl::gputest {

using cuda::DevConnMem;
using cuda::DevControl;
using cuda::DeviceEdge;

std::string GpuRun::setUp(const std::vector<std::vector<uint8_t>>& images, const std::vector<RankBuffers>& bufs,
                          uint64_t timeoutNs) {
  if (int(images.size()) != s_.nranks || int(bufs.size()) != s_.nranks || s_.nranks > Gpu::kStreams)
    return "GpuRun: " + std::to_string(s_.nranks) + " ranks, " + std::to_string(images.size()) + " plans, " +
           std::to_string(bufs.size()) + " buffers, " + std::to_string(Gpu::kStreams) + " streams";
  if (s_.mapped) control_ = static_cast<DevControl*>(mem_.mapped(sizeof(DevControl), &controlDev_));
  else controlDev_ = mem_.alloc(sizeof(DevControl));
  for (int r = 0; r < s_.nranks; ++r) {
    cuda::RankPlan rp;
    const Status st = cuda::readRankPlan(images[r], r, s_.nranks, s_.sliceElems, &rp);
    if (!st.ok()) return st.message();
    std::vector<DevPtr> conns;
    for (const DeviceEdge& e : rp.edges) conns.push_back(conn(e));
    const cuda::DevPlanHeader& h = rp.plan.header;
    const DevPtr image = mem_.alloc(images[r].size()), memory = mem_.alloc(bufs[r].mem.size());
    const DevPtr connTable = mem_.alloc(conns.size() * sizeof(DevPtr));
    mem_.upload(image, images[r].data(), images[r].size());
    mem_.upload(memory, bufs[r].mem.data(), bufs[r].mem.size());
    mem_.upload(connTable, conns.data(), conns.size() * sizeof(DevPtr));
    cuda::InterpArgs a{};
    a.image = reinterpret_cast<const uint8_t*>(image);
    a.input = reinterpret_cast<char*>(memory + bufs[r].inOff);
    a.output = reinterpret_cast<char*>(memory + bufs[r].outOff);
    a.scratch = h.scratchCount ? reinterpret_cast<char*>(mem_.alloc(h.scratchCount * s_.elemBytes)) : nullptr;
    a.conns = reinterpret_cast<DevConnMem* const*>(connTable);
    a.stepsDone = reinterpret_cast<uint64_t*>(mem_.alloc((h.nchannels + 1) * sizeof(uint64_t)));
    a.control = reinterpret_cast<DevControl*>(controlDev_);
    a.call = s_.call;
    a.sliceElems = s_.sliceElems;
    a.timeoutNs = timeoutNs;
    a.flags = s_.oneGpu && !s_.mapped ? cuda::kArgOneGpu : 0;
    args_.push_back(a);
    channels_.push_back(h.nchannels);
    memory_.push_back(memory);
  }
  // The copies ran on the legacy stream (a pageable one may return before
  // its DMA ends); the kernels run on non-blocking streams, which do not
  // wait for it.
  mem_.sync();
  return mem_.error();
}

std::string GpuRun::checkOccupancy(Handle fn, const std::vector<bool>& present) const {
  int perSm = 0, ctas = 0;
  std::string why = g_->check(g_->cu.occupancyMaxActiveBlocksPerMultiprocessor(&perSm, fn, int(s_.threads), 0),
                              "cuOccupancyMaxActiveBlocksPerMultiprocessor");
  for (size_t r = 0; r < channels_.size() && r < present.size(); ++r) ctas += present[r] ? int(channels_[r]) : 0;
  if (why.empty() && (ctas > perSm * g_->sms || (ctas > 1 && !g_->concurrentKernels)))
    why = std::to_string(ctas) + " CTAs of " + std::to_string(s_.threads) + " threads cannot all be resident: " +
          std::to_string(perSm) + " per SM x " + std::to_string(g_->sms) + " SMs, concurrent kernels " +
          (g_->concurrentKernels ? "yes" : "no");
  return why;
}

std::string GpuRun::launch(Handle fn, int r) {
  if (channels_[r] == 0) return "";
  void* params[] = {&args_[r]};
  return g_->check(g_->cu.launchKernel(fn, channels_[r], 1, 1, s_.threads, 1, 1, 0, g_->streams[r], params, nullptr),
                   "cuLaunchKernel (interpreter kernel)");
}

std::string GpuRun::finish(DevControl* control) {
  for (int r = 0; r < s_.nranks; ++r)
    mem_.fail(g_->check(g_->cu.streamSynchronize(g_->streams[r]), "cuStreamSynchronize"));
  if (control_) {
    if (mem_.ok()) std::memcpy(static_cast<void*>(control), control_, sizeof *control);
  } else {
    mem_.download(control, controlDev_, sizeof *control);
  }
  return mem_.error();
}

std::string GpuRun::download(std::vector<RankBuffers>* bufs) {
  for (int r = 0; r < s_.nranks; ++r) mem_.download((*bufs)[r].mem.data(), memory_[r], (*bufs)[r].mem.size());
  return mem_.error();
}

const DevConnMem* GpuRun::hostConn(const DeviceEdge& e) const {
  auto it = hostConns_.find(EdgeKey(e.from, e.to, e.link));
  return it == hostConns_.end() ? nullptr : it->second;
}

// Edge e's connection, made on first use: zeroed counters and headers, and
// kDevSlots slots in device memory.
DevPtr GpuRun::conn(const DeviceEdge& e) {
  DevPtr& d = conns_[EdgeKey(e.from, e.to, e.link)];
  if (d) return d;
  DevConnMem m;
  std::memset(static_cast<void*>(&m), 0, sizeof m);
  const DevPtr slots = mem_.alloc(cuda::kDevSlots * s_.slotBytes);
  m.slotBytes = s_.slotBytes;
  if (s_.mapped) {
    void* h = mem_.mapped(sizeof m, &d);
    m.dataOffset = slots - d;
    if (h) std::memcpy(h, static_cast<const void*>(&m), sizeof m);
    hostConns_[EdgeKey(e.from, e.to, e.link)] = static_cast<const DevConnMem*>(h);
  } else {
    d = mem_.alloc(sizeof m);
    m.dataOffset = slots - d;
    mem_.upload(d, &m, sizeof m);
  }
  return d;
}

}  // namespace hoccl::gputest
