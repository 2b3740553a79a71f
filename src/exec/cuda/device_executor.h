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
// scratch, uploaded once. Connection memory (a DevConnMem and its slots) is
// allocated by the receiving rank (device_conns.cc). To a sender that is a
// thread of this process its address goes over the bootstrap; to a sender
// in another process of this host it goes as a VMM allocation exported as
// a POSIX fd (device_ipc.h). Where the sender's GPU cannot write into the
// receiver's (no peer access, or HOCCL_P2P_DISABLE), the connection lives
// in host memory both GPUs map instead: staged. Ranks on other hosts are
// refused by create() for now.
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
#include <tuple>
#include <vector>

#include "src/base/cuda_device_api.h"
#include "src/base/fdpass.h"
#include "src/base/oob.h"
#include "src/exec/cuda/device_ipc.h"
#include "src/exec/cuda/interp.h"
#include "src/exec/cuda/interp_record.h"
#include "src/exec/dataops.h"
#include "src/exec/engine.h"

namespace hoccl::cuda {

// The smallest connection slot on the device, and the ring chunk per
// channel that DeviceExecutor::channelsFor aims at (device_executor.cc).
inline constexpr size_t kMinDeviceSlot = size_t(512) << 10;
inline constexpr uint64_t kChannelChunk = uint64_t(128) << 10;

struct DeviceSettings {
  size_t sliceBytes = 128 << 10;  // the communicator's slice (HOCCL_SLICE_BYTES)
  int slots = 8;                  // HOCCL_SLOTS: the schedules' steps fit in half of them
  unsigned threads = 512;         // per CTA (HOCCL_DEVICE_THREADS)
  int channels = 0;               // HOCCL_DEVICE_CHANNELS; 0: by size (channelsFor)
  int minChannels = 0;            // config->minCTAs: at least this many by size (0: unset)
  int maxChannels = 0;            // config->maxCTAs: at most this many (0: unset)
  bool p2pDisable = false;        // HOCCL_P2P_DISABLE: every connection between ranks staged through host memory
  bool p2pCheck = true;           // HOCCL_P2P_CHECK: peer access only after its self-test passed
  std::string ipc = "auto";       // HOCCL_DEVICE_IPC: auto, fd (VMM) or legacy (cuIpc*) between processes
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
  // that holds `devicePtr`. Fails with hocclInvalidUsage, naming the ranks
  // and processes, when a rank is on another host; with the driver's
  // reason when it lacks an entry point (VMM ones too, where a rank is
  // another process) or refuses the image.
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
  Status evictPlan();
  void freePlan(PlanRes* p);
  class CtxScope;
  Status shareDevices(const Driver& d);
  Status sharePaths(const Driver& d);  // device_conns.cc
  Status reachRow(const Driver& d, std::vector<uint8_t>* row, std::map<int, std::string>* why);
  std::vector<int> probeTargets() const;
  Status probePeers(std::map<int, std::string>* probed);
  void releaseProbes(size_t maps, size_t exported, size_t opened);
  bool staged(int from, int to) const { return from != to && !direct_[size_t(from) * size_t(nranks_) + size_t(to)]; }
  Status makeConn(bool staged, DevPtr* mem);
  void releaseConns();
  Status upload(DevPtr dst, const void* src, size_t bytes, const char* what);
  Status setUp(const Work& w, PlanRes* out);
  Status connect(const std::vector<DeviceEdge>& edges);  // connectEdges, and on failure forgets what is half made
  Status connectEdges(const std::vector<DeviceEdge>& edges);
  Status exportConn(const DeviceEdge& e, DevPtr* mem);
  Status importConns(const std::vector<int>& exporters, const std::vector<int>& byHandle,
                     std::map<int, std::string>* unmapped = nullptr);
  Status exportByHandle(const DeviceEdge& e, const DevConnMem& init, IpcBufferMsg* msg, DevPtr* mem);
  Status exportLegacy(const DevConnMem& init, IpcBufferMsg* msg, DevPtr* mem);
  Status vmmConn(int handleType, const DevConnMem& init, const std::string& peer, IpcBufferMsg* msg, VmmMapping* m);
  std::string describePeer(int peer) const;
  Status alloc(size_t bytes, DevPtr* p, PlanRes* owner);
  Status kernel(DType t, RedOp op, CuHandle* fn);

  DeviceApi api_;
  TaskOwner* owner_ = nullptr;
  OutOfBand* oob_ = nullptr;
  bool otherProcesses_ = false;  // some rank is another process (of this host)
  uint64_t socketKey_ = 0;       // names this communicator's fd sockets (fdSocketName)
  FdListener fdListener_;        // where exporters hand this rank connection memory
  std::vector<VmmMapping> ipcMaps_;  // connection memory shared with other processes
  std::vector<HostShm> shmMaps_;     // the same, staged through host memory
  DeviceSettings settings_;
  int rank_ = 0, nranks_ = 1, device_ = 0;
  double timeoutSec_ = 300;  // the communicator's, which bounds every wait of a launch
  const char* timeoutFrom_ = "HOCCL_TIMEOUT";  // what set it (ProgressPolicy::timeoutFrom)
  size_t slotBytes_ = 0;
  int channelCap_ = 1;  // channelsFor's cap (create)
  bool oneGpu_ = false;  // every rank on this executor's GPU (kArgOneGpu)
  // How connections reach ranks of other processes (HOCCL_DEVICE_IPC): VMM
  // memory as POSIX fds over a Unix socket, VMM memory as fabric handles or
  // cuMemAlloc memory as cuIpc handles (both over the bootstrap).
  enum class Ipc { Fd, Fabric, Legacy } ipc_ = Ipc::Fd;
  std::vector<DevPtr> ipcExported_, ipcOpened_;  // legacy IPC: allocations handed out, and mapped here
  struct RankGpu {
    int device;       // ordinal in the rank's process
    std::string bus;  // PCI bus id, "" if unknown
  };
  std::vector<RankGpu> rankGpus_;  // by rank (shareDevices)
  // [from * nranks + to]: 1 where rank `from`'s kernels write into rank
  // `to`'s GPU memory directly; 0: their connection stages through host memory.
  std::vector<uint8_t> direct_;
  // The peer-path self-test's answer for each rank of another process on
  // another GPU (probePeers): "" if this rank's GPU wrote into that rank's
  // GPU memory and read it back intact, else why not. Empty without
  // HOCCL_P2P_CHECK or with HOCCL_P2P_DISABLE.
  std::map<int, std::string> probed_;
  std::vector<uint8_t> probing_;  // by rank: runs that test (HOCCL_P2P_CHECK=1, HOCCL_P2P_DISABLE=0)
  bool probeStuck_ = false;  // a self-test's copies did not finish: its buffers are leaked
  std::vector<int> peerDevices_;   // GPUs of this process's other ranks, not ours (shareDevices)
  std::vector<int> peerRetained_;  // their primary contexts, retained for peer access
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
  std::map<std::tuple<int, int, int>, DevPtr> conns_;  // (from, to, link) -> DevConnMem
  uint64_t launches_ = 0, evictions_ = 0;  // enqueue's thread only
  std::vector<DevPtr> held_;         // connections it shares with a peer (device_executor.cc)
  std::mutex failMu_;
  Status failure_;  // the first failure poll() read (sticky)
};

}  // namespace hoccl::cuda
