// Our topology file (JSON, docs/topology-file.md) -> TopoOverrides.
#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <map>
#include <set>
#include <string>
#include <unordered_set>
#include <vector>

#include "base/json.h"
#include "src/topo/topology.h"

namespace hoccl {
namespace topo {

namespace {

using json::Member;
using json::Value;

const char* const kKinds[] = {"ethernet", "infiniband", "roce", "loopback"};

class Reader {
 public:
  Reader(const std::string& path, const ParseLimits& limits) : path_(path), limits_(limits) {}

  Status at(int line, int column, const char* fmt, ...) const __attribute__((format(printf, 4, 5))) {
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    return errorf(hocclInvalidArgument, "topology file %s: line %d, column %d: %s", path_.c_str(), line, column, buf);
  }

  Status unknownKey(const Member& m, const char* where, const char* known) const {
    return at(m.line, m.column, "unknown key %s in %s (known keys: %s)", json::quote(m.key).c_str(), where, known);
  }

  Status typeError(const Member& m, const char* want) const {
    return at(m.value.line, m.value.column, "\"%s\" must be %s, not %s", m.key.c_str(), want,
              json::typeName(m.value.type()));
  }

  Status object(const Value& v, const char* what) const {
    if (!v.isObject()) return at(v.line, v.column, "%s must be an object, not %s", what, json::typeName(v.type()));
    return Status();
  }

  Status string(const Member& m, std::string* out) const {
    if (!m.value.isString()) return typeError(m, "a string");
    *out = m.value.asString();
    return Status();
  }

  Status name(const Member& m, std::string* out) const {
    HOCCL_TRY(string(m, out));
    if (out->empty()) return at(m.value.line, m.value.column, "\"%s\" must not be empty", m.key.c_str());
    return Status();
  }

  Status integer(const Member& m, long long lo, long long hi, long long* out) const {
    int64_t i = 0;
    bool exact = m.value.asInteger(&i);
    if (!exact || i < lo || i > hi) {
      char want[96];
      snprintf(want, sizeof want, "an integer from %lld to %lld", lo, hi);
      if (!m.value.isNumber()) return typeError(m, want);
      if (exact)
        return at(m.value.line, m.value.column, "\"%s\" must be %s, not %lld", m.key.c_str(), want,
                  static_cast<long long>(i));
      return at(m.value.line, m.value.column, "\"%s\" must be %s, not %.17g", m.key.c_str(), want,
                m.value.asNumber());
    }
    *out = i;
    return Status();
  }

  Status integer(const Member& m, int lo, int* out) const {
    long long v = 0;
    HOCCL_TRY(integer(m, lo, 1 << 30, &v));
    *out = static_cast<int>(v);
    return Status();
  }

  Status gbps(const Member& m, double* out) const {
    if (!m.value.isNumber()) return typeError(m, "a number (Gbit/s)");
    if (m.value.asNumber() < 0)
      return at(m.value.line, m.value.column, "\"%s\" must not be negative", m.key.c_str());
    *out = m.value.asNumber();
    return Status();
  }

  Status boolean(const Member& m, bool* out) const {
    if (!m.value.isBool()) return typeError(m, "true or false");
    *out = m.value.asBool();
    return Status();
  }

  // A hostlist expression, or an array of them.
  Status hostlist(const Member& m, std::vector<std::string>* out) const {
    std::vector<const Value*> exprs;
    if (m.value.isString()) {
      exprs.push_back(&m.value);
    } else if (m.value.isArray()) {
      for (const Value& e : m.value.items()) {
        if (!e.isString())
          return at(e.line, e.column, "\"%s\" entries must be strings (hostlist expressions), not %s", m.key.c_str(),
                    json::typeName(e.type()));
        exprs.push_back(&e);
      }
    } else {
      return typeError(m, "a hostlist string or an array of them");
    }
    std::unordered_set<std::string> seen(out->begin(), out->end());
    for (const Value* e : exprs) {
      std::vector<std::string> names;
      Status st = expandHostlist(e->asString(), &names, limits_.namesPerHostlist);
      if (!st.ok()) return at(e->line, e->column, "%s", st.message().c_str());
      totalNames_ += names.size();
      if (totalNames_ > limits_.namesPerFile)
        return at(e->line, e->column, "the file's hostlists expand to more than %zu names in all", limits_.namesPerFile);
      for (std::string& n : names)
        if (seen.insert(n).second) out->push_back(std::move(n));
    }
    return Status();
  }

