// Topology: what the job runs on, at three levels (rank -> node -> switch
// group). Each rank discovers its own node; the bootstrap exchanges the
// nodes so every rank holds the whole System; a topology file (ours, JSON)
// or a Slurm topology.conf places nodes under switches and may override
// anything discovered. Pure data: algorithms and the cost model read it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/error.h"

namespace hoccl {
namespace topo {

struct NumaInfo {
  int id = 0;
  std::string cpus;        // cpulist, e.g. "0-15,32-47"
  uint64_t memBytes = 0;
};

struct NicInfo {
  std::string name;        // interface or HCA name: eth0, ib0, mlx5_0
  std::string kind;        // "ethernet", "infiniband", "roce", "loopback"
  std::string address;     // IP address (ethernet) or GID (verbs), if known
  std::string pciPath;     // sysfs PCI path, empty for virtual devices
  int numaNode = -1;
  int port = 0;            // verbs port number, 0 for sockets
  double speedGbps = 0;    // 0 = unknown
  bool up = true;
};

struct GpuInfo {
  int index = 0;
  std::string name;
  std::string pciBusId;
  int numaNode = -1;
  std::vector<int> nvlinkPeers;  // indices of GPUs on this node reachable by NVLink
  // GPUs this one can write into by P2P (NVLink or PCIe), as NVML says;
  // meaningful where p2pProbed (NVML answered for this GPU).
  std::vector<int> p2pPeers;
  bool p2pProbed = false;
};

struct NodeInfo {
  std::string hostId;      // identity used to group ranks (HOCCL_HOSTID or host:boot-id)
  std::string hostname;
  std::string source;      // "hwloc", "sysfs", "file"
  int packages = 0, cores = 0, pus = 0;
  std::vector<NumaInfo> numa;
  std::vector<NicInfo> nics;
  std::vector<GpuInfo> gpus;
  std::string gpuStatus;   // "2 GPUs" or why none: "no driver: libcuda.so.1 not found (...)"
  std::string verbsStatus; // "2 HCAs" or why none
  std::string switchName;  // leaf switch group; filled from the file / topology.conf
};

struct SwitchInfo {
  std::string name;
  std::string parent;               // upper switch, "" for the top
  std::vector<std::string> nodes;   // host names / ids directly below
  std::vector<std::string> children;  // switches directly below
  double linkGbps = 0;              // each node's link under this switch (0 unknown)
  double uplinkGbps = 0;            // this switch's link to its parent (0 unknown)
};

struct RankPlacement {
  int node = 0;       // index into System::nodes
  int localRank = 0;  // index among the ranks of its node
  int pid = 0;
};

enum class LinkClass : uint8_t {
  Self = 0,      // same rank
  Shm = 1,       // same node: shared memory
  NetLeaf = 2,   // different nodes under one leaf switch
  NetSpine = 3,  // different leaf switches: the traffic crosses uplinks
};
const char* linkClassName(LinkClass c);  // "SELF", "SHM", "NET", "SPINE"

struct System {
  std::vector<NodeInfo> nodes;
  std::vector<SwitchInfo> switches;
  std::vector<RankPlacement> ranks;

  LinkClass link(int a, int b) const;
  // Leaf switch of a node ("" if none is known: all nodes under one switch).
  const std::string& switchOf(int node) const { return nodes[node].switchName; }
};

// What a topology file or topology.conf contributes: switches, and per node
// (matched by host id or host name) the fields to override.
struct DumpRank {
  int rank = 0;
  std::string node;  // host id of its node
  int localRank = 0;
  int pid = 0;
};

struct TopoOverrides {
  std::vector<SwitchInfo> switches;
  std::vector<DumpRank> ranks;   // present in dumps (HOCCL_TOPO_DUMP_FILE) only
  std::vector<NodeInfo> nodes;   // only the fields set in the file are meaningful
  std::vector<std::vector<std::string>> nodeFieldsSet;  // per entry of `nodes`: which keys the file set
};

// How many host names a file's hostlists may expand to. The defaults hold
// any real cluster; the fuzzers use small ones so each input stays cheap.
struct ParseLimits {
  size_t namesPerHostlist = 1000000;
  size_t namesPerFile = 2000000;
};

// Our topology file format: JSON, documented in docs/topology-file.md.
// Errors name the file, line and column and what was expected.
Status parseTopoFile(const std::string& text, const std::string& path, TopoOverrides* out,
                     const ParseLimits& limits = ParseLimits());
// Slurm topology.conf: SwitchName=... Nodes=.../Switches=... [LinkSpeed=...].
// Errors name the file and line.
Status parseSlurmTopology(const std::string& text, const std::string& path, TopoOverrides* out,
                          const ParseLimits& limits = ParseLimits());
// Slurm hostlist expression: "node[01-04,07],gpu1" -> node01 node02 ...
Status expandHostlist(const std::string& expr, std::vector<std::string>* out, size_t maxNames = 1000000);

// Reads and parses a file: the Slurm format when `slurm` is set, else ours.
// Missing, unreadable or oversized (256 MiB) files are errors naming it.
Status loadOverridesFile(const std::string& path, bool slurm, TopoOverrides* out);
// HOCCL_TOPO_FILE's rule: a name ending in ".conf" is a Slurm topology.conf.
bool isSlurmTopologyPath(const std::string& path);

// A whole system from a dump (a file with a "ranks" section): hoccl-topo
// shows a job's system from it.
Status systemFromDump(const TopoOverrides& o, System* out);

// Applies overrides (switch placement, node fields) to a system.
Status applyOverrides(const TopoOverrides& o, System* sys);
// After applyOverrides: "" when the file's switches place every node of
// the system (or it describes none), else a sentence for a warning that
// says how many nodes no switch lists, names some of them and some names
// the file lists (a file written for other hosts otherwise changes
// nothing, silently).
std::string unplacedNodes(const TopoOverrides& o, const System& sys);
// The system in the topology file format (HOCCL_TOPO_DUMP_FILE).
std::string toTopoFile(const System& sys);

// Discovers this machine: hwloc if built with it, else sysfs/procfs; CUDA
// GPUs if a driver is present; verbs devices if libibverbs is present.
NodeInfo discoverLocalNode(const std::string& hostId);

// Human-readable tree and the rank x rank link-class matrix (hoccl-topo).
std::string describeSystem(const System& sys);
std::string linkMatrix(const System& sys);

// Wire form of a NodeInfo, exchanged through the bootstrap.
std::string serializeNode(const NodeInfo& n);
Status deserializeNode(const std::string& bytes, NodeInfo* out);

}  // namespace topo
}  // namespace hoccl
