// The device executor (device_executor.h).
#include "src/exec/cuda/device_executor.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#include "base/log.h"
#include "src/exec/cuda/image.h"
#include "src/exec/cuda/kernel_names.h"
#include "src/exec/cuda/plan.h"

namespace hoccl::cuda {
namespace {

std::atomic<const void*> testImage{nullptr};
std::atomic<size_t> testPlanCap{0};

bool eventDone(const DeviceApi& api, CuHandle ev) { return api.eventQuery(ev) == kCudaSuccess; }

// What was given up while a launch might still use it (abandon, and the
// destructor when a launch does not end): never freed, and kept reachable
// from here so that a leak checker (LeakSanitizer in the sanitizer builds,
// run with detect_leaks=1) does not report a deliberate leak as a bug.
std::mutex givenUpMu;
std::vector<const void*>* givenUp = nullptr;  // never destroyed: it must outlive the leak check at exit

void keepForever(const void* p) {
  std::lock_guard<std::mutex> lock(givenUpMu);
  if (!givenUp) givenUp = new std::vector<const void*>();
  givenUp->push_back(p);
}

}  // namespace

void setKernelImageForTesting(const void* image) { testImage.store(image, std::memory_order_release); }
void setPlanCapForTesting(size_t cap) { testPlanCap.store(cap, std::memory_order_relaxed); }

size_t DeviceExecutor::planCap() {
  const size_t cap = testPlanCap.load(std::memory_order_relaxed);
  return cap ? cap : kMaxDevicePlans;
}

// The executor's context current on this thread while in scope, and the
// caller's back after. Also this thread's stream-capture mode relaxed: while
// a stream is captured into a CUDA graph in the global mode (the default of
// cuStreamBeginCapture and of torch.cuda.graph), the driver refuses
// allocations and synchronous work from every thread that has not relaxed
// its mode, and the executor's own (cuMemAlloc, the module load, uploads on
// its setup stream) are no part of any graph: a call's first setup may run
// while its stream is being captured, as NCCL's may.
class DeviceExecutor::CtxScope {
 public:
  explicit CtxScope(const DeviceExecutor& e) : api_(e.api_) {
    if (api_.ctxGetCurrent(&prev_) != kCudaSuccess) prev_ = nullptr;
    switched_ = prev_ != e.ctx_ && api_.ctxSetCurrent(e.ctx_) == kCudaSuccess;
    relaxed_ = api_.threadExchangeStreamCaptureMode(&mode_) == kCudaSuccess;
  }
  ~CtxScope() {
    if (relaxed_) api_.threadExchangeStreamCaptureMode(&mode_);
    if (switched_) api_.ctxSetCurrent(prev_);
  }

