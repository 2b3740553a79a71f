// HO-Ring's cost plan (horing.cc builds the schedule): the same levels —
// the intra-group ring, the rails (with a switch level: under each switch,
// then across), the intra-group ring back — overlapped in a pipeline of K
// chunks.
#include <algorithm>
#include <cmath>

#include "algorithms/cost.h"
#include "algorithms/phases.h"
#include "algorithms/registry.h"

namespace hoccl {
namespace {

// The groups, rails and switch level the builder would use.
struct Shape {
  Hierarchy h;
  bool sw = false;
  int W = 1, n = 1;
  int S() const { return h.rails; }
  int N() const { return h.ngroups(); }
};

Shape shapeOf(const CostQuery& q) {
  Shape s;
  s.h = queryHierarchy(q);
  const char* why = nullptr;
  s.sw = switchLevel(s.h, &s.W, &s.n, &why);
  return s;
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

// horing.cc's default policy for 4-byte elements (all-reduce: the part's
// length; the others: one block's part times P, the same number).
int defaultChunks(double M, int C) {
  const double moved = M / 4 / C;
  return int(std::clamp(std::floor(moved / double(kElemsPerPipelineChunk)), 1.0, double(kMaxPipelineChunks)));
}

}  // namespace

CostPlan horingCost(const CostQuery& q) {
  const Shape s = shapeOf(q);
  const int P = q.nranks, N = s.N(), S = s.S();
  const double M = q.bytes;
  const int K = q.pipelineChunks > 0 ? q.pipelineChunks : defaultChunks(M, q.channels);
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
  CostPlan plan;
  plan.shape = s.sw ? "horing, switch level" : "horing";
  std::vector<CostPhase>& ph = plan.phases;
  if (q.coll == CollKind::AllReduce) {
    if (N == 1) {
      plan = ringCost(q);
      plan.shape = "horing (one node: a plain ring)";
      return plan;
    }
    if (!(intra && N > 1) && !s.sw) {  // groups of one: a ring through the rail
      plan.shape = "horing (a plain ring)";
      ph.push_back(ringsPhase({railMembers(s, 0)}, M / N, N - 1, true));
      ph.push_back(ringsPhase({railMembers(s, 0)}, M / N, N - 1, false));
      return plan;
    }
    auto fused = [](CostPhase p) {
      p.fused = true;
      return p;
    };
    if (intra) ph.push_back(ringsPhase(groups, M / G, G - 1, true));
    if (s.sw) {
      const double part = M / S / s.n;
      ph.push_back(ringsPhase(rails(under), part, s.n - 1, true));
      ph.push_back(ringsPhase(rails(across), part / s.W, s.W - 1, true));
      ph.push_back(fused(ringsPhase(rails(across), part / s.W, s.W - 1, false)));
      ph.push_back(ringsPhase(rails(under), part, s.n - 1, false));
    } else {
      ph.push_back(ringsPhase(rails(whole), M / S / N, N - 1, true));
      ph.push_back(fused(ringsPhase(rails(whole), M / S / N, N - 1, false)));
    }
    if (intra) ph.push_back(ringsPhase(groups, M / G, G - 1, false));
  } else {
    const bool rs = q.coll == CollKind::ReduceScatter;
    const double block = M / P;
    // Intra: one ring pass per group q (blocks of ranks (q, s)): N(G-1)
    // steps of one block.
    std::vector<CostPhase> railPh;
    if (N > 1) {
      if (s.sw) {
        railPh.push_back(ringsPhase(rails(under), block, s.W * (s.n - 1), rs));
        railPh.push_back(ringsPhase(rails(across), block, s.W - 1, rs));
        if (!rs) std::reverse(railPh.begin(), railPh.end());
      } else {
        railPh.push_back(ringsPhase(rails(whole), block, N - 1, rs));
      }
    }
    if (rs && intra) ph.push_back(ringsPhase(groups, block, N * (G - 1), rs));
    ph.insert(ph.end(), railPh.begin(), railPh.end());
    if (!rs && intra) ph.push_back(ringsPhase(groups, block, N * (G - 1), rs));
  }
  plan.pipelineChunks = K;
  return plan;
}

}  // namespace hoccl
