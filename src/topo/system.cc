// Link classes and applying a topology file / topology.conf to a System.
#include <map>
#include <set>
#include <string>
#include <vector>

#include "src/topo/topology.h"

namespace hoccl {
namespace topo {

const char* linkClassName(LinkClass c) {
  switch (c) {
    case LinkClass::Self: return "SELF";
    case LinkClass::Shm: return "SHM";
    case LinkClass::NetLeaf: return "NET";
    case LinkClass::NetSpine: return "SPINE";
  }
  return "?";
}

LinkClass System::link(int a, int b) const {
  int n = static_cast<int>(ranks.size());
  // Out-of-range ranks get the most conservative class rather than a crash.
  if (a < 0 || b < 0 || a >= n || b >= n) return LinkClass::NetSpine;
  if (a == b) return LinkClass::Self;
  int na = ranks[a].node, nb = ranks[b].node;
  if (na == nb) return LinkClass::Shm;
  int nn = static_cast<int>(nodes.size());
  if (na < 0 || nb < 0 || na >= nn || nb >= nn) return LinkClass::NetSpine;
  return nodes[na].switchName == nodes[nb].switchName ? LinkClass::NetLeaf : LinkClass::NetSpine;
}

namespace {

std::string shortName(const std::string& host) { return host.substr(0, host.find('.')); }

// Fills children from parents and parents from children, checking that
// every name exists, no switch has two parents, and there is no cycle.
Status linkSwitches(std::vector<SwitchInfo>* sw) {
  std::map<std::string, size_t> index;
  for (size_t i = 0; i < sw->size(); ++i) {
    const std::string& name = (*sw)[i].name;
    if (name.empty()) return errorf(hocclInvalidArgument, "switch #%zu has no name", i + 1);
    if (!index.emplace(name, i).second)
      return errorf(hocclInvalidArgument, "switch \"%s\" is defined twice", name.c_str());
  }
  for (SwitchInfo& s : *sw) {
    if (!s.parent.empty() && !index.count(s.parent))
      return errorf(hocclInvalidArgument, "switch \"%s\": parent \"%s\" is not a defined switch", s.name.c_str(),
                    s.parent.c_str());
    if (s.parent == s.name) return errorf(hocclInvalidArgument, "switch \"%s\" is its own parent", s.name.c_str());
  }
  for (SwitchInfo& s : *sw) {
    for (const std::string& c : s.children) {
      auto it = index.find(c);
      if (it == index.end())
        return errorf(hocclInvalidArgument, "switch \"%s\" lists switch \"%s\", which is not defined", s.name.c_str(),
                      c.c_str());
      SwitchInfo& child = (*sw)[it->second];
      if (!child.parent.empty() && child.parent != s.name)
        return errorf(hocclInvalidArgument, "switch \"%s\" is under both \"%s\" and \"%s\"", c.c_str(),
                      child.parent.c_str(), s.name.c_str());
      child.parent = s.name;
    }
  }
  // Children: the listed ones in their order, then any others whose parent
  // names this switch, in definition order; no duplicates.
  std::vector<std::vector<std::string>> children(sw->size());
  std::vector<std::set<std::string>> seen(sw->size());
  for (size_t i = 0; i < sw->size(); ++i)
    for (const std::string& c : (*sw)[i].children)
      if (seen[i].insert(c).second) children[i].push_back(c);
  for (const SwitchInfo& s : *sw) {
    if (s.parent.empty()) continue;
    size_t p = index[s.parent];
    if (seen[p].insert(s.name).second) children[p].push_back(s.name);
  }
  for (size_t i = 0; i < sw->size(); ++i) (*sw)[i].children = std::move(children[i]);
  // Cycles: walking up from any switch must reach a top within n steps.
  for (const SwitchInfo& s : *sw) {
    const SwitchInfo* cur = &s;
    for (size_t steps = 0; !cur->parent.empty(); ++steps) {
      if (steps > sw->size())
        return errorf(hocclInvalidArgument, "switches form a cycle through \"%s\"", s.name.c_str());
      cur = &(*sw)[index[cur->parent]];
    }
  }
  return Status();
}

void copyField(const std::string& field, const NodeInfo& from, NodeInfo* to) {
  if (field == "hostname") to->hostname = from.hostname;
  else if (field == "source") to->source = from.source;
  else if (field == "switch") to->switchName = from.switchName;
  else if (field == "packages") to->packages = from.packages;
  else if (field == "cores") to->cores = from.cores;
  else if (field == "pus") to->pus = from.pus;
  else if (field == "numa") to->numa = from.numa;
  else if (field == "nics") to->nics = from.nics;
  else if (field == "gpus") to->gpus = from.gpus;
  else if (field == "gpu_status") to->gpuStatus = from.gpuStatus;
  else if (field == "verbs_status") to->verbsStatus = from.verbsStatus;
}

bool knownField(const std::string& f) {
  static const std::set<std::string> fields = {"hostname", "source", "switch",     "packages",    "cores",
                                               "pus",      "numa",   "nics",       "gpus",        "gpu_status",
                                               "verbs_status"};
  return fields.count(f) > 0;
}

// Finds the nodes an entry's "host" names: by host id, else host name, else
// short host name (the part before the first '.').
class NodeIndex {
 public:
  explicit NodeIndex(const System& sys) {
    for (size_t i = 0; i < sys.nodes.size(); ++i) {
      const NodeInfo& n = sys.nodes[i];
      byId_[n.hostId].push_back(i);
      if (n.hostname.empty()) continue;
      byName_[n.hostname].push_back(i);
      byShort_[shortName(n.hostname)].push_back(i);
    }
  }
  const std::vector<size_t>& match(const std::string& host) const {
    static const std::vector<size_t> none;
    for (const auto* m : {&byId_, &byName_, &byShort_}) {
      auto it = m->find(host);
      if (it != m->end()) return it->second;
    }
    return none;
  }

