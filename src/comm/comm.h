// The communicator: what one rank knows about its job. It builds each
// call's schedule and connections and hands the call to the executor
// (src/exec/engine.h), which owns the progress loop.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "algorithms/registry.h"
#include "hoccl.h"
#include "src/bootstrap/bootstrap.h"
#include "base/config.h"
#include "base/error.h"
#include "src/exec/cuda/device_executor.h"
#include "src/exec/engine.h"
#include "src/exec/flight.h"
#include "src/topo/topology.h"
#include "src/tune/tuner.h"
#include "transport/links/links.h"

namespace hoccl {

// Node identity: HOCCL_HOSTID if set, else host name + boot id.
std::string localHostId(const Settings& s);
// Test hook: node identity for communicators created by this thread
// (ranks-as-threads tests of multi-node code). Empty: no override.
void setThreadHostIdOverride(const std::string& id);
// The physical machine: the kernel's boot id (emulated nodes share it).
std::string localMachineId();
// HOCCL_HEARTBEAT_TIMEOUT and _INTERVAL, the interval at most a quarter of
// the timeout: a peer is called silent only after several beats went
// unanswered.
inline HeartbeatOptions heartbeatOptions(const Settings& s) {
  HeartbeatOptions hb;
  hb.timeoutSec = s.heartbeatTimeoutSec;
  hb.intervalSec = s.heartbeatTimeoutSec > 0 ? std::min(s.heartbeatIntervalSec, s.heartbeatTimeoutSec / 4)
                                             : s.heartbeatIntervalSec;
  return hb;
}

// A measured network (HOCCL_TOPO_PROBE), as the files it stands in for.
struct ProbedFiles {
  std::string topo;             // HOCCL_TOPO_FILE's format
  std::string tune;             // HOCCL_TUNE_FILE's format
  std::string from;             // where it came from, for messages
  std::set<std::string> hosts;  // the nodes it describes (host ids)
};

}  // namespace hoccl

struct hocclComm : public hoccl::TaskOwner {
  static constexpr uint32_t kLiveMagic = 0x484f434d;  // "HOCM"

  uint32_t liveMagic = kLiveMagic;
  // Told apart from an earlier communicator that had the same address:
  // numbered when registered (src/api/handles.cc), never 0 after.
  uint64_t serial = 0;
  int rank = 0;
  int nranks = 1;
  uint64_t commHash = 0;
  int splitCount = 0;
  // hocclCommCreateGroup calls so far per member list (by its hash): the
  // members of one list count alike, whatever else each rank created.
  std::map<uint64_t, uint64_t> groupCounts;
  hoccl::Settings settings;
  // HOCCL_SLICE_BYTES as asked (0: auto); settings.sliceBytes holds the
  // slice finishInit chose from it, and a split chooses its own.
  uint64_t sliceBytesAsked = 0;
  std::string hostId;
  std::unique_ptr<hoccl::Bootstrap> boot;
  // Every connection of this rank, over shared memory or the network
  // (after boot: it uses the bootstrap, so it goes first).
  std::unique_ptr<hoccl::Links> links;
  std::vector<int> localRanks;
  std::vector<bool> isLocal;              // per rank: same node as this one
  hoccl::topo::System system;             // every node, switch and rank
  std::shared_ptr<const hoccl::Grouping> grouping;  // node of each rank, switch of each node
  // HOCCL_TOPO_PROBE's result, used where no HOCCL_TOPO_FILE / HOCCL_TUNE_FILE
  // is given; null without it (comm_probe.cc).
  std::shared_ptr<const hoccl::ProbedFiles> probed;
  const hoccl::AlgoInfo* algo = nullptr;  // HOCCL_ALGO, or null for auto
  std::unique_ptr<hoccl::tune::Tuner> tuner;
  std::set<std::pair<int, int>> loggedChoices;  // (collective, log2 of bytes) already logged
  hoccl::ProgressPolicy policy;  // spinning and timeout of this rank's waits
  // Ranks known to share this rank's machine: its own there or, for a
  // split, its parent's if more; counted in the process's tally from init
  // to destruction when `sharingCounted` (comm.cc).
  int sharingMachine = 0;
  bool sharingCounted = false;
  ~hocclComm() override;
  uint64_t oneShotSeq = 0;  // calls run one-shot over shared memory so far
  uint64_t opSeq = 0;  // collectives run so far (point-to-point calls are not counted)
  // Point-to-point messages so far, per peer: sends to it, receives from it.
  std::vector<uint64_t> sendSeq, recvSeq;

