// The cost model (model.h). Resources are each rank's copy/reduce path,
// each node's memory, each node's network links out and in, and each leaf's
// uplink out and in; a step's edges add their bytes to the resources on
// their path, and the step takes as long as its busiest resource plus the
// latency of the slowest link class it uses.
#include "src/tune/model.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "algorithms/cost.h"
#include "algorithms/registry.h"
#include "src/topo/topology.h"

namespace hoccl {
namespace tune {
namespace {

// Busy time (us) of every resource, for one step or a whole phase.
class Load {
 public:
  explicit Load(const Machine& m)
      : m_(m),
        P_(m.nranks()),
        N_(m.nnodes()),
        L_(m.nleaves()),
        t_(size_t(2 * P_ + 3 * N_ + 2 * L_), 0.0),
        staged_(size_t(P_), 0.0),
        sent_(size_t(P_), 0),
        nodeInBytes_(size_t(N_), 0.0),
        upOutBytes_(size_t(L_), 0.0),
        upInBytes_(size_t(L_), 0.0),
        cpuBytes_(size_t(N_), 0.0),
        cpuMsg_(size_t(N_), 0.0),
        cores_(size_t(N_), 0.0) {
    // Ranks outnumber cores: a node's ranks share ranks/oversubscription
    // cores, so the CPU their messages take is a resource of the node.
    if (m.links.oversubscription > 1) {
      for (int r = 0; r < P_; ++r) cores_[size_t(m.nodeOf[size_t(r)])] += 1 / m.links.oversubscription;
    }
  }

  // `bytes` from rank a to rank b in one step, over `channels` connections;
  // `staged`: see CostPhase::staged.
  void edge(int a, int b, double bytes, bool reduce, int channels, bool staged = false) {
    const LinkModel& lm = m_.links;
    const int na = m_.nodeOf[size_t(a)], nb = m_.nodeOf[size_t(b)];
    const double copyRate = lm.shm.bytesPerUs();
    const double recvRate = reduce ? std::min(copyRate, lm.reduceGbps * 125.0) : copyRate;
    // The receiver copies (or reduces) what arrives; the sender copies it
    // into a shared slot when the peer is on its node.
    add(rankIn(b), bytes / recvRate);
    add(mem(nb), bytes * 2 * (reduce ? lm.reduceMemRatio : 1) / (lm.nodeMemGbps * 125.0));
    if (cores_[size_t(na)] > 0) {
      const double msg = lm.messageCpuUs(N_, na != nb);
      cpuBytes_[size_t(nb)] += bytes / recvRate / cores_[size_t(nb)];
      if (na == nb) cpuBytes_[size_t(na)] += bytes / copyRate / cores_[size_t(na)];
      cpuMsg_[size_t(na)] += msg / cores_[size_t(na)];
      cpuMsg_[size_t(nb)] += msg / cores_[size_t(nb)];
    }
    if (na == nb) {
      // The first message a rank sends in the step is the baseline every
      // algorithm pays (uncharged); more are copies of their own.
      if (staged && reduce && !lm.shmByReference && ++sent_[size_t(a)] > 1) stageCopy(a, bytes);
      else add(rankOut(a), bytes / copyRate);
      lat_ = std::max(lat_, lm.latency(lm.shm));
      return;
    }
    add(mem(na), bytes / (lm.nodeMemGbps * 125.0));
    const double nic = lm.net.bytesPerUs();
    if (nic > 0) {
      add(nicOut(na), bytes / (nic * m_.nics(na)));
      add(nicIn(nb), bytes / (nic * m_.nics(nb)));
    }
    nodeInBytes_[size_t(nb)] += bytes;
    if (lm.flowGbps > 0) flow_ = std::max(flow_, bytes / (channels * lm.flowGbps * 125.0));
    const int la = m_.leafOf[size_t(na)], lb = m_.leafOf[size_t(nb)];
    if (la == lb) {
      lat_ = std::max(lat_, lm.latency(lm.net));
      return;
    }
    lat_ = std::max(lat_, lm.latency(lm.net) + lm.latency(lm.spine));
    const double up = lm.spine.bytesPerUs();
    if (up > 0) {
      add(upOut(la), bytes / up);
      add(upIn(lb), bytes / up);
    }
    upOutBytes_[size_t(la)] += bytes;
    upInBytes_[size_t(lb)] += bytes;
  }
  // A message rank a copies into a shared slot for a rank of its node in a
  // pass of its own: a's path is busy for it besides what a receives, and
  // the node's memory moves it (one read, one write). Its CPU is counted
  // with the edge's.
  void stageCopy(int a, double bytes) {
    const int na = m_.nodeOf[size_t(a)];
    staged_[size_t(a)] += bytes / m_.links.shm.bytesPerUs();
    add(mem(na), bytes * 2 / (m_.links.nodeMemGbps * 125.0));
  }
  // Bytes of this step into the busiest node and through the busiest uplink.
  double nodeInBytes() const { return *std::max_element(nodeInBytes_.begin(), nodeInBytes_.end()); }
  double uplinkBytes() const {
    return std::max(*std::max_element(upOutBytes_.begin(), upOutBytes_.end()),
                    *std::max_element(upInBytes_.begin(), upInBytes_.end()));
  }

