#include "src/comm/comm.h"

#include <sched.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "algorithms/executable.h"
#include "algorithms/pairwise.h"
#include "src/comm/comm_settings.h"
#include "base/clock.h"
#include "base/log.h"
#include "transport/device_conn_mem.h"

namespace hoccl {
namespace {

// Polls before sleeping: yielding polls when ranks outnumber cores (each
// hands the core to a peer that may be the one we wait for), busy polls
// otherwise. Measured on 2 cores, 4 ranks: 8-byte all-reduce 60-100 us with
// 64 busy polls, 7 us with 64-256 yielding polls.
constexpr int kYieldSpins = 128;
// In a communicator that uses the network (docs/algorithms.md, "Small
// messages across nodes: one socket per pair, and waiting ranks").
constexpr int kYieldSpinsRemote = 2048;  // in calls of up to HOCCL_NET_SPIN_BYTES
constexpr int kBusySpins = 20000;

int onlineCpus() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0) return CPU_COUNT(&set);
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

// The most ranks known to share this machine among this process's live
// communicators. A waiting rank yields the core when they outnumber the
// cores, whichever communicator it waits in: PaRO's rail group has one rank
// per node, and one on each of two emulated nodes sharing 2 cores polled
// busily through its calls while the job's 6 other ranks needed the cores
// (rail all-reduce 25.2 ms against 20.5 yielding;
// results/20261129-spin-count-parent).
class MachineSharing {
 public:
  static int enter(int ranks) {
    std::lock_guard<std::mutex> lock(mu());
    live().insert(ranks);
    return *live().rbegin();
  }
  static void leave(int ranks) {
    std::lock_guard<std::mutex> lock(mu());
    auto it = live().find(ranks);
    if (it != live().end()) live().erase(it);
  }

 private:
  // Never destroyed: a communicator may be freed during exit, after
  // function-local statics are gone.
  static std::mutex& mu() {
    static std::mutex* m = new std::mutex;
    return *m;
  }
  static std::multiset<int>& live() {
    static std::multiset<int>* s = new std::multiset<int>;
    return *s;
  }
};

// HOCCL_ALGO: null for auto (the tuner decides per call).
const AlgoInfo* forcedAlgorithm(const Settings& s) {
  if (s.algo == "auto") return nullptr;
  return findAlgorithm(s.algo.c_str());
}

// Whether every node's ranks are threads of one process (the same on every
// rank, so every rank's tuner makes the same choices).
bool nodesAreOneProcess(const std::vector<RankInfo>& table) {
  std::map<std::string, const RankInfo*> first;  // per node, its first rank
  for (const RankInfo& r : table) {
    if (!sameProcess(*first.emplace(r.hostId, &r).first->second, r)) return false;
  }
  return true;
}

// The cost model of this communicator's machine, with the tune file's
// links and rules; every rank must have read the same file.
// `ranksPerCore`: ranks per core on this rank's machine (latencies scale).
Status makeTuner(hocclComm* c, double ranksPerCore) {
  tune::LinkModel links;
  tune::TuneFile file;
  uint64_t hash = 0;
  if (!c->settings.tuneFile.empty() || c->probed) {
    if (!c->settings.tuneFile.empty())
      HOCCL_TRY(tune::loadTuneFile(c->settings.tuneFile, links, &file).context("HOCCL_TUNE_FILE"));
    else HOCCL_TRY(tune::parseTuneFile(c->probed->tune, c->probed->from, links, &file).context("HOCCL_TOPO_PROBE"));
    for (const tune::TuneRule& r : file.rules)
      hash = hash * 1000003u + (uint64_t(r.coll) << 56) + r.lo * 31 + r.hi * 7 + uint64_t(r.algo) * 131 +
             uint64_t(r.channels) * 17 + uint64_t(r.chunks);
    links = file.links;
  }
  // Each rank's rules, and whether it moves device buffers across hosts
  // through the copy path (HOCCL_NET_DEVICE_PATH is a rank's own choice):
  // the model prices the copy path where any rank takes it, so every
  // rank's tuner agrees.
  struct Shared {
    uint64_t rules;
    uint64_t copyPath;
  };
  std::vector<Shared> shared(c->nranks, Shared{0, 0});
  shared[c->rank] = Shared{hash, c->settings.netDevicePath == "copy" ? 1u : 0u};
  HOCCL_TRY(c->boot->allGather(shared.data(), sizeof(Shared)).context("comparing tune files"));
  for (int r = 0; r < c->nranks; ++r) {
    if (shared[r].rules != hash)
      return errorf(hocclInvalidUsage,
                    "HOCCL_TUNE_FILE differs between ranks: rank %d's rules are not rank %d's; every rank must "
                    "read the same file", r, c->rank);
    if (shared[r].copyPath) links.device.copyPath = true;
  }
  // The slot window of a device connection follows the communicator's own
  // HOCCL_SLICE_BYTES and HOCCL_SLOTS (the same on every rank).
  links.device.windowKB =
      double(cuda::kDevSlots) * double(cuda::deviceSlotBytes(c->settings.sliceBytes, c->settings.slots)) / 1024;
  tune::Machine m = tune::Machine::fromSystem(c->system, links);
  m.links.oversubscription = std::max(1.0, ranksPerCore);
  m.links.shmByReference = nodesAreOneProcess(c->boot->table());
  // The one-shot slots exist on every rank or on none (every rank on one
  // node), and HOCCL_BOARD_BYTES must match: every rank's tuner agrees.
  tune::SharedSlots slots;
  if (OneShotSlots* s = c->links->oneShotSlots()) slots.capacity = s->capacity();
  slots.autoBytes = c->settings.oneShotShmBytes;
  c->tuner = std::make_unique<tune::Tuner>(std::move(m), file.rules, file.path, c->algo, c->settings.nchannels, slots);
  return Status();
}

}  // namespace

