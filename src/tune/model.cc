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

#include "algorithms/phases.h"
#include "src/topo/topology.h"

namespace hoccl {
namespace tune {
namespace {

constexpr double kInf = 1e300;

// Busy time (us) of every resource, for one step or a whole phase.
class Load {
 public:
  explicit Load(const Machine& m)
      : m_(m),
        P_(m.nranks()),
        N_(m.nnodes()),
        L_(m.nleaves()),
        t_(size_t(2 * P_ + 3 * N_ + 2 * L_), 0.0),
        nodeInBytes_(size_t(N_), 0.0),
        upOutBytes_(size_t(L_), 0.0),
        upInBytes_(size_t(L_), 0.0) {}

  // `bytes` from rank a to rank b in one step, over `channels` connections.
  void edge(int a, int b, double bytes, bool reduce, int channels) {
    const LinkModel& lm = m_.links;
    const int na = m_.nodeOf[size_t(a)], nb = m_.nodeOf[size_t(b)];
    const double copyRate = lm.shm.bytesPerUs();
    const double recvRate = reduce ? std::min(copyRate, lm.reduceGbps * 125.0) : copyRate;
    // The receiver copies (or reduces) what arrives; the sender copies it
    // into a shared slot when the peer is on its node.
    add(rankIn(b), bytes / recvRate);
    add(mem(nb), bytes * (reduce ? 3 : 2) / (lm.nodeMemGbps * 125.0));
    if (na == nb) {
      add(rankOut(a), bytes / copyRate);
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
      // A rank sends and receives at once; its path is busy for the larger.
      if (i < size_t(P_)) worst = std::max(worst, std::max(t_[i], t_[i + size_t(P_)]));
      else if (i >= size_t(2 * P_)) worst = std::max(worst, t_[i]);
    }
    return worst;
  }
  double latencyUs() const { return lat_; }
  const std::vector<double>& busy() const { return t_; }
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
  std::vector<double> t_;
  std::vector<double> nodeInBytes_, upOutBytes_, upInBytes_;
  double lat_ = 0, flow_ = 0;
};

// One phase: a set of steps that all look alike (the same edges and bytes),
// repeated `steps` times.
struct Phase {
  double bwUs = 0;   // bandwidth time of all its steps
  double latUs = 0;  // latency of all its steps
  double netUs = 0;  // the busiest network link's time, all steps
  std::vector<double> busy;  // per resource, all steps (for overlap)
  double stepNodeInBytes = 0, stepUplinkBytes = 0;  // one step's (Prediction)
  double us() const { return bwUs + latUs; }
};

Phase ringPhase(const Machine& m, const RingSet& set, int channels) {
  Load l(m);
  for (const std::vector<int>& ring : set.rings) {
    const size_t n = ring.size();
    if (n < 2) continue;
    for (size_t i = 0; i < n; ++i) l.edge(ring[i], ring[(i + 1) % n], set.bytes, set.reduce, channels);
  }
  Phase p;
  p.bwUs = l.bandwidthUs() * set.steps;
  p.latUs = l.latencyUs() * set.steps;
  p.netUs = l.networkUs() * set.steps;
  p.busy = l.busy();
  for (double& b : p.busy) b *= set.steps;
  p.stepNodeInBytes = l.nodeInBytes();
  p.stepUplinkBytes = l.uplinkBytes();
  return p;
}

Phase exchangePhase(const Machine& m, const std::vector<Transfer>& msgs, double bytes, bool reduce, int channels,
                    double extraLatencySteps = 0) {
  Load l(m);
  for (const Transfer& t : msgs) l.edge(t.from, t.to, bytes, reduce, channels);
  Phase p;
  p.bwUs = l.bandwidthUs();
  p.latUs = l.latencyUs() * (1 + extraLatencySteps);
  p.netUs = l.networkUs();
  p.busy = l.busy();
  p.stepNodeInBytes = l.nodeInBytes();
  p.stepUplinkBytes = l.uplinkBytes();
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
  double maxPerChunk = 0, fill = 0;
  for (const Phase& p : ph) {
    for (size_t i = 0; i < total.size(); ++i) total[i] += p.busy[i];
    const double perChunk = p.bwUs / K + p.latUs;
    maxPerChunk = std::max(maxPerChunk, perChunk);
    fill += perChunk;
  }
  const double steady = *std::max_element(total.begin(), total.end());
  return std::max(steady, maxPerChunk * K) + fill - maxPerChunk;
}

// The groups, rails and switch level the builders would use.
struct Shape {
  Hierarchy h;
  bool sw = false;
  int W = 1, n = 1;
  int S() const { return h.rails; }
  int N() const { return h.ngroups(); }
};

Shape shapeOf(const Machine& m) {
  Shape s;
  ScheduleKey key;
  key.nranks = m.nranks();
  key.groups = std::make_shared<const Grouping>(m.grouping());
  makeHierarchy(key, &s.h);
  const char* why = nullptr;
  s.sw = switchLevel(s.h, &s.W, &s.n, &why);
  return s;
}

std::vector<int> ranksInOrder(int P) {
  std::vector<int> v(static_cast<size_t>(P));
  for (int i = 0; i < P; ++i) v[size_t(i)] = i;
  return v;
}

// Rail s's servers: the whole rail, those under switch w, or those with
// index j under their switch.
std::vector<int> railMembers(const Shape& s, int rail) { return s.h.rail(rail).members; }
std::vector<int> railUnder(const Shape& s, int rail, int w) {
  const std::vector<int> all = railMembers(s, rail);
  return std::vector<int>(all.begin() + w * s.n, all.begin() + (w + 1) * s.n);
}
std::vector<int> railAcross(const Shape& s, int rail, int j) {
  const std::vector<int> all = railMembers(s, rail);
  std::vector<int> v;
  for (int w = 0; w < s.W; ++w) v.push_back(all[size_t(w * s.n + j)]);
  return v;
}

Prediction predictRing(const Machine& m, CollKind coll, double M, int C) {
  const int P = m.nranks();
  RingSet rs{{ranksInOrder(P)}, M / P, P - 1, true};
  RingSet ag{{ranksInOrder(P)}, M / P, P - 1, false};
  std::vector<Phase> ph;
  if (coll != CollKind::AllGather) ph.push_back(ringPhase(m, rs, C));
  if (coll != CollKind::ReduceScatter) ph.push_back(ringPhase(m, ag, C));
  return made(sumUs(ph), "ring", ph);
}

Prediction predictDoubling(const Machine& m, double M) {
  const int P = m.nranks();
  int p2 = 1;
  while (p2 * 2 <= P) p2 *= 2;
  const int extra = P - p2;
  auto real = [&](int v) { return v < extra ? 2 * v + 1 : v + extra; };
  std::vector<Phase> ph;
  std::vector<Transfer> fold;
  for (int i = 0; i < extra; ++i) fold.push_back({2 * i, 2 * i + 1});
  if (!fold.empty()) ph.push_back(exchangePhase(m, fold, M, true, 1));
  for (int d = 1; d < p2; d *= 2) {
    std::vector<Transfer> x;
    for (int v = 0; v < p2; ++v) x.push_back({real(v), real(v ^ d)});
    ph.push_back(exchangePhase(m, x, M, true, 1));
  }
  if (!fold.empty()) {
    for (Transfer& f : fold) std::swap(f.from, f.to);
    ph.push_back(exchangePhase(m, fold, M, false, 1));
  }
  return made(sumUs(ph), "doubling", ph);
}

// A chain through every group at once (members[0] is the root), moving
// `bytes` pipelined in slices: one pass over the slowest link, plus a
// latency per hop.
Phase chainPhase(const Machine& m, const Shape& s, double bytes, bool reduce, bool towardsRoot, int C) {
  std::vector<Transfer> edges;
  int hops = 0;
  for (const std::vector<int>& g : s.h.groups) {
    for (size_t i = 1; i < g.size(); ++i)
      edges.push_back(towardsRoot ? Transfer{g[i], g[i - 1]} : Transfer{g[i - 1], g[i]});
    hops = std::max(hops, int(g.size()) - 1);
  }
  if (edges.empty()) return Phase{};
  return exchangePhase(m, edges, bytes, reduce, C, hops - 1);
}

// A star in every group: the root sends (or receives) one block to (from)
// each member; the root's path serialises them.
Phase starPhase(const Machine& m, const Shape& s, double block, bool scatter, int C) {
  std::vector<Transfer> edges;
  for (const std::vector<int>& g : s.h.groups)
    for (size_t i = 1; i < g.size(); ++i) edges.push_back(scatter ? Transfer{g[0], g[i]} : Transfer{g[i], g[0]});
  if (edges.empty()) return Phase{};
  return exchangePhase(m, edges, block, false, C);
}

Prediction predictHierarchical(const Machine& m, CollKind coll, double M, int C) {
  const Shape s = shapeOf(m);
  const int N = s.N(), P = m.nranks();
  std::vector<int> leaders = s.h.leaders().members;
  std::vector<Phase> ph;
  if (coll == CollKind::AllReduce) {
    ph.push_back(chainPhase(m, s, M, true, true, C));
    if (N > 1) {
      ph.push_back(ringPhase(m, RingSet{{leaders}, M / N, N - 1, true}, C));
      ph.push_back(ringPhase(m, RingSet{{leaders}, M / N, N - 1, false}, C));
    }
    ph.push_back(chainPhase(m, s, M, false, false, C));
  } else if (coll == CollKind::ReduceScatter) {
    ph.push_back(chainPhase(m, s, M, true, true, C));
    if (N > 1) ph.push_back(ringPhase(m, RingSet{{leaders}, M / P, s.S() * (N - 1), true}, C));
    ph.push_back(starPhase(m, s, M / P, true, C));
  } else {
    ph.push_back(starPhase(m, s, M / P, false, C));
    if (N > 1) ph.push_back(ringPhase(m, RingSet{{leaders}, M / P, s.S() * (N - 1), false}, C));
    ph.push_back(chainPhase(m, s, M, false, false, C));
  }
  return made(sumUs(ph), "hierarchical", ph);
}

int defaultHoRingChunks(CollKind coll, double M, int P, int C) {
  // horing.cc's policy, for 4-byte elements: chunks of >= 32768 elements
  // moved per rank, at most 4.
  // (all-reduce: the part's length; the others: one block's part times P,
  // which is the same number of elements).
  (void)coll;
  (void)P;
  const double moved = M / 4 / C;
  return int(std::clamp(std::floor(moved / 32768.0), 1.0, 4.0));
}

Prediction predictHoRing(const Machine& m, CollKind coll, double M, int C, int K) {
  const Shape s = shapeOf(m);
  const int P = m.nranks(), N = s.N(), S = s.S();
  if (K <= 0) K = defaultHoRingChunks(coll, M, P, C);
  std::vector<std::vector<int>> groups;
  for (const std::vector<int>& g : s.h.groups)
    if (g.size() > 1) groups.push_back(g);
  const bool intra = S > 1;
  const int G = S;  // the largest group sets the step count
  auto rails = [&](auto membersOf) {
    std::vector<std::vector<int>> v;
    for (int r = 0; r < S; ++r) {
      for (auto& mem : membersOf(r)) v.push_back(mem);
    }
    return v;
  };
  auto whole = [&](int r) { return std::vector<std::vector<int>>{railMembers(s, r)}; };
  auto under = [&](int r) {
    std::vector<std::vector<int>> v;
    for (int w = 0; w < s.W; ++w) v.push_back(railUnder(s, r, w));
    return v;
  };
  auto across = [&](int r) {
    std::vector<std::vector<int>> v;
    for (int j = 0; j < s.n; ++j) v.push_back(railAcross(s, r, j));
    return v;
  };
  std::vector<Phase> ph;
  const char* what = s.sw ? "horing, switch level" : "horing";
  if (coll == CollKind::AllReduce) {
    if (N == 1) {
      Prediction r = predictRing(m, coll, M, C);
      r.shape = "horing (one node: a plain ring)";
      return r;
    }
    if (!(intra && N > 1) && !s.sw) {  // groups of one: a ring through the rail
      RingSet a{{railMembers(s, 0)}, M / N, N - 1, true};
      RingSet b = a;
      b.reduce = false;
      ph = {ringPhase(m, a, C), ringPhase(m, b, C)};
      return made(sumUs(ph), "horing (a plain ring)", ph);
    }
    if (intra) ph.push_back(ringPhase(m, RingSet{groups, M / G, G - 1, true}, C));
    if (s.sw) {
      const double part = M / S / s.n;
      ph.push_back(ringPhase(m, RingSet{rails(under), part, s.n - 1, true}, C));
      Phase top = ringPhase(m, RingSet{rails(across), part / s.W, s.W - 1, true}, C);
      Phase topAg = ringPhase(m, RingSet{rails(across), part / s.W, s.W - 1, false}, C);
      ph.push_back(followedBy(top, topAg));
      ph.push_back(ringPhase(m, RingSet{rails(under), part, s.n - 1, false}, C));
    } else {
      Phase rail = ringPhase(m, RingSet{rails(whole), M / S / N, N - 1, true}, C);
      Phase railAg = ringPhase(m, RingSet{rails(whole), M / S / N, N - 1, false}, C);
      ph.push_back(followedBy(rail, railAg));
    }
    if (intra) ph.push_back(ringPhase(m, RingSet{groups, M / G, G - 1, false}, C));
  } else {
    const bool rs = coll == CollKind::ReduceScatter;
    const double block = M / P;
    // Intra: one ring pass per group q (blocks of ranks (q, s)): N(G-1)
    // steps of one block.
    Phase in = intra ? ringPhase(m, RingSet{groups, block, N * (G - 1), rs}, C) : Phase{};
    std::vector<Phase> railPh;
    if (N > 1) {
      if (s.sw) {
        railPh.push_back(ringPhase(m, RingSet{rails(under), block, s.W * (s.n - 1), rs}, C));
        railPh.push_back(ringPhase(m, RingSet{rails(across), block, s.W - 1, rs}, C));
        if (!rs) std::reverse(railPh.begin(), railPh.end());
      } else {
        railPh.push_back(ringPhase(m, RingSet{rails(whole), block, N - 1, rs}, C));
      }
    }
    if (rs) {
      if (intra) ph.push_back(in);
      ph.insert(ph.end(), railPh.begin(), railPh.end());
    } else {
      ph.insert(ph.end(), railPh.begin(), railPh.end());
      if (intra) ph.push_back(in);
    }
  }
  return made(pipelinedUs(ph, K), what, ph, K);
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
  }
  if (nodeLink > 0) m.links.net.gbps = nodeLink;
  if (uplink > 0) m.links.spine.gbps = uplink;
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

namespace {

Prediction predictUnshaped(const Machine& m, CollKind coll, AlgoId algo, double M, int C, int pipelineChunks) {
  if (coll != CollKind::AllReduce && coll != CollKind::ReduceScatter && coll != CollKind::AllGather)
    return predictRing(m, coll == CollKind::Broadcast ? CollKind::AllGather : CollKind::ReduceScatter, M, C);
  switch (algo) {
    case AlgoId::Hierarchical: return predictHierarchical(m, coll, M, C);
    case AlgoId::HoRing: return predictHoRing(m, coll, M, C, pipelineChunks);
    case AlgoId::Doubling:
      if (coll == CollKind::AllReduce) return predictDoubling(m, M);
      return predictRing(m, coll, M, C);
    default: return predictRing(m, coll, M, C);
  }
}

}  // namespace

Prediction predict(const Machine& m, CollKind coll, AlgoId algo, uint64_t bytes, int nchannels, int pipelineChunks) {
  const int C = std::max(nchannels, 1);
  if (m.nranks() <= 1) return {0, "one rank"};
  Prediction p = predictUnshaped(m, coll, algo, double(bytes), C, pipelineChunks);
  // Links with a token bucket (burstKB) refill it while idle: what the
  // busiest one saves is the time its burst takes at its rate, at most its
  // idle time within the call, as in a loop of calls where each starts with
  // the bucket the last one left empty (the schedule engine follows every
  // bucket instead).
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