 private:
  std::map<std::string, std::vector<size_t>> byId_, byName_, byShort_;
};

}  // namespace

Status applyOverrides(const TopoOverrides& o, System* sys) {
  if (o.nodeFieldsSet.size() != o.nodes.size())
    return errorf(hocclInvalidArgument, "topology overrides: %zu node entries but %zu field lists", o.nodes.size(),
                  o.nodeFieldsSet.size());
  std::vector<SwitchInfo> switches = o.switches.empty() ? sys->switches : o.switches;
  HOCCL_TRY(linkSwitches(&switches));

  // Which switch lists each name directly.
  std::map<std::string, std::string> under;
  for (const SwitchInfo& s : switches) {
    for (const std::string& n : s.nodes) {
      auto [it, fresh] = under.emplace(n, s.name);
      if (!fresh && it->second != s.name)
        return errorf(hocclInvalidArgument, "node \"%s\" is listed under two switches: \"%s\" and \"%s\"", n.c_str(),
                      it->second.c_str(), s.name.c_str());
    }
  }
  // Check the node entries before changing anything.
  std::set<std::string> names;
  for (const SwitchInfo& s : switches) names.insert(s.name);
  for (size_t e = 0; e < o.nodes.size(); ++e) {
    for (const std::string& f : o.nodeFieldsSet[e]) {
      if (!knownField(f))
        return errorf(hocclInvalidArgument, "node \"%s\": unknown field \"%s\"", o.nodes[e].hostId.c_str(), f.c_str());
      // With no switches described, a switch name alone groups nodes.
      if (f == "switch" && !o.nodes[e].switchName.empty() && !names.empty() && !names.count(o.nodes[e].switchName))
        return errorf(hocclInvalidArgument, "node \"%s\": switch \"%s\" is not a defined switch",
                      o.nodes[e].hostId.c_str(), o.nodes[e].switchName.c_str());
    }
  }

  if (!o.switches.empty() || !sys->switches.empty()) {
    for (NodeInfo& n : sys->nodes) {
      auto it = under.find(n.hostId);
      if (it == under.end() && !n.hostname.empty()) it = under.find(n.hostname);
      if (it == under.end() && !n.hostname.empty()) it = under.find(shortName(n.hostname));
      n.switchName = it == under.end() ? "" : it->second;
    }
  }
  sys->switches = std::move(switches);

  const NodeIndex index(*sys);  // entries match the names as they were before any entry renames a node

  for (size_t e = 0; e < o.nodes.size(); ++e) {
    const NodeInfo& entry = o.nodes[e];
    const std::vector<std::string>& fields = o.nodeFieldsSet[e];
    bool setsSource = false, setsSwitch = false, setsAny = false;
    for (const std::string& f : fields) {
      setsSource |= f == "source";
      setsSwitch |= f == "switch";
      setsAny |= f != "switch";
    }
    for (size_t i : index.match(entry.hostId)) {
      NodeInfo& n = sys->nodes[i];
      std::string before = n.switchName;
      for (const std::string& f : fields) copyField(f, entry, &n);
      if (setsAny && !setsSource && n.source.find("file") == std::string::npos)
        n.source = n.source.empty() ? "file" : n.source + "+file";
      if (!setsSwitch || before == n.switchName) continue;
      // An explicit "switch" wins over hostlist membership: keep the lists true.
      for (SwitchInfo& s : sys->switches) {
        std::vector<std::string> kept;
        for (const std::string& name : s.nodes)
          if (name != n.hostId && name != n.hostname && (n.hostname.empty() || name != shortName(n.hostname)))
            kept.push_back(name);
        s.nodes = std::move(kept);
        if (s.name == n.switchName) s.nodes.push_back(n.hostId);
      }
    }
  }
  return Status();
}

std::string unplacedNodes(const TopoOverrides& o, const System& sys) {
  if (o.switches.empty()) return "";
  std::vector<std::string> missing, listed;
  for (const NodeInfo& n : sys.nodes) {
    if (!n.switchName.empty()) continue;
    missing.push_back(n.hostname.empty() || n.hostname == n.hostId ? n.hostId : n.hostId + " (" + n.hostname + ")");
  }
  if (missing.empty()) return "";
  for (const SwitchInfo& s : o.switches) listed.insert(listed.end(), s.nodes.begin(), s.nodes.end());
  auto some = [](const std::vector<std::string>& v) {
    std::string out;
    for (size_t i = 0; i < v.size() && i < 4; ++i) out += (i ? ", " : "") + v[i];
    if (v.size() > 4) out += ", ...";
    return out.empty() ? std::string("no nodes") : out;
  };
  const std::string count = sys.nodes.size() == 1        ? std::string("this job's one node is not")
                            : missing.size() == sys.nodes.size()
                                ? "none of this job's " + std::to_string(sys.nodes.size()) + " nodes is"
                                : std::to_string(missing.size()) + " of this job's " +
                                      std::to_string(sys.nodes.size()) + " nodes are not";
  return count + " listed under its switches (" + some(missing) + "; it lists " + some(listed) +
         "): those nodes count as under one unnamed switch; check the names (HOCCL_HOSTID, host names)";
}

}  // namespace topo
}  // namespace hoccl