Status finishInit(hocclComm* c) {
  double t0 = nowSec();
  startFlightRecorder(c);
  c->installCallCheck();
  const auto& table = c->boot->table();
  std::vector<int> remote;
  c->isLocal.assign(c->nranks, false);
  for (int r = 0; r < c->nranks; ++r) {
    c->isLocal[r] = c->hostId == table[r].hostId;
    if (c->isLocal[r]) c->localRanks.push_back(r);
    else remote.push_back(r);
  }
  HOCCL_TRY(buildSystem(c));
  // Every rank of a communicator that spans nodes has a remote peer, so
  // all choose the same slice.
  c->sliceBytesAsked = c->settings.sliceBytes;
  if (c->settings.sliceBytes == 0) c->settings.sliceBytes = defaultSliceBytes(!remote.empty());
  LinksOptions lo;
  lo.rank = c->rank;
  lo.commHash = c->commHash;
  lo.isLocal = c->isLocal;
  lo.localAddr = c->boot->listenAddress();
  lo.localIfname = c->boot->interfaceName();
  HOCCL_TRY(Links::create(*c->boot, c->settings, lo, &c->links));
  if (c->nranks > 1) {
    std::vector<ConnRequest> ring;
    int next = (c->rank + 1) % c->nranks, prev = (c->rank + c->nranks - 1) % c->nranks;
    for (int ch = 0; ch < std::max(c->settings.nchannels, 1); ++ch) {
      ring.push_back({next, ch, true});
      ring.push_back({prev, ch, false});
    }
    HOCCL_TRY(c->links->connect(ring));
  }
  // Ranks on this physical machine, not node: emulated nodes share the
  // cores. More of them than cores: a spinning rank steals the core its
  // peer needs, so it yields between polls instead of pausing, and every
  // step also waits for the scheduler (the cost model's latencies scale).
  // A split also counts its parent's ranks here (sharingMachine, set by
  // commSplit), as every member's parent does: the tuners agree.
  int onMachine = 0;
  for (const RankInfo& r : table) onMachine += strcmp(r.machineId, table[c->rank].machineId) == 0;
  onMachine = std::max(onMachine, c->sharingMachine);
  c->algo = forcedAlgorithm(c->settings);
  HOCCL_TRY(makeTuner(c, double(onMachine) / std::max(1, onlineCpus())));
  // How this rank waits is its own choice, so it also counts the ranks of
  // this process's other communicators (a group made by a fresh init).
  c->sharingMachine = onMachine;
  const int sharing = MachineSharing::enter(onMachine);
  c->sharingCounted = true;
  int spin = c->settings.spinIters;
  c->policy.timeoutSec = c->settings.timeoutSec;
  c->policy.timeoutFrom = c->settings.timeoutFrom;
  c->policy.yieldWhileSpinning = sharing > onlineCpus();
  c->policy.remoteSpinIters = spin >= 0 ? spin : c->policy.yieldWhileSpinning ? kYieldSpinsRemote : kBusySpins;
  if (spin < 0) spin = c->policy.yieldWhileSpinning ? kYieldSpins : kBusySpins;
  c->policy.spinIters = spin;
  c->policy.remoteSpinMaxBytes = c->settings.netSpinBytes;
  HINFO(kSubInit, "rank %d/%d: %zu local ranks, %d cpus, algorithm %s, slice %llu B x %d slots, spin %d "
        "(%d on the network), transport setup %.1f ms",
        c->rank, c->nranks, c->localRanks.size(), onlineCpus(), c->algo ? c->algo->name : "auto",
        static_cast<unsigned long long>(c->settings.sliceBytes), c->settings.slots, spin,
        c->policy.remoteSpinIters, (nowSec() - t0) * 1e3);
  return Status();
}

