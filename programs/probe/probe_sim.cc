// The simulated network of probe_sim.h.
#include "programs/probe/probe_sim.h"

#include <algorithm>
#include <cmath>

namespace hoccl {
namespace probe {
namespace {

// splitmix64: a small deterministic generator for the simulated noise.
struct Rng {
  uint64_t s;
  uint64_t next() {
    uint64_t z = (s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  double uniform() { return double(next() >> 11) / double(1ull << 53); }
};

}  // namespace

std::vector<Report> SimNet::run(const Round& round) {
  const int n = int(leafOf.size());
  std::vector<Report> rep(n);
  Rng rng{seed};
  seed = rng.next();
  auto rttOf = [&](int a, int b) {
    return !rttUs.empty() ? rttUs[a][b] : leafOf[a] == leafOf[b] ? rttLeafUs : rttSpineUs;
  };
  for (const PingPair& p : round.pings) {
    const double base = rttOf(p.from, p.to);
    rep[p.from].rttMinUs = base + noiseUs * 0.2 * rng.uniform();
    rep[p.from].rttMedUs = base + noiseUs * (0.5 + rng.uniform());
    rep[p.from].rttP90Us = base + noiseUs * (2 + rng.uniform());
  }
  // Max-min fair shares: links are 4 per node and leaf (out, in, up, down).
  const int L = int(uplinkGbps.size());
  std::vector<double> capacity(4 * n + 2 * L, 0);
  for (int i = 0; i < n; ++i) capacity[2 * i] = capacity[2 * i + 1] = nodeGbps[i];
  for (int l = 0; l < L; ++l) capacity[2 * n + 2 * l] = capacity[2 * n + 2 * l + 1] = uplinkGbps[l];
  const size_t F = round.flows.size();
  std::vector<std::vector<int>> uses(F);
  for (size_t f = 0; f < F; ++f) {
    const Flow& fl = round.flows[f];
    uses[f] = {2 * fl.src, 2 * fl.dst + 1};
    if (leafOf[fl.src] != leafOf[fl.dst]) {
      if (uplinkGbps[leafOf[fl.src]] > 0) uses[f].push_back(2 * n + 2 * leafOf[fl.src]);
      if (uplinkGbps[leafOf[fl.dst]] > 0) uses[f].push_back(2 * n + 2 * leafOf[fl.dst] + 1);
    }
  }
  std::vector<double> rate(F, 0);
  std::vector<int> bottleneck(F, -1);
  std::vector<bool> fixed(F, false);
  std::vector<double> left = capacity;
  // Water filling: the link with the smallest fair share fixes its flows,
  // which leave the others; per link, its unfixed flows (in flow order).
  std::vector<int> count(capacity.size(), 0);
  std::vector<std::vector<size_t>> flowsOn(capacity.size());
  for (size_t f = 0; f < F; ++f)
    for (int l : uses[f]) ++count[size_t(l)], flowsOn[size_t(l)].push_back(f);
  std::vector<int> active;  // links some flow uses, in index order
  for (size_t l = 0; l < count.size(); ++l)
    if (count[l] > 0) active.push_back(int(l));
  for (size_t done = 0; done < F;) {
    double share = 1e300;
    int link = -1;
    for (int l : active)
      if (count[size_t(l)] > 0 && left[size_t(l)] / count[size_t(l)] < share)
        share = left[size_t(l)] / count[size_t(l)], link = l;
    for (size_t f : flowsOn[size_t(link)]) {
      if (fixed[f]) continue;
      rate[f] = share;
      bottleneck[f] = link;
      fixed[f] = true;
      ++done;
      for (int l : uses[f]) left[size_t(l)] -= share, --count[size_t(l)];
    }
  }
  for (size_t f = 0; f < F; ++f) {
    const Flow& fl = round.flows[f];
    const bool up = bottleneck[f] >= 2 * n;
    const double hiccup = rng.uniform() < glitch ? 0.4 : 1.0;
    rep[fl.dst].rxGbps += rate[f] * hiccup * goodput * (1 + 0.01 * (rng.uniform() - 0.5));
    rep[fl.dst].rxBurstKB = up ? spineBurstKB : netBurstKB;
    if (fl.ping) {
      const double buf = up ? spineBufferKB : netBufferKB;
      const double linkRate = capacity[bottleneck[f]];
      rep[fl.src].rttP90Us = rttOf(fl.src, fl.dst) + buf / (linkRate * 0.125);
    }
  }
  return rep;
}

}  // namespace probe
}  // namespace hoccl