 private:
  const DeviceApi& api_;
  CuHandle prev_ = nullptr;
  bool switched_ = false;
  int mode_ = kCaptureModeRelaxed;  // swapped in; the caller's while in scope
  bool relaxed_ = false;
};

Status DeviceExecutor::create(const Driver& d, TaskOwner* owner, OutOfBand* oob, const DeviceSettings& s,
                              const void* devicePtr, std::unique_ptr<DeviceExecutor>* out) {
  std::unique_ptr<DeviceExecutor> e(new DeviceExecutor());
  e->oob_ = oob;
  e->settings_ = s;
  e->rank_ = oob->rank();
  e->timeoutSec_ = owner->progressPolicy().timeoutSec;
  e->timeoutFrom_ = owner->progressPolicy().timeoutFrom;
  e->nranks_ = oob->nranks();
  e->owner_ = owner;
  // Connections are raw device pointers between threads of one process,
  // VMM allocations shared by fd between processes of one host, and go
  // through the network proxy to other hosts (the transport decides).
  for (int p = 0; p < e->nranks_; ++p)
    if (!owner->sameProcess(p)) e->otherProcesses_ = true;
  // Every rank's launches wait for each other, each on its own stream. The
  // driver spreads streams over CUDA_DEVICE_MAX_CONNECTIONS hardware queues
  // (8 unless set before the driver starts); with more streams than queues
  // a rank's launch can sit behind a waiting peer's and never start (seen
  // on an H100: 8 ranks as threads timed out in about one run in three; 32
  // queues ran). Each rank has its caller's stream and the executor's own.
  const char* queues = getenv("CUDA_DEVICE_MAX_CONNECTIONS");
  const int nqueues = queues ? atoi(queues) : 8;
  if (e->rank_ == 0 && e->nranks_ > 1 && nqueues < 2 * e->nranks_)
    HWARN(kSubAll, "device buffers: %d ranks share this process's GPUs but CUDA_DEVICE_MAX_CONNECTIONS is %s: "
          "set it to at least %d (e.g. 32) before the first CUDA call of the process (hoccl's init makes one), "
          "or a launch may wait behind another rank's until HOCCL_TIMEOUT", e->nranks_,
          queues ? queues : "unset (8)", 2 * e->nranks_);
  HOCCL_TRY(resolveDeviceApi(d, &e->api_));
  const DeviceApi& cu = e->api_;
  HOCCL_TRY(cuCheck(d.api.pointerGetAttribute(&e->device_, kPointerAttributeDeviceOrdinal,
                                              reinterpret_cast<uintptr_t>(devicePtr)),
                    "cuPointerGetAttribute(DEVICE_ORDINAL)"));
  std::vector<DevicePeer> peers;
  HOCCL_TRY(e->shareDevices(d, &peers));
  HOCCL_TRY(cuCheck(cu.devicePrimaryCtxRetain(&e->ctx_, e->device_), "cuDevicePrimaryCtxRetain"));
  e->retained_ = true;
  CtxScope scope(*e);
  // Uploads go on it from here on (the transport's too).
  HOCCL_TRY(cuCheck(cu.streamCreate(&e->setupStream_, kStreamNonBlocking), "cuStreamCreate(setup)"));
  e->slotBytes_ = deviceSlotBytes(s.sliceBytes, s.slots);
  HOCCL_TRY(e->openConnections(d, std::move(peers)));
  const void* image = testImage.load(std::memory_order_acquire);
  if (!image) image = kernelImage().data;
  if (!image)
    return Status(hocclInvalidUsage, "device buffers: this hoccl embeds no device kernels (built without the "
                                     "CUDA Toolkit; configure with -DHOCCL_CUDA=ON)");
  HOCCL_TRY(cuCheck(cu.moduleLoadData(&e->module_, image), "cuModuleLoadData(the embedded kernels)"));
  void* host = nullptr;
  HOCCL_TRY(cuCheck(cu.memHostAlloc(&host, sizeof(DevControl), kHostAllocPortableMapped),
                    "cuMemHostAlloc(DEVICEMAP) for the control block"));
  e->control_ = static_cast<DevControl*>(host);
  std::memset(static_cast<void*>(e->control_), 0, sizeof(DevControl));
  HOCCL_TRY(cuCheck(cu.memHostGetDevicePointer(&e->controlDev_, host, 0), "cuMemHostGetDevicePointer"));
  HOCCL_TRY(cuCheck(cu.eventCreate(&e->last_, kEventDisableTiming), "cuEventCreate"));
  *out = std::move(e);
  return Status();
}

// Every rank learns which GPU each rank runs on and its multiprocessors,
// and takes the same cap: the fewest multiprocessors per rank on any GPU,
// halved. Halved because two calls can be on a GPU at once: a rank whose
// part of call k is done launches call k+1, whose CTAs take multiprocessors
// while a slower rank's CTAs of call k may still wait for one; if k+1's
// took the last ones, k could never finish (seen on an H100: 8 ranks at one
// CTA per multiprocessor each timed out). A third call cannot start before
// every rank's CTAs of call k+1 were placed, which needs call k done.
// A GPU is told apart by its PCI bus id where the driver gives one (an
// ordinal is per process: CUDA_VISIBLE_DEVICES renumbers), else by ordinal.
// A rank that cannot ask still takes part (with 0), so that none waits.
// *peers: every rank as the device transport needs to know it.
Status DeviceExecutor::shareDevices(const Driver& d, std::vector<DevicePeer>* peers) {
  int sms = 0;
  const Status asked = cuCheck(api_.deviceGetAttribute(&sms, kDeviceAttributeMultiprocessors, device_),
                               "cuDeviceGetAttribute(MULTIPROCESSOR_COUNT)");
  struct Entry {
    int32_t device, multiprocessors;
    char bus[32];         // PCI bus id, "" if unknown
    int32_t channels[3];  // HOCCL_DEVICE_CHANNELS, config->minCTAs, maxCTAs: must match
    int32_t reserved;     // 0: no padding goes over the wire
  };
  static_assert(sizeof(Entry) == 56, "Entry has no padding");
  std::vector<Entry> all(static_cast<size_t>(nranks_));
  Entry& me = all[size_t(rank_)];
  me = Entry{device_, asked.ok() ? sms : 0, {}, {settings_.channels, settings_.minChannels, settings_.maxChannels},
             0};
  int dev = 0;
  if (d.api.deviceGet && d.api.deviceGetPciBusId && d.api.deviceGet(&dev, device_) == kCudaSuccess &&
      d.api.deviceGetPciBusId(me.bus, sizeof me.bus - 1, dev) != kCudaSuccess)
    std::memset(me.bus, 0, sizeof me.bus);
  HOCCL_TRY(oob_->allGather(all.data(), sizeof(Entry)).context("device setup: sharing which GPU each rank runs on"));
  HOCCL_TRY(asked);
  // Every rank sees every rank's channel settings, so all refuse alike.
  for (int r = 0; r < nranks_; ++r)
    if (memcmp(all[size_t(r)].channels, me.channels, sizeof me.channels) != 0)
      return errorf(hocclInvalidUsage,
                    "device buffers: rank %d has HOCCL_DEVICE_CHANNELS / config minCTAs / maxCTAs = %d / %d / %d "
                    "and rank %d has %d / %d / %d (0: unset); they must be the same on every rank",
                    r, all[size_t(r)].channels[0], all[size_t(r)].channels[1], all[size_t(r)].channels[2], rank_,
                    me.channels[0], me.channels[1], me.channels[2]);
  peers->clear();
  for (int r = 0; r < nranks_; ++r) {
    const PeerInfo info = owner_->peerInfo(r);
    peers->push_back(DevicePeer{r == rank_ || owner_->sameProcess(r), all[size_t(r)].device, all[size_t(r)].bus,
                                info.pid, info.host, r == rank_ || owner_->sameHost(r)});
  }
  // One GPU for every rank (by bus id; by ordinal only within a process,
  // since ordinals are per process): counters may need only GPU scope.
  oneGpu_ = true;
  for (const Entry& other : all)
    oneGpu_ = oneGpu_ && (all[0].bus[0] && other.bus[0] ? strcmp(other.bus, all[0].bus) == 0
                                                         : !otherProcesses_ && other.device == all[0].device);
  // Bus ids and ordinals name GPUs of one host: ranks of other hosts
  // share none of them.
  int cap = 64;
  for (int m = 0; m < nranks_; ++m) {
    const Entry& mine = all[size_t(m)];
    int sharing = 0;
    for (int o = 0; o < nranks_; ++o) {
      const Entry& other = all[size_t(o)];
      if ((*peers)[size_t(o)].host != (*peers)[size_t(m)].host) continue;
      const bool byBus = mine.bus[0] && other.bus[0];
      sharing += (byBus ? strcmp(other.bus, mine.bus) == 0 : other.device == mine.device) ? 1 : 0;
    }
    cap = std::min(cap, mine.multiprocessors / (2 * sharing));
  }
  if (cap < 1) {
    return errorf(hocclInvalidUsage,
                  "device buffers: %d ranks share a GPU with fewer multiprocessors than twice the ranks; "
                  "every rank's CTAs of two calls must be resident at once", nranks_);
  }
  if (settings_.maxChannels > 0) cap = std::min(cap, settings_.maxChannels);
  channelCap_ = settings_.channels > 0 ? std::min(cap, settings_.channels) : cap;
  return Status();
}

// The device transport, from the owner (collective: every rank opens it
// here). Where some connection lives in host memory, counters need system
// scope even with every rank on one GPU.
Status DeviceExecutor::openConnections(const Driver& d, std::vector<DevicePeer> peers) {
  DeviceConnOptions o;
  o.driver = &d;
  o.api = &api_;
  o.oob = oob_;
  o.device = device_;
  o.setupStream = setupStream_;
  o.ctx = ctx_;
  o.peers = std::move(peers);
  // The network proxy's thread reports a broken connection here and asks
  // whether a launch may still run; it stops before this executor goes.
  o.fail = [this](const Status& st) {
    {
      std::lock_guard<std::mutex> lock(failMu_);
      if (failure_.ok()) failure_ = st;
    }
    requestAbort();
  };
  o.launchPending = [this] { return launched_.load(std::memory_order_acquire) && !eventDone(api_, last_); };
  o.watch = [this]() -> Status {
    HOCCL_TRY(owner_->peerAbort(true));
    for (int p = 0; p < nranks_; ++p)
      if (p != rank_ && owner_->remotePeer(p)) HOCCL_TRY(owner_->peerSilent(p));
    for (int p = 0; p < nranks_; ++p)
      if (p != rank_ && !owner_->sameProcess(p) && owner_->sameHost(p) && owner_->peerCrashed(p)) {
        const PeerInfo info = owner_->peerInfo(p);
        return errorf(hocclRemoteError, "rank %d: peer rank %d (pid %d on %s) has exited without freeing its "
                      "communicator during a call on device buffers", rank_, p, info.pid, info.host.c_str());
      }
    return Status();
  };
  TaskOwner* owner = owner_;
  o.peerProcessGone = [owner](int r) { return owner->peerProcessGone(r); };
  o.slotBytes = slotBytes_;
  o.timeoutSec = timeoutSec_;
  o.timeoutFrom = timeoutFrom_;
  o.settings = settings_.conn;
  HOCCL_TRY(owner_->openDeviceConnections(o, &conns_));
  oneGpu_ = oneGpu_ && !conns_->inHostMemory();
  return Status();
}

// cuMemcpyHtoD from pageable memory may return before the data reaches the
// device (the driver stages it, as CUDA's documentation of synchronous
// copies says), and a kernel on another stream launched after it could
// read what was there before: a connection's counters reset under a peer
// that had already sent. So uploads go on the executor's own stream and
// are waited for; that non-blocking stream does not wait for other
// streams' kernels (the legacy stream would wait for blocking ones).
Status DeviceExecutor::upload(DevPtr dst, const void* src, size_t bytes, const char* what) {
  HOCCL_TRY(cuCheck(api_.memcpyHtoDAsync(dst, src, bytes, setupStream_), what));
  return cuCheck(api_.streamSynchronize(setupStream_), "cuStreamSynchronize(setup uploads)");
}

int DeviceExecutor::channelsFor(uint64_t bytes) const {
  if (settings_.channels > 0) return channelCap_;
  // A ring cuts the data in nranks chunks per channel; a channel is worth
  // its CTA once its chunk is kChannelChunk (on an H100, 4 ranks: 4 MiB
  // on 2 channels of 512 KiB chunks gave 30 GB/s busbw, 8 MiB on 16 of
  // 128 KiB 120). config->minCTAs raises it, within the cap.
  const uint64_t perChannel = uint64_t(nranks_) * kChannelChunk;
  const uint64_t want = std::max<uint64_t>((bytes + perChannel - 1) / perChannel, uint64_t(settings_.minChannels));
  return int(std::max<uint64_t>(1, std::min<uint64_t>(want, uint64_t(channelCap_))));
}

DeviceExecutor::~DeviceExecutor() {
  if (!api_.ctxGetCurrent) return;  // never resolved: nothing was made
  CtxScope scope(*this);
  if (!waitIdle(timeoutSec_ + 5)) {
    requestAbort();
    if (!waitIdle(1)) {
      HWARN(kSubAll, "rank %d: a device launch did not end; its device memory is leaked rather than freed under it",
            rank_);
      detach();
      keepForever(conns_.release());  // the connections too: the launch may still write into them
      return;
    }
  }
  for (auto& [sched, plan] : plans_) freePlan(&plan);
  conns_.reset();
  if (control_) api_.memFreeHost(control_);
  if (last_) api_.eventDestroy(last_);
  if (setupStream_) api_.streamDestroy(setupStream_);
  if (module_) api_.moduleUnload(module_);
  if (retained_) api_.devicePrimaryCtxRelease(device_);
}

void DeviceExecutor::detach() {
  if (conns_) conns_->quiesce();  // the network proxy asks the owner for peers' news while a launch may run
  owner_ = nullptr;
  oob_ = nullptr;
}

void DeviceExecutor::abandon(std::unique_ptr<DeviceExecutor> e) {
  if (!e) return;
  e->requestAbort();
  e->detach();
  keepForever(e.release());
}

Status DeviceExecutor::alloc(size_t bytes, DevPtr* p, PlanRes* owner) {
  *p = 0;
  HOCCL_TRY(cuCheck(api_.memAlloc(p, bytes ? bytes : 16), "cuMemAlloc"));
  owner->owned.push_back(*p);
  return Status();
}

void DeviceExecutor::freePlan(PlanRes* p) {
  for (DevPtr a : p->owned) api_.memFree(a);
  p->owned.clear();
}

// The least recently launched plan that no CUDA graph holds is freed once
// every launch queued so far has ended (one of them may be its last). The
// choice depends only on the sequence of calls, the same on every rank, so
// every rank sets the next one up again at the same call (setUp's barrier).
// Waiting here cannot deadlock: the call that needs room has not been
// launched by anyone (no rank launches before setUp's barrier), and the
// launches queued before it wait only for peers' launches already queued.
Status DeviceExecutor::evictPlan() {
  auto victim = plans_.end();
  for (auto it = plans_.begin(); it != plans_.end(); ++it)
    if (!it->second.captured && (victim == plans_.end() || it->second.lastUse < victim->second.lastUse)) victim = it;
  if (victim == plans_.end()) return Status();  // every plan is in a graph: keep them all
  if (!waitIdle(timeoutSec_))
    return errorf(hocclRemoteError, "device buffers: rank %d's earlier launches did not end within %g s (%s) while "
                  "it made room for a new schedule", rank_, timeoutSec_, timeoutFrom_);
  freePlan(&victim->second);
  plans_.erase(victim);
  ++evictions_;
  return Status();
}

Status DeviceExecutor::kernel(DType t, RedOp op, CuHandle* fn) {
  // Every pair with a kernel lies in the reduce table (PreMulSum has none).
  CuHandle* slot = int(t) < kNumDTypes && int(op) < kNumRedOps ? &kernels_[size_t(t) * kNumRedOps + size_t(op)]
                                                                : nullptr;
  if (slot && *slot) {
    *fn = *slot;
    return Status();
  }
  const std::string name = interpKernelName(t, op);
  if (!slot || name.empty())
    return errorf(hocclInvalidArgument, "device buffers: no kernel for %s %s", dtypeName(t), redOpName(op));
  const int rc = api_.moduleGetFunction(slot, module_, name.c_str());
  if (rc != kCudaSuccess) {
    *slot = nullptr;
    return Status(hocclInvalidArgument, "device buffers: the embedded kernels have no " + name + " (" +
                                            dtypeName(t) + " " + redOpName(op) + "): cuModuleGetFunction " +
                                            resultName(rc));
  }
  *fn = *slot;
  return Status();
}

Status DeviceExecutor::setUp(const Work& w, PlanRes* out) {
  DevPlan plan;
  HOCCL_TRY(flattenSchedule(*w.schedule, &plan));
  const std::vector<uint8_t> image = plan.image();
  RankPlan rp;
  out->sliceElems = slotBytes_ / dtypeSize(w.call->dtype);
  HOCCL_TRY(readRankPlan(image, rank_, nranks_, out->sliceElems, &rp));
  HOCCL_TRY(conns_->connect(rp.edges));
  std::vector<DevPtr> table;
  for (const DeviceEdge& e : rp.edges) {
    table.push_back(conns_->conn(e));
    if (!table.back())  // a kernel would follow a null pointer
      return errorf(hocclInternalError, "device setup: rank %d's edge %d->%d link %d is not connected after connect()",
                    rank_, e.from, e.to, e.link);
  }
  out->sched = w.keep;
  out->nchannels = rp.plan.header.nchannels;
  HOCCL_TRY(alloc(image.size(), &out->image, out));
  HOCCL_TRY(upload(out->image, image.data(), image.size(), "cuMemcpyHtoDAsync(plan)"));
  HOCCL_TRY(alloc(table.size() * sizeof(DevPtr), &out->conns, out));
  if (!table.empty())
    HOCCL_TRY(upload(out->conns, table.data(), table.size() * sizeof(DevPtr), "cuMemcpyHtoDAsync(connection table)"));
  // Zero once: each launch's last channel zeroes them for the next (interp.h).
  HOCCL_TRY(alloc((out->nchannels + 1) * sizeof(uint64_t), &out->stepsDone, out));
  const std::vector<uint64_t> zeros(out->nchannels + 1, 0);
  HOCCL_TRY(upload(out->stepsDone, zeros.data(), zeros.size() * sizeof(uint64_t), "cuMemcpyHtoDAsync(steps done)"));
  if (rp.plan.header.scratchCount)
    HOCCL_TRY(alloc(rp.plan.header.scratchCount * dtypeSize(w.call->dtype), &out->scratch, out));
  // No rank launches this schedule before every rank has set it up. The
  // driver calls above (cuMemAlloc, the synchronous copies) may wait for
  // the whole device to go idle; a peer's launch of this schedule, already
  // running and waiting for this rank's, would then never end (seen on an
  // H100 with 8 ranks sharing the GPU: every wait ran into the timeout).
  return oob_->barrier().context("device setup: waiting for every rank to set up the schedule before launching it");
}

Status DeviceExecutor::enqueue(const Work& w) {
  CtxScope scope(*this);
  CuHandle fn = nullptr;
  HOCCL_TRY(kernel(w.call->dtype, w.call->op, &fn));
  auto it = plans_.find(w.schedule);
  if (it == plans_.end()) {
    if (plans_.size() >= planCap()) HOCCL_TRY(evictPlan());
    PlanRes res;
    const Status st = setUp(w, &res);
    if (!st.ok()) {
      freePlan(&res);
      return st;
    }
    it = plans_.emplace(w.schedule, std::move(res)).first;
  }
  PlanRes& p = it->second;
  p.lastUse = ++launches_;
  if (p.nchannels == 0) return Status();  // nothing moves (one rank, or count 0)
  CuHandle stream = w.call->stream;
  // Captured into a CUDA graph, the launch and what orders it are nodes of
  // the graph; the event that orders this communicator's launches stays
  // outside it (external wait and record nodes), so that launches outside
  // the graph, polling and abort keep using it.
  int capture = kCaptureStatusNone;
  HOCCL_TRY(cuCheck(api_.streamIsCapturing(stream, &capture), "cuStreamIsCapturing"));
  if (capture == kCaptureStatusInvalidated)
    return Status(hocclInvalidUsage, "device buffers: the stream's capture into a CUDA graph was invalidated by an "
                                     "earlier call; end the capture (cuStreamEndCapture reports why) and start again");
  const bool captured = capture == kCaptureStatusActive;
  p.captured = p.captured || captured;  // a graph may replay it at any time: never evicted
  // After this communicator's previous launch, whatever its stream (on the
  // same stream, outside any capture, the stream orders them already).
  if (launched_.load(std::memory_order_relaxed) && (captured || lastCaptured_ || stream != lastStream_))
    HOCCL_TRY(cuCheck(api_.streamWaitEvent(stream, last_, captured ? kEventWaitExternal : 0), "cuStreamWaitEvent"));
  InterpArgs a{};
  a.image = reinterpret_cast<const uint8_t*>(p.image);
  a.input = const_cast<char*>(static_cast<const char*>(w.call->sendbuff));
  a.output = static_cast<char*>(w.call->recvbuff);
  a.scratch = reinterpret_cast<char*>(p.scratch);
  a.conns = reinterpret_cast<DevConnMem* const*>(p.conns);
  a.stepsDone = reinterpret_cast<uint64_t*>(p.stepsDone);
  a.control = reinterpret_cast<DevControl*>(controlDev_);
  a.call = callHash(uint8_t(w.call->coll), w.call->count, w.call->dtype, w.call->op, w.call->root, w.call->opSeq);
  a.sliceElems = p.sliceElems;
  a.timeoutNs = uint64_t(timeoutSec_ * 1e9);
  a.flags = oneGpu_ ? kArgOneGpu : 0;
  void* params[] = {&a};
  HOCCL_TRY(cuCheck(api_.launchKernel(fn, p.nchannels, 1, 1, settings_.threads, 1, 1, 0, stream, params, nullptr),
                    "cuLaunchKernel"));
  HOCCL_TRY(cuCheck(captured ? api_.eventRecordWithFlags(last_, stream, kEventRecordExternal)
                             : api_.eventRecord(last_, stream),
                    "cuEventRecord"));
  lastStream_ = stream;
  lastCaptured_ = captured;
  launched_.store(true, std::memory_order_release);
  conns_->launched();
  return Status();
}

Status DeviceExecutor::poll() {
  {
    std::lock_guard<std::mutex> lock(failMu_);
    if (!failure_.ok()) return failure_;
  }
  if (__atomic_load_n(&control_->code, __ATOMIC_ACQUIRE) == kDevOk) return Status();
  // The record is complete once the failing launch has ended; the others
  // of its channels stop within a poll interval.
  waitIdle(1);
  DevControl k;
  std::memcpy(static_cast<void*>(&k), control_, sizeof k);
  std::lock_guard<std::mutex> lock(failMu_);
  if (failure_.ok()) failure_ = runStatus(k);
  return failure_;
}

void DeviceExecutor::requestAbort() {
  if (control_) __atomic_store_n(&control_->abort, 1u, __ATOMIC_RELEASE);
}

bool DeviceExecutor::waitIdle(double sec) {
  if (!launched_.load(std::memory_order_acquire)) return true;
  CtxScope scope(*this);
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(sec);
  while (!eventDone(api_, last_)) {
    if (std::chrono::steady_clock::now() >= end) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  return true;
}

}  // namespace hoccl::cuda