Status tellPeersSetupFailed(hocclComm* c, Status st) {
  if (st.ok() || !c->boot || c->nranks < 2) return st;
  Status first = c->boot->abortSeen();
  // A connection a peer closed under us: that peer is usually failing for
  // a reason of its own (out of descriptors, say), whose notice comes
  // within moments and says more than the closed connection.
  for (int i = 0; i < 4 && first.ok() && st.code() == hocclRemoteError; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    first = c->boot->pollAbort();
  }
  std::string msg = !first.ok() ? first.message()
                                : "rank " + std::to_string(c->rank) + " (pid " + std::to_string(getpid()) + " on " +
                                      c->hostId + ") could not set up the communicator: " + st.message();
  c->boot->broadcastAbort(first.ok() ? st.code() : first.code(), msg, std::vector<bool>(c->nranks, true),
                          std::min(2.0, c->settings.timeoutSec));
  return !first.ok() && st.code() == hocclRemoteError ? first : st;
}

Status commInit(const UniqueIdData& id, int nranks, int rank, const hocclConfig_t* config, hocclComm* c) {
  double t0 = nowSec();
  setLogRank(rank);
  HOCCL_TRY(commSettings(config, &c->settings));
  c->rank = rank;
  c->nranks = nranks;
  c->hostId = localHostId(c->settings);
  c->commHash = id.magic;
  if (id.rootStartedByInit && rank == 0) {
    SockAddr bound;
    Status st = startRoot(id.root, id.magic, c->settings.timeoutSec, &bound, c->settings.timeoutFrom);
    if (!st.ok() && st.message().find("in use") == std::string::npos) {
      // The host named in HOCCL_COMM_ID may not be a local address we can
      // bind; listen on every interface at that port instead.
      SockAddr any{};
      any.u.sa.sa_family = id.root.u.sa.sa_family;
      any.setPort(id.root.port());
      st = startRoot(any, id.magic, c->settings.timeoutSec, &bound, c->settings.timeoutFrom);
    }
    HOCCL_TRY(st.context("HOCCL_COMM_ID rendezvous"));
  }
  BootstrapOptions bo;
  bo.rank = rank;
  bo.nranks = nranks;
  bo.timeoutSec = c->settings.timeoutSec;
  bo.connectRetries = c->settings.connectRetries;
  bo.hostId = c->hostId;
  bo.machineId = localMachineId();
  bo.fingerprint = c->settings.fingerprint();
  bo.ifnameRule = c->settings.socketIfname;
  bo.heartbeat = heartbeatOptions(c->settings);
  HOCCL_TRY(Bootstrap::join(id, bo, &c->boot));
  double t1 = nowSec();
  HOCCL_TRY(tellPeersSetupFailed(c, finishInit(c)));
  HINFO(kSubInit, "rank %d/%d ready: bootstrap %.1f ms, total %.1f ms", rank, nranks, (t1 - t0) * 1e3,
        (nowSec() - t0) * 1e3);
  return Status();
}

}  // namespace hoccl

hocclComm::~hocclComm() {
  if (sharingCounted) hoccl::MachineSharing::leave(sharingMachine);
}

namespace hoccl {

void commFree(hocclComm* comm) {
  comm->liveMagic = 0;
  delete comm;
}

void warnUndelivered(hocclComm* comm) {
  if (!comm->links || !comm->fatalError().ok()) return;
  // Channels a schedule may use (HOCCL_NCHANNELS and the point-to-point
  // ones): connections are looked up, never made, here.
  constexpr int kChannels = 64;
  for (int peer = 0; peer < comm->nranks; ++peer) {
    if (peer == comm->rank) continue;
    int unread = 0;
    uint64_t firstCount = 0;
    uint8_t firstType = 0, firstColl = 0;
    for (int ch = 0; ch < kChannels; ++ch) {
      if (RecvConn* r = comm->links->recvConn(peer, ch)) {
        const SlotHeader* h = nullptr;
        const void* payload = nullptr;
        if (r->tryPeek(&h, &payload)) {
          if (unread++ == 0) {
            firstCount = h->count;
            firstType = h->dtype;
            firstColl = h->coll;
          }
        }
      }
    }
    if (unread)
      HWARN(kSubAll, "rank %d: destroyed with %s from rank %d never received (the first: %s of %llu %s); a small "
            "send returns before its receive is posted, so it is lost if none is", comm->rank,
            unread == 1 ? "a message" : "messages", peer,
            firstColl == static_cast<uint8_t>(CollKind::SendRecv) ? "a hocclSend"
                                                                 : collName(static_cast<CollKind>(firstColl)),
            static_cast<unsigned long long>(firstCount),
            firstType < kNumDTypes ? dtypeName(static_cast<DType>(firstType)) : "elements");
  }
}

}  // namespace hoccl

