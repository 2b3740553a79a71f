// How the communicator runs calls: schedules and connections first, then
// the executor; and what the executor may ask the communicator meanwhile.
#include <unistd.h>

#include <cstring>

#include <algorithm>
#include <atomic>
#include <functional>
#include <thread>

#include "base/thread_name.h"
#include "base/tls.h"
#include "src/comm/comm.h"

using namespace hoccl;

std::string hocclComm::describeSelf() const {
  return "rank " + std::to_string(rank) + " (pid " + std::to_string(getpid()) + " on " + hostId + ")";
}

PeerInfo hocclComm::peerInfo(int peer) const {
  const RankInfo& info = boot->table()[peer];
  return PeerInfo{info.pid, info.hostId};
}

bool hocclComm::sameProcess(int peer) const { return hoccl::sameProcess(boot->table()[rank], boot->table()[peer]); }

bool hocclComm::sameHost(int peer) const {
  const RankInfo& me = boot->table()[rank];
  const RankInfo& other = boot->table()[peer];
  return strcmp(other.machineId, me.machineId) == 0 && strcmp(other.hostId, me.hostId) == 0;
}

Status hocclComm::prepareDevice(const CollCall& call, const ScheduleKey& key, std::shared_ptr<const Schedule>* out) {
  if (!device) {
    cuda::DeviceSettings ds;
    ds.sliceBytes = settings.sliceBytes;
    ds.slots = settings.slots;
    ds.threads = unsigned(settings.deviceThreads);
    ds.channels = settings.deviceChannels;
    ds.minChannels = settings.minCTAs;
    ds.maxChannels = settings.maxCTAs;
    ds.conn.p2pDisable = settings.p2pDisable;
    ds.conn.p2pCheck = settings.p2pCheck;
    ds.conn.ipc = settings.deviceIpc;
    ds.conn.netPath = settings.netDevicePath;
    ds.conn.proxySpinUs = settings.proxySpinUs;
    ds.conn.proxyIdleUs = settings.proxyIdleUs;
    // The device of whichever buffer the call reads or writes there (a
    // reduce's non-root receive buffer, say, is not looked at).
    const cuda::Driver& d = cuda::processDriver();
    const void* on = cuda::memoryKind(d, call.recvbuff) == cuda::MemoryKind::Device ? call.recvbuff : call.sendbuff;
    HOCCL_TRY(cuda::DeviceExecutor::create(d, this, boot.get(), ds, on, &device));
    devicePublished.store(device.get(), std::memory_order_release);
  }
  const size_t esize = dtypeSize(call.dtype);
  const ScheduleCacheKey k = cacheKey(key, esize);
  auto it = deviceSchedules.find(k);
  if (it == deviceSchedules.end() && deviceSchedules.size() >= 256) deviceSchedules.clear();  // as prepare()'s
  if (it == deviceSchedules.end()) {
    auto sched = std::make_shared<const Schedule>(tunedSchedule(key, esize, device.get()));
    // The tuner never picks it for device buffers (Tuner::chooseForDevice);
    // were it to, the kernels would find no steps and leave the output as
    // it was.
    if (sched->oneShotShm)
      return errorf(hocclInternalError, "rank %d: %s on device buffers was given oneshot_shm, which runs on host "
                    "buffers only", rank, collName(key.coll));
    it = deviceSchedules.emplace(k, std::move(sched)).first;
  }
  *out = it->second;
  return Status();
}

Status hocclComm::pollDevice() {
  cuda::DeviceExecutor* exec = deviceExecutor();
  if (!exec) return Status();
  Status st = exec->poll();
  if (st.ok()) return st;
  if (!fatalError().ok()) return fatalError();
  // A connection lost to a peer that stopped on an error of its own: that
  // error, when its notice comes soon, says more than the lost connection.
  if (st.code() == hocclRemoteError) st = preferPeerReason(*this, st);
  fail(st, true);
  dumpFlight(this, "rank " + std::to_string(rank) + ": a call on device buffers failed: " + st.message());
  return st;
}

bool hocclComm::peerProcessGone(int peer) {
  int pid = 0;
  return links && links->localPeerExited(peer, false, &pid);
}

bool hocclComm::peerCrashed(int peer) {
  int pid = 0;
  return links && links->localPeerExited(peer, true, &pid);
}