  template <typename Fn>
  Status array(const Member& m, const char* what, Fn each) const {
    if (!m.value.isArray()) return typeError(m, "an array");
    for (const Value& e : m.value.items()) {
      HOCCL_TRY(object(e, what));
      HOCCL_TRY(each(e));
    }
    return Status();
  }

  Status numa(const Value& v, NumaInfo* out) const {
    bool haveId = false;
    for (const Member& m : v.members()) {
      if (m.key == "id") {
        HOCCL_TRY(integer(m, 0, &out->id));
        haveId = true;
      } else if (m.key == "cpus") HOCCL_TRY(cpulist(m, &out->cpus));
      else if (m.key == "mem_bytes") {
        long long b = 0;
        HOCCL_TRY(integer(m, 0, 1LL << 53, &b));
        out->memBytes = static_cast<uint64_t>(b);
      } else if (m.key != "comment") return unknownKey(m, "a NUMA entry", "id, cpus, mem_bytes, comment");
    }
    if (!haveId) return at(v.line, v.column, "NUMA entry without \"id\"");
    return Status();
  }

  Status cpulist(const Member& m, std::string* out) const {
    HOCCL_TRY(string(m, out));
    for (char c : *out)
      if (!(c >= '0' && c <= '9') && c != ',' && c != '-')
        return at(m.value.line, m.value.column, "\"cpus\" must be a CPU list such as \"0-15,32-47\"");
    return Status();
  }

  Status nic(const Value& v, NicInfo* out) const {
    bool haveName = false;
    for (const Member& m : v.members()) {
      if (m.key == "name") {
        HOCCL_TRY(name(m, &out->name));
        haveName = true;
      } else if (m.key == "kind") {
        HOCCL_TRY(string(m, &out->kind));
        bool ok = false;
        for (const char* k : kKinds) ok |= out->kind == k;
        if (!ok)
          return at(m.value.line, m.value.column,
                    "\"kind\" must be \"ethernet\", \"infiniband\", \"roce\" or \"loopback\", not %s",
                    json::quote(out->kind).c_str());
      } else if (m.key == "address") HOCCL_TRY(string(m, &out->address));
      else if (m.key == "pci_path") HOCCL_TRY(string(m, &out->pciPath));
      else if (m.key == "numa") HOCCL_TRY(integer(m, -1, &out->numaNode));
      else if (m.key == "port") HOCCL_TRY(integer(m, 0, &out->port));
      else if (m.key == "speed_gbps") HOCCL_TRY(gbps(m, &out->speedGbps));
      else if (m.key == "up") HOCCL_TRY(boolean(m, &out->up));
      else if (m.key != "comment")
        return unknownKey(m, "a NIC entry", "name, kind, speed_gbps, numa, address, pci_path, port, up, comment");
    }
    if (!haveName) return at(v.line, v.column, "NIC entry without \"name\"");
    if (out->kind.empty()) out->kind = "ethernet";
    return Status();
  }

  Status gpu(const Value& v, GpuInfo* out) const {
    bool haveIndex = false;
    for (const Member& m : v.members()) {
      if (m.key == "index") {
        HOCCL_TRY(integer(m, 0, &out->index));
        haveIndex = true;
      } else if (m.key == "name") HOCCL_TRY(string(m, &out->name));
      else if (m.key == "pci_bus_id") HOCCL_TRY(string(m, &out->pciBusId));
      else if (m.key == "numa") HOCCL_TRY(integer(m, -1, &out->numaNode));
      else if (m.key == "nvlink_peers" || m.key == "p2p_peers") {
        if (!m.value.isArray()) return typeError(m, "an array of GPU indices");
        const bool p2p = m.key == "p2p_peers";
        out->p2pProbed = out->p2pProbed || p2p;
        for (const Value& e : m.value.items()) {
          Member item{m.key, e, e.line, e.column};
          int peer = 0;
          HOCCL_TRY(integer(item, 0, &peer));
          (p2p ? out->p2pPeers : out->nvlinkPeers).push_back(peer);
        }
      } else if (m.key != "comment")
        return unknownKey(m, "a GPU entry", "index, name, pci_bus_id, numa, nvlink_peers, p2p_peers, comment");
    }
    if (!haveIndex) return at(v.line, v.column, "GPU entry without \"index\"");
    return Status();
  }