  // A fatal error (mismatch, dead peer, timeout, abort) leaves the
  // communicator unusable; every later call returns it.
  // Written under errMutex; read through fatalError() from any thread.
  hocclResult_t fatalCode = hocclSuccess;
  std::string fatalMsg;
  hoccl::Status fatalError() {
    if (!hasFatal.load(std::memory_order_acquire)) return hoccl::Status();  // the usual case: no lock
    std::lock_guard<std::mutex> lock(errMutex);
    return hoccl::Status(fatalCode, fatalMsg);
  }
  std::atomic<bool> hasFatal{false};  // set once fatalCode is
  std::atomic<bool> abortRequested{false};
  // Non-blocking init (config->blocking = 0): init runs on initThread and
  // initPending stays true until it ends; its error, if any, is fatal. An
  // abort meanwhile sets initAbandoned and the thread frees the comm.
  std::atomic<bool> initPending{false};
  std::thread initThread;
  std::mutex initMutex;
  bool initAbandoned = false;
  std::atomic<int> inFlight{0};  // API calls using this comm right now (abort waits for them)
  // The thread running calls on this comm now (a tag; 0: none): a second
  // thread's call is refused (comm_run.cc, runCalls).
  std::atomic<uint64_t> callThread{0};
  std::mutex errMutex;
  std::string lastError;

  // What a cached schedule depends on besides the communicator (esize: the
  // element size); the host and the device caches share it.
  using ScheduleCacheKey = std::tuple<int, uint64_t, int, bool, uint64_t, size_t>;
  static ScheduleCacheKey cacheKey(const hoccl::ScheduleKey& key, size_t esize) {
    return {static_cast<int>(key.coll), key.count, key.root, key.inPlace, key.maxStepCount, esize};
  }
  std::map<ScheduleCacheKey, std::shared_ptr<const hoccl::Schedule>> schedules;
  // The entry the last cached call used: a loop of one call finds it
  // without a lookup.
  ScheduleCacheKey lastKey{-1, 0, 0, false, 0, 0};
  std::shared_ptr<const hoccl::Schedule> lastSchedule;
  std::shared_ptr<const hoccl::Schedule> lastBuilt;  // the last uncached (point-to-point) schedule

  // Ops made by hocclRedOpCreatePreMulSum: op value hocclNumOps + i is
  // userOps[i]. Destroyed entries stay (not live) so a stale value is named
  // as such, and their slots are reused.
  struct UserOp {
    bool live = false;
    hoccl::DType dtype = hoccl::DType::Float32;
    const void* scalarAt = nullptr;  // hocclScalarDevice: read when a call runs
    alignas(8) unsigned char scalar[8] = {};  // hocclScalarHostImmediate
  };
  std::mutex opsMutex;
  std::vector<UserOp> userOps;

  hoccl::ScratchPool scratch;  // tasks' scratch, kept across calls

  // Calls on device buffers: the executor, made by the first one, and
  // their schedules (without host connections), by the same key as
  // `schedules`. Other threads (a watchdog polling
  // hocclCommGetAsyncError, an abort) see the executor through
  // deviceExecutor(), published once it is complete.
  std::unique_ptr<hoccl::cuda::DeviceExecutor> device;
  std::atomic<hoccl::cuda::DeviceExecutor*> devicePublished{nullptr};
  hoccl::cuda::DeviceExecutor* deviceExecutor() const { return devicePublished.load(std::memory_order_acquire); }
  std::map<ScheduleCacheKey, std::shared_ptr<const hoccl::Schedule>> deviceSchedules;
  // The schedule of a call on device buffers, and the device executor
  // (made now if this is the communicator's first such call).
  hoccl::Status prepareDevice(const hoccl::CollCall& call, const hoccl::ScheduleKey& key,
                              std::shared_ptr<const hoccl::Schedule>* out);
  // The device executor's first recorded failure, made the communicator's
  // fatal error (and told to the peers); Status() when none.
  hoccl::Status pollDevice();