namespace hoccl {

namespace {

// The executor's view of one prepared call: numbered (its schedule is
// already in w; the call stays where it is, and w points at it).
void makeWork(CommCall& c, Work* w) {
  hocclComm* comm = c.comm;
  w->owner = comm;
  CollCall& call = c.call;
  w->call = &call;
  if (call.coll == CollKind::SendRecv) {
    // Each message names its place in the stream between its two ranks.
    comm->sendSeq.resize(comm->nranks);
    comm->recvSeq.resize(comm->nranks);
    for (PeerPart& p : call.parts) p.seq = ++(p.send ? comm->sendSeq : comm->recvSeq)[p.peer];
    call.opSeq = comm->opSeq;
  } else {
    call.opSeq = ++comm->opSeq;
    comm->callHistory[call.opSeq % hocclComm::kCallHistory] = signatureOf(call);
    // A one-shot-over-shared-memory call takes the next one-shot number; another call carries the
    // number the next one will take, to spot a peer that ran it there.
    call.oneShotSeq = w->schedule && w->schedule->oneShotShm ? ++comm->oneShotSeq : comm->oneShotSeq + 1;
  }
  if (comm->flight) {
    const Schedule* s = w->schedule;
    comm->flight->running(c.flightId, s ? s->algorithm : nullptr, s ? static_cast<int>(s->channels.size()) : 0,
                          call.device);
    w->flight = comm->flight.get();
    w->flightId = c.flightId;
  }
  w->sliceBytes = comm->settings.sliceBytes;
  w->checkCalls = comm->settings.checkCalls;
  w->directBytes = comm->settings.directBytes;
  w->cma = comm->settings.crossMemoryAttach;
}

}  // namespace

namespace {

// One communicator's device calls, in order: schedule, number, enqueue.
// A call refused before it reached its peers (no usable device path, ranks
// in other processes, a type with no kernel) leaves the communicator
// usable: every rank of this process refuses it alike. A failure after
// (connection setup, a launch) may leave peers waiting: it is fatal.
Status enqueueDevice(CommCall* calls, const std::vector<size_t>& idx) {
  for (size_t i : idx) {
    CommCall& c = calls[i];
    Work w;
    if (c.comm->flight)
      c.flightId = c.comm->flight->begin(c.call, c.comm->opSeq + (c.call.coll != CollKind::SendRecv ? 1 : 0));
    Status prepared = c.comm->prepareDevice(c.call, c.key, &w.keep);
    if (!prepared.ok() && c.comm->flight) c.comm->flight->finished(c.flightId, prepared);
    HOCCL_TRY(prepared);
    w.schedule = w.keep.get();
    makeWork(c, &w);
    Status st = c.comm->device->enqueue(w);
    if (!st.ok() && c.comm->flight) c.comm->flight->finished(c.flightId, st);
    if (!st.ok()) {
      if (st.code() != hocclInvalidArgument) c.comm->fail(st, true);
      return st;
    }
  }
  return Status();
}

// Calls on device buffers are queued on their streams. A communicator's
// first call of a schedule exchanges connection addresses with its peers,
// so when one thread drives several communicators (a group), each is set
// up on a thread of its own.
Status runDeviceCalls(CommCall* calls, size_t n) {
  std::vector<std::pair<hocclComm*, std::vector<size_t>>> byComm;
  for (size_t i = 0; i < n; ++i) {
    auto it = std::find_if(byComm.begin(), byComm.end(), [&](const auto& u) { return u.first == calls[i].comm; });
    if (it == byComm.end()) it = byComm.insert(byComm.end(), {calls[i].comm, {}});
    it->second.push_back(i);
  }
  if (byComm.size() == 1) return enqueueDevice(calls, byComm[0].second);
  std::vector<Status> sts(byComm.size());
  std::vector<std::thread> threads(byComm.size());
  for (size_t j = 0; j < byComm.size(); ++j) {
    Status st = startThread("a thread to queue a group's device calls", &threads[j],
                            [&, j] { sts[j] = enqueueDevice(calls, byComm[j].second); });
    if (!st.ok()) sts[j] = st;
  }
  for (std::thread& t : threads)
    if (t.joinable()) t.join();
  for (const Status& st : sts)
    if (!st.ok()) return st;
  return Status();
}

Status runHostCalls(CommCall* calls, size_t n);

}  // namespace

namespace {

// A tag of the calling thread, never 0. A plain thread-local (no
// constructor) costs one load on every call; a constructed one goes
// through the TLS wrapper each time.
std::atomic<uint64_t> nextThreadTag{1};
HOCCL_THREAD_LOCAL uint64_t tlsThreadTag = 0;
uint64_t threadTag() {
  if (__builtin_expect(tlsThreadTag == 0, 0)) tlsThreadTag = nextThreadTag.fetch_add(1, std::memory_order_relaxed);
  return tlsThreadTag;
}

// The communicators of a run, each taken for the calling thread while it
// runs. Two threads calling on one communicator at once would interleave
// their calls' numbers and messages: a false mismatch, or wrong data where
// the headers are not checked. As NCCL leaves that undefined, hoccl refuses
// the second thread's call at once and leaves the communicator as it was.
class CallThreadGuard {
 public:
  ~CallThreadGuard() {
    for (size_t i = 0; i < nheld_; ++i) at(i)->callThread.store(0, std::memory_order_release);
  }
  Status take(CommCall* calls, size_t n) {
    const uint64_t me = threadTag();
    for (size_t i = 0; i < n; ++i) {
      hocclComm* c = calls[i].comm;
      uint64_t owner = 0;
      if (c->callThread.compare_exchange_strong(owner, me, std::memory_order_acquire)) {
        hold(c);
      } else if (owner != me) {
        return errorf(hocclInvalidUsage,
                      "rank %d: another thread is running a call on this communicator; a communicator takes "
                      "calls from one thread at a time (as NCCL requires), so this %s was refused and the "
                      "communicator is unchanged",
                      c->rank, describeCall(calls[i].call.coll, calls[i].call.count, calls[i].call.dtype,
                                            calls[i].call.op, calls[i].call.root).c_str());
      }
    }
    return Status();
  }


