// What the tuner knows of the network a communicator spans: which leaf
// switch each of its nodes is under, the node links and the leaves'
// uplinks. NCCL tells the tuner only nRanks and nNodes, so the nodes are
// placed from hoccl's topology file (HOCCL_TOPO_FILE: ours or a Slurm
// topology.conf) in the order NCCL numbers them (SLURM_JOB_NODELIST when it
// names exactly nNodes nodes of the file, else the file's order).
#pragma once

#include <string>
#include <vector>

namespace hoccl {
namespace ncclplugin {

struct Fabric {
  std::vector<int> leafOf;          // per node of the communicator
  std::vector<int> nicsOf;          // per node: network links (rails), >= 1
  double nodeGbps = 0;              // one node link; 0 unknown
  std::vector<double> uplinkGbps;   // per leaf; 0 = not a bottleneck
  std::vector<std::string> leafNames;
  std::string how;                  // how the nodes were placed, for the log

  int leaves() const { return static_cast<int>(uplinkGbps.size()); }
  // Worst ratio of a leaf's node links to its uplink (1 = not oversubscribed).
  double oversubscription() const;
};

// Reads `path` (empty: a fabric of one leaf, no constraint) and places
// `nNodes` nodes. `nodeList` is SLURM_JOB_NODELIST's value (may be empty).
// Returns false with `why` set when the file is unreadable or wrong.
bool loadFabric(const std::string& path, int nNodes, const std::string& nodeList, Fabric* out, std::string* why);

}  // namespace ncclplugin
}  // namespace hoccl
