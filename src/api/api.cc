// The C API: argument checks, error reporting, and dispatch to the core.
#include <cstddef>
#include <cstring>
#include <mutex>
#include <optional>
#include <thread>

#include "hoccl.h"
#include "src/api/api_internal.h"
#include "src/comm/comm_settings.h"
#include "base/cuda_driver.h"
#include "src/exec/cuda/kernel_names.h"
#include "base/log.h"
#include "base/thread_name.h"
#include "base/tls.h"

using namespace hoccl;

namespace hoccl {
namespace {

HOCCL_THREAD_LOCAL std::string tlsLastError;
HOCCL_THREAD_LOCAL std::string tlsCommError;  // hocclGetLastError(comm)'s answer

}  // namespace

hocclResult_t report(hocclComm* comm, const Status& st) {
  if (st.ok()) return hocclSuccess;
  tlsLastError = st.message();
  if (comm) {
    std::lock_guard<std::mutex> lock(comm->errMutex);
    comm->lastError = st.message();
  }
  HWARN(kSubAll, "%s: %s", resultName(st.code()), st.message().c_str());
  return st.code();
}

namespace {
// The communicator queries: a live comm, held by `use` while the query reads
// it, and somewhere to write the answer.
Status enterQuery(hocclComm* comm, CommUse* use, const void* out, const char* fn, const char* outName) {
  Status st = enterComm(comm, use, fn);
  if (st.ok() && !out) st = errorf(hocclInvalidArgument, "%s: %s is NULL", fn, outName);
  return st;
}
}  // namespace

Status checkDatatype(const char* fn, int dtype) {
  if (dtype < 0 || dtype >= hocclNumTypes)
    return errorf(hocclInvalidArgument, "%s: datatype %d is not a valid hocclDataType_t (0..%d)", fn, dtype,
                  hocclNumTypes - 1);
  return Status();
}

namespace {
// Where a call's buffers live (null buffers are not asked about). Without
// a usable CUDA driver (probed once per process) no pointer can be device
// memory and nothing is asked; with one, the driver says. Mixing is refused.
Status bufferKind(const char* fn, const void* sendbuff, const void* recvbuff, bool* device) {
  *device = false;
  const cuda::Driver& driver = cuda::processDriver();
  if (!driver.usable()) return Status();
  const bool sendOnDevice = cuda::memoryKind(driver, sendbuff) == cuda::MemoryKind::Device;
  const bool recvOnDevice = cuda::memoryKind(driver, recvbuff) == cuda::MemoryKind::Device;
  if (sendbuff && recvbuff && sendOnDevice != recvOnDevice)
    return errorf(hocclInvalidUsage, "%s: sendbuff is %s memory but recvbuff is %s memory; both must be one kind", fn,
                  sendOnDevice ? "CUDA device" : "host", recvOnDevice ? "CUDA device" : "host");
  *device = sendOnDevice || recvOnDevice;
  return Status();
}

// A collective on device buffers: one the device-plan interpreter runs,
// with a kernel for its type and op.
Status checkDeviceCall(const char* fn, const CollCall& call) {
  if (call.coll == CollKind::AllToAllv || call.coll == CollKind::SendRecv)
    return errorf(hocclInvalidUsage, "%s: device buffers are not supported for point-to-point and all-to-all-v "
                  "calls yet (the device executor runs all-reduce, reduce-scatter, all-gather, broadcast, reduce "
                  "and all-to-all)", fn);
  if (cuda::interpKernelName(call.dtype, call.op).empty())
    return errorf(hocclInvalidArgument, "%s: no device kernel for %s %s (device buffers take the integer, fp16, "
                  "bf16, float and double types with sum, prod, max, min and avg)", fn, dtypeName(call.dtype),
                  call.op == RedOp::PreMulSum ? "PreMulSum" : redOpName(call.op));
  return Status();
}
}  // namespace

// Point-to-point calls and all-to-all-v (`what`, as the error names it):
// host buffers only for now.
Status checkHostBuffers(const char* fn, const char* what, const void* sendbuff, const void* recvbuff) {
  bool device = false;
  HOCCL_TRY(bufferKind(fn, sendbuff, recvbuff, &device));
  if (device)
    return errorf(hocclInvalidUsage, "%s: %s is CUDA device memory, and %s runs on host memory only (the device "
                  "executor runs all-reduce, reduce-scatter, all-gather, broadcast, reduce and all-to-all; %s)", fn,
                  sendbuff ? "sendbuff" : "recvbuff", what, cuda::processDriver().status.c_str());
  return Status();
}

Status checkUsable(hocclComm* comm, const char* fn) {
  if (comm->initPending.load(std::memory_order_acquire))
    return errorf(hocclInvalidUsage, "%s: the communicator's non-blocking init is still in progress; wait until "
                  "hocclCommGetAsyncError returns hocclSuccess", fn);
  if (comm->deviceExecutor()) comm->pollDevice();
  Status fatal = comm->fatalError();
  if (!fatal.ok())
    return Status(fatal.code(), std::string(fn) + ": the communicator is unusable after an earlier error (" +
                                    fatal.message() + "); destroy or abort it");
  return Status();
}

Status checkCollective(hocclComm* comm, CollKind coll, const void* sendbuff, void* recvbuff,
                       size_t count, int dtype, int op, int root, CollCall* call, ScheduleKey* key) {
  const char* fn = collName(coll);
  HOCCL_TRY(checkUsable(comm, fn));
  HOCCL_TRY(checkDatatype(fn, dtype));
  bool reduces = collReduces(coll);
  if (reduces && op < 0)
    return errorf(hocclInvalidArgument, "%s: op %d is not a valid hocclRedOp_t (0..%d or an op made by "
                  "hocclRedOpCreatePreMulSum)", fn, op, hocclNumOps - 1);
  if (reduces && op >= hocclNumOps) HOCCL_TRY(userOpFor(comm, fn, op, static_cast<DType>(dtype), call));
  bool rooted = coll == CollKind::Broadcast || coll == CollKind::Reduce;
  if (rooted && (root < 0 || root >= comm->nranks))
    return errorf(hocclInvalidArgument, "%s: root %d is out of range [0, %d)", fn, root, comm->nranks);
  size_t esize = dtypeSize(static_cast<DType>(dtype));
  size_t factor =
      (coll == CollKind::ReduceScatter || coll == CollKind::AllGather || coll == CollKind::AllToAll) ? comm->nranks : 1;
  // Keep every byte offset well inside size_t and ptrdiff_t.
  if (static_cast<unsigned __int128>(count) * esize * factor > (static_cast<unsigned __int128>(1) << 62))
    return errorf(hocclInvalidArgument, "%s: count %zu is too large: %zu x %zu-byte elements x %zu overflows",
                  fn, count, count, esize, factor);
  bool needSend = !(coll == CollKind::Broadcast && comm->rank != root);
  bool needRecv = !(coll == CollKind::Reduce && comm->rank != root);
  if (count > 0 && needSend && !sendbuff) return errorf(hocclInvalidArgument, "%s: sendbuff is NULL", fn);
  if (count > 0 && needRecv && !recvbuff) return errorf(hocclInvalidArgument, "%s: recvbuff is NULL", fn);
  bool device = false;
  HOCCL_TRY(bufferKind(fn, count > 0 && needSend ? sendbuff : nullptr, count > 0 && needRecv ? recvbuff : nullptr,
                       &device));

  key->coll = coll;
  key->nranks = comm->nranks;
  key->rank = comm->rank;
  key->count = count;
  key->root = rooted ? root : 0;
  key->nchannels = comm->settings.nchannels;
  // Two messages must fit in a connection's slots (see ScheduleKey).
  key->maxStepCount = static_cast<uint64_t>(comm->settings.slots / 2) *
                      (comm->settings.sliceBytes >> __builtin_ctzll(esize));  // esize: a power of two
  uint64_t inBytes = inputCount(*key) * esize, outBytes = outputCount(*key) * esize;
  auto s = reinterpret_cast<uintptr_t>(sendbuff), r = reinterpret_cast<uintptr_t>(recvbuff);
  uintptr_t expectedSend = r;  // where sendbuff sits for an in-place call
  if (coll == CollKind::ReduceScatter) expectedSend = r - comm->rank * count * esize;
  if (coll == CollKind::AllGather) expectedSend = r + comm->rank * count * esize;
  key->inPlace = needSend && needRecv && count > 0 && s == expectedSend;
  const bool inPlaceCall = key->inPlace;
  // PreMulSum reads a scaled copy of the input, so its schedule is the
  // out-of-place one whatever the caller passed.
  if (reduces && op >= hocclNumOps) key->inPlace = false;
  if (count > 0 && needSend && needRecv && !inPlaceCall && s < r + outBytes && r < s + inBytes)
    return errorf(hocclInvalidArgument,
                  "%s: sendbuff and recvbuff overlap but the call is not in place (in place means %s)", fn,
                  coll == CollKind::ReduceScatter ? "recvbuff == sendbuff + rank*recvcount"
                  : coll == CollKind::AllGather   ? "sendbuff == recvbuff + rank*sendcount"
                                                  : "sendbuff == recvbuff");
  call->coll = coll;
  call->sendbuff = sendbuff;
  call->recvbuff = recvbuff;
  call->count = count;
  call->dtype = static_cast<DType>(dtype);
  call->op = !reduces ? RedOp::Sum : op >= hocclNumOps ? RedOp::PreMulSum : static_cast<RedOp>(op);
  call->root = key->root;
  call->device = device;
  if (device) HOCCL_TRY(checkDeviceCall(fn, *call));
  return Status();
}

}  // namespace hoccl