 private:
  // The usual handful on the stack: a call allocates nothing here.
  static constexpr size_t kInline = 4;
  void hold(hocclComm* c) {
    if (nheld_ < kInline) inline_[nheld_] = c;
    else more_.push_back(c);
    ++nheld_;
  }
  hocclComm* at(size_t i) const { return i < kInline ? inline_[i] : more_[i - kInline]; }
  hocclComm* inline_[kInline] = {};
  std::vector<hocclComm*> more_;
  size_t nheld_ = 0;
};

}  // namespace

namespace {

Status runTakenCalls(CommCall* calls, size_t n);

// HOCCL_DEBUG_DUMP: once per run that left a communicator failed (a call
// refused for its arguments leaves it usable), by the first one that
// records (the dump holds every communicator of the process).
__attribute__((noinline, cold)) void dumpAfterFailure(const CommCall* calls, size_t n, const Status& st) {
  for (size_t i = 0; i < n; ++i) {
    if (calls[i].comm->flight && !calls[i].comm->fatalError().ok()) {
      dumpFlight(calls[i].comm, "rank " + std::to_string(calls[i].comm->rank) + ": a call failed: " + st.message());
      return;
    }
  }
}

}  // namespace

Status runCalls(CommCall* calls, size_t n) {
  CallThreadGuard guard;
  HOCCL_TRY(guard.take(calls, n));
  Status st = runTakenCalls(calls, n);
  if (__builtin_expect(!st.ok(), 0)) dumpAfterFailure(calls, n, st);
  return st;
}

namespace {

Status runTakenCalls(CommCall* calls, size_t n) {
  size_t onDevice = 0;
  for (size_t i = 0; i < n; ++i) onDevice += calls[i].call.device ? 1 : 0;
  if (onDevice == 0) return runHostCalls(calls, n);
  if (onDevice == n) return runDeviceCalls(calls, n);
  // A group of both: the device calls are queued, then the host ones run.
  std::vector<CommCall> device, host;
  for (size_t i = 0; i < n; ++i) (calls[i].call.device ? device : host).push_back(calls[i]);
  HOCCL_TRY(runDeviceCalls(device.data(), device.size()));
  return runHostCalls(host.data(), host.size());
}

}  // namespace

namespace {

// prepareCall for a call that will be numbered `seq` (a collective) or
// follows collective `seq` (point-to-point): while it sets up connections,
// a wait on the bootstrap checks that call against the peers' (comm_callcheck.cc).
Status prepareNumbered(CommCall& c, uint64_t seq, const Schedule** out, std::shared_ptr<const Schedule>* keep) {
  hocclComm* comm = c.comm;
  if (comm->flight) comm->setupFlightId = c.flightId = comm->flight->begin(c.call, seq);
  comm->settingUp = c.call.coll != CollKind::SendRecv;
  comm->setupCall = signatureOf(c.call);
  comm->setupCall.opSeq = seq;
  Status st = comm->prepareCall(c.call, c.key, out, keep);
  comm->settingUp = false;
  if (!st.ok() && comm->flight) comm->flight->finished(c.flightId, st);
  return st;
}

// The number each collective of `calls` will take (makeWork); a
// point-to-point call gets its communicator's last.
std::vector<uint64_t> futureSeqs(const CommCall* calls, size_t n) {
  std::vector<uint64_t> seq(n);
  for (size_t i = 0; i < n; ++i) {
    uint64_t s = calls[i].comm->opSeq;
    for (size_t j = 0; j <= i; ++j)
      if (calls[j].comm == calls[i].comm && calls[j].call.coll != CollKind::SendRecv) ++s;
    seq[i] = s;
  }
  return seq;
}

Status runHostCalls(CommCall* calls, size_t n) {
  if (n == 1) {  // one call, the common case: no allocation here
    Work w;
    // The schedule is borrowed from the communicator's cache: nothing else
    // prepares a call of this communicator before this one has run.
    const bool coll = calls[0].call.coll != CollKind::SendRecv;
    Status st = prepareNumbered(calls[0], calls[0].comm->opSeq + (coll ? 1 : 0), &w.schedule, nullptr);
    if (!st.ok()) {
      // A peer that stopped first may be why set-up failed: its reason.
      st = preferPeerReason(*calls[0].comm, st);
      calls[0].comm->fail(st, true);
      return st;
    }
    makeWork(calls[0], &w);
    return hostExecutor().run(&w, 1);
  }
  // Schedules first. One that needs new connections sets them up with its
  // peers over the bootstrap, which waits for them to do the same; when one
  // thread drives several ranks (a group over several communicators), the
  // ranks that must connect do so on threads of their own.
  std::vector<Work> work(n);
  std::vector<Status> sts(n);
  const std::vector<uint64_t> seqs = futureSeqs(calls, n);
  auto prep = [&](size_t i) { sts[i] = prepareNumbered(calls[i], seqs[i], &work[i].schedule, &work[i].keep); };
  // Calls still to build, per communicator: one thread per communicator
  // builds its calls in order (a communicator's schedule cache and
  // connections are not shared between threads).
  std::vector<std::pair<hocclComm*, std::vector<size_t>>> uncached;
  for (size_t i = 0; i < n; ++i) {
    const CommCall& c = calls[i];
    if (c.comm->hasSchedule(c.key, dtypeSize(c.call.dtype))) {
      prep(i);
      continue;
    }
    auto it = std::find_if(uncached.begin(), uncached.end(), [&](const auto& u) { return u.first == c.comm; });
    if (it == uncached.end()) it = uncached.insert(uncached.end(), {c.comm, {}});
    it->second.push_back(i);
  }
  auto prepAll = [&](const std::vector<size_t>& idx) {
    for (size_t i : idx) prep(i);
  };
  if (uncached.size() == 1) prepAll(uncached[0].second);
  if (uncached.size() > 1) {
    std::vector<std::thread> threads(uncached.size());
    for (size_t j = 0; j < uncached.size(); ++j) {
      const std::vector<size_t>& idx = uncached[j].second;
      Status st = startThread("a thread to connect a group's communicators", &threads[j],
                              [&, j] { prepAll(uncached[j].second); });
      if (!st.ok())
        for (size_t i : idx) sts[i] = st;
    }
    for (std::thread& t : threads)
      if (t.joinable()) t.join();
  }
  for (size_t i = 0; i < n; ++i) {
    if (!sts[i].ok()) {
      sts[i] = preferPeerReason(*calls[i].comm, sts[i]);
      calls[i].comm->fail(sts[i], true);
      return sts[i];
    }
    makeWork(calls[i], &work[i]);
  }
  return hostExecutor().run(work.data(), n);
}

}  // namespace
}  // namespace hoccl
