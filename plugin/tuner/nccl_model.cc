#include "plugin/tuner/nccl_model.h"

#include <algorithm>
#include <cmath>
#include <map>

namespace hoccl {
namespace ncclplugin {
namespace {

// Inside a node NCCL's kernels and NVLink are not what the switches change;
// these only keep intra-node hops from being a bottleneck in either model.
constexpr double kIntraNodeGbps = 2400;
constexpr double kSpineHopUs = 1.0;  // one more switch each way
constexpr double kUnknownNodeGbps = 100;
constexpr int kChannels = 2;

}  // namespace

ProtoLatencies ProtoLatencies::defaults() {
  // Algorithms: tree, ring, collnet direct, collnet chain, NVLS, NVLS tree,
  // PAT; protocols: LL, LL128, Simple.
  ProtoLatencies l{};
  const double base[NCCL_NUM_ALGORITHMS][NCCL_NUM_PROTOCOLS] = {
      {6.8, 14.0, 8.4}, {6.6, 14.0, 8.4}, {0, 0, 0}, {0, 0, 0}, {0, 0, 0}, {0, 0, 0}, {6.6, 14.0, 8.4}};
  const double nvlink[NCCL_NUM_ALGORITHMS][NCCL_NUM_PROTOCOLS] = {
      {0.6, 1.25, 4}, {0.6, 1.9, 3.4}, {0, 0, 3.7}, {0, 0, 2.8}, {0, 0, 25}, {0, 0, 25}, {0.6, 1.9, 3.4}};
  const double net[NCCL_NUM_ALGORITHMS][NCCL_NUM_PROTOCOLS] = {
      {5.0, 8.5, 14}, {2.7, 4.0, 14.0}, {0, 0, 31}, {0, 0, 30}, {0, 0, 18}, {0, 0, 20.9}, {2.7, 4.0, 14.0}};
  for (int a = 0; a < NCCL_NUM_ALGORITHMS; ++a)
    for (int p = 0; p < NCCL_NUM_PROTOCOLS; ++p) {
      l.base[a][p] = base[a][p];
      l.nvlink[a][p] = nvlink[a][p];
      l.net[a][p] = net[a][p];
    }
  return l;
}

ProtoLatencies ProtoLatencies::fromNccl(const ncclTunerConstants_v5_t& c) {
  ProtoLatencies l{};
  for (int a = 0; a < NCCL_NUM_ALGORITHMS; ++a)
    for (int p = 0; p < NCCL_NUM_PROTOCOLS; ++p) {
      l.base[a][p] = c.baseLatencies[a][p];
      l.nvlink[a][p] = c.hwLatencies[NCCL_HW_NVLINK][a][p];
      l.net[a][p] = c.hwLatencies[NCCL_HW_NET][a][p];
    }
  return l;
}

double protocolEfficiency(int proto) {
  switch (proto) {
    case NCCL_PROTO_LL: return 0.5;
    case NCCL_PROTO_LL128: return 120.0 / 128.0;
    default: return 1.0;
  }
}

NcclModel::NcclModel(int nRanks, int nNodes, const Fabric& fabric, const ProtoLatencies& lat)
    : nRanks_(std::max(nRanks, 1)), nNodes_(std::max(nNodes, 1)), fabric_(fabric), lat_(lat) {
  // The leaves this communicator uses, numbered densely as the model wants.
  std::map<int, int> dense;
  std::vector<double> uplinks;
  for (int& l : fabric_.leafOf) {
    auto it = dense.find(l);
    if (it == dense.end()) {
      it = dense.emplace(l, static_cast<int>(dense.size())).first;
      uplinks.push_back(l < fabric.leaves() ? fabric.uplinkGbps[l] : 0);
    }
    l = it->second;
  }
  fabric_.uplinkGbps = uplinks;
  fabric_.leafOf.resize(nNodes_, 0);
  fabric_.nicsOf.resize(nNodes_, 1);
}

bool NcclModel::modelled(int coll, int algo) const {
  switch (coll) {
    case ncclFuncAllReduce: return algo == NCCL_ALGO_RING || algo == NCCL_ALGO_TREE;
    case ncclFuncAllGather:
    case ncclFuncReduceScatter: return algo == NCCL_ALGO_RING || algo == NCCL_ALGO_PAT;
    case ncclFuncBroadcast:
    case ncclFuncReduce: return algo == NCCL_ALGO_RING;
    default: return false;
  }
}

tune::Machine NcclModel::machine(int algo, int proto, bool realFabric) const {
  const double eff = protocolEfficiency(proto);
  tune::Machine m;
  m.nodeOf.resize(nRanks_);
  for (int r = 0; r < nRanks_; ++r) m.nodeOf[r] = static_cast<int>(static_cast<long long>(r) * nNodes_ / nRanks_);
  m.leafOf = realFabric ? fabric_.leafOf : std::vector<int>(nNodes_, 0);
  m.nicsOf = fabric_.nicsOf;
  const double nodeGbps = fabric_.nodeGbps > 0 ? fabric_.nodeGbps : kUnknownNodeGbps;
  m.links.shm = {lat_.nvlink[algo][proto], kIntraNodeGbps * eff};
  m.links.nodeMemGbps = 1e9;
  m.links.reduceGbps = 1e9;
  m.links.shmByReference = true;  // NCCL's kernels write into their peers' buffers: no host slots
  m.links.net = {lat_.net[algo][proto], nodeGbps * eff};
  // The model takes one uplink rate for all leaves: the slowest one used.
  double uplink = 0;
  for (double u : fabric_.uplinkGbps)
    if (u > 0) uplink = uplink > 0 ? std::min(uplink, u) : u;
  m.links.spine = {realFabric ? kSpineHopUs : 0.0, realFabric ? uplink * eff : 0.0};
  m.links.flowGbps = 0;
  return m;
}

double NcclModel::ringUs(const tune::Machine& m, int coll, double bytes) const {
  const int P = nRanks_;
  tune::RingSet set;
  std::vector<int> order(P);
  for (int r = 0; r < P; ++r) order[r] = r;
  set.rings = {order};
  switch (coll) {
    case ncclFuncAllReduce:
      set.bytes = bytes / P;
      set.steps = 2 * (P - 1);
      set.reduce = true;
      break;
    case ncclFuncAllGather:
    case ncclFuncReduceScatter:
      set.bytes = bytes / P;
      set.steps = P - 1;
      set.reduce = coll == ncclFuncReduceScatter;
      break;
    default:  // broadcast, reduce: a pipelined chain of 8*P chunks
      set.bytes = bytes / (8.0 * P);
      set.steps = 8 * P + P - 2;
      set.reduce = coll == ncclFuncReduce;
      break;
  }
  // A ring is pipelined: a chunk's latency adds up hop by hop, so a spine
  // crossing costs its extra latency on the hops that cross, not on every
  // step as a lock-step model would charge it.
  tune::Machine noSpineLatency = m;
  noSpineLatency.links.spine.latencyUs = 0;
  int crossings = 0;
  for (int r = 0; r < P; ++r)
    if (m.leafOf[m.nodeOf[r]] != m.leafOf[m.nodeOf[(r + 1) % P]]) ++crossings;
  double spineLatency = m.links.spine.latencyUs * set.steps * crossings / P;
  return tune::ringSetUs(noSpineLatency, set, kChannels) + spineLatency;
}

double NcclModel::treeUs(const tune::Machine& m, double bytes) const {
  // Node heads are each node's first rank; the trees join them, chains join
  // the ranks of a node. Every edge carries half the data (one tree) each
  // way; a chain carries both halves.
  const int N = nNodes_;
  std::vector<int> head(N, -1);
  for (int r = nRanks_ - 1; r >= 0; --r) head[m.nodeOf[r]] = r;
  std::vector<tune::Transfer> msgs;
  int depth = 0;
  for (int tree = 0; tree < 2; ++tree) {
    for (int i = 1; i < N; ++i) {
      // Binary tree over 0..N-1 rooted at 0: the parent clears i's lowest set bit.
      int parent = i & (i - 1);
      int a = tree == 0 ? i : N - 1 - i, b = tree == 0 ? parent : N - 1 - parent;
      msgs.push_back({head[a], head[b]});
      msgs.push_back({head[b], head[a]});
    }
  }
  for (int n = 1; n < N; n <<= 1) ++depth;
  int chain = 0;
  for (int r = 0; r + 1 < nRanks_; ++r)
    if (m.nodeOf[r] == m.nodeOf[r + 1]) {
      for (int k = 0; k < 2; ++k) {
        msgs.push_back({r, r + 1});
        msgs.push_back({r + 1, r});
      }
      if (m.nodeOf[r] == 0) ++chain;
    }
  double t = tune::exchangeUs(m, msgs, bytes / 2, true, kChannels);
  // Pipeline fill: up and down the tree and the chains. Subtrees are ranges
  // of nodes, so a path to the root crosses the spine about once.
  double spine = m.nleaves() > 1 ? m.links.spine.latencyUs : 0;
  return t + 2 * (depth * m.links.net.latencyUs + spine + chain * m.links.shm.latencyUs);
}

double NcclModel::patUs(const tune::Machine& m, int coll, double bytes) const {
  const int P = nRanks_;
  const double block = bytes / P;
  std::vector<int> dists;
  for (int d = 1; d < P; d <<= 1) dists.push_back(d);
  if (coll == ncclFuncReduceScatter) std::reverse(dists.begin(), dists.end());
  double t = 0;
  for (int d : dists) {
    std::vector<tune::Transfer> msgs;
    for (int r = 0; r < P; ++r) msgs.push_back({r, (r + d) % P});
    int blocks = std::min(d, P - d);
    t += tune::exchangeUs(m, msgs, blocks * block, coll == ncclFuncReduceScatter, kChannels);
  }
  return t;
}

double NcclModel::us(int coll, int algo, int proto, size_t nBytes, bool realFabric) const {
  if (nRanks_ <= 1 || !modelled(coll, algo)) return 0;
  tune::Machine m = machine(algo, proto, realFabric);
  const double bytes = static_cast<double>(nBytes);
  double t;
  if (algo == NCCL_ALGO_TREE) t = treeUs(m, bytes);
  else if (algo == NCCL_ALGO_PAT) t = patUs(m, coll, bytes);
  else t = ringUs(m, coll, bytes);
  return lat_.base[algo][proto] + t;
}

double NcclModel::fabricFactor(int coll, int algo, int proto, size_t nBytes) const {
  if (nNodes_ <= 1 || !modelled(coll, algo)) return 1;
  double flat = us(coll, algo, proto, nBytes, false);
  double real = us(coll, algo, proto, nBytes, true);
  if (!(flat > 0) || !(real > 0)) return 1;
  return std::max(1.0, real / flat);
}

}  // namespace ncclplugin
}  // namespace hoccl