namespace {

hocclResult_t collective(CollKind coll, const void* sendbuff, void* recvbuff, size_t count, int dtype,
                         int op, int root, hocclComm_t comm, hocclStream_t stream) {
  // Inside a group the call is checked straight into its place in the
  // group's queue (and taken out again if it fails).
  const bool grouped = groupActive();
  std::optional<CommCall> alone;
  CommCall& one = grouped ? groupSlot() : alone.emplace();
  one.comm = comm;
  CommUse use;
  Status st = enterComm(comm, &use, collName(coll));
  if (st.ok()) st = checkCollective(comm, coll, sendbuff, recvbuff, count, dtype, op, root, &one.call, &one.key);
  if (!st.ok()) {
    if (grouped) groupDropSlot();
    return refuseCall(use.comm, st);
  }
  one.commSerial = comm->serial;
  CollCall& call = one.call;
  // Device buffers: queued on the stream. Host buffers: the call completes
  // before returning, whatever the stream.
  call.stream = call.device ? stream : nullptr;
  setLogRank(comm->rank);
  if (grouped) return hocclSuccess;
  HTRACE(kSubColl, "%s call #%llu", describeCall(call.coll, count, call.dtype, call.op, call.root).c_str(),
         static_cast<unsigned long long>(comm->opSeq + 1));
  return report(comm, runCalls(&one, 1));
}

// The checksum of an id (UniqueIdData::checksum): FNV-1a over all its
// bytes, those of the checksum itself as zeros.
uint64_t idChecksum(const hocclUniqueId& id) {
  hocclUniqueId copy = id;
  memset(copy.internal + offsetof(UniqueIdData, checksum), 0, sizeof(uint64_t));
  return fnv1a64(copy.internal, sizeof copy.internal);
}

// As NCCL documents for blocking = 0: the handle is returned at once with
// hocclInProgress; hocclCommGetAsyncError says hocclInProgress until init
// has ended, then hocclSuccess or init's error.
hocclResult_t initNonBlocking(hocclComm_t* comm, int nranks, const UniqueIdData& id, int rank,
                              const hocclConfig_t& config) {
  hocclComm* c = new hocclComm();
  c->rank = rank;
  c->nranks = nranks;
  c->initPending.store(true);
  registerComm(c);
  *comm = c;
  Status started = startThread("the non-blocking init's thread", &c->initThread, [c, id, nranks, rank, config] {
    nameThisThread("hoccl-init");
    Status st = commInit(id, nranks, rank, &config, c);
    if (!st.ok()) {
      st.context("rank " + std::to_string(rank) + " init");
      c->fail(st, false);
      report(c, st);
    }
    std::unique_lock<std::mutex> lock(c->initMutex);
    c->initPending.store(false, std::memory_order_release);
    if (c->initAbandoned) {
      lock.unlock();
      // Aborted meanwhile, so unregistered: no call can enter it any more,
      // but a query that entered before the abort may still read it.
      if (waitUnused(c, 1.0)) commFree(c);
      else HWARN(kSubAll, "rank %d's aborted communicator is still in use by a call after 1 s; its memory is leaked",
                 rank);
    }
  });
  if (!started.ok()) {
    unregisterComm(c);
    commFree(c);
    *comm = nullptr;
    return report(nullptr, started.context("rank " + std::to_string(rank) + " init"));
  }
  return hocclInProgress;
}

// Waits for a non-blocking init to end (destroy), or leaves it to free the
// communicator itself when it ends (abort: bounded time). True if the
// caller may free comm now.
bool settleInit(hocclComm* comm, bool wait) {
  if (!comm->initThread.joinable()) return true;
  if (wait) {
    comm->initThread.join();
    return true;
  }
  std::lock_guard<std::mutex> lock(comm->initMutex);
  if (!comm->initPending.load()) {
    comm->initThread.join();  // it has ended, or is about to
    return true;
  }
  comm->initAbandoned = true;
  comm->initThread.detach();
  return false;
}

}  // namespace

