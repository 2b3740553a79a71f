// The PaRO strategy advisor behind hoccl-paro (docs/paro.md): for a model
// (parameters, trainable parameters, micro-steps per step, element sizes)
// and a machine (nodes x ranks per node, as hoccl-sim describes it), the
// collectives each strategy issues per optimizer step, their predicted time
// with hoccl's cost model, and the training state each rank holds.
//
// Groups: "intra" is one node's ranks (costed on a one-node machine with the
// same links), "rail" is the ranks with one local index on every node (a
// communicator of one rank per node: the algorithm its tuner picks, costed
// with one rail's share of the node links, uplinks and node memory, as the
// m rails run at once), "world" is every rank (costed with the algorithm the
// tuner picks for that call, HO-Ring where it wins).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "src/tune/tuner.h"

namespace hoccl {
namespace tune {
namespace paro {

enum class Level { N, I, G };  // whole on every rank, sharded in a node, sharded over all ranks
enum class Group { Intra, Rail, World };

struct Strategy {
  const char* name;
  Level p, g, os;  // parameters, gradients, optimizer state
};
// DDP, ZeRO-1, ZeRO-2, ZeRO-3, MiCS, NIG, NII, IIG, IGG, ING.
const std::vector<Strategy>& strategies();
const char* levelName(Level l);
const char* groupName(Group g);

struct ModelSize {
  double params = 0;      // all parameters (Ψ)
  double trainable = 0;   // trainable ones (Ψ'); <= params
  int accum = 1;          // micro-steps per optimizer step
  int elemBytes = 2;      // bytes per parameter and gradient element (bf16: 2)
  int optimizerBytes = 8; // optimizer state per trainable element besides the fp32 master (Adam: 8)
  int units = 1;          // calls each collective is split into (one per module)
  // Time one rank's optimizer takes per trainable parameter it updates
  // (ns; 0: not costed). A rank updates its share of the optimizer state:
  // all of it under DDP, 1/m or 1/(n m) where the state is sharded, so
  // strategies that shard it step faster where the update is not free.
  double optimizerNs = 0;
};

enum class Phase { Micro, Boundary, Step };
const char* phaseName(Phase p);

// One row of the strategy table: `calls` calls (per micro-step for Micro,
// else per step) of `coll` on `group`, each of `elems` elements (the larger
// side: reduce-scatter input, all-gather output).
struct Call {
  Phase phase;
  Group group;
  CollKind coll;
  double elems;
  int calls;
};
// The collectives of a strategy on nodes x perNode ranks; calls on one-rank
// groups are left out (they move nothing).
std::vector<Call> strategyCalls(const Strategy& s, const ModelSize& model, int nodes, int perNode);

// Training state per rank in bytes: parameters elemBytes x Ψ at p's share,
// gradients elemBytes x Ψ' at g's share, optimizer (4 + optimizerBytes) x Ψ'
// at os's share; shares 1, 1/perNode, 1/(nodes x perNode).
struct StateBytes {
  double params = 0, grads = 0, optimizer = 0;
  double total() const { return params + grads + optimizer; }
};
StateBytes stateBytes(const Strategy& s, const ModelSize& model, int nodes, int perNode);

// One row of a strategy's table, costed: `perStep` calls per optimizer
// step (micro-step rows: times the micro-steps), each of `elems` elements
// (the larger side) and `us` microseconds.
struct CallCost {
  Call call;
  double elems = 0;
  int perStep = 0;
  double us = 0;
};

struct Costed {
  Strategy strategy;
  std::vector<CallCost> calls;
  double microUs = 0, boundaryUs = 0, stepUs = 0;  // micro: all A micro-steps together
  double optimizerUs = 0;                          // the rank's optimizer update (ModelSize::optimizerNs)
  StateBytes state;
  bool fits = true;
  double commUs() const { return microUs + boundaryUs + stepUs; }
  double totalUs() const { return commUs() + optimizerUs; }  // what recommend() ranks by
};

// How a call is costed: the closed-form model (predict), the schedule
// simulator (simulate: the builders' real schedules, piece by piece, on the
// same link model, as hoccl-sim does by default), or Auto: the simulator
// where the group has at most kScheduleMaxRanks ranks. The advisor costs
// dozens of calls, so its bound is lower than hoccl-sim's 512: hoccl-paro
// took about 0.5 s of CPU at 32 ranks, 7 s at 64 and 36 s at 256.
// On the emulated 4:1 shape the closed form priced HO-Ring's mid-sized
// world calls about 20% high where the simulator was within 10%
// (results/20261128-paro-advisor-engine, results/20261128-paro-10).
enum class Engine { Model, Schedule, Auto };
constexpr int kScheduleMaxRanks = 32;
bool parseEngine(const std::string& name, Engine* out);
const char* engineName(Engine e);

class Advisor {
 public:
  // The machine must be rectangular (every node the same number of ranks).
  // intraScale (fitIntraRates) multiplies the copy rates of the intra
  // group's node only: the fit measures a node's ranks copying at once on
  // shared cores, while the world's and rails' copies run while they wait
  // on the network (docs/paro.md, "Intra-node rates from a measurement").
  Advisor(const Machine& machine, std::vector<TuneRule> rules, std::string rulesPath, Engine engine = Engine::Model,
          double intraScale = 1.0);
  bool rectangular(std::string* why) const;
  int nodes() const { return nodes_; }
  int perNode() const { return perNode_; }