  // Duration of the step: busiest resource, plus latency.
  double bandwidthUs() const {
    double worst = flow_;
    for (size_t i = 0; i < t_.size(); ++i) {
      // A rank sends and receives at once; its path is busy for the larger,
      // and for the copies it stages before either.
      if (i < size_t(P_)) worst = std::max(worst, std::max(t_[i], t_[i + size_t(P_)]) + staged_[i]);
      else if (i >= size_t(2 * P_)) worst = std::max(worst, t_[i]);
    }
    return worst;
  }
  double latencyUs() const { return lat_; }
  // Per resource (a rank's staged copies count on its receiving path).
  std::vector<double> busy() const {
    std::vector<double> b = t_;
    for (size_t i = 0; i < staged_.size(); ++i) b[i] += staged_[i];
    return b;
  }
  // Per node, when ranks outnumber cores: the CPU time its cores spend on
  // the step's bytes, and on one message per edge (messages cut into
  // slices cost that per slice).
  const std::vector<double>& cpuBytes() const { return cpuBytes_; }
  const std::vector<double>& cpuMsg() const { return cpuMsg_; }
  // The busiest network link (node link or uplink, either direction).
  double networkUs() const {
    double worst = 0;
    for (size_t i = size_t(2 * P_ + N_); i < t_.size(); ++i) worst = std::max(worst, t_[i]);
    return worst;
  }

 private:
  size_t rankIn(int r) const { return size_t(r); }
  size_t rankOut(int r) const { return size_t(P_ + r); }
  size_t mem(int n) const { return size_t(2 * P_ + n); }
  size_t nicOut(int n) const { return size_t(2 * P_ + N_ + n); }
  size_t nicIn(int n) const { return size_t(2 * P_ + 2 * N_ + n); }
  size_t upOut(int l) const { return size_t(2 * P_ + 3 * N_ + l); }
  size_t upIn(int l) const { return size_t(2 * P_ + 3 * N_ + L_ + l); }
  void add(size_t i, double us) { t_[i] += us; }