using namespace hoccl;

// The tuner picks the algorithm, channels and pipeline depth for a
// collective's size, one-shot over shared memory included (the rule that
// takes small calls of a one-node communicator there lives in the tuner,
// so hoccl-info --dump-selection and this log name it as the choice, and a
// forced oneshot_shm that does not fit falls back there, saying why); what
// executes is built by the same function the verifier tests check
// (algorithms/executable.h).
Schedule hocclComm::tunedSchedule(const ScheduleKey& key0, size_t esize, const cuda::DeviceExecutor* device) {
  const uint64_t bytes = (inputCount(key0) > outputCount(key0) ? inputCount(key0) : outputCount(key0)) * esize;
  const tune::Choice choice = device ? tuner->chooseForDevice(key0.coll, bytes) : tuner->choose(key0.coll, bytes);
  ScheduleKey key = key0;
  key.groups = grouping;  // (not part of the cache key: one per communicator)
  key.nchannels = choice.nchannels;
  key.pipelineChunks = choice.pipelineChunks;
  const AlgoInfo& use = algorithmInfo(choice.algo);
  // The tuner's channels are host threads' worth; on a GPU a channel is a
  // CTA, and one CTA moves a fraction of what the device can.
  if (device) {
    key.nchannels = device->channelsFor(bytes);
    if (use.maxChannels > 0 && key.coll != CollKind::AllToAll) key.nchannels = std::min(key.nchannels, use.maxChannels);
  }
  // All-to-all on the device: channelsFor's CTAs, each exchanging its part
  // of every block with one peer at a time (the host's pairwise schedule
  // runs a channel per peer and direction, 2(P-1) CTAs).
  Schedule built = device && key.coll == CollKind::AllToAll ? buildAllToAllShifted(key)
                                                              : buildExecutable(use, key, settings.checkCalls);
  int bucket = 0;
  while (bucket < 63 && (uint64_t{2} << bucket) <= bytes) ++bucket;
  if (rank == 0 && loggedChoices.insert({static_cast<int>(key.coll), bucket}).second) {
    HINFO(kSubTune, "%s of %llu bytes: %s, %d channel(s), pipeline %d, predicted %.1f us (%s)", collName(key.coll),
          static_cast<unsigned long long>(bytes), built.algorithm, key.nchannels, key.pipelineChunks,
          choice.predictedUs, choice.explained().c_str());
  }
  return built;
}

Status hocclComm::connectFor(const Schedule& sched) {
  std::set<ConnRequest> missing;
  for (size_t ch = 0; ch < sched.channels.size(); ++ch) {
    const int link = linkOf(sched.channels, ch);
    for (const Step& s : sched.channels[ch].steps) {
      if (s.recvPeer >= 0 && !links->recvConn(s.recvPeer, link)) missing.insert({s.recvPeer, link, false});
      if (s.sendPeer >= 0 && !links->sendConn(s.sendPeer, link)) missing.insert({s.sendPeer, link, true});
    }
  }
  if (missing.empty()) return Status();
  return links->connect(std::vector<ConnRequest>(missing.begin(), missing.end()));
}

namespace {

// All-to-all(-v) and a group's sends and receives: algorithms/pairwise.h,
// with the zero-copy marks that let large sends go by reference.
std::shared_ptr<const Schedule> pairwiseSchedule(const CollCall& call, const ScheduleKey& key) {
  Schedule built;
  if (key.coll != CollKind::SendRecv) {
    built = buildAllToAll(key);
  } else {
    // The schedule counts bytes: the parts may differ in type.
    std::vector<PointOp> ops(call.parts.size());
    for (size_t i = 0; i < ops.size(); ++i) {
      const PeerPart& p = call.parts[i];
      ops[i].peer = p.peer;
      ops[i].send = p.send;
      ops[i].count = p.count * dtypeSize(p.dtype);
      ops[i].at = Slice{Buf::Part, 0, static_cast<uint32_t>(i)};
    }
    built = buildPointToPoint(key, ops, "pairwise");
  }
  markZeroCopyEligible(&built);
  return std::make_shared<const Schedule>(std::move(built));
}

}  // namespace

