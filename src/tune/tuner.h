// The tuner: which algorithm, how many channels and how deep a pipeline for
// each (collective, size) of a communicator. Under auto, a call small
// enough for the one-shot slots of a one-node communicator runs
// oneshot_shm (HOCCL_BOARD_BYTES; SharedSlots); then rules from a tune file
// (HOCCL_TUNE_FILE) win; HOCCL_ALGO forces the algorithm; otherwise the
// cost model (model.h) ranks every candidate. Every rank holds the same
// machine, slots and rules, so every rank picks the same schedule.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/error.h"
#include "src/tune/model.h"

namespace hoccl {
namespace tune {

// One rule of a tune file: calls of `coll` with lo <= bytes < hi use
// `algo` (and, when non-zero, `channels` and `chunks`).
struct TuneRule {
  CollKind coll = CollKind::AllReduce;
  uint64_t lo = 0, hi = UINT64_MAX;
  AlgoId algo = AlgoId::Ring;
  int channels = 0;
  int chunks = 0;
  int line = 0;  // in the file, for messages
};

struct TuneFile {
  std::string path;
  LinkModel links;  // `base` with the file's `link` and `set` lines applied
  std::vector<TuneRule> rules;
};

// The tune file format (docs/algorithms.md):
//   # comment
//   link shm|net|spine [latency_us=X] [gbps=Y]
//   set node_mem_gbps=X | reduce_gbps=X | reduce_mem_ratio=X | flow_gbps=X ...
//   <collective> <lo>-<hi>|* <algorithm> [channels=N] [chunks=K]
// Collectives: allreduce, reducescatter, allgather, broadcast, reduce;
// sizes in bytes with optional K, M, G suffixes (powers of 1024), hi
// exclusive and may be empty ("1M-"). Errors name the file, the line and
// what was expected.
Status parseTuneFile(const std::string& text, const std::string& path, const LinkModel& base, TuneFile* out);
Status loadTuneFile(const std::string& path, const LinkModel& base, TuneFile* out);

// HO-Ring pipeline depths the model weighs (a tune-file rule may name any
// other with chunks=K). The verifier sweep covers each of them.
inline constexpr int kPipelineDepths[] = {1, 2, 4, 8, 16, 32};

struct Choice {
  AlgoId algo = AlgoId::Ring;
  int nchannels = 1;
  int pipelineChunks = 0;  // horing only; 0 = the builder's default
  double predictedUs = 0;
  std::string why;         // "model", "HOCCL_ALGO", "<file>:<line>", "device rule ...", "HOCCL_BOARD_BYTES=..."
  bool byModel = false;    // the cost model picked it (no rule, nothing forced)
  // Why a forced or ruled algorithm did not run (empty: none did not),
  // e.g. "HOCCL_ALGO=oneshot_shm: ... span 2 nodes".
  std::string fallback;
  std::string explained() const { return fallback.empty() ? why : why + "; fallback: " + fallback; }
};

// A communicator's one-shot slots (oneshot_shm; registry.h,
// AlgoInfo::sharedSlotsOnly), the same on every rank.
struct SharedSlots {
  uint64_t capacity = 0;   // payload bytes of each rank's slot; 0: none (ranks on several nodes)
  uint64_t autoBytes = 0;  // HOCCL_BOARD_BYTES: under auto, calls of up to this many bytes per rank run there
  // What a communicator of `m` would have (tools that describe a machine
  // without one): slots where every rank is on one node, of the size the
  // registry row allows.
  static SharedSlots ofMachine(const Machine& m, uint64_t autoBytes);
};

// Calls on device buffers: all-reduces up to this many bytes run recursive
// doubling, larger ones the ring (chooseForDevice).
inline constexpr uint64_t kDeviceDoublingMaxBytes = uint64_t(256) << 10;

class Tuner {
 public:
  // forcedAlgo: nullptr for auto. channels: 0 lets the model choose
  // (1..maxChannels), else fixed. slots: the communicator's one-shot
  // slots; without them (the default) oneshot_shm never runs.
  Tuner(Machine machine, std::vector<TuneRule> rules, std::string rulesPath, const AlgoInfo* forcedAlgo,
        int channels, SharedSlots slots = {}, int maxChannels = 4);