  const Machine& m_;
  int P_, N_, L_;
  std::vector<double> t_, staged_;
  std::vector<int> sent_;  // messages each rank sends in the step (staged ones)
  std::vector<double> nodeInBytes_, upOutBytes_, upInBytes_;
  std::vector<double> cpuBytes_, cpuMsg_, cores_;
  double lat_ = 0, flow_ = 0;
};

// The unit the per-message CPU terms (LinkModel::msgCpuUs, netMsgCpuUs)
// are charged in: the executor's slice when they were fitted, 128 KiB. A
// communicator across nodes now moves 512 KiB slices (defaultSliceBytes),
// yet still pays about this per 128 KiB there: charged per 512 KiB the
// model preferred the ring on the emulated cluster (2 nodes x 2, 10 Gbit/s;
// 1 MiB to 16 MiB), which ran 1.2-2x slower than the hierarchical
// all-reduce it chose before (results/20261130-net-slices). Refitting the
// terms per slice size is open.
constexpr double kSliceBytes = 128 * 1024;

// One phase: a set of steps that all look alike (the same edges and bytes),
// repeated `steps` times.
struct Phase {
  double bwUs = 0;   // bandwidth time of all its steps
  double latUs = 0;  // latency of all its steps
  double netUs = 0;  // the busiest network link's time, all steps
  std::vector<double> busy;  // per resource, all steps (for overlap)
  double stepNodeInBytes = 0, stepUplinkBytes = 0;  // one step's (Prediction)
  // Ranks outnumbering cores (else empty): per node, CPU time of all its
  // steps' bytes, and of one message per edge and step; and how many
  // slices each edge's message is cut into per step (per chunk: msgsPer).
  std::vector<double> cpuBytes, cpuMsg;
  double stepBytes = 0;
  int channels = 1;
  // Messages per edge and step, when the step runs in K chunks.
  double msgsPer(int K) const {
    const double perConn = stepBytes / (double(std::max(channels, 1)) * std::max(K, 1));
    return double(std::max(K, 1)) * std::max(channels, 1) * std::max(1.0, std::ceil(perConn / kSliceBytes));
  }
  // The busiest node's CPU time for all steps, run in K chunks.
  double cpuUs(int K) const {
    double worst = 0;
    for (size_t n = 0; n < cpuBytes.size(); ++n) worst = std::max(worst, cpuBytes[n] + cpuMsg[n] * msgsPer(K));
    return worst;
  }
  double us() const { return std::max(bwUs, cpuUs(1)) + latUs; }
};

// Fills a phase's CPU fields from a step's load repeated `steps` times.
void setCpu(Phase* p, const Load& l, int steps, double bytes, int channels) {
  p->cpuBytes = l.cpuBytes();
  p->cpuMsg = l.cpuMsg();
  for (double& x : p->cpuBytes) x *= steps;
  for (double& x : p->cpuMsg) x *= steps;
  p->stepBytes = bytes;
  p->channels = channels;
}

// One message's latency from rank a to rank b.
double edgeLatencyUs(const Machine& m, int a, int b) {
  const LinkModel& lm = m.links;
  switch (m.linkClass(a, b)) {
    case topo::LinkClass::Self: return 0;
    case topo::LinkClass::Shm: return lm.latency(lm.shm);
    case topo::LinkClass::NetLeaf: return lm.latency(lm.net);
    default: return lm.latency(lm.net) + lm.latency(lm.spine);
  }
}

// The latency a ring phase accumulates: step s of a rank waits for step
// s-1 of its predecessor, so the slowest chain of `steps` messages crosses
// consecutive edges of the ring, a window of them (each edge's latency
// once per lap), not the slowest edge at every step.
double ringLatencyUs(const Machine& m, const RingSet& set) {
  double worst = 0;
  for (const std::vector<int>& ring : set.rings) {
    const size_t n = ring.size();
    if (n < 2 || set.steps <= 0) continue;
    std::vector<double> lat(n);
    double lap = 0;
    for (size_t i = 0; i < n; ++i) lap += lat[i] = edgeLatencyUs(m, ring[i], ring[(i + 1) % n]);
    const size_t laps = size_t(set.steps) / n, rest = size_t(set.steps) % n;
    double window = 0, best = 0;  // the slowest `rest` consecutive edges
    for (size_t i = 0; i < rest; ++i) window += lat[i];
    best = window;
    for (size_t i = 0; rest > 0 && i < n; ++i) {
      window += lat[(i + rest) % n] - lat[i];
      best = std::max(best, window);
    }
    worst = std::max(worst, double(laps) * lap + best);
  }
  return worst;
}

Phase ringPhase(const Machine& m, const RingSet& set, int channels) {
  Load l(m);
  for (const std::vector<int>& ring : set.rings) {
    const size_t n = ring.size();
    if (n < 2) continue;
    for (size_t i = 0; i < n; ++i) l.edge(ring[i], ring[(i + 1) % n], set.bytes, set.reduce, channels);
  }
  Phase p;
  p.bwUs = l.bandwidthUs() * set.steps;
  p.latUs = ringLatencyUs(m, set);
  p.netUs = l.networkUs() * set.steps;
  p.busy = l.busy();
  for (double& b : p.busy) b *= set.steps;
  p.stepNodeInBytes = l.nodeInBytes();
  p.stepUplinkBytes = l.uplinkBytes();
  setCpu(&p, l, set.steps, set.bytes, channels);
  return p;
}

Phase exchangePhase(const Machine& m, const std::vector<Transfer>& msgs, double bytes, bool reduce, int channels,
                    double extraLatencySteps = 0, bool staged = false) {
  Load l(m);
  for (const Transfer& t : msgs) l.edge(t.from, t.to, bytes, reduce, channels, staged);
  Phase p;
  p.bwUs = l.bandwidthUs();
  p.latUs = l.latencyUs() * (1 + extraLatencySteps);
  p.netUs = l.networkUs();
  p.busy = l.busy();
  p.stepNodeInBytes = l.nodeInBytes();
  p.stepUplinkBytes = l.uplinkBytes();
  setCpu(&p, l, 1, bytes, channels);
  return p;
}

// One phase made of `a`'s steps, then `b`'s (a ring's reduce-scatter then
// its all-gather on the same channel).
Phase followedBy(Phase a, const Phase& b) {
  a.bwUs += b.bwUs;
  a.latUs += b.latUs;
  a.netUs += b.netUs;
  for (size_t i = 0; i < a.busy.size(); ++i) a.busy[i] += b.busy[i];
  a.stepNodeInBytes = std::max(a.stepNodeInBytes, b.stepNodeInBytes);
  a.stepUplinkBytes = std::max(a.stepUplinkBytes, b.stepUplinkBytes);
  // b's messages, counted in a's slices (the same size for a ring's two halves).
  const double scale = a.msgsPer(1) > 0 ? b.msgsPer(1) / a.msgsPer(1) : 1;
  for (size_t n = 0; n < a.cpuBytes.size() && n < b.cpuBytes.size(); ++n) {
    a.cpuBytes[n] += b.cpuBytes[n];
    a.cpuMsg[n] += b.cpuMsg[n] * scale;
  }
  return a;
}

double sumUs(const std::vector<Phase>& ph) {
  double t = 0;
  for (const Phase& p : ph) t += p.us();
  return t;
}

double netUs(const std::vector<Phase>& ph) {
  double t = 0;
  for (const Phase& p : ph) t += p.netUs;
  return t;
}

// A prediction of `us` for phases run in K pipeline chunks: a chunk's step
// moves 1/K of what the phase's step would.
Prediction made(double us, const char* what, const std::vector<Phase>& ph, int K = 1) {
  Prediction p{us, what, netUs(ph)};
  for (const Phase& x : ph) {
    p.stepNodeInBytes = std::max(p.stepNodeInBytes, x.stepNodeInBytes / std::max(K, 1));
    p.stepUplinkBytes = std::max(p.stepUplinkBytes, x.stepUplinkBytes / std::max(K, 1));
  }
  return p;
}

// Phases that overlap in a pipeline of K chunks: each chunk pays every
// phase's latency; in steady state the busiest resource, summed over the
// phases, sets the pace; the first chunk fills and the last drains the
// pipeline through the phases other than the slowest.
double pipelinedUs(const std::vector<Phase>& ph, int K) {
  if (ph.empty()) return 0;
  if (K <= 1) return sumUs(ph);
  std::vector<double> total(ph.front().busy.size(), 0.0);
  size_t nodes = 0;
  for (const Phase& p : ph) nodes = std::max(nodes, p.cpuBytes.size());
  std::vector<double> cpu(nodes, 0.0);
  double maxPerChunk = 0, fill = 0;
  for (const Phase& p : ph) {
    for (size_t i = 0; i < total.size(); ++i) total[i] += p.busy[i];
    // Every chunk's step is a message of its own: the CPU a message costs
    // is paid K times, the CPU for bytes once.
    for (size_t n = 0; n < p.cpuBytes.size(); ++n) cpu[n] += p.cpuBytes[n] + p.cpuMsg[n] * p.msgsPer(K);
    const double perChunk = std::max(p.bwUs, p.cpuUs(K)) / K + p.latUs;
    maxPerChunk = std::max(maxPerChunk, perChunk);
    fill += perChunk;
  }
  double steady = *std::max_element(total.begin(), total.end());
  if (!cpu.empty()) steady = std::max(steady, *std::max_element(cpu.begin(), cpu.end()));
  return std::max(steady, maxPerChunk * K) + fill - maxPerChunk;
}

// The phases of an algorithm's cost plan (algorithms/cost.h) on machine m.
Prediction evaluate(const Machine& m, const CostPlan& plan, int C) {
  std::vector<Phase> ph;
  for (const CostPhase& c : plan.phases) {
    const int ch = c.channels > 0 ? c.channels : C;
    Phase p;
    if (c.kind == CostPhase::Kind::Rings) {
      p = ringPhase(m, RingSet{c.rings, c.bytes, c.steps, c.reduce}, ch);
    } else if (!c.messages.empty()) {
      std::vector<Transfer> msgs;
      for (const CostMessage& x : c.messages) msgs.push_back(Transfer{x.from, x.to});
      p = exchangePhase(m, msgs, c.bytes, c.reduce, ch, c.extraLatencySteps, c.staged);
    }
    if (c.fused && !ph.empty()) ph.back() = followedBy(ph.back(), p);
    else ph.push_back(p);
  }
  const int K = std::max(plan.pipelineChunks, 1);
  return made(pipelinedUs(ph, K), plan.shape, ph, K);
}

}  // namespace

int Machine::nleaves() const {
  int n = 0;
  for (int l : leafOf) n = std::max(n, l + 1);
  return std::max(n, 1);
}

topo::LinkClass Machine::linkClass(int a, int b) const {
  if (a == b) return topo::LinkClass::Self;
  const int na = nodeOf[size_t(a)], nb = nodeOf[size_t(b)];
  if (na == nb) return topo::LinkClass::Shm;
  return leafOf[size_t(na)] == leafOf[size_t(nb)] ? topo::LinkClass::NetLeaf : topo::LinkClass::NetSpine;
}

Grouping Machine::grouping() const {
  Grouping g;
  g.groupOf = nodeOf;
  if (nleaves() > 1) g.superOf = leafOf;
  return g;
}

Machine Machine::rectangular(int nodes, int ranksPerNode, int leaves, const LinkModel& links) {
  Machine m;
  nodes = std::max(nodes, 1);
  ranksPerNode = std::max(ranksPerNode, 1);
  leaves = std::clamp(leaves, 1, nodes);
  for (int r = 0; r < nodes * ranksPerNode; ++r) m.nodeOf.push_back(r / ranksPerNode);
  for (int n = 0; n < nodes; ++n) m.leafOf.push_back(n * leaves / nodes);
  m.links = links;
  return m;
}

Machine Machine::fromSystem(const topo::System& sys, const LinkModel& base) {
  Machine m;
  m.links = base;
  for (const topo::RankPlacement& r : sys.ranks) m.nodeOf.push_back(r.node);
  std::map<std::string, int> leaf;
  double nodeLink = 0, uplink = 0;
  for (const topo::NodeInfo& n : sys.nodes) {
    const std::string& sw = n.switchName;
    auto it = leaf.find(sw);
    if (it == leaf.end()) it = leaf.emplace(sw, int(leaf.size())).first;
    m.leafOf.push_back(it->second);
    for (const topo::SwitchInfo& s : sys.switches) {
      if (s.name != sw) continue;
      if (s.linkGbps > 0) nodeLink = nodeLink > 0 ? std::min(nodeLink, s.linkGbps) : s.linkGbps;
      if (s.uplinkGbps > 0) uplink = uplink > 0 ? std::min(uplink, s.uplinkGbps) : s.uplinkGbps;
    }
  }
  if (nodeLink <= 0) {
    // The slowest node's fastest usable NIC, where discovery knows speeds.
    for (const topo::NodeInfo& n : sys.nodes) {
      double best = 0;
      for (const topo::NicInfo& nic : n.nics)
        if (nic.up && nic.kind != "loopback") best = std::max(best, nic.speedGbps);
      if (best > 0) nodeLink = nodeLink > 0 ? std::min(nodeLink, best) : best;
    }
    m.netRateNominal = nodeLink > 0;
  }
  if (nodeLink > 0) m.links.net.gbps = nodeLink;
  if (uplink > 0) m.links.spine.gbps = uplink;
  m.uplinkRateUnknown = m.nleaves() > 1 && m.links.spine.gbps <= 0;
  return m;
}

double ringSetUs(const Machine& m, const RingSet& set, int channels) {
  return ringPhase(m, set, std::max(channels, 1)).us();
}

double exchangeUs(const Machine& m, const std::vector<Transfer>& msgs, double bytes, bool reduce, int channels) {
  return exchangePhase(m, msgs, bytes, reduce, std::max(channels, 1)).us();
}

double busBwFactor(CollKind coll, int nranks) {
  const double P = nranks;
  switch (coll) {
    case CollKind::AllReduce: return P > 1 ? 2 * (P - 1) / P : 0;
    case CollKind::ReduceScatter:
    case CollKind::AllGather: return P > 1 ? (P - 1) / P : 0;
    default: return 1;
  }
}

Prediction predict(const Machine& m, CollKind coll, AlgoId algo, uint64_t bytes, int nchannels, int pipelineChunks) {
  const int C = std::max(nchannels, 1);
  if (m.nranks() <= 1) return {0, "one rank"};
  // An algorithm that lacks the collective runs the ring (as its builder
  // falls back to it), so it costs what the ring costs.
  const AlgoInfo& chosen = algorithmInfo(algo);
  const AlgoInfo& runs = chosen.supports(coll) ? chosen : algorithmInfo(AlgoId::Ring);
  CostQuery q;
  q.coll = coll;
  q.nranks = m.nranks();
  q.groups = std::make_shared<const Grouping>(m.grouping());
  q.bytes = double(bytes);
  q.channels = C;
  q.pipelineChunks = pipelineChunks;
  Prediction p = evaluate(m, runs.cost(q), C);
  // Links with a token bucket (burstKB) refill it while idle: what the
  // busiest one saves is the time its burst takes at its rate, at most its
  // idle time within the call, as in a loop of calls where each starts with
  // the bucket the last one left empty (the schedule engine follows every
  // bucket instead).
  p.usWithoutBursts = p.us;
  double head = 0;
  const LinkModel& lm = m.links;
  if (lm.net.burstKB > 0 && lm.net.gbps > 0) head = std::max(head, lm.net.burstKB * 1000 / lm.net.bytesPerUs());
  if (m.nleaves() > 1 && lm.spine.burstKB > 0 && lm.spine.gbps > 0)
    head = std::max(head, lm.spine.burstKB * 1000 / lm.spine.bytesPerUs());
  p.us -= std::min({head, p.netUs, std::max(0.0, p.us - p.netUs)});
  return p;
}

}  // namespace tune
}  // namespace hoccl