Status hoccl::finishGroupedInit(hocclComm* comm) {
  settleInit(comm, true);
  return comm->fatalError();
}

extern "C" {

hocclResult_t hocclGetVersion(int* version) {
  if (!version) return report(nullptr, errorf(hocclInvalidArgument, "hocclGetVersion: version is NULL"));
  *version = HOCCL_VERSION_CODE;
  return hocclSuccess;
}

hocclResult_t hocclGetUniqueId(hocclUniqueId* uniqueId) {
  if (!uniqueId) return report(nullptr, errorf(hocclInvalidArgument, "hocclGetUniqueId: uniqueId is NULL"));
  Settings s;
  Status checked = commSettings(nullptr, &s);
  if (!checked.ok()) return report(nullptr, checked);
  UniqueIdData id;
  if (!s.commId.empty()) {
    // Every rank derives the same id from HOCCL_COMM_ID; rank 0's init
    // starts the rendezvous there.
    Status st = parseHostPort(s.commId, &id.root);
    if (!st.ok()) return report(nullptr, st.context("HOCCL_COMM_ID"));
    id.magic = fnv1a64(s.commId.data(), s.commId.size());
    id.rootStartedByInit = 1;
  } else {
    SockAddr local;
    std::string ifname;
    Status st = chooseLocalAddress(s.socketIfname, &local, &ifname);
    if (st.ok()) st = startRoot(local, id.magic = randomU64(), s.timeoutSec, &id.root, s.timeoutFrom);
    if (!st.ok()) return report(nullptr, st.context("hocclGetUniqueId"));
  }
  memset(uniqueId, 0, sizeof *uniqueId);
  memcpy(uniqueId->internal, &id, sizeof id);
  const uint64_t sum = idChecksum(*uniqueId);
  memcpy(uniqueId->internal + offsetof(UniqueIdData, checksum), &sum, sizeof sum);
  return hocclSuccess;
}

hocclResult_t hocclCommInitRankConfig(hocclComm_t* comm, int nranks, hocclUniqueId commId, int rank,
                                      hocclConfig_t* config) {
  const char* fn = "hocclCommInitRank";
  if (!comm) return report(nullptr, errorf(hocclInvalidArgument, "%s: comm is NULL", fn));
  *comm = nullptr;
  if (nranks < 1) return report(nullptr, errorf(hocclInvalidArgument, "%s: nranks %d must be >= 1", fn, nranks));
  if (rank < 0 || rank >= nranks)
    return report(nullptr, errorf(hocclInvalidArgument, "%s: rank %d is out of range [0, %d)", fn, rank, nranks));
  UniqueIdData id;
  memcpy(&id, commId.internal, sizeof id);
  if (id.tag != kUniqueIdTag || id.protocol != kBootstrapProtocol)
    return report(nullptr, errorf(hocclInvalidArgument,
                                  "%s: the unique id is not one made by hocclGetUniqueId of this hoccl version", fn));
  // Checked before anything in it is used (its address, HOCCL_COMM_ID's
  // flag), so a damaged id is named as such, not as a network error.
  if (id.checksum != idChecksum(commId))
    return report(nullptr, errorf(hocclInvalidArgument,
                                  "%s: not a valid unique id: its checksum does not match its contents (corrupted, "
                                  "or not all %zu bytes of what hocclGetUniqueId made were passed on)",
                                  fn, sizeof commId.internal));
  if (config && config->blocking == 0) return initNonBlocking(comm, nranks, id, rank, copyConfig(*config));
  if (groupActive()) {
    // NCCL's grouped init: started now on a thread of its own, finished by
    // hocclGroupEnd, which returns its error.
    hocclConfig_t deferred = HOCCL_CONFIG_INITIALIZER;
    if (config) deferred = copyConfig(*config);
    deferred.blocking = 0;
    const hocclResult_t rc = initNonBlocking(comm, nranks, id, rank, deferred);
    if (rc != hocclInProgress) return refuseCall(nullptr, Status(rc, hocclGetLastError(nullptr)));
    groupEnqueueInit(*comm);
    return hocclSuccess;
  }
  hocclComm* c = new hocclComm();
  Status st = commInit(id, nranks, rank, config, c);
  if (!st.ok()) {
    commFree(c);
    return report(nullptr, st.context("rank " + std::to_string(rank) + " init"));
  }
  registerComm(c);
  *comm = c;
  return hocclSuccess;
}

hocclResult_t hocclCommInitRank(hocclComm_t* comm, int nranks, hocclUniqueId commId, int rank) {
  return hocclCommInitRankConfig(comm, nranks, commId, rank, nullptr);
}

hocclResult_t hocclCommSplit(hocclComm_t comm, int color, int key, hocclComm_t* newcomm,
                             hocclConfig_t* config) {
  CommUse use;
  Status st = enterComm(comm, &use, "hocclCommSplit");
  if (st.ok() && !newcomm) st = errorf(hocclInvalidArgument, "hocclCommSplit: newcomm is NULL");
  if (st.ok() && comm->initPending.load(std::memory_order_acquire))
    st = errorf(hocclInvalidUsage, "hocclCommSplit: the communicator's non-blocking init is still in progress");
  if (st.ok() && color < 0 && color != HOCCL_SPLIT_NOCOLOR)
    st = errorf(hocclInvalidArgument, "hocclCommSplit: color %d must be >= 0 or HOCCL_SPLIT_NOCOLOR", color);
  if (!st.ok()) return report(use.comm, st);
  hocclComm* c = nullptr;
  st = commSplit(comm, color, key, config, &c);
  if (!st.ok()) return report(comm, st);
  if (c) registerComm(c);
  *newcomm = c;
  return hocclSuccess;
}

hocclResult_t hocclCommCreateGroup(hocclComm_t comm, const int* ranks, int nranks, hocclComm_t* newcomm,
                                   hocclConfig_t* config) {
  const char* what = "hocclCommCreateGroup";
  CommUse use;
  Status st = enterComm(comm, &use, what);
  if (st.ok() && !newcomm) st = errorf(hocclInvalidArgument, "%s: newcomm is NULL", what);
  if (st.ok() && !ranks) st = errorf(hocclInvalidArgument, "%s: ranks is NULL", what);
  if (st.ok() && comm->initPending.load(std::memory_order_acquire))
    st = errorf(hocclInvalidUsage, "%s: the communicator's non-blocking init is still in progress", what);
  if (!st.ok()) return report(use.comm, st);
  hocclComm* c = nullptr;
  st = commCreateGroupOf(comm, ranks, nranks, config, &c);
  if (!st.ok()) return report(comm, st);
  registerComm(c);
  *newcomm = c;
  return hocclSuccess;
}

hocclResult_t hocclCommShrink(hocclComm_t comm, int* excludeRanksList, int excludeRanksCount, hocclComm_t* newcomm,
                              hocclConfig_t* config, int shrinkFlags) {
  const char* what = "hocclCommShrink";
  CommUse use;
  Status st = enterComm(comm, &use, what);
  if (st.ok() && !newcomm) st = errorf(hocclInvalidArgument, "%s: newcomm is NULL", what);
  if (st.ok() && comm->initPending.load(std::memory_order_acquire))
    st = errorf(hocclInvalidUsage, "%s: the communicator's non-blocking init is still in progress", what);
  if (!st.ok()) return report(use.comm, st);
  hocclComm* c = nullptr;
  st = commShrink(comm, excludeRanksList, excludeRanksCount, shrinkFlags, config, &c);
  if (!st.ok()) return report(comm, st);
  registerComm(c);
  *newcomm = c;
  return hocclSuccess;
}

hocclResult_t hocclCommFinalize(hocclComm_t comm) {
  // Host calls complete before they return: nothing is left to flush.
  return report(nullptr, checkComm(comm, "hocclCommFinalize"));
}

hocclResult_t hocclCommDestroy(hocclComm_t comm) {
  if (!comm) return hocclSuccess;  // as NCCL: destroying NULL is a no-op
  Status st = checkComm(comm, "hocclCommDestroy");
  if (!st.ok()) return report(nullptr, st);
  if (!unregisterComm(comm))  // another thread destroyed or aborted it since the check
    return report(nullptr, errorf(hocclInvalidUsage, "hocclCommDestroy: comm %p was destroyed or aborted by another "
                                  "thread meanwhile", static_cast<void*>(comm)));
  settleInit(comm, true);
  // Destroying a communicator another thread is still calling is the
  // caller's error; its memory is leaked rather than freed under that call.
  if (!waitUnused(comm, 1.0)) {
    HWARN(kSubAll, "hocclCommDestroy: rank %d's communicator is still in use by a call on another thread after 1 s; "
          "its memory is leaked", comm->rank);
    return hocclSuccess;
  }
  warnUndelivered(comm);
  commFree(comm);
  return hocclSuccess;
}

hocclResult_t hocclCommAbort(hocclComm_t comm) {
  if (!comm) return hocclSuccess;
  Status st = checkComm(comm, "hocclCommAbort");
  if (!st.ok()) return report(nullptr, st);
  // No new call can start once it is unregistered; a call running on another
  // thread sees the abort flag (its doorbell is rung) and returns.
  if (!unregisterComm(comm))  // another thread destroyed or aborted it since the check
    return report(nullptr, errorf(hocclInvalidUsage, "hocclCommAbort: comm %p was destroyed or aborted by another "
                                  "thread meanwhile", static_cast<void*>(comm)));
  comm->abortRequested.store(true);
  if (!settleInit(comm, false)) return hocclSuccess;  // init in progress frees it when it ends
  // Within 1 s in all: at most 0.3 s telling the peers, 0.6 s for a call
  // on another thread to return.
  comm->fail(Status(hocclRemoteError, "rank " + std::to_string(comm->rank) + " aborted its communicator"), true, 0.3);
  dumpFlight(comm, "rank " + std::to_string(comm->rank) + ": hocclCommAbort");
  if (comm->links) comm->links->doorbell().ring();
  if (cuda::DeviceExecutor* exec = comm->deviceExecutor()) {
    // A launch waiting for a peer ends at its next poll of the abort word.
    exec->requestAbort();
    if (!exec->waitIdle(0.5)) {
      HWARN(kSubAll, "hocclCommAbort: rank %d's device launches did not end within 0.5 s (a stream held up before "
            "them?); their memory is leaked", comm->rank);
      // The communicator is freed below: the executor's transport threads,
      // which read it, stop first (the network proxy went on asking it for
      // peers' abort notices every 0.1 s while the launch was pending).
      cuda::DeviceExecutor::abandon(std::move(comm->device));
    }
  }
  if (!waitUnused(comm, 0.6)) {
    // Freeing memory another thread still uses would be worse than a leak.
    HWARN(kSubAll, "hocclCommAbort: a call on rank %d did not return within 1 s; its memory is leaked", comm->rank);
    return hocclSuccess;
  }
  commFree(comm);
  return hocclSuccess;
}

hocclResult_t hocclCommGetAsyncError(hocclComm_t comm, hocclResult_t* asyncError) {
  CommUse use;
  Status st = enterQuery(comm, &use, asyncError, "hocclCommGetAsyncError", "asyncError");
  if (!st.ok()) return report(use.comm, st);
  if (comm->initPending.load(std::memory_order_acquire)) {
    *asyncError = hocclInProgress;
    return hocclSuccess;
  }
  *asyncError = comm->fatalError().code();
  if (*asyncError == hocclSuccess) {
    // A launch that failed on the device (timeout, mismatch, abort).
    Status dev = comm->pollDevice();
    if (!dev.ok()) {
      report(comm, dev);
      *asyncError = comm->fatalError().code();
    }
  }
  if (*asyncError == hocclSuccess) {
    // A peer's abort notice: sticky from now on, as NCCL's async errors are.
    Status peer = comm->peerAbort(true);
    if (!peer.ok()) {
      comm->fail(peer, false);
      report(comm, peer);
      *asyncError = peer.code();
    }
  }
  if (*asyncError == hocclSuccess) {
    // A peer that died between calls sent no notice; its connections (or
    // its pid, on this node) say so. Tell the other ranks, as a call would.
    Status lost = comm->lostPeer();
    if (!lost.ok()) {
      comm->fail(lost, true);
      report(comm, lost);
      *asyncError = lost.code();
    }
  }
  // A failed communicator's launches stop waiting for peers.
  if (*asyncError != hocclSuccess && comm->deviceExecutor()) comm->deviceExecutor()->requestAbort();
  return hocclSuccess;
}

hocclResult_t hocclCommCount(const hocclComm_t comm, int* count) {
  CommUse use;
  Status st = enterQuery(comm, &use, count, "hocclCommCount", "count");
  if (!st.ok()) return report(use.comm, st);
  *count = comm->nranks;
  return hocclSuccess;
}

hocclResult_t hocclCommCuDevice(const hocclComm_t comm, int* device) {
  CommUse use;
  Status st = enterQuery(comm, &use, device, "hocclCommCuDevice", "device");
  if (!st.ok()) return report(use.comm, st);
  const cuda::DeviceExecutor* exec = comm->deviceExecutor();
  *device = exec ? exec->device() : -1;  // -1: no call on device buffers yet
  return hocclSuccess;
}

hocclResult_t hocclCommUserRank(const hocclComm_t comm, int* rank) {
  CommUse use;
  Status st = enterQuery(comm, &use, rank, "hocclCommUserRank", "rank");
  if (!st.ok()) return report(use.comm, st);
  *rank = comm->rank;
  return hocclSuccess;
}

const char* hocclGetErrorString(hocclResult_t result) { return resultName(result); }

const char* hocclGetLastError(hocclComm_t comm) {
  // comm's newest error (every error about a live communicator is recorded
  // on it, its argument errors too), copied to a buffer of its own: the
  // thread's own last error, which may be newer, stays as it was.
  CommUse use;
  if (comm && enterComm(comm, &use, "hocclGetLastError").ok()) {
    std::lock_guard<std::mutex> lock(comm->errMutex);
    if (!comm->lastError.empty()) {
      tlsCommError = comm->lastError;
      return tlsCommError.c_str();
    }
  }
  return tlsLastError.c_str();
}

hocclResult_t hocclAllReduce(const void* sendbuff, void* recvbuff, size_t count, hocclDataType_t datatype,
                             hocclRedOp_t op, hocclComm_t comm, hocclStream_t stream) {
  return collective(CollKind::AllReduce, sendbuff, recvbuff, count, datatype, op, 0, comm, stream);
}

hocclResult_t hocclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                                 hocclDataType_t datatype, hocclRedOp_t op, hocclComm_t comm,
                                 hocclStream_t stream) {
  return collective(CollKind::ReduceScatter, sendbuff, recvbuff, recvcount, datatype, op, 0, comm, stream);
}

hocclResult_t hocclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount, hocclDataType_t datatype,
                             hocclComm_t comm, hocclStream_t stream) {
  return collective(CollKind::AllGather, sendbuff, recvbuff, sendcount, datatype, hocclSum, 0, comm, stream);
}

hocclResult_t hocclBroadcast(const void* sendbuff, void* recvbuff, size_t count, hocclDataType_t datatype,
                             int root, hocclComm_t comm, hocclStream_t stream) {
  return collective(CollKind::Broadcast, sendbuff, recvbuff, count, datatype, hocclSum, root, comm, stream);
}

hocclResult_t hocclReduce(const void* sendbuff, void* recvbuff, size_t count, hocclDataType_t datatype,
                          hocclRedOp_t op, int root, hocclComm_t comm, hocclStream_t stream) {
  return collective(CollKind::Reduce, sendbuff, recvbuff, count, datatype, op, root, comm, stream);
}

hocclResult_t hocclAlltoAll(const void* sendbuff, void* recvbuff, size_t count, hocclDataType_t datatype,
                            hocclComm_t comm, hocclStream_t stream) {
  return collective(CollKind::AllToAll, sendbuff, recvbuff, count, datatype, hocclSum, 0, comm, stream);
}

}  // extern "C"
