// The tuner: which algorithm, how many channels and how deep a pipeline for
// each (collective, size) of a communicator. Rules from a tune file
// (HOCCL_TUNE_FILE) win; HOCCL_ALGO forces the algorithm; otherwise the
// cost model (model.h) ranks every candidate. Every rank holds the same
// machine and rules, so every rank picks the same schedule.
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
  std::string why;         // "model", "HOCCL_ALGO", "<file>:<line>", "device rule ..."
  bool byModel = false;    // the cost model picked it (no rule, nothing forced)
};

// Calls on device buffers: all-reduces up to this many bytes run recursive
// doubling, larger ones the ring (chooseForDevice).
inline constexpr uint64_t kDeviceDoublingMaxBytes = uint64_t(256) << 10;

class Tuner {
 public:
  // forcedAlgo: nullptr for auto. channels: 0 lets the model choose
  // (1..maxChannels), else fixed.
  Tuner(Machine machine, std::vector<TuneRule> rules, std::string rulesPath, const AlgoInfo* forcedAlgo,
        int channels, int maxChannels = 4);

  // Where the machine's link rates are unknown (Machine::netRateNominal,
  // uplinkRateUnknown), the model weighs each candidate on every machine
  // those rates could make (robustScenarios) and picks the one whose worst
  // ratio to the best of each is least: good over the range, not best at
  // a nominal rate that may not hold.
  Choice choose(CollKind coll, uint64_t bytes) const;
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
  // Across hosts the cost model picks, on the device machine
  // (deviceMachine: GPU links inside a node, the proxy's latency and the
  // PCIe cap on the network), among every algorithm that runs across
  // nodes, HO-Ring's pipeline depth included.
  Choice chooseForDevice(CollKind coll, uint64_t bytes) const;
  // Tests: chooseForDevice returns choose()'s pick while set, so that a
  // call on device buffers runs the schedule of the same call on host
  // buffers and the two can be compared bit for bit.
  static void hostChoicesOnDeviceForTesting(bool on);
  const Machine& machine() const { return m_; }

  // The selection table for sizes lo..hi (factor f): size, choice and the
  // predicted time of every algorithm (hoccl-info --dump-selection).
  std::string table(uint64_t lo, uint64_t hi, int factor) const;

 private:
  // Whether a prediction's steps fit the links' buffers (LinkParams::bufferKB).
  bool stepsFit(const Machine& m, const Prediction& p) const;
  Choice chooseOn(const Machine& m, const std::vector<Machine>& scenarios, CollKind coll, uint64_t bytes) const;
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
};

// See Tuner::scenarios().
std::vector<Machine> robustScenarios(const Machine& m);

// "64K", "1M", "3G", "100" -> bytes; false when malformed or too large.
bool parseSize(const std::string& s, uint64_t* out);
std::string sizeText(uint64_t bytes);  // 65536 -> "64K"

}  // namespace tune
}  // namespace hoccl
