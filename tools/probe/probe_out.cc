// What the probe writes (topology file, tune file, summary) and the
// simulated network its tests and plan estimates use (probe_plan.h).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "tools/probe/probe_plan.h"

namespace hoccl {
namespace probe {
namespace {

std::string num(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.3g", v);
  return buf;
}

std::string quoted(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) >= 0x20) out += c;
  }
  return out + "\"";
}

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

void toLineRate(Result* r, int mtu) {
  if (mtu <= 52) return;
  const double f = double(mtu + 14) / double(mtu - 52);
  r->lineFactor = f;
  for (double& g : r->nodeGbps) g *= f;
  for (Group& g : r->groups) g.linkGbps *= f, g.uplinkGbps *= f;
  // Queues and buckets hold frames, as tbf and switch buffers count them.
  for (double* kb : {&r->netBufferKB, &r->spineBufferKB, &r->netBurstKB, &r->spineBurstKB}) *kb *= f;
}

std::string topologyJson(const Result& r, const std::vector<std::string>& hosts) {
  std::ostringstream o;
  const bool tree = r.grouped && r.groups.size() > 1;
  o << "{\"version\":1,\n \"comment\":"
    << quoted("measured by hoccl-topo probe: " + std::to_string(hosts.size()) + " nodes, " +
              (r.grouped ? std::to_string(r.groups.size()) + " leaf group(s)" : "leaf groups unknown") +
              ", confidence " + r.confidence)
    << ",\n \"switches\":[\n";
  for (size_t g = 0; g < r.groups.size(); ++g) {
    const Group& gr = r.groups[g];
    o << "  {\"name\":" << quoted(r.grouped ? "leaf" + std::to_string(g) : "network");
    if (tree) o << ",\"parent\":\"spine\"";
    o << ",\"nodes\":[";
    for (size_t i = 0; i < gr.nodes.size(); ++i) o << (i ? "," : "") << quoted(hosts[gr.nodes[i]]);
    o << "]";
    if (gr.linkGbps > 0) o << ",\"link_gbps\":" << num(gr.linkGbps);
    if (tree && !gr.uplinkLowerBound && gr.uplinkGbps > 0) o << ",\"uplink_gbps\":" << num(gr.uplinkGbps);
    std::string c;
    if (hosts.size() == 1) c = "one node: nothing between nodes was measured";
    else if (!r.grouped) c = "the probe could not tell which nodes share a leaf; this switch stands for the whole network";
    else if (tree && gr.uplinkLowerBound)
      c = "uplink never a bottleneck (carried " + num(gr.uplinkGbps) + " Gbit/s)";
    double lo = 1e300, hi = 0;
    for (int v : gr.nodes) lo = std::min(lo, r.nodeGbps[v]), hi = std::max(hi, r.nodeGbps[v]);
    if (hi > 1.15 * lo) {
      c += std::string(c.empty() ? "" : "; ") + "node links:";
      for (int v : gr.nodes) c += " " + hosts[v] + " " + num(r.nodeGbps[v]);
    }
    if (!c.empty()) o << ",\"comment\":" << quoted(c);
    o << "}" << (g + 1 < r.groups.size() || tree ? "," : "") << "\n";
  }
  if (tree) o << "  {\"name\":\"spine\"}\n";
  o << " ]}\n";
  return o.str();
}

std::string tuneConf(const Result& r) {
  std::ostringstream o;
  o << "# written by hoccl-topo probe (docs/topology-file.md): queues and token buckets it measured\n";
  if (r.intraRttUs > 0)
    o << "# TCP round trips: " << num(r.intraRttUs) << " us inside a leaf"
      << (r.interRttUs > 0 ? ", " + num(r.interRttUs) + " us across the spine" : std::string()) << "\n";
  auto line = [&](const char* link, double buf, double burst) {
    if (buf <= 0 && burst <= 0) return;
    o << "link " << link;
    if (burst > 0) o << " burst_kb=" << num(burst);
    if (buf > 0) o << " buffer_kb=" << num(buf);
    o << "\n";
  };
  line("net", r.netBufferKB, r.netBurstKB);
  if (r.grouped && r.groups.size() > 1) line("spine", r.spineBufferKB, r.spineBurstKB);
  return o.str();
}

std::string summary(const Result& r, const std::vector<std::string>& hosts) {
  std::ostringstream o;
  o << "probe: " << hosts.size() << " nodes, " << r.rounds << " rounds, "
    << (r.grouped ? std::to_string(r.groups.size()) + " leaf group(s)" : std::string("leaf groups unknown"))
    << ", confidence " << r.confidence << "\n";
  for (size_t g = 0; g < r.groups.size(); ++g) {
    const Group& gr = r.groups[g];
    o << "  " << (r.grouped ? "leaf" + std::to_string(g) : std::string("network")) << ": node links "
      << num(gr.linkGbps) << " Gbit/s";
    if (r.grouped && r.groups.size() > 1)
      o << ", uplink " << (gr.uplinkLowerBound ? ">= " : "") << num(gr.uplinkGbps) << " Gbit/s"
        << (gr.uplinkLowerBound ? " (never a bottleneck)" : "");
    o << "\n   ";
    for (int v : gr.nodes) o << " " << hosts[v] << " (" << num(r.nodeGbps[v]) << ")";
    o << "\n";
  }
  if (r.lineFactor != 1)
    o << "  rates on the wire: TCP goodput x " << num(r.lineFactor) << " (Ethernet and TCP/IP headers)\n";
  o << "  queues: node link " << num(r.netBufferKB) << " kB";
  if (r.grouped && r.groups.size() > 1) o << ", uplink " << num(r.spineBufferKB) << " kB";
  o << "; token buckets: node link " << num(r.netBurstKB) << " kB";
  if (r.grouped && r.groups.size() > 1) o << ", uplink " << num(r.spineBurstKB) << " kB";
  o << "\n";
  for (const std::string& n : r.notes) o << "  note: " << n << "\n";
  // The lowest round trip of every pair, in us ("." where not measured:
  // with --sample only the sampled nodes ping each other).
  const size_t n = r.rttUs.size();
  if (n > 1 && n <= 64) {
    o << "  round trips (us):\n      ";
    for (size_t j = 0; j < n; ++j) o << (j < 10 ? "    n" : "   n") << j;
    o << "\n";
    for (size_t i = 0; i < n; ++i) {
      o << (i < 10 ? "    n" : "   n") << i << " ";
      for (size_t j = 0; j < n; ++j) {
        char cell[16];
        if (i == j) std::snprintf(cell, sizeof cell, "%6s", "-");
        else if (r.rttUs[i][j] <= 0) std::snprintf(cell, sizeof cell, "%6s", ".");  // not measured (--sample)
        else std::snprintf(cell, sizeof cell, "%6.1f", r.rttUs[i][j]);
        o << cell;
      }
      o << "\n";
    }
  }
  return o.str();
}

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