Status hocclComm::prepareCall(const CollCall& call, const ScheduleKey& key, const Schedule** out,
                              std::shared_ptr<const Schedule>* keep) {
  if (cachedKind(key.coll)) return prepare(key, dtypeSize(call.dtype), out, keep);
  auto sched = pairwiseSchedule(call, key);
  HOCCL_TRY(connectFor(*sched));
  *out = sched.get();
  if (keep) *keep = sched;
  lastBuilt = std::move(sched);
  return Status();
}

Status hocclComm::prepare(const ScheduleKey& key0, size_t esize, const Schedule** out,
                          std::shared_ptr<const Schedule>* keep) {
  const ScheduleCacheKey k = cacheKey(key0, esize);
  if (k != lastKey || !lastSchedule) {
    auto it = schedules.find(k);
    if (it == schedules.end()) {
      if (key0.coll == CollKind::AllToAll && algo && rank == 0 &&
          loggedChoices.insert({static_cast<int>(key0.coll), 64}).second)  // once per communicator
        HINFO(kSubTune, "AllToAll: pairwise exchange (fallback: HOCCL_ALGO=%s does not apply: every all-to-all "
              "is pairwise)", algo->name);
      auto sched = key0.coll == CollKind::AllToAll ? pairwiseSchedule(CollCall{}, key0)
                                                   : std::make_shared<const Schedule>(tunedSchedule(key0, esize));
      HOCCL_TRY(connectFor(*sched));
      if (schedules.size() > 256) schedules.clear();
      it = schedules.emplace(k, std::move(sched)).first;
    }
    lastKey = k;
    lastSchedule = it->second;
  }
  *out = lastSchedule.get();
  if (keep) *keep = lastSchedule;
  return Status();
}

void hocclComm::fail(const Status& st, bool tellPeers, double budgetSec) {
  bool first = false;
  {
    std::lock_guard<std::mutex> lock(errMutex);
    if (fatalCode == hocclSuccess) {
      fatalCode = st.code();
      fatalMsg = st.message();
      hasFatal.store(true, std::memory_order_release);
      first = true;
    }
  }
  if (first && flight) flight->noteFatal(st.message());
  if (!tellPeers || !first) return;
  // Messages made here already start with "rank <this rank>"; others get it.
  const std::string me = "rank " + std::to_string(rank);
  const std::string& text = st.message();
  bool named = text.compare(0, me.size(), me) == 0 && (text.size() == me.size() || !isdigit(text[me.size()]));
  std::string msg = named ? text : me + ": " + text;
  if (links) links->broadcastAbort(st.code(), msg);
  // Ranks on other nodes may not talk to this one (or to the culprit) at
  // all in the current call; without a notice they would wait for the
  // timeout.
  if (links && links->hasNetwork() && boot) {
    std::vector<bool> remote(nranks);
    for (int r = 0; r < nranks; ++r) remote[r] = !isLocal[r];
    boot->broadcastAbort(st.code(), msg, remote, budgetSec);
  }
}

Status hocclComm::peerAbort(bool network) {
  if (!network && (!links || !links->abortFlagged())) return Status();  // every pass of the progress loop
  int code = 0;
  std::string msg;
  if (links && links->abortNotice(&code, &msg))
    return Status(static_cast<hocclResult_t>(code), "rank " + std::to_string(rank) + " stopped because " + msg);
  if (network && links && links->hasNetwork() && boot) {
    Status st = boot->pollAbort();
    if (!st.ok()) return Status(st.code(), "rank " + std::to_string(rank) + " stopped because " + st.message());
  }
  return Status();
}

Status hocclComm::lostPeer() {
  int pid = 0;
  for (int r = 0; links && r < nranks; ++r) {
    if (r != rank && links->localPeerExited(r, true, &pid))
      return hoccl::errorf(hocclRemoteError, "rank %d: peer rank %d (pid %d on %s) has exited without freeing its "
                           "communicator (found between calls)", rank, r, pid, hostId.c_str());
  }
  for (int r = 0; boot && r < nranks; ++r) {
    Status silent = boot->peerSilent(r);
    if (!silent.ok()) return hoccl::Status(silent.code(), silent.message() + " (found between calls)");
  }
  int peer = -1;
  std::string why;
  if (links && links->lostRemotePeer(&peer, &why)) {
    const RankInfo& info = boot->table()[peer];
    return hoccl::errorf(hocclRemoteError, "rank %d: lost peer rank %d (pid %d on %s) between calls: %s", rank, peer,
                         info.pid, info.hostId, why.c_str());
  }
  return Status();
}
