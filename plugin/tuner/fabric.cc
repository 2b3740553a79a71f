#include "plugin/tuner/fabric.h"

#include <algorithm>
#include <map>

#include "src/topo/topology.h"

namespace hoccl {
namespace ncclplugin {

double Fabric::oversubscription() const {
  double worst = 1;
  for (int l = 0; l < leaves(); ++l) {
    if (uplinkGbps[l] <= 0 || nodeGbps <= 0) continue;
    double below = 0;
    for (size_t n = 0; n < leafOf.size(); ++n)
      if (leafOf[n] == l) below += nodeGbps * nicsOf[n];
    worst = std::max(worst, below / uplinkGbps[l]);
  }
  return worst;
}

namespace {

void flat(int nNodes, Fabric* out, const std::string& how) {
  *out = Fabric();
  out->leafOf.assign(nNodes, 0);
  out->nicsOf.assign(nNodes, 1);
  out->uplinkGbps = {0};
  out->leafNames = {"(one switch)"};
  out->how = how;
}

}  // namespace

bool loadFabric(const std::string& path, int nNodes, const std::string& nodeList, Fabric* out, std::string* why) {
  if (path.empty()) {
    flat(nNodes, out, "no topology file: one switch");
    return true;
  }
  topo::TopoOverrides o;
  Status st = topo::loadOverridesFile(path, topo::isSlurmTopologyPath(path), &o);
  if (!st.ok()) {
    *why = st.message();
    return false;
  }
  // Leaves are the switches with nodes directly below; file order.
  struct Placed {
    int leaf;
    int nics;
  };
  std::map<std::string, Placed> where;
  std::vector<std::string> order;
  Fabric f;
  for (const topo::SwitchInfo& s : o.switches) {
    if (s.nodes.empty()) continue;
    int leaf = static_cast<int>(f.leafNames.size());
    f.leafNames.push_back(s.name);
    f.uplinkGbps.push_back(s.uplinkGbps);
    if (s.linkGbps > 0) f.nodeGbps = f.nodeGbps > 0 ? std::min(f.nodeGbps, s.linkGbps) : s.linkGbps;
    for (const std::string& n : s.nodes) {
      if (where.count(n)) continue;
      where[n] = {leaf, 1};
      order.push_back(n);
    }
  }
  // A node entry listing its network interfaces gives its rails.
  for (const topo::NodeInfo& n : o.nodes) {
    int nics = 0;
    for (const topo::NicInfo& nic : n.nics)
      if (nic.kind != "loopback") ++nics;
    for (const std::string& key : {n.hostname, n.hostId}) {
      auto it = where.find(key);
      if (it != where.end() && nics > 0) it->second.nics = nics;
    }
  }
  if (order.empty()) {
    flat(nNodes, out, path + " places no node under a switch: one switch");
    return true;
  }
  std::vector<std::string> names;
  std::vector<std::string> listed;
  if (!nodeList.empty() && topo::expandHostlist(nodeList, &listed).ok() &&
      static_cast<int>(listed.size()) == nNodes &&
      std::all_of(listed.begin(), listed.end(), [&](const std::string& n) { return where.count(n) > 0; })) {
    names = listed;
    f.how = "nodes from SLURM_JOB_NODELIST placed by " + path;
  } else if (static_cast<int>(order.size()) >= nNodes) {
    names.assign(order.begin(), order.begin() + nNodes);
    f.how = static_cast<int>(order.size()) == nNodes
                ? "the " + std::to_string(nNodes) + " nodes of " + path + " in file order"
                : "assumed: the first " + std::to_string(nNodes) + " of " + std::to_string(order.size()) +
                      " nodes of " + path + " (a scheduler packs a job under few switches)";
  } else {
    flat(nNodes, out,
         path + " names " + std::to_string(order.size()) + " nodes, the communicator has " + std::to_string(nNodes) +
             ": one switch assumed");
    return true;
  }
  for (const std::string& n : names) {
    f.leafOf.push_back(where[n].leaf);
    f.nicsOf.push_back(where[n].nics);
  }
  *out = std::move(f);
  return true;
}

}  // namespace ncclplugin
}  // namespace hoccl