  // Builds (or reuses) this rank's schedule for a call and makes sure every
  // connection it uses exists. The tuner picks the algorithm, channels and
  // pipeline depth for the call's size in bytes (esize: element size).
  // *out stays valid until this communicator's next prepare; *keep, if
  // given, holds it as long as the caller needs it.
  hoccl::Status prepare(const hoccl::ScheduleKey& key, size_t esize, const hoccl::Schedule** out,
                        std::shared_ptr<const hoccl::Schedule>* keep);
  // The same for any call: point-to-point ones (all-to-all(-v), a group's
  // sends and receives) get the pairwise schedules of
  // algorithms/pairwise.h; all-to-all's is cached, the others are built
  // for the call (and held in lastBuilt until the next).
  hoccl::Status prepareCall(const hoccl::CollCall& call, const hoccl::ScheduleKey& key, const hoccl::Schedule** out,
                            std::shared_ptr<const hoccl::Schedule>* keep);
  // A collective's schedule as the tuner chooses it (not cached), one-shot
  // over shared memory included (a schedule with no steps).
  // device: the executor of a call on device buffers, which sets the
  // channels (DeviceExecutor::channelsFor); null for host buffers.
  hoccl::Schedule tunedSchedule(const hoccl::ScheduleKey& key, size_t esize,
                                const hoccl::cuda::DeviceExecutor* device = nullptr);
  // Creates the connections `sched` uses that do not exist yet.
  hoccl::Status connectFor(const hoccl::Schedule& sched);
  // Calls whose schedule depends on more than the cache key (a group's
  // parts, an all-to-all-v layout) are built for each call.
  static bool cachedKind(hoccl::CollKind k) {
    return k != hoccl::CollKind::SendRecv && k != hoccl::CollKind::AllToAllv;
  }
  bool hasSchedule(const hoccl::ScheduleKey& key, size_t esize) const {
    if (!cachedKind(key.coll)) return false;
    return schedules.count(cacheKey(key, esize)) != 0;
  }
  // Records a fatal error and, the first time, tells the other ranks (local
  // ones through their control blocks, the others through the bootstrap), so
  // none of them waits, within about budgetSec.
  void fail(const hoccl::Status& st, bool tellPeers, double budgetSec = 0.5);
  // An abort a peer told us about, if any: through shared memory only
  // (cheap: every poll), or through the network too (a syscall or two).
  hoccl::Status peerAbort(bool network) override;
  // A peer found gone between calls (hocclCommGetAsyncError): a local
  // rank's process that exited without freeing its communicator, or a
  // network connection that broke other than by an orderly close.
  hoccl::Status lostPeer();

  // What the executor asks while it runs this communicator's calls
  // (src/exec/engine.h; comm_run.cc).
  int ownRank() const override { return rank; }
  const hoccl::ProgressPolicy& progressPolicy() const override { return policy; }
  std::string describeSelf() const override;
  hoccl::PeerInfo peerInfo(int peer) const override;
  bool sameProcess(int peer) const override;
  bool sameHost(int peer) const override;
  bool remotePeer(int peer) const override { return !isLocal[peer]; }
  bool usesNetwork() const override { return links->hasNetwork(); }
  bool abortPending() const override { return abortRequested.load(std::memory_order_relaxed); }
  bool peerProcessGone(int peer) override;
  bool peerCrashed(int peer) override;
  hoccl::Status peerSilent(int peer) override { return boot ? boot->peerSilent(peer) : hoccl::Status(); }
  void recordFailure(const hoccl::Status& st, bool tellPeers) override { fail(st, tellPeers); }
  // Stalled calls' signatures, compared across ranks (comm_callcheck.cc).
  hoccl::Status crossCheckCall(const hoccl::CollCall& call, const std::vector<int>& waitingOn) override;
  // Sets the bootstrap's wait hook: a rank waiting for a peer while it sets
  // up a call's connections (setupCall) checks that call the same way, and
  // tells the flight recorder whom it waits for.
  void installCallCheck();
  // Tells the ranks in waitingOn about `current` (unless it is a
  // point-to-point call) and compares `got` with this rank's calls.
  hoccl::Status checkCallNotices(const hoccl::CallSignature& current, bool collective,
                                 const std::vector<int>& waitingOn, std::vector<hoccl::CallNotice> got);
  // The signatures of this rank's last kCallHistory collectives, at
  // opSeq % kCallHistory (written as each is numbered); peers' notices
  // about collectives this rank has not reached yet; per peer, the
  // collective this rank last told it about; the collective whose
  // connections are being set up (numbered opSeq + 1 or later), if any.
  static constexpr size_t kCallHistory = 64;
  hoccl::CallSignature callHistory[kCallHistory];
  std::vector<hoccl::CallNotice> earlyNotices;
  std::vector<uint64_t> noticeSentFor;
  bool settingUp = false;
  hoccl::CallSignature setupCall;
  // HOCCL_DEBUG_DUMP: this communicator's last calls (comm_flight.cc);
  // null without it. setupFlightId: the entry of the call being set up.
  std::unique_ptr<hoccl::FlightRecorder> flight;
  uint64_t setupFlightId = 0;
  hoccl::Connections& connections() override { return *links; }
  hoccl::Doorbell& doorbell() override { return links->doorbell(); }
  // The device executor's connections, from transport/links, with NVML's
  // answer to which GPU may write into which (comm_topo.cc).
  hoccl::Status openDeviceConnections(const hoccl::cuda::DeviceConnOptions& o,
                                      std::unique_ptr<hoccl::cuda::DeviceConnections>* out) override;
  hoccl::ScratchPool* scratchPool() override { return &scratch; }
};

