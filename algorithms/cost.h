// What the cost model (src/tune/model.h) prices for one algorithm, said by
// the algorithm itself: the phases its schedule runs, each a set of
// concurrent rings or of concurrent messages between ranks, in order. The
// model knows links, latencies and bandwidths; the algorithm knows which
// ranks talk to which, how much and how often. An algorithm's registry row
// (registry.h) carries the function that makes its plan, so the model and
// the tuner never branch per algorithm.
#pragma once

#include <memory>
#include <vector>

#include "algorithms/schedule.h"

namespace hoccl {

// One call to price.
struct CostQuery {
  CollKind coll = CollKind::AllReduce;
  int nranks = 1;
  std::shared_ptr<const Grouping> groups;  // node of each rank, switch of each node
  double bytes = 0;        // the NCCL size of the call (nccl-tests' "size")
  int channels = 1;        // >= 1
  int pipelineChunks = 0;  // 0: the builder's default policy
};

struct CostMessage {
  int from = 0, to = 0;
};

struct CostPhase {
  enum class Kind : uint8_t { Rings, Exchange };
  Kind kind = Kind::Rings;
  std::vector<std::vector<int>> rings;  // Rings: concurrent rings, members in ring order
  std::vector<CostMessage> messages;    // Exchange: concurrent messages (none: a phase with no cost)
  double bytes = 0;                     // per message (rings: per step of each ring)
  int steps = 1;                        // Rings: steps of the phase
  bool reduce = false;                  // the receiver combines what it receives
  int channels = 0;                     // connections it runs on; 0: the call's
  double extraLatencySteps = 0;         // Exchange: latency of further hops (a chain pipelined in slices)
  bool fused = false;                   // runs on the previous phase's channel right after it
  // Exchange that reduces: a rank sending several messages copies each
  // into a slot in a pass of its own before it reduces what arrives
  // (oneshot; tune::LinkModel's shmByReference). The model charges every
  // algorithm one pass per message, at its receiver, and no sender's copy:
  // a ring's, a chain's or doubling's one message a step is that baseline.
  bool staged = false;
};

struct CostPlan {
  const char* shape = "";  // what was costed, e.g. "horing, switch level"
  std::vector<CostPhase> phases;
  int pipelineChunks = 1;  // the phases overlap in a pipeline of this many chunks
};

inline CostPhase ringsPhase(std::vector<std::vector<int>> rings, double bytes, int steps, bool reduce) {
  CostPhase p;
  p.rings = std::move(rings);
  p.bytes = bytes;
  p.steps = steps;
  p.reduce = reduce;
  return p;
}

inline CostPhase exchangePhase(std::vector<CostMessage> messages, double bytes, bool reduce, int channels = 0,
                               double extraLatencySteps = 0, bool staged = false) {
  CostPhase p;
  p.kind = CostPhase::Kind::Exchange;
  p.staged = staged;
  p.messages = std::move(messages);
  p.bytes = bytes;
  p.reduce = reduce;
  p.channels = channels;
  p.extraLatencySteps = extraLatencySteps;
  return p;
}

// Ranks 0..P-1 in order: the flat ring.
std::vector<int> ranksInOrder(int P);

}  // namespace hoccl
