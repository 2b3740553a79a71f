// The device executor: runs a communicator's calls on device buffers as
// launches of the device-plan interpreter (interp.h, one CTA per channel)
// on the caller's stream, and returns once they are queued.
//
// Per communicator: the kernels' module loaded once from the embedded
// image, a control block (DevControl) in mapped host memory through which
// the host reads a launch's failure and sets the abort word, and an event
// that orders the communicator's launches one after the other whatever
// stream each is on (their connections and counters are shared). Per cached
// schedule: the plan image, its connection table, per-channel counters and
// scratch, uploaded once. The connections themselves (a DevConnMem and its
// slots per edge) come from a device transport, which the executor gets
// from its owner (TaskOwner::openDeviceConnections) and knows only through
// transport/device_connection.h: which memory they use and how it crosses
// processes is the transport's business. Ranks on other hosts are refused
// by create() for now: no device transport reaches them yet.
//
// A launch's arguments are pointers and constants only, nothing the host
// rewrites per replay, so a launch can later be captured in a CUDA graph.
// Everything here runs through DeviceApi: the tests drive it on the host
// with a fake driver.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "base/cuda_device_api.h"
#include "base/oob.h"
#include "src/exec/cuda/interp.h"
#include "src/exec/cuda/interp_record.h"
#include "src/exec/dataops.h"
#include "src/exec/engine.h"
#include "transport/device_connection.h"

namespace hoccl::cuda {

// The ring chunk per channel that DeviceExecutor::channelsFor aims at
// (device_executor.cc).
inline constexpr uint64_t kChannelChunk = uint64_t(128) << 10;

struct DeviceSettings {
  size_t sliceBytes = 128 << 10;  // the communicator's slice (HOCCL_SLICE_BYTES)
  int slots = 8;                  // HOCCL_SLOTS: the schedules' steps fit in half of them
  unsigned threads = 512;         // per CTA (HOCCL_DEVICE_THREADS)
  int channels = 0;               // HOCCL_DEVICE_CHANNELS; 0: by size (channelsFor)
  int minChannels = 0;            // config->minCTAs: at least this many by size (0: unset)
  int maxChannels = 0;            // config->maxCTAs: at most this many (0: unset)
  DeviceConnSettings conn;        // HOCCL_P2P_DISABLE, HOCCL_P2P_CHECK, HOCCL_DEVICE_IPC: for the transport
};

// Plans (a flattened schedule and its device memory) an executor keeps; the
// least recently launched one beyond it is freed (DeviceExecutor::evictPlan).
inline constexpr size_t kMaxDevicePlans = 64;

// Tests: the image create() loads instead of kernelImage() (for builds that
// embed no kernels; a fake driver accepts any bytes). Null: kernelImage().
void setKernelImageForTesting(const void* image);
// Tests: kMaxDevicePlans replaced by `cap` (0: restored).
void setPlanCapForTesting(size_t cap);

class DeviceExecutor {
 public:
  // The executor of communicator `owner` (bootstrap `oob`) on the device
  // that holds `devicePtr`, with its owner's device connections. Fails with
  // hocclInvalidUsage, naming the ranks and processes, when a rank is on
  // another host; with the driver's reason when it lacks an entry point or
  // refuses the image; with the transport's when it cannot connect the
  // ranks (VMM entry points missing where a rank is another process).
  static Status create(const Driver& d, TaskOwner* owner, OutOfBand* oob, const DeviceSettings& s,
                       const void* devicePtr, std::unique_ptr<DeviceExecutor>* out);
  // Waits for the launches to end (every wait in them is bounded by the
  // communicator's timeout), then frees; if they do not end, the memory
  // is leaked rather than freed under a running kernel.
  ~DeviceExecutor();
  DeviceExecutor(const DeviceExecutor&) = delete;
  DeviceExecutor& operator=(const DeviceExecutor&) = delete;

