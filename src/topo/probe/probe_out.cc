// What the probe writes: the topology file, the tune file and a summary
// for people (probe_plan.h).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "src/topo/probe/probe_plan.h"

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

}  // namespace probe
}  // namespace hoccl