namespace hoccl {

// Fills comm->system (collective over the bootstrap; comm_topo.cc).
Status buildSystem(hocclComm* comm);
// HOCCL_TOPO_PROBE: sets comm->probed, measured or reused, for the nodes
// of `sys` (collective over the bootstrap; comm_probe.cc).
Status probeTopology(hocclComm* comm, const topo::System& sys);
// How many times this process took part in measuring (tests).
int probesMeasuredForTesting();

// Initialises a new communicator `c` (collective over the ranks of the
// unique id). On error the caller frees c.
Status commInit(const UniqueIdData& id, int nranks, int rank, const hocclConfig_t* config, hocclComm* c);
// Everything after the bootstrap exists: node grouping, shared memory, the
// ring connections every ring and chain schedule uses (comm.cc).
Status finishInit(hocclComm* c);
// A rank whose setup fails after the bootstrap exists tells every other
// rank, which would otherwise wait for it until the timeout. One stopped
// by a peer's notice passes that on: the peer's notice to a third rank may
// come after this rank has closed the connection that rank waits on.
// Returns st.
Status tellPeersSetupFailed(hocclComm* c, Status st);
// Communicators made from a parent's (comm_split.cc).
Status commSplit(hocclComm* parent, int color, int key, const hocclConfig_t* config, hocclComm** out);
// hocclCommCreateGroup: collective over `members` (distinct parent ranks,
// in the new communicator's rank order; this rank among them) only.
// afterFailure: the parent failed or is being abandoned (hocclCommShrink
// with HOCCL_SHRINK_ABORT): its abort notices do not stop the exchange.
Status commCreateGroup(hocclComm* parent, const std::vector<int>& members, const hocclConfig_t* config,
                       hocclComm** out, bool afterFailure = false, const char* what = "hocclCommCreateGroup");
// hocclCommCreateGroup after its handle checks: the list is checked
// (range, repeats, the caller among them), then commCreateGroup.
Status commCreateGroupOf(hocclComm* parent, const int* ranks, int nranks, const hocclConfig_t* config,
                         hocclComm** out);
// hocclCommShrink after its handle checks: the exclude list is checked
// (range, repeats, the caller, at least one survivor, flags), then, with
// HOCCL_SHRINK_ABORT, the parent's work in flight is abandoned, and the
// survivors make the new communicator as commCreateGroup does.
Status commShrink(hocclComm* parent, const int* excludeRanksList, int excludeRanksCount, int shrinkFlags,
                  const hocclConfig_t* config, hocclComm** out);
void commFree(hocclComm* comm);
// HOCCL_DEBUG_DUMP (comm_flight.cc): makes and registers c->flight (when
// set); writes the process's dump, saying why, if c has a recorder.
void startFlightRecorder(hocclComm* c);
void dumpFlight(hocclComm* c, const std::string& reason);

// One validated call of the C API, with the key of its schedule.
struct CommCall {
  hocclComm* comm = nullptr;
  CollCall call;
  ScheduleKey key;
  uint64_t commSerial = 0;  // comm->serial when the call was checked (a group runs it later)
  uint64_t flightId = 0;    // its entry in comm->flight, once prepared (0: none)
};
// Runs calls (one, or a group's, possibly of several communicators): builds
// or reuses each schedule and its connections, numbers the calls and hands
// them to the executor. A failure is recorded as the communicator's fatal
// error.
// At destroy: warns (HOCCL_DEBUG=WARN) about each peer whose messages this
// rank never received (a message waiting in a receive connection). The
// receiver is the one that can tell: a sender that destroys at once may
// see its last message not yet read by a receiver that will read it.
void warnUndelivered(hocclComm* comm);
Status runCalls(CommCall* calls, size_t n);

}  // namespace hoccl