  // True if running a call of `sched` will first set it up (connections
  // exchanged with peers: every rank must reach its call).
  bool needsSetup(const Schedule* sched) const { return plans_.count(sched) == 0; }
  // Queues the call on w.call->stream after this communicator's previous
  // launches and returns. Setup errors return here; what happens on the
  // device is for poll().
  Status enqueue(const Work& w);
  // The first failure a launch recorded (timeout, abort, mismatch), naming
  // rank, channel, step and peer; Status() while none has.
  Status poll();
  // Sets the abort word: a waiting launch ends within a poll interval.
  void requestAbort();
  // True once every launch queued so far has ended (waits up to `sec`).
  bool waitIdle(double sec);
  // Gives up an executor whose launches have not ended, for an owner that
  // cannot wait for them (hocclCommAbort) and frees itself next: the abort
  // word is set, the transport's threads that call back into the executor
  // (and through it into the owner: the network proxy's watch) stop now
  // and its network closes (DeviceConnections::quiesce), and the executor
  // and everything a launch may still touch (plans, control block,
  // connection memory) are leaked. Nothing left running refers to the
  // owner or its bootstrap afterwards.
  static void abandon(std::unique_ptr<DeviceExecutor> e);
  int device() const { return device_; }
  // The channels (CTAs) a call moving `bytes` per rank should use on the
  // device: one per ring chunk of kChannelChunk, at most what fits: every CTA of every rank must be resident
  // at once (they wait on each other), for two calls in a row, so all ranks
  // together get one CTA per two multiprocessors of the GPU they share (the
  // least over the GPUs).
  // The same on every rank. HOCCL_DEVICE_CHANNELS fixes it, within the cap.
  int channelsFor(uint64_t bytes) const;
  int channelCap() const { return channelCap_; }
  size_t plans() const { return plans_.size(); }
  uint64_t evictions() const { return evictions_; }

 private:
  DeviceExecutor() = default;
  struct PlanRes {
    std::shared_ptr<const Schedule> sched;  // keeps the key alive
    DevPtr image = 0, conns = 0, stepsDone = 0, scratch = 0;
    uint32_t nchannels = 0;
    uint64_t sliceElems = 0;
    std::vector<DevPtr> owned;  // the allocations above
    uint64_t lastUse = 0;       // the launch that used it last (launches_)
    bool captured = false;      // launched into a CUDA graph: kept while the executor lives
  };
  static size_t planCap();
  // Stops the transport's threads that call back into this executor and
  // forgets the owner and bootstrap (abandon, and the destructor when a
  // launch does not end).
  void detach();
  Status evictPlan();
  void freePlan(PlanRes* p);
  class CtxScope;
  Status shareDevices(const Driver& d, std::vector<DevicePeer>* peers);
  Status openConnections(const Driver& d, std::vector<DevicePeer> peers);
  Status upload(DevPtr dst, const void* src, size_t bytes, const char* what);
  Status setUp(const Work& w, PlanRes* out);
  Status alloc(size_t bytes, DevPtr* p, PlanRes* owner);
  Status kernel(DType t, RedOp op, CuHandle* fn);

  DeviceApi api_;
  TaskOwner* owner_ = nullptr;
  OutOfBand* oob_ = nullptr;
  bool otherProcesses_ = false;  // some rank is another process (of this host)
  DeviceSettings settings_;
  int rank_ = 0, nranks_ = 1, device_ = 0;
  double timeoutSec_ = 300;  // the communicator's, which bounds every wait of a launch
  const char* timeoutFrom_ = "HOCCL_TIMEOUT";  // what set it (ProgressPolicy::timeoutFrom)
  size_t slotBytes_ = 0;
  int channelCap_ = 1;  // channelsFor's cap (create)
  // Every rank on this executor's GPU and every connection in its memory,
  // so counters need only GPU scope (kArgOneGpu).
  bool oneGpu_ = false;
  std::unique_ptr<DeviceConnections> conns_;  // the transport's (openConnections)
  CuHandle ctx_ = nullptr, module_ = nullptr, last_ = nullptr;
  CuHandle setupStream_ = nullptr;  // uploads (upload())
  bool retained_ = false;
  std::atomic<bool> launched_{false};
  DevControl* control_ = nullptr;  // mapped host memory
  DevPtr controlDev_ = 0;
  std::array<CuHandle, size_t(kNumDTypes) * kNumRedOps> kernels_{};  // by (type, op), looked up on first use
  CuHandle lastStream_ = nullptr;  // of the last launch (enqueue's thread only)
  bool lastCaptured_ = false;
  std::map<const Schedule*, PlanRes> plans_;
  uint64_t launches_ = 0, evictions_ = 0;  // enqueue's thread only
  std::mutex failMu_;
  Status failure_;  // the first failure poll() read (sticky)
};

}  // namespace hoccl::cuda