  Status node(const Value& v, NodeInfo* out, std::vector<std::string>* set, const Member** switchMember) const {
    bool haveHost = false;
    for (const Member& m : v.members()) {
      const std::string& k = m.key;
      if (k == "comment") continue;
      if (k == "host") {
        HOCCL_TRY(name(m, &out->hostId));
        haveHost = true;
        continue;
      }
      if (k == "hostname") HOCCL_TRY(string(m, &out->hostname));
      else if (k == "source") HOCCL_TRY(string(m, &out->source));
      else if (k == "switch") {
        HOCCL_TRY(string(m, &out->switchName));
        *switchMember = &m;
      } else if (k == "packages") HOCCL_TRY(integer(m, 0, &out->packages));
      else if (k == "cores") HOCCL_TRY(integer(m, 0, &out->cores));
      else if (k == "pus") HOCCL_TRY(integer(m, 0, &out->pus));
      else if (k == "gpu_status") HOCCL_TRY(string(m, &out->gpuStatus));
      else if (k == "verbs_status") HOCCL_TRY(string(m, &out->verbsStatus));
      else if (k == "numa") {
        HOCCL_TRY(array(m, "a NUMA entry", [&](const Value& e) {
          out->numa.emplace_back();
          return numa(e, &out->numa.back());
        }));
      } else if (k == "nics") {
        HOCCL_TRY(array(m, "a NIC entry", [&](const Value& e) {
          out->nics.emplace_back();
          return nic(e, &out->nics.back());
        }));
      } else if (k == "gpus") {
        HOCCL_TRY(array(m, "a GPU entry", [&](const Value& e) {
          out->gpus.emplace_back();
          return gpu(e, &out->gpus.back());
        }));
        HOCCL_TRY(gpuPeers(m, out->gpus));
      } else {
        return unknownKey(m, "a node entry",
                          "host, hostname, source, switch, packages, cores, pus, numa, nics, gpus, gpu_status, "
                          "verbs_status, comment");
      }
      set->push_back(k);
    }
    if (!haveHost) return at(v.line, v.column, "node entry without \"host\" (a host id or host name)");
    return Status();
  }

  // Every peer a GPU entry names is another GPU entry of its node.
  Status gpuPeers(const Member& m, const std::vector<GpuInfo>& gpus) const {
    std::set<int> indices;
    for (const GpuInfo& g : gpus) indices.insert(g.index);
    for (const GpuInfo& g : gpus)
      for (const auto& [peers, key] : {std::pair{&g.nvlinkPeers, "nvlink_peers"}, {&g.p2pPeers, "p2p_peers"}})
        for (int p : *peers)
          if (p == g.index || !indices.count(p))
            return at(m.line, m.column, "GPU %d's %s names GPU %d, %s", g.index, key, p,
                      p == g.index ? "itself" : "which is not a GPU entry of this node");
    return Status();
  }

  // Where each switch's fields were, for errors found after reading them all.
  struct SwitchLines {
    int line = 0, column = 0;
    const Member* parent = nullptr;
    const Member* nodes = nullptr;
    const Member* switches = nullptr;
  };

  Status switchEntry(const Value& v, SwitchInfo* out, SwitchLines* where) const {
    where->line = v.line, where->column = v.column;
    bool haveName = false;
    for (const Member& m : v.members()) {
      if (m.key == "name") {
        HOCCL_TRY(name(m, &out->name));
        haveName = true;
      } else if (m.key == "parent") {
        HOCCL_TRY(string(m, &out->parent));
        where->parent = &m;
      } else if (m.key == "nodes") {
        HOCCL_TRY(hostlist(m, &out->nodes));
        where->nodes = &m;
      } else if (m.key == "switches") {
        HOCCL_TRY(hostlist(m, &out->children));
        where->switches = &m;
      } else if (m.key == "link_gbps") HOCCL_TRY(gbps(m, &out->linkGbps));
      else if (m.key == "uplink_gbps") HOCCL_TRY(gbps(m, &out->uplinkGbps));
      else if (m.key != "comment")
        return unknownKey(m, "a switch entry", "name, parent, nodes, switches, link_gbps, uplink_gbps, comment");
    }
    if (!haveName) return at(v.line, v.column, "switch entry without \"name\"");
    return Status();
  }