  // Where the machine's link rates are unknown (Machine::netRateNominal,
  // uplinkRateUnknown), the model weighs each candidate on every machine
  // those rates could make (robustScenarios) and picks the one whose worst
  // ratio to the best of each is least: good over the range, not best at
  // a nominal rate that may not hold.
  //
  // One-shot over shared memory (oneshot_shm) is no candidate of the
  // model: under auto it runs exactly where it fits (see oneShotShmMisfit)
  // and its bytes per rank are at most slots.autoBytes, before any rule,
  // as it did when the communicator decided it before asking the tuner.
  // Forced (HOCCL_ALGO) or named by a rule where it does not fit, the call
  // takes the choice it would get without that, and Choice::fallback says
  // why. Forcing any other algorithm turns it off.
  Choice choose(CollKind coll, uint64_t bytes) const;
  // Why oneshot_shm cannot run a call of `bytes` (NCCL size) on this
  // communicator, or "" where it can: it needs host buffers, 2 ranks or
  // more, one-shot slots (every rank on one node) and at most the slots'
  // capacity and the row's maxBytesPerRank of input per rank.
  std::string oneShotShmMisfit(CollKind coll, uint64_t bytes, bool hostBuffers) const;
  // The machines the tuner weighs: m_ alone where its rates are known;
  // otherwise node links at their nominal rate and at a tenth of it, and,
  // under several leaves, uplinks not oversubscribed, 2:1 and 4:1.
  const std::vector<Machine>& scenarios() const { return scenarios_; }
  // The same for a call on device buffers. A tune-file rule or HOCCL_ALGO
  // wins as in choose(); otherwise the host cost model does not apply (a
  // GPU channel is one CTA that handles its messages one after another, at
  // GPU memory rates), and a rule measured on an H100 (1 to 8 ranks on the
  // GPU; docs/gpu.md, results/20261127-h100-device-algorithms) picks: all-reduce by recursive doubling up to
  // kDeviceDoublingMaxBytes, the ring above; reduce-scatter and all-gather
  // by the ring (one-shot was never faster there); broadcast and reduce as
  // the model picks them. predictedUs is 0: the model has no device costs.
  // Never oneshot_shm: the executor reads and writes its slots with the
  // CPU (a forced or ruled oneshot_shm falls back, saying so).
  // Across hosts the cost model picks, on the device machine
  // (deviceMachine: GPU links inside a node, the proxy's latency and the
  // PCIe cap on the network), among every algorithm that runs across
  // nodes, HO-Ring's pipeline depth included.
  Choice chooseForDevice(CollKind coll, uint64_t bytes) const;
  // Tests: chooseForDevice returns choose()'s pick while set (oneshot_shm
  // aside), so that a call on device buffers runs the schedule of the same
  // call on host buffers and the two can be compared bit for bit.
  static void hostChoicesOnDeviceForTesting(bool on);
  const Machine& machine() const { return m_; }

  // The selection table for sizes lo..hi (factor f): size, choice and the
  // predicted time of every algorithm (hoccl-info --dump-selection).
  std::string table(uint64_t lo, uint64_t hi, int factor) const;

 private:
  // Whether a prediction's steps fit the links' buffers (LinkParams::bufferKB).
  bool stepsFit(const Machine& m, const Prediction& p) const;
  // hostBuffers: oneshot_shm may run (chooseForDevice passes false).
  Choice chooseOn(const Machine& m, const std::vector<Machine>& scenarios, CollKind coll, uint64_t bytes,
                  bool hostBuffers) const;
  // oneshot_shm's choice for a call it fits, said to come from `why`.
  Choice oneShotShmChoice(const Machine& m, CollKind coll, uint64_t bytes, std::string why) const;
  Machine m_;
  std::vector<Machine> scenarios_;  // m_ first
  // Across hosts: m_ and its scenarios as calls on device buffers see them
  // (deviceMachine); unused on one node.
  Machine deviceM_;
  std::vector<Machine> deviceScenarios_;
  std::vector<TuneRule> rules_;
  std::string rulesPath_;
  const AlgoInfo* forced_;
  int channels_, maxChannels_;
  SharedSlots slots_;
};

// See Tuner::scenarios().
std::vector<Machine> robustScenarios(const Machine& m);

// "64K", "1M", "3G", "100" -> bytes; false when malformed or too large.
bool parseSize(const std::string& s, uint64_t* out);
std::string sizeText(uint64_t bytes);  // 65536 -> "64K"

}  // namespace tune
}  // namespace hoccl
