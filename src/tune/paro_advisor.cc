// The PaRO strategy advisor (paro_advisor.h).
#include "src/tune/paro_advisor.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

#include "src/tune/sim.h"

namespace hoccl {
namespace tune {
namespace paro {

const std::vector<Strategy>& strategies() {
  static const std::vector<Strategy> all = {
      {"DDP", Level::N, Level::N, Level::N},    {"ZeRO-1", Level::N, Level::N, Level::G},
      {"ZeRO-2", Level::N, Level::G, Level::G}, {"ZeRO-3", Level::G, Level::G, Level::G},
      {"MiCS", Level::I, Level::I, Level::I},   {"NIG", Level::N, Level::I, Level::G},
      {"NII", Level::N, Level::I, Level::I},    {"IIG", Level::I, Level::I, Level::G},
      {"IGG", Level::I, Level::G, Level::G},    {"ING", Level::I, Level::N, Level::G},
  };
  return all;
}

const char* levelName(Level l) { return l == Level::N ? "N" : l == Level::I ? "I" : "G"; }
const char* groupName(Group g) { return g == Group::Intra ? "intra" : g == Group::Rail ? "rail" : "world"; }
const char* phaseName(Phase p) { return p == Phase::Micro ? "micro" : p == Phase::Boundary ? "boundary" : "step"; }

namespace {

// The group whose ranks hold one shard at `level` together (I: a node's
// ranks split the buffer; G: all ranks do).
Group shardGroup(Level l) { return l == Level::I ? Group::Intra : Group::World; }

double share(Level l, int nodes, int perNode) {
  return l == Level::N ? 1.0 : l == Level::I ? 1.0 / perNode : 1.0 / (double(nodes) * perNode);
}

}  // namespace

std::vector<Call> strategyCalls(const Strategy& s, const ModelSize& model, int nodes, int perNode) {
  std::vector<Call> calls;
  const double all = model.params, train = model.trainable;
  // Sharded parameters are gathered before the forward and again before the backward.
  if (s.p != Level::N) calls.push_back({Phase::Micro, shardGroup(s.p), CollKind::AllGather, all, 2});
  // Sharded gradients are reduce-scattered every micro-step.
  if (s.g != Level::N) calls.push_back({Phase::Micro, shardGroup(s.g), CollKind::ReduceScatter, train, 1});
  // At the boundary, from the gradients' level to the optimizer state's.
  if (s.g == Level::N && s.os == Level::N)
    calls.push_back({Phase::Boundary, Group::World, CollKind::AllReduce, train, 1});
  else if (s.g == Level::N && s.os == Level::G)
    calls.push_back({Phase::Boundary, Group::World, CollKind::ReduceScatter, train, 1});
  else if (s.g == Level::I && s.os == Level::I)
    calls.push_back({Phase::Boundary, Group::Rail, CollKind::AllReduce, train / perNode, 1});
  else if (s.g == Level::I && s.os == Level::G)
    calls.push_back({Phase::Boundary, Group::Rail, CollKind::ReduceScatter, train / perNode, 1});
  // After the step, from the optimizer state's level back to the parameters'.
  if (s.p == Level::N && s.os != Level::N)
    calls.push_back({Phase::Step, shardGroup(s.os), CollKind::AllGather, train, 1});
  else if (s.p == Level::I && s.os == Level::G)
    calls.push_back({Phase::Step, Group::Rail, CollKind::AllGather, train / perNode, 1});
  // Calls on one-rank groups move nothing.
  const int size[] = {perNode, nodes, nodes * perNode};
  calls.erase(std::remove_if(calls.begin(), calls.end(), [&](const Call& c) { return size[int(c.group)] <= 1; }),
              calls.end());
  return calls;
}

StateBytes stateBytes(const Strategy& s, const ModelSize& model, int nodes, int perNode) {
  StateBytes b;
  b.params = model.elemBytes * model.params * share(s.p, nodes, perNode);
  b.grads = model.elemBytes * model.trainable * share(s.g, nodes, perNode);
  b.optimizer = (4.0 + model.optimizerBytes) * model.trainable * share(s.os, nodes, perNode);
  return b;
}

namespace {
int ranksPerNode(const Machine& m) { return m.nnodes() > 0 ? m.nranks() / m.nnodes() : 0; }
// The links of one node of `m` costed alone. A node of a multi-node job
// shares its cores with the job's network threads, so its messages cost
// msgCpuUs, not the one-node job's localMsgCpuUs (model.h).
LinkModel nodeLinks(const Machine& m, double scale) {
  LinkModel l = m.links;
  if (m.nnodes() > 1) l.localMsgCpuUs = l.msgCpuUs;
  l.shm.gbps *= scale;
  l.nodeMemGbps *= scale;
  return l;
}
// The machine one rail runs on: one rank on every node, under the same
// leaves. With `rails` of them at once (the node's ranks, each on its own
// rail), one rail gets its share of what they all use: a node link carries
// rails/NICs of them, an uplink and a node's memory all of them. Cores need
// no scaling: each rank already has 1/oversubscription of one.
Machine railMachine(const Machine& m, int rails) {
  Machine r;
  r.leafOf = m.leafOf;
  for (int n = 0; n < m.nnodes(); ++n) r.nodeOf.push_back(n);
  r.links = m.links;
  if (rails > 1) {
    int nics = rails;
    for (int n = 0; n < m.nnodes(); ++n) nics = std::min(nics, m.nics(n));
    const double perLink = double(rails) / std::max(nics, 1);
    r.links.net.gbps /= perLink;
    r.links.net.burstKB /= perLink;
    r.links.spine.gbps /= rails;
    r.links.spine.burstKB /= rails;
    r.links.nodeMemGbps /= rails;
  }
  return r;
}
}  // namespace

bool parseEngine(const std::string& name, Engine* out) {
  if (name == "model") *out = Engine::Model;
  else if (name == "schedule") *out = Engine::Schedule;
  else if (name == "auto") *out = Engine::Auto;
  else return false;
  return true;
}

const char* engineName(Engine e) { return e == Engine::Model ? "model" : e == Engine::Schedule ? "schedule" : "auto"; }

Advisor::Advisor(const Machine& machine, std::vector<TuneRule> rules, std::string rulesPath, Engine engine,
                 double intraScale)
    : world_(machine),
      nodes_(machine.nnodes()),
      perNode_(ranksPerNode(machine)),
      worldTuner_(machine, rules, rulesPath, nullptr, 0),
      intraTuner_(Machine::rectangular(1, std::max(perNode_, 1), 1, nodeLinks(machine, intraScale)), rules, rulesPath,
                  nullptr, 0),
      railTuner_(railMachine(machine, 1), rules, rulesPath, nullptr, 0),
      railShared_(railMachine(machine, perNode_)),
      engine_(engine) {}

bool Advisor::rectangular(std::string* why) const {
  std::map<int, int> count;
  for (int n : world_.nodeOf) ++count[n];
  for (const auto& [node, c] : count) {
    if (c != perNode_ || int(count.size()) != nodes_) {
      *why = "every node must have the same number of ranks (node " + std::to_string(node) + " has " +
             std::to_string(c) + ", " + std::to_string(world_.nranks()) + " ranks on " + std::to_string(nodes_) +
             " nodes)";
      return false;
    }
  }
  return true;
}

double Advisor::costUs(const Machine& m, CollKind coll, const Choice& c, uint64_t bytes) const {
  const bool sched = engine_ == Engine::Schedule || (engine_ == Engine::Auto && m.nranks() <= kScheduleMaxRanks);
  if (sched) {
    const SimResult r = simulate(m, coll, c.algo, bytes, c.nchannels, c.pipelineChunks);
    if (r.ok) return r.us;
  }
  return predict(m, coll, c.algo, bytes, c.nchannels, c.pipelineChunks).us;
}

double Advisor::callUs(Group g, CollKind coll, uint64_t bytes) const {
  const auto key = std::make_tuple(int(g), int(coll), bytes);
  auto hit = cache_.find(key);
  if (hit != cache_.end()) return hit->second;
  double us = 0;
  if (g != Group::Rail) {
    const Tuner& t = g == Group::Intra ? intraTuner_ : worldTuner_;
    if (t.machine().nranks() > 1) us = costUs(t.machine(), coll, t.choose(coll, bytes), bytes);
  } else if (nodes_ > 1) {
    // The m rails at once, each a communicator of one rank per node: the
    // algorithm its tuner picks (on the rail's own machine, as the rail's
    // communicator would), costed with the rail's share of the links.
    us = costUs(railShared_, coll, railTuner_.choose(coll, bytes), bytes);
  }
  cache_[key] = us;
  return us;
}

std::vector<Costed> Advisor::evaluate(const ModelSize& model, double memBytes) const {
  std::vector<Costed> rows;
  const int units = std::max(model.units, 1);
  for (const Strategy& s : strategies()) {
    Costed row;
    row.strategy = s;
    for (const Call& c : strategyCalls(s, model, nodes_, perNode_)) {
      const uint64_t bytes = uint64_t(std::llround(c.elems * model.elemBytes / units));
      const double each = callUs(c.group, c.coll, std::max<uint64_t>(bytes, 1));
      const int perStep = c.calls * units * (c.phase == Phase::Micro ? model.accum : 1);
      row.calls.push_back({c, c.elems / units, perStep, each});
      const double us = each * perStep;
      if (c.phase == Phase::Micro) row.microUs += us;
      else if (c.phase == Phase::Boundary) row.boundaryUs += us;
      else row.stepUs += us;
    }
    row.optimizerUs = model.optimizerNs * model.trainable * share(s.os, nodes_, perNode_) / 1e3;
    row.state = stateBytes(s, model, nodes_, perNode_);
    row.fits = memBytes <= 0 || row.state.total() <= memBytes;
    rows.push_back(row);
  }
  return rows;
}

namespace {
double intraAllGatherMs(const Machine& base, double scale, const std::vector<TuneRule>& rules,
                        const std::string& rulesPath, uint64_t bytes, Engine engine) {
  return Advisor(base, rules, rulesPath, engine, scale).callUs(Group::Intra, CollKind::AllGather, bytes) / 1e3;
}
}  // namespace

bool fitIntraRates(const Machine& machine, const std::vector<TuneRule>& rules, const std::string& rulesPath,
                   uint64_t bytes, double ms, IntraFit* fit, std::string* why, Engine engine) {
  if (ranksPerNode(machine) <= 1) {
    *why = "an intra-node all-gather needs nodes of more than one rank";
    return false;
  }
  if (!(ms > 0) || bytes == 0) {
    *why = "the measured all-gather needs a size and a time above 0";
    return false;
  }
  // The predicted time falls as the rates rise: bisect the scale on a log scale.
  double lo = kIntraFitMinScale, hi = kIntraFitMaxScale;
  fit->warning.clear();
  const double fastest = intraAllGatherMs(machine, hi, rules, rulesPath, bytes, engine);
  const double slowest = intraAllGatherMs(machine, lo, rules, rulesPath, bytes, engine);
  char buf[320];
  if (fastest > ms) {
    lo = hi;
    std::snprintf(buf, sizeof buf,
                  "the measured all-gather (%.3g ms) is faster than the model predicts at any copy rate (%.3g ms): "
                  "its per-message costs are too high here, so its intra-node predictions will be high",
                  ms, fastest);
    fit->warning = buf;
  } else if (slowest < ms) {
    hi = lo;
    std::snprintf(buf, sizeof buf,
                  "the measured all-gather (%.3g ms) is slower than the model predicts at %g of the copy rates "
                  "(%.3g ms), so its intra-node predictions will be low",
                  ms, kIntraFitMinScale, slowest);
    fit->warning = buf;
  } else {
    for (int i = 0; i < 40; ++i) {
      const double mid = std::sqrt(lo * hi);
      (intraAllGatherMs(machine, mid, rules, rulesPath, bytes, engine) > ms ? lo : hi) = mid;
    }
  }
  fit->scale = std::sqrt(lo * hi);
  fit->shmGbps = machine.links.shm.gbps * fit->scale;
  fit->nodeMemGbps = machine.links.nodeMemGbps * fit->scale;
  fit->predictedMs = intraAllGatherMs(machine, fit->scale, rules, rulesPath, bytes, engine);
  return true;
}

int recommend(const std::vector<Costed>& rows) {
  int best = -1;
  for (int i = 0; i < int(rows.size()); ++i) {
    if (!rows[i].fits) continue;
    if (best < 0 || rows[i].totalUs() < rows[best].totalUs() ||
        (rows[i].totalUs() == rows[best].totalUs() && rows[i].state.total() < rows[best].state.total()))
      best = i;
  }
  return best;
}

}  // namespace paro
}  // namespace tune
}  // namespace hoccl
