// The executor boundary. The communicator hands the executor calls, each
// with the schedule it built and connected, and the executor runs them to
// completion: the host executor in the caller's thread today, a CUDA
// executor on the user's stream next. Everything the engine needs from the
// communicator goes through TaskOwner, so exec knows nothing of bootstrap,
// shared memory or sockets.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "src/exec/executor.h"

namespace hoccl {

class FlightRecorder;

namespace cuda {
struct DeviceConnOptions;
class DeviceConnections;
}  // namespace cuda

// How a waiting rank spends its time: polls before sleeping (yielding the
// core between polls when ranks outnumber cores) and how long it waits
// without progress before giving up.
struct ProgressPolicy {
  double timeoutSec = 1800;
  const char* timeoutFrom = "HOCCL_TIMEOUT";  // what set it, for messages (Settings::timeoutFrom)
  int spinIters = 0;
  // Polls before sleeping in a small call (up to remoteSpinMaxBytes per
  // rank) of a communicator that spans nodes: a network round trip
  // outlasts a local one, and a rank that sleeps through it wakes late, so
  // its peers wait longer and sleep too. A larger call's waits last
  // milliseconds, and ranks polling through them on shared cores slowed
  // the ranks they waited for (results/20261128-net-spin-bytes), so it polls spinIters times as any call does.
  int remoteSpinIters = 0;
  uint64_t remoteSpinMaxBytes = 0;
  bool yieldWhileSpinning = false;
};

// Who a peer is, for messages.
struct PeerInfo {
  int pid = 0;
  std::string host;
};

// What the progress engine needs from the communicator that owns a call.
class TaskOwner {
 public:
  virtual ~TaskOwner() = default;
  // The rank's connections and the doorbell it sleeps on: the transports'
  // neutral interface (transport/connection.h), nothing of a backend.
  virtual Connections& connections() = 0;
  virtual Doorbell& doorbell() = 0;
  // The device executor's connections (transport/device_connection.h),
  // from the transport that reaches the communicator's ranks; collective,
  // once per device executor. Without one: hocclInvalidUsage.
  virtual Status openDeviceConnections(const cuda::DeviceConnOptions& o,
                                       std::unique_ptr<cuda::DeviceConnections>* out) {
    (void)o;
    (void)out;
    return Status(hocclInvalidUsage, "device buffers: this communicator has no device transport");
  }
  // Where tasks take their scratch from (null: each task allocates its own).
  virtual ScratchPool* scratchPool() { return nullptr; }
  virtual int ownRank() const = 0;
  virtual const ProgressPolicy& progressPolicy() const = 0;
  // "rank 0 (pid 12 on hostA)": this rank, as timeout messages name it.
  virtual std::string describeSelf() const = 0;
  virtual PeerInfo peerInfo(int peer) const = 0;
  // True if `peer` is a thread of this process (device pointers are
  // valid in both).
  virtual bool sameProcess(int peer) const { return peer == ownRank(); }
  // True if `peer` runs on this host (the same machine and host id): a
  // process there can take fds from this one.
  virtual bool sameHost(int peer) const { return sameProcess(peer); }
  // True if `peer` is reached over the network, not shared memory.
  virtual bool remotePeer(int peer) const = 0;
  // True if some peer is (the network may stall longer than a neighbour).
  virtual bool usesNetwork() const = 0;
  // hocclCommAbort was called on this communicator.
  virtual bool abortPending() const = 0;
  // An abort a peer told this rank about: through shared memory only
  // (cheap, every poll), or through the network too (a system call or two).
  virtual Status peerAbort(bool network) = 0;
  // True if `peer`'s process is known to have exited (same machine only).
  virtual bool peerProcessGone(int peer) = 0;
  // hocclRemoteError naming `peer` if it is on another host and its
  // process has not answered heartbeats for HOCCL_HEARTBEAT_TIMEOUT (a cut
  // link, a frozen host, a stopped process); cheap: no system call.
  virtual Status peerSilent(int peer) {
    (void)peer;
    return Status();
  }
  // True if `peer`'s process exited without destroying its communicator
  // (killed, crashed; same machine only): a peer that finished its part
  // and left in order is not one.
  virtual bool peerCrashed(int peer) { return peerProcessGone(peer); }
  // Records a fatal error; with tellPeers, tells the other ranks so none of
  // them waits for the timeout.
  virtual void recordFailure(const Status& st, bool tellPeers) = 0;
  // A stalled call's check (now and then, not every poll) that the ranks
  // it waits on run the same call: tells each of `waitingOn` this call's
  // signature, once per call, and compares the signatures peers told this
  // rank with its own calls. Ranks that disagree in a way that changes who
  // sends (roots, a reduce against a broadcast) may all wait to receive,
  // so no message header ever shows the difference. An error names both
  // calls.
  virtual Status crossCheckCall(const CollCall& call, const std::vector<int>& waitingOn) {
    (void)call;
    (void)waitingOn;
    return Status();
  }
};

// A failure that a peer's stop may explain (a connection it closed, or
// reset, because it stopped first): the reason that peer's abort notice
// gives, if one arrives within about 0.2 s (then *fromPeer is set, if
// given), else `st`. A call's own mismatch or bad arguments are not
// waited on.
Status preferPeerReason(TaskOwner& o, const Status& st, bool* fromPeer = nullptr);

// One validated, numbered call with its schedule, ready to run.
struct Work {
  TaskOwner* owner = nullptr;
  const CollCall* call = nullptr;  // the caller's, alive until the call has run (or is queued)
  const Schedule* schedule = nullptr;
  // Owns the schedule where its communicator's cache might drop it first
  // (a group prepares all its calls before any runs; the device executor
  // keeps its plans); a lone host call borrows it from the cache.
  std::shared_ptr<const Schedule> keep;
  size_t sliceBytes = 0;
  bool checkCalls = true;
  size_t directBytes = 0;  // slices this large go by reference where allowed
  int cma = 0;             // HOCCL_CMA: to other processes too (CollTask)
  // HOCCL_DEBUG_DUMP: the call's entry in its communicator's flight
  // recorder (flight.h), told where a stalled call waits and how it ended.
  FlightRecorder* flight = nullptr;
  uint64_t flightId = 0;
};

class Executor {
 public:
  virtual ~Executor() = default;
  // Runs the calls, of one communicator or several, until all are done or
  // one fails: a mismatch, a peer's abort, a dead peer, an abort request or
  // no progress for longer than the timeout. The failing call's owner has
  // recorded the error when this returns it.
  virtual Status run(const Work* work, size_t n) = 0;
};

// Host buffers: progresses the calls in the caller's thread, polling, then
// sleeping on the doorbell of the first call's communicator.
Executor& hostExecutor();

}  // namespace hoccl
