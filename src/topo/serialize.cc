// Writing the topology file format: the HOCCL_TOPO_DUMP_FILE dump, and one
// node as the wire record the bootstrap exchanges. Both read back through
// parseTopoFile, so there is one format and one parser.
#include <string>
#include <vector>

#include "base/json.h"
#include "src/topo/topology.h"

namespace hoccl {
namespace topo {

namespace {

using json::Value;

constexpr size_t kMaxNodeRecordBytes = 1u << 20;

// A name a hostlist expression can carry as itself.
bool hostlistSafe(const std::string& n) {
  if (n.empty()) return false;
  for (char c : n)
    if (c == '[' || c == ']' || c == ',' || c == ' ' || c == '\t' || c == '\n' || c == '\r') return false;
  return true;
}

// "node01,node02,node03,node07,gpu1" -> "node[01-03,07],gpu1". Names keep
// their order; only names whose last run of digits has the same length merge,
// so the expansion gives back exactly the input.
std::string compressHostlist(const std::vector<std::string>& names) {
  struct Split {
    std::string prefix, digits, suffix;
  };
  auto split = [](const std::string& n) {
    size_t end = n.find_last_of("0123456789");
    if (end == std::string::npos) return Split{n, "", ""};
    size_t start = end;
    while (start > 0 && n[start - 1] >= '0' && n[start - 1] <= '9') --start;
    if (end - start + 1 > 18) return Split{n, "", ""};
    return Split{n.substr(0, start), n.substr(start, end - start + 1), n.substr(end + 1)};
  };
  std::string out;
  size_t i = 0;
  while (i < names.size()) {
    Split first = split(names[i]);
    if (first.digits.empty()) {
      out += (out.empty() ? "" : ",") + names[i];
      ++i;
      continue;
    }
    // One bracket group: following names with the same prefix, suffix and digit count.
    std::string group;
    size_t j = i;
    while (j < names.size()) {
      Split s = split(names[j]);
      if (s.digits.empty() || s.prefix != first.prefix || s.suffix != first.suffix ||
          s.digits.size() != first.digits.size())
        break;
      // A run of consecutive numbers.
      long long lo = std::stoll(s.digits), hi = lo;
      size_t k = j + 1;
      while (k < names.size()) {
        Split t = split(names[k]);
        if (t.digits.empty() || t.prefix != first.prefix || t.suffix != first.suffix ||
            t.digits.size() != first.digits.size() || std::stoll(t.digits) != hi + 1)
          break;
        ++hi;
        ++k;
      }
      group += group.empty() ? "" : ",";
      group += s.digits;
      if (hi > lo) group += "-" + split(names[k - 1]).digits;
      j = k;
    }
    std::string item = (j - i == 1) ? names[i] : first.prefix + "[" + group + "]" + first.suffix;
    out += (out.empty() ? "" : ",") + item;
    i = j;
  }
  // Belt and braces: if the expression does not expand back, list the names.
  std::vector<std::string> back;
  if (!expandHostlist(out, &back).ok() || back != names) {
    out.clear();
    for (const std::string& n : names) out += (out.empty() ? "" : ",") + n;
  }
  return out;
}

Value nodeEntry(const NodeInfo& n) {
  Value e = Value::object();
  e.set("host", n.hostId);
  e.set("hostname", n.hostname);
  e.set("source", n.source);
  if (!n.switchName.empty()) e.set("switch", n.switchName);
  e.set("packages", n.packages);
  e.set("cores", n.cores);
  e.set("pus", n.pus);
  Value& numa = e.set("numa", Value::array());
  for (const NumaInfo& m : n.numa) {
    Value& x = numa.push(Value::object());
    x.set("id", m.id);
    x.set("cpus", m.cpus);
    x.set("mem_bytes", m.memBytes);
  }
  Value& nics = e.set("nics", Value::array());
  for (const NicInfo& c : n.nics) {
    Value& x = nics.push(Value::object());
    x.set("name", c.name);
    x.set("kind", c.kind);
    x.set("speed_gbps", c.speedGbps);
    x.set("numa", c.numaNode);
    x.set("up", c.up);
    if (c.port) x.set("port", c.port);
    if (!c.address.empty()) x.set("address", c.address);
    if (!c.pciPath.empty()) x.set("pci_path", c.pciPath);
  }
  Value& gpus = e.set("gpus", Value::array());
  for (const GpuInfo& g : n.gpus) {
    Value& x = gpus.push(Value::object());
    x.set("index", g.index);
    x.set("name", g.name);
    x.set("pci_bus_id", g.pciBusId);
    x.set("numa", g.numaNode);
    Value& peers = x.set("nvlink_peers", Value::array());
    for (int p : g.nvlinkPeers) peers.push(p);
    if (g.p2pProbed) {
      Value& p2p = x.set("p2p_peers", Value::array());
      for (int p : g.p2pPeers) p2p.push(p);
    }
  }
  e.set("gpu_status", n.gpuStatus);
  e.set("verbs_status", n.verbsStatus);
  return e;
}

}  // namespace

std::string toTopoFile(const System& sys) {
  Value doc = Value::object();
  doc.set("version", 1);
  doc.set("comment", "hoccl topology: docs/topology-file.md; feed back with HOCCL_TOPO_FILE");
  Value& switches = doc.set("switches", Value::array());
  for (const SwitchInfo& s : sys.switches) {
    Value& x = switches.push(Value::object());
    x.set("name", s.name);
    if (!s.parent.empty()) x.set("parent", s.parent);
    std::vector<std::string> listed;
    for (const std::string& n : s.nodes)
      if (hostlistSafe(n)) listed.push_back(n);  // others are placed by their node's "switch"
    if (!listed.empty()) x.set("nodes", compressHostlist(listed));
    if (s.linkGbps > 0) x.set("link_gbps", s.linkGbps);
    if (s.uplinkGbps > 0) x.set("uplink_gbps", s.uplinkGbps);
  }
  Value& nodes = doc.set("nodes", Value::array());
  for (const NodeInfo& n : sys.nodes) nodes.push(nodeEntry(n));
  if (!sys.ranks.empty()) {
    Value& ranks = doc.set("ranks", Value::array());
    for (size_t r = 0; r < sys.ranks.size(); ++r) {
      const RankPlacement& p = sys.ranks[r];
      Value& x = ranks.push(Value::object());
      x.set("rank", static_cast<int64_t>(r));
      bool valid = p.node >= 0 && p.node < static_cast<int>(sys.nodes.size());
      x.set("node", valid ? sys.nodes[p.node].hostId : std::string("?"));
      x.set("local_rank", p.localRank);
      x.set("pid", p.pid);
    }
  }
  return json::write(doc, 2);
}

std::string serializeNode(const NodeInfo& n) {
  Value doc = Value::object();
  doc.set("version", 1);
  doc.set("nodes", Value::array()).push(nodeEntry(n));
  return json::write(doc, 0);
}

Status deserializeNode(const std::string& bytes, NodeInfo* out) {
  if (bytes.size() > kMaxNodeRecordBytes)
    return errorf(hocclInvalidArgument, "node record of %zu bytes is larger than the limit of %zu", bytes.size(),
                  kMaxNodeRecordBytes);
  TopoOverrides o;
  HOCCL_TRY(parseTopoFile(bytes, "(node record)", &o));
  if (o.nodes.size() != 1 || !o.switches.empty())
    return errorf(hocclInvalidArgument, "node record: expected exactly one node and no switches, found %zu and %zu",
                  o.nodes.size(), o.switches.size());
  *out = std::move(o.nodes[0]);
  return Status();
}

}  // namespace topo
}  // namespace hoccl