  Status rank(const Value& v, DumpRank* out) const {
    HOCCL_TRY(object(v, "a rank entry"));
    for (const Member& m : v.members()) {
      long long x = 0;
      if (m.key == "rank" || m.key == "local_rank" || m.key == "pid") {
        HOCCL_TRY(integer(m, 0, 1LL << 30, &x));
        (m.key == "rank" ? out->rank : m.key == "local_rank" ? out->localRank : out->pid) = static_cast<int>(x);
      } else if (m.key == "node") {
        HOCCL_TRY(string(m, &out->node));
      } else if (m.key != "comment") {
        return unknownKey(m, "a rank entry", "rank, node, local_rank, pid, comment");
      }
    }
    return Status();
  }

  Status checkSwitches(const std::vector<SwitchInfo>& sw, const std::vector<SwitchLines>& where) const;

 private:
  std::string path_;
  ParseLimits limits_;
  mutable size_t totalNames_ = 0;
};

Status Reader::checkSwitches(const std::vector<SwitchInfo>& sw, const std::vector<SwitchLines>& where) const {
  std::map<std::string, size_t> index;
  for (size_t i = 0; i < sw.size(); ++i) {
    auto [it, fresh] = index.emplace(sw[i].name, i);
    if (!fresh)
      return at(where[i].line, where[i].column, "switch \"%s\" is defined twice (first at line %d)",
                sw[i].name.c_str(), where[it->second].line);
  }
  std::vector<std::string> parent(sw.size());
  for (size_t i = 0; i < sw.size(); ++i) {
    if (sw[i].parent.empty()) continue;
    const Value& v = where[i].parent->value;
    if (!index.count(sw[i].parent))
      return at(v.line, v.column, "parent \"%s\" is not a defined switch", sw[i].parent.c_str());
    parent[i] = sw[i].parent;
  }
  for (size_t i = 0; i < sw.size(); ++i) {
    for (const std::string& c : sw[i].children) {
      const Value& v = where[i].switches->value;
      auto it = index.find(c);
      if (it == index.end()) return at(v.line, v.column, "switch \"%s\" is not defined", c.c_str());
      std::string& p = parent[it->second];
      if (!p.empty() && p != sw[i].name)
        return at(v.line, v.column, "switch \"%s\" is already under \"%s\"", c.c_str(), p.c_str());
      p = sw[i].name;
    }
  }
  for (size_t i = 0; i < sw.size(); ++i) {
    std::string path = sw[i].name;
    size_t cur = i;
    for (size_t steps = 0; !parent[cur].empty(); ++steps) {
      cur = index[parent[cur]];
      path += " -> " + sw[cur].name;
      if (steps >= sw.size() || cur == i)
        return at(where[i].line, where[i].column, "switches form a cycle: %s", path.c_str());
    }
  }
  std::map<std::string, size_t> under;
  for (size_t i = 0; i < sw.size(); ++i) {
    for (const std::string& n : sw[i].nodes) {
      auto [it, fresh] = under.emplace(n, i);
      if (!fresh) {
        const Value& v = where[i].nodes->value;
        return at(v.line, v.column, "node \"%s\" is listed under two switches: \"%s\" (line %d) and \"%s\"",
                  n.c_str(), sw[it->second].name.c_str(), where[it->second].nodes->value.line, sw[i].name.c_str());
      }
    }
  }
  return Status();
}

}  // namespace

Status parseTopoFile(const std::string& text, const std::string& path, TopoOverrides* out,
                     const ParseLimits& limits) {
  Reader r(path, limits);
  Value doc;
  Status st = json::parse(text, &doc);
  if (!st.ok()) return errorf(hocclInvalidArgument, "topology file %s: %s", path.c_str(), st.message().c_str());
  HOCCL_TRY(r.object(doc, "the document"));
  TopoOverrides o;
  std::vector<Reader::SwitchLines> where;
  std::vector<const Member*> switchRefs;
  std::vector<int> nodeLines;
  bool haveVersion = false;
  for (const Member& m : doc.members()) {
    if (m.key == "version") {
      long long v = 0;
      HOCCL_TRY(r.integer(m, 0, 1LL << 30, &v));
      if (v != 1) return r.at(m.value.line, m.value.column, "version %lld is not supported (this is version 1)", v);
      haveVersion = true;
    } else if (m.key == "switches") {
      HOCCL_TRY(r.array(m, "a switch entry", [&](const Value& e) {
        o.switches.emplace_back();
        where.emplace_back();
        return r.switchEntry(e, &o.switches.back(), &where.back());
      }));
    } else if (m.key == "nodes") {
      HOCCL_TRY(r.array(m, "a node entry", [&](const Value& e) {
        o.nodes.emplace_back();
        o.nodeFieldsSet.emplace_back();
        nodeLines.push_back(e.line);
        switchRefs.push_back(nullptr);
        return r.node(e, &o.nodes.back(), &o.nodeFieldsSet.back(), &switchRefs.back());
      }));
    } else if (m.key == "ranks") {
      HOCCL_TRY(r.array(m, "a rank entry", [&](const Value& e) {
        o.ranks.emplace_back();
        return r.rank(e, &o.ranks.back());
      }));
    } else if (m.key != "comment") {
      return r.unknownKey(m, "the document", "version, switches, nodes, ranks, comment");
    }
  }
  if (!haveVersion) return r.at(doc.line, doc.column, "missing \"version\": 1");
  HOCCL_TRY(r.checkSwitches(o.switches, where));
  std::set<std::string> switchNames;
  for (const SwitchInfo& s : o.switches) switchNames.insert(s.name);
  std::map<std::string, int> hosts;
  for (size_t i = 0; i < o.nodes.size(); ++i) {
    auto [it, fresh] = hosts.emplace(o.nodes[i].hostId, nodeLines[i]);
    if (!fresh)
      return r.at(nodeLines[i], 1, "node \"%s\" has two entries (the other at line %d)", o.nodes[i].hostId.c_str(),
                  it->second);
    const std::string& sw = o.nodes[i].switchName;
    if (switchRefs[i] && !sw.empty() && !o.switches.empty() && !switchNames.count(sw))
      return r.at(switchRefs[i]->value.line, switchRefs[i]->value.column, "switch \"%s\" is not defined in this file",
                  sw.c_str());
  }
  *out = std::move(o);
  return Status();
}

Status systemFromDump(const TopoOverrides& o, System* out) {
  System sys;
  sys.nodes = o.nodes;
  std::vector<DumpRank> ranks = o.ranks;
  std::sort(ranks.begin(), ranks.end(), [](const DumpRank& a, const DumpRank& b) { return a.rank < b.rank; });
  for (size_t i = 0; i < ranks.size(); ++i) {
    if (ranks[i].rank != static_cast<int>(i))
      return errorf(hocclInvalidArgument, "topology dump: ranks are not 0..%zu (rank %d missing or repeated)",
                    ranks.size() - 1, static_cast<int>(i));
    RankPlacement p;
    p.node = -1;
    for (size_t n = 0; n < sys.nodes.size(); ++n)
      if (sys.nodes[n].hostId == ranks[i].node) p.node = static_cast<int>(n);
    if (p.node < 0)
      return errorf(hocclInvalidArgument, "topology dump: rank %d is on node \"%s\", which has no entry",
                    ranks[i].rank, ranks[i].node.c_str());
    p.localRank = ranks[i].localRank;
    p.pid = ranks[i].pid;
    sys.ranks.push_back(p);
  }
  TopoOverrides placement;
  placement.switches = o.switches;
  HOCCL_TRY(applyOverrides(placement, &sys));
  *out = std::move(sys);
  return Status();
}

}  // namespace topo
}  // namespace hoccl
