// The host executor's progress engine: polls every call's task, spins
// briefly when nothing moves, then sleeps on the doorbell; checks the
// health of the peers a stuck task waits on, and turns a stall longer than
// the timeout into an error naming the step and the peers.
#include <sched.h>

#include <algorithm>
#include <chrono>
#include <set>
#include <thread>

#include "base/clock.h"
#include "src/exec/dataops.h"
#include "src/exec/engine.h"
#include "src/exec/flight.h"

namespace hoccl {
namespace {

std::string callText(const CollCall& c) { return describeCall(c.coll, c.count, c.dtype, c.op, c.root); }

// "; rank 1 is pid 123 on hostB" for each peer waited on.
std::string describePeers(const TaskOwner& o, const std::vector<int>& peers) {
  std::string out;
  for (int p : std::set<int>(peers.begin(), peers.end())) {
    PeerInfo info = o.peerInfo(p);
    out += "; rank " + std::to_string(p) + " is pid " + std::to_string(info.pid) + " on " + info.host;
  }
  return out;
}

}  // namespace

Status preferPeerReason(TaskOwner& o, const Status& st, bool* fromPeer) {
  if (st.code() == hocclInvalidArgument || st.code() == hocclInvalidUsage) return st;
  for (int i = 0; i < 4; ++i) {
    Status peer = o.peerAbort(true);
    if (!peer.ok()) {
      if (fromPeer) *fromPeer = true;
      return peer;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return st;
}

namespace {

// A peer the task waits on that is gone: its process exited, one of its
// connections failed, or (on another host) it stopped answering heartbeats.
Status deadPeer(TaskOwner& o, const CollTask& t, bool* fromPeer) {
  const CollCall& call = t.call();
  const auto seq = static_cast<unsigned long long>(call.opSeq);
  for (int peer : t.waitingOn()) {
    if (!o.remotePeer(peer) && o.peerProcessGone(peer)) {
      // It may have left after a failure of the call that it told everyone
      // about (a mismatch it found): that is the reason to report.
      PeerInfo info = o.peerInfo(peer);
      return preferPeerReason(o,
                              errorf(hocclRemoteError, "rank %d: peer rank %d (pid %d on %s) has exited during %s "
                                     "(call #%llu)", o.ownRank(), peer, info.pid, info.host.c_str(),
                                     callText(call).c_str(), seq),
                              fromPeer);
    }
    if (o.remotePeer(peer)) {
      Status silent = o.peerSilent(peer);
      if (!silent.ok())
        return errorf(silent.code(), "%s, during %s (call #%llu)", silent.message().c_str(), callText(call).c_str(),
                      seq);
    }
    for (int ch = 0; ch < t.channelCount(); ++ch) {
      std::string why;
      if (SendConn* s = o.connections().sendConn(peer, ch)) why = s->failure();
      if (RecvConn* r = why.empty() ? o.connections().recvConn(peer, ch) : nullptr) why = r->failure();
      // A connection that failed while its peer lives: that peer may have
      // stopped for a reason another rank is telling everyone; report that.
      if (!why.empty())
        return preferPeerReason(
            o, errorf(hocclRemoteError, "rank %d: lost peer rank %d (on %s) during %s (call #%llu): %s", o.ownRank(),
                      peer, o.peerInfo(peer).host.c_str(), callText(call).c_str(), seq, why.c_str()),
            fromPeer);
    }
  }
  return Status();
}

// HOCCL_DEBUG_DUMP: how a call ended, in its flight recorder (a call of a
// failed group that had finished is done; the rest failed with the group).
void recordEnd(const Work& w, bool done, const Status& st) {
  if (w.flight) w.flight->finished(w.flightId, done ? Status() : st);
}

class HostExecutor : public Executor {
 public:
  Status run(const Work* work, size_t n) override {
    if (n == 1 && work[0].call->op != RedOp::PreMulSum) {  // the common case: the task lives on the stack
      const Work& w = work[0];
      CollTask task(*w.call, *w.schedule, &w.owner->connections(), w.owner->scratchPool(), w.sliceBytes,
                    w.checkCalls, w.directBytes, w.cma);
      Status st;
      int spun = 0;
      if (quickly(w.owner, task, &st, &spun)) {
        if (w.flight) recordEnd(w, task.done(), st);
        return st;
      }
      CollTask* one = &task;
      st = progress(work, &one, 1, spun);
      if (w.flight) recordEnd(w, task.done(), st);
      return st;
    }
    std::vector<ScratchPool::Lease> scaled;  // PreMulSum inputs, alive until the tasks end
    std::vector<CollCall> calls;             // PreMulSum calls, reading the scaled inputs
    auto callOf = [&](size_t i, Status* st) -> const CollCall* {
      if (work[i].call->op != RedOp::PreMulSum) return work[i].call;
      if (calls.empty()) calls.reserve(n);
      calls.push_back(*work[i].call);
      *st = preMultiply(work[i], &calls.back(), &scaled);
      if (!st->ok()) work[i].owner->recordFailure(*st, true);
      return &calls.back();
    };
    Status st;
    std::vector<std::unique_ptr<CollTask>> tasks;
    std::vector<CollTask*> ptrs;
    for (size_t i = 0; i < n; ++i) {
      const CollCall* call = callOf(i, &st);
      if (!st.ok()) {
        for (size_t j = 0; j < n; ++j) recordEnd(work[j], false, st);
        return st;
      }
      const Work& w = work[i];
      tasks.push_back(std::make_unique<CollTask>(*call, *w.schedule, &w.owner->connections(), w.owner->scratchPool(),
                                                 w.sliceBytes, w.checkCalls, w.directBytes, w.cma));
      ptrs.push_back(tasks.back().get());
    }
    st = progress(work, ptrs.data(), n);
    for (size_t i = 0; i < n; ++i) recordEnd(work[i], tasks[i]->done(), st);
    return st;
  }

 private:
  // PreMulSum's local step: the task reads a copy of the input multiplied
  // by this rank's scalar (the schedule was built out of place for it).
  static Status preMultiply(const Work& w, CollCall* call, std::vector<ScratchPool::Lease>* keep) {
    const size_t bytes = inputCount(w.schedule->key) * dtypeSize(call->dtype);
    if (bytes == 0) return Status();
    ScratchPool::Lease lease = ScratchPool::take(w.owner->scratchPool(), bytes);
    if (!lease.data())
      return errorf(hocclSystemError, "rank %d: out of memory for the %zu-byte scaled input of %s (call #%llu)",
                    w.owner->ownRank(), bytes, callText(*call).c_str(), static_cast<unsigned long long>(call->opSeq));
    const void* scalar = call->scalarAt ? call->scalarAt : call->scalar;
    scaleElements(call->dtype, lease.data(), call->sendbuff, bytes / dtypeSize(call->dtype), scalar);
    call->sendbuff = lease.data();
    keep->push_back(std::move(lease));
    return Status();
  }

  static Status fail(TaskOwner* o, const Status& st, bool tellPeers) {
    o->recordFailure(st, tellPeers);
    return st;
  }

  // A task's own failure. One caused by a peer (hocclRemoteError: its
  // memory went away under a direct read, say) is often the echo of that
  // peer's failure, which it is telling everyone: report the peer's reason.
  static Status taskFailed(TaskOwner* o, const Status& st) {
    if (st.code() != hocclRemoteError) return fail(o, st, true);
    bool fromPeer = false;
    Status why = preferPeerReason(*o, st, &fromPeer);
    return fail(o, why, !fromPeer);
  }

  // One call, first without the general loop's bookkeeping: a small call is
  // usually done within a few passes and a short spin. True if it ended
  // (*st says how); false hands it to progress(), which also sleeps, times
  // out and reports aborts and dead peers (*spun: the idle polls so far,
  // which count towards HOCCL_SPIN).
  static bool quickly(TaskOwner* o, CollTask& t, Status* st, int* spun) {
    const ProgressPolicy& policy = o->progressPolicy();
    const int spinCap = policy.spinIters < 256 ? policy.spinIters : 256;
    for (int& spins = *spun; spins < spinCap;) {
      if (o->abortPending()) return false;
      Status s = o->peerAbort(false);
      if (!s.ok()) {
        *st = fail(o, s, false);
        return true;
      }
      bool moved = false;
      s = t.progress(&moved);
      if (!s.ok()) {
        *st = taskFailed(o, s);
        return true;
      }
      if (t.done()) return true;
      if (moved) {
        spins = 0;
        continue;
      }
      ++spins;
      if (policy.yieldWhileSpinning) sched_yield();
#if defined(__x86_64__)
      else __builtin_ia32_pause();
#endif
    }
    return false;
  }

  // A small call of a communicator that spans nodes: whoever a rank waits
  // on, a network round trip is usually on the way (a leader's broadcast
  // waits for the leaders' exchange). Large calls do not qualify
  // (ProgressPolicy::remoteSpinMaxBytes).
  static bool waitsOnNetwork(const Work* work, CollTask* const* tasks, size_t ntasks) {
    for (size_t i = 0; i < ntasks; ++i)
      if (!tasks[i]->done() && work[i].owner->usesNetwork() &&
          callBytes(tasks[i]->call()) <= work[i].owner->progressPolicy().remoteSpinMaxBytes)
        return true;
    return false;
  }

  // A rank's bytes in a call: its buffer (all-reduce, broadcast, ...) or
  // its part (all-gather's input, reduce-scatter's output), or all it
  // sends and receives (send/receive).
  static uint64_t callBytes(const CollCall& c) {
    if (c.coll != CollKind::SendRecv) return c.count * dtypeSize(c.dtype);
    uint64_t bytes = 0;
    for (const PeerPart& p : c.parts) bytes += p.count * dtypeSize(p.dtype);
    return bytes;
  }

  static Status progress(const Work* work, CollTask* const* tasks, size_t ntasks, int spun = 0) {
    if (ntasks == 0) return Status();
    TaskOwner* first = work[0].owner;
    bool multiComm = false;
    for (size_t i = 0; i < ntasks; ++i) multiComm |= work[i].owner != first;
    const ProgressPolicy& policy = first->progressPolicy();
    // When the current stall was first noticed (-1: the last pass moved
    // something), and when the peers' health was last checked: the clock
    // is read only once polls stop moving, not on every call.
    double lastProgress = -1, lastHealthCheck = -1;
    int spins = spun;
    int spinLimit = policy.spinIters;  // raised once per stall if a call waits on the network
    bool networkChecked = false;
    // Calls on one communicator share its connections, so they run one
    // after another; calls on different communicators run together.
    // (On the stack for the usual handful of calls: a call allocates nothing.)
    constexpr size_t kInline = 8;
    TaskOwner* busyInline[kInline];
    std::vector<TaskOwner*> busyHeap(ntasks > kInline ? ntasks : 0);
    TaskOwner** const busy = ntasks > kInline ? busyHeap.data() : busyInline;
    size_t nbusy = 0;
    bool allDone = false, progressed = false;
    // One pass over every unfinished call; false when one failed (*st).
    auto poll = [&](Status* st) {
      allDone = true;
      progressed = false;
      nbusy = 0;
      for (size_t i = 0; i < ntasks; ++i) {
        TaskOwner* o = work[i].owner;
        CollTask& t = *tasks[i];
        if (t.done()) continue;
        allDone = false;
        if (std::find(busy, busy + nbusy, o) != busy + nbusy) continue;
        busy[nbusy++] = o;
        if (o->abortPending()) {
          *st = errorf(hocclInvalidUsage, "rank %d: communicator aborted by hocclCommAbort during %s (call #%llu)",
                       o->ownRank(), callText(t.call()).c_str(), static_cast<unsigned long long>(t.call().opSeq));
          return false;
        }
        Status s = o->peerAbort(false);
        if (!s.ok()) {
          *st = fail(o, s, false);
          return false;
        }
        s = t.progress(&progressed);
        if (!s.ok()) {
          *st = taskFailed(o, s);
          return false;
        }
      }
      return true;
    };
    for (;;) {
      Status st;
      if (!poll(&st)) return st;
      if (allDone) return Status();
      if (progressed) {
        lastProgress = -1;
        spins = 0;
        spinLimit = policy.spinIters;
        networkChecked = false;
        continue;
      }
      if (++spins >= spinLimit && !networkChecked) {
        networkChecked = true;
        if (policy.remoteSpinIters > spinLimit && waitsOnNetwork(work, tasks, ntasks))
          spinLimit = policy.remoteSpinIters;
      }
      if (spins < spinLimit) {
        if (policy.yieldWhileSpinning) sched_yield();
#if defined(__x86_64__)
        else __builtin_ia32_pause();
#endif
        continue;
      }
      double now = nowSec();
      if (lastProgress < 0) lastProgress = now;
      if (lastHealthCheck < 0) lastHealthCheck = now;
      for (size_t i = 0; i < ntasks; ++i) {
        TaskOwner* o = work[i].owner;
        CollTask& t = *tasks[i];
        if (t.done()) continue;
        double limit = o->progressPolicy().timeoutSec;
        // A rank that waits only on live local peers is usually waiting for
        // one that waits on the network; it gives that one a head start to
        // time out first, so the first report names the remote peer (a cut
        // link, a hung node) rather than a neighbour in the chain.
        bool remoteWait = false;
        for (int p : t.waitingOn()) remoteWait |= o->remotePeer(p);
        if (!remoteWait && o->usesNetwork()) limit += std::min(5.0, 0.2 * limit);
        if (now - lastProgress > limit) {
          Status st = errorf(hocclTimeout, "%s made no progress for %g s (%s) in %s, call #%llu: %s%s",
                             o->describeSelf().c_str(), limit, o->progressPolicy().timeoutFrom,
                             callText(t.call()).c_str(),
                             static_cast<unsigned long long>(t.call().opSeq), t.describeWait().c_str(),
                             describePeers(*o, t.waitingOn()).c_str());
          return fail(o, st, true);
        }
        if (now - lastHealthCheck > 0.1) {
          if (work[i].flight) work[i].flight->waiting(work[i].flightId, t.describeWait(), t.waitingOn());
          Status st = o->peerAbort(true);
          if (!st.ok()) return fail(o, st, false);
          bool fromPeer = false;  // a peer's notice: already told to everyone
          st = deadPeer(*o, t, &fromPeer);
          if (!st.ok()) return fail(o, st, !fromPeer);
          st = t.crossCheckOneShotShm();
          if (!st.ok()) return fail(o, st, true);
          st = o->crossCheckCall(t.call(), t.waitingOn());
          if (!st.ok()) return fail(o, st, true);
        }
      }
      if (now - lastHealthCheck > 0.1) lastHealthCheck = now;
      // Announce the sleep, then look once more: what a peer published
      // before the announcement shows up in this poll, what comes after
      // rings the doorbell (connection.h, Doorbell).
      Doorbell& bell = first->doorbell();
      const uint32_t seen = bell.arm();
      if (!poll(&st)) {
        bell.disarm();
        return st;
      }
      if (allDone || progressed) {
        bell.disarm();
        if (allDone) return Status();
        lastProgress = -1;
        spins = 0;
        spinLimit = policy.spinIters;
        networkChecked = false;
        continue;
      }
      bell.wait(seen, multiComm ? 1 : 100);
    }
  }
};

}  // namespace

Executor& hostExecutor() {
  static HostExecutor executor;
  return executor;
}

}  // namespace hoccl