namespace hoccl::tune {

Machine deviceMachine(const Machine& m) {
  Machine d = m;
  LinkModel& l = d.links;
  const DeviceLinks& g = m.links.device;
  int perNode = 1;
  for (int n = 0; n < m.nnodes(); ++n)
    perNode = std::max(perNode, int(std::count(m.nodeOf.begin(), m.nodeOf.end(), n)));
  l.shm = g.gpu;
  l.nodeMemGbps = g.memGbps * perNode;  // each GPU its own HBM
  l.reduceMemRatio = 1.5;
  l.reduceGbps = g.reduceGbps;
  l.shmByReference = false;
  // One rank per GPU, each with its own CTAs: no shared cores, and the
  // messages' CPU cost is the proxy's latency, not the executor's.
  l.oversubscription = 1.0;
  l.msgCpuUs = l.netMsgCpuUs = l.localMsgCpuUs = 0;
  // A slot comes back after the message crossed, the receiver's proxy
  // handed it over and the release came back: about two one-way latencies
  // and the proxies' hand-over. 1 Gbit/s = 125 bytes/us.
  const double roundTripUs = 2 * l.net.latencyUs + g.proxyUs;
  const double windowGbps =
      roundTripUs > 0 && g.windowKB > 0 ? g.windowKB * 1024 / roundTripUs / 125.0 : g.pcieGbps;
  const double cap = std::min(g.pcieGbps, windowGbps);
  l.net.latencyUs += g.proxyUs + (g.copyPath ? g.copyUs : 0);
  l.net.gbps = l.net.gbps > 0 ? std::min(l.net.gbps, cap) : cap;
  if (l.flowGbps > 0) l.flowGbps = std::min(l.flowGbps, cap);
  return d;
}

}  // namespace hoccl::tune