  // Predicted time of one call on a group, in microseconds.
  double callUs(Group g, CollKind coll, uint64_t bytes) const;
  Engine engine() const { return engine_; }
  // Every strategy costed; memBytes <= 0: no memory limit.
  std::vector<Costed> evaluate(const ModelSize& model, double memBytes) const;

 private:
  Machine world_;
  int nodes_ = 0, perNode_ = 0;
  Tuner worldTuner_, intraTuner_;       // intra: one node of perNode_ ranks, same links
  Tuner railTuner_;                     // one rail: one rank per node, same links
  Machine railShared_;                  // one rail's share of the links with all perNode_ at once
  Engine engine_ = Engine::Model;
  // The time of one call on machine m with the tuner's choice c, by engine_.
  double costUs(const Machine& m, CollKind coll, const Choice& c, uint64_t bytes) const;
  mutable std::map<std::tuple<int, int, uint64_t>, double> cache_;  // (group, coll, bytes) -> us
};

// Intra-node copy rates fitted to a measured all-gather. Where a node's
// "memory" is a share of cores other jobs also run on (the emulated
// cluster: every node on the host's cores), no default describes it, so a
// caller measures one all-gather of `bytes` on every node's ranks at once
// and the fit scales the intra group's per-rank copy rate (shm) and node
// memory rate together, in their given ratio, until the advisor's own
// intra-node costing (callUs(Intra, ...), same engine) predicts `ms`; the
// Advisor then takes `scale` as its intraScale.
struct IntraFit {
  double scale = 1;         // applied to both rates
  double shmGbps = 0;       // the fitted rates
  double nodeMemGbps = 0;
  double predictedMs = 0;   // the fitted advisor's time for the measured call
  std::string warning;      // set where the fit stopped at a bound of its range
};
constexpr double kIntraFitMinScale = 1e-3, kIntraFitMaxScale = 1e3;
// Returns false (with *why) where the machine has one rank per node.
bool fitIntraRates(const Machine& machine, const std::vector<TuneRule>& rules, const std::string& rulesPath,
                   uint64_t bytes, double ms, IntraFit* fit, std::string* why, Engine engine = Engine::Model);

// The index of the fastest strategy that fits (ties: the least memory), or
// -1 when none fits.
int recommend(const std::vector<Costed>& rows);

}  // namespace paro
}  // namespace tune
}  // namespace hoccl
