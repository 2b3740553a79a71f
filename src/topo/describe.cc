// Human-readable views of a System: the switch / node / rank tree and the
// rank x rank link-class matrix (as `nvidia-smi topo -m` prints GPUs).
#include <algorithm>
#include <cstdio>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "src/topo/topology.h"

namespace hoccl {
namespace topo {

namespace {

constexpr int kMaxMatrixRanks = 256;

std::string fmt(const char* f, double v) {
  char buf[64];
  snprintf(buf, sizeof buf, f, v);
  return buf;
}

std::string plural(long long n, const char* one, const char* many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

std::string gbps(double g) { return g > 0 ? fmt("%g Gb/s", g) : "speed ?"; }

std::string bytes(uint64_t b) {
  if (b >= (1ull << 30)) return fmt("%.1f GiB", b / double(1ull << 30));
  if (b >= (1ull << 20)) return fmt("%.1f MiB", b / double(1ull << 20));
  return std::to_string(b) + " B";
}

std::string basename(const std::string& p) { return p.substr(p.rfind('/') + 1); }

class Tree {
 public:
  explicit Tree(const System& sys) : sys_(sys) {
    for (size_t r = 0; r < sys.ranks.size(); ++r) ranksOf_[sys.ranks[r].node].push_back(static_cast<int>(r));
    for (size_t i = 0; i < sys.nodes.size(); ++i) nodesUnder_[sys.nodes[i].switchName].push_back(static_cast<int>(i));
    for (const SwitchInfo& s : sys.switches) known_.insert(s.name);
  }

  std::string text() {
    out_ = "System: " + plural(static_cast<long long>(sys_.nodes.size()), "node", "nodes") + ", " +
           plural(static_cast<long long>(sys_.ranks.size()), "rank", "ranks") + ", " +
           plural(static_cast<long long>(sys_.switches.size()), "switch", "switches") + "\n";
    for (const SwitchInfo& s : sys_.switches)
      if (s.parent.empty() || !known_.count(s.parent)) switchTree(s, 0);
    for (auto& [name, nodes] : nodesUnder_) {
      if (name.empty() || known_.count(name)) continue;
      line(0, "switch " + name + " (not described by the topology file)");
      for (int n : nodes) node(n, 1);
    }
    auto none = nodesUnder_.find("");
    if (none != nodesUnder_.end()) {
      line(0, sys_.switches.empty() ? "nodes (no switches described: one switch is assumed)" : "nodes under no switch");
      for (int n : none->second) node(n, 1);
    }
    return out_;
  }

 private:
  const System& sys_;
  std::map<int, std::vector<int>> ranksOf_;
  std::map<std::string, std::vector<int>> nodesUnder_;
  std::set<std::string> known_;
  std::set<std::string> shown_;
  std::string out_;

  void line(int depth, const std::string& s) { out_ += std::string(2 * depth, ' ') + s + "\n"; }

  void switchTree(const SwitchInfo& s, int depth) {
    if (!shown_.insert(s.name).second) return;  // a cycle, or listed twice
    std::string head = "switch " + s.name;
    std::vector<std::string> attrs;
    if (s.linkGbps > 0) attrs.push_back((s.nodes.empty() ? "links below " : "node links ") + gbps(s.linkGbps));
    if (s.uplinkGbps > 0) attrs.push_back("uplink " + gbps(s.uplinkGbps));
    for (size_t i = 0; i < attrs.size(); ++i) head += (i ? ", " : "  [") + attrs[i];
    if (!attrs.empty()) head += "]";
    line(depth, head);
    for (const SwitchInfo& c : sys_.switches)
      if (c.parent == s.name) switchTree(c, depth + 1);
    auto it = nodesUnder_.find(s.name);
    size_t present = 0;
    if (it != nodesUnder_.end()) {
      for (int n : it->second) node(n, depth + 1);
      present = it->second.size();
    }
    if (s.nodes.size() > present)
      line(depth + 1, "(" + plural(static_cast<long long>(s.nodes.size() - present), "more node", "more nodes") +
                          " listed here, not in this system)");
  }

  void node(int i, int d) {
    const NodeInfo& n = sys_.nodes[i];
    std::string head = "node " + (n.hostname.empty() ? n.hostId : n.hostname);
    head += "  (host id " + n.hostId + ", source " + (n.source.empty() ? "?" : n.source) + ")";
    line(d, head);
    line(d + 1, "cpus   " + plural(n.packages, "package", "packages") + ", " + plural(n.cores, "core", "cores") +
                    ", " + plural(n.pus, "PU", "PUs"));
    for (const NumaInfo& m : n.numa)
      line(d + 1, "numa   " + std::to_string(m.id) + ": cpus " + (m.cpus.empty() ? "?" : m.cpus) + ", " +
                      bytes(m.memBytes));
    size_t w = 0;
    for (const NicInfo& c : n.nics) w = std::max(w, c.name.size() + (c.port ? 2 : 0));
    for (const NicInfo& c : n.nics) {
      std::string name = c.name + (c.port ? ":" + std::to_string(c.port) : "");
      char buf[512];
      snprintf(buf, sizeof buf, "nic    %-*s  %-10s  %-12s  numa %-2s  %-4s", static_cast<int>(w), name.c_str(),
               c.kind.c_str(), gbps(c.speedGbps).c_str(), c.numaNode >= 0 ? std::to_string(c.numaNode).c_str() : "-",
               c.up ? "up" : "down");
      std::string s = buf;
      while (!s.empty() && s.back() == ' ') s.pop_back();
      if (!c.address.empty()) s += "  " + c.address;
      if (!c.pciPath.empty()) s += "  pci " + basename(c.pciPath);
      line(d + 1, s);
    }
    for (const GpuInfo& g : n.gpus) {
      std::string s = "gpu    " + std::to_string(g.index) + ": " + (g.name.empty() ? "?" : g.name);
      if (!g.pciBusId.empty()) s += "  pci " + g.pciBusId;
      s += "  numa " + (g.numaNode >= 0 ? std::to_string(g.numaNode) : std::string("-"));
      if (!g.nvlinkPeers.empty()) {
        s += "  nvlink to";
        for (int p : g.nvlinkPeers) s += " " + std::to_string(p);
      }
      if (g.p2pProbed) {
        s += "  p2p to";
        for (int p : g.p2pPeers) s += " " + std::to_string(p);
        if (g.p2pPeers.empty()) s += " none";
      }
      line(d + 1, s);
    }
    line(d + 1, "gpus   " + (n.gpuStatus.empty() ? std::string("?") : n.gpuStatus));
    line(d + 1, "verbs  " + (n.verbsStatus.empty() ? std::string("?") : n.verbsStatus));
    auto it = ranksOf_.find(i);
    if (it == ranksOf_.end()) {
      line(d + 1, "ranks  none");
      return;
    }
    std::string s = "ranks  ";
    for (size_t k = 0; k < it->second.size(); ++k) {
      int r = it->second[k];
      const RankPlacement& p = sys_.ranks[r];
      s += (k ? ", " : "") + std::to_string(r) + " (local " + std::to_string(p.localRank);
      if (p.pid) s += ", pid " + std::to_string(p.pid);
      s += ")";
    }
    line(d + 1, s);
  }
};

}  // namespace

std::string describeSystem(const System& sys) { return Tree(sys).text(); }

std::string linkMatrix(const System& sys) {
  int n = static_cast<int>(sys.ranks.size());
  std::string out;
  const char* legend =
      "Legend:\n"
      "  SELF  = the same rank\n"
      "  SHM   = the same node: shared memory\n"
      "  NET   = different nodes under one leaf switch\n"
      "  SPINE = nodes under different leaf switches: the traffic crosses uplinks\n";
  if (n > kMaxMatrixRanks) {
    long long count[4] = {0, 0, 0, 0};
    for (int a = 0; a < n; ++a)
      for (int b = 0; b < n; ++b) ++count[static_cast<int>(sys.link(a, b))];
    out = "Link classes of " + std::to_string(n) + " ranks (matrix omitted above " + std::to_string(kMaxMatrixRanks) +
          " ranks), ordered pairs:\n";
    for (int c = 0; c < 4; ++c) {
      char buf[96];
      snprintf(buf, sizeof buf, "  %-6s %lld\n", linkClassName(static_cast<LinkClass>(c)), count[c]);
      out += buf;
    }
    return out + legend;
  }
  int w = std::max(6, static_cast<int>(std::to_string(n - 1).size()) + 2);
  auto cell = [&](const std::string& s) { return s + std::string(w > static_cast<int>(s.size()) ? w - s.size() : 1, ' '); };
  out += cell("");
  for (int b = 0; b < n; ++b) out += cell("r" + std::to_string(b));
  out += "node\n";
  for (int a = 0; a < n; ++a) {
    out += cell("r" + std::to_string(a));
    for (int b = 0; b < n; ++b) out += cell(linkClassName(sys.link(a, b)));
    int node = sys.ranks[a].node;
    bool valid = node >= 0 && node < static_cast<int>(sys.nodes.size());
    std::string host = valid ? (sys.nodes[node].hostId.empty() ? sys.nodes[node].hostname : sys.nodes[node].hostId)
                             : "?";
    std::string sw = valid && !sys.nodes[node].switchName.empty() ? " (" + sys.nodes[node].switchName + ")" : "";
    out += host + sw + "\n";
  }
  return out + "\n" + legend;
}

}  // namespace topo
}  // namespace hoccl
