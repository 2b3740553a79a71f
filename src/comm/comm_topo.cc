// The communicator's view of the whole system: each rank's node, discovered
// once per process and exchanged over the bootstrap, then the topology file
// (HOCCL_TOPO_FILE, else what HOCCL_TOPO_PROBE measured) applied, then
// dumped if HOCCL_TOPO_DUMP_FILE asks.
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <mutex>

#include "src/comm/comm.h"
#include "src/topo/nvml.h"
#include "base/log.h"
#include "base/regular_file.h"

namespace hoccl {
namespace {

// Discovery reads sysfs/hwloc once per process; node ids differ per rank
// only when tests fake them, so the id is filled in per call.
topo::NodeInfo localNode(const std::string& hostId) {
  static std::once_flag once;
  static topo::NodeInfo node;
  std::call_once(once, [] {
    char host[256] = {0};
    gethostname(host, sizeof host - 1);
    node = topo::discoverLocalNode(host);
  });
  topo::NodeInfo n = node;
  n.hostId = hostId;
  return n;
}

}  // namespace

Status buildSystem(hocclComm* c) {
  Bootstrap& boot = *c->boot;
  std::string mine = topo::serializeNode(localNode(c->hostId));
  std::vector<uint64_t> sizes(c->nranks);
  sizes[c->rank] = mine.size();
  HOCCL_TRY(boot.allGather(sizes.data(), sizeof(uint64_t)).context("exchanging topology"));
  size_t width = *std::max_element(sizes.begin(), sizes.end());
  std::vector<char> all(width * c->nranks, 0);
  memcpy(all.data() + width * c->rank, mine.data(), mine.size());
  HOCCL_TRY(boot.allGather(all.data(), width).context("exchanging topology"));

  topo::System& sys = c->system;
  sys = topo::System();
  sys.ranks.resize(c->nranks);
  std::vector<int> perNode;
  for (int r = 0; r < c->nranks; ++r) {
    const std::string id = boot.table()[r].hostId;
    int node = -1;
    for (size_t i = 0; i < sys.nodes.size(); ++i)
      if (sys.nodes[i].hostId == id) node = static_cast<int>(i);
    if (node < 0) {
      topo::NodeInfo n;
      Status st = topo::deserializeNode(std::string(all.data() + width * r, sizes[r]), &n);
      if (!st.ok()) return st.context("topology of rank " + std::to_string(r));
      n.hostId = id;
      sys.nodes.push_back(std::move(n));
      perNode.push_back(0);
      node = static_cast<int>(sys.nodes.size()) - 1;
    }
    sys.ranks[r].node = node;
    sys.ranks[r].localRank = perNode[node]++;
    sys.ranks[r].pid = boot.table()[r].pid;
  }

  HOCCL_TRY(probeTopology(c, sys));
  const std::string& file = c->settings.topoFile;
  if (!file.empty()) {
    topo::TopoOverrides o;
    HOCCL_TRY(topo::loadOverridesFile(file, topo::isSlurmTopologyPath(file), &o).context("HOCCL_TOPO_FILE"));
    HOCCL_TRY(topo::applyOverrides(o, &sys).context("HOCCL_TOPO_FILE " + file));
    const std::string unplaced = c->rank == 0 ? topo::unplacedNodes(o, sys) : "";
    if (!unplaced.empty()) HWARN(kSubInit, "HOCCL_TOPO_FILE %s: %s", file.c_str(), unplaced.c_str());
  } else if (c->probed) {
    topo::TopoOverrides o;
    HOCCL_TRY(topo::parseTopoFile(c->probed->topo, c->probed->from, &o).context("HOCCL_TOPO_PROBE"));
    HOCCL_TRY(topo::applyOverrides(o, &sys).context("HOCCL_TOPO_PROBE " + c->probed->from));
  }
  // What hierarchical schedules need of it: node per rank, switch per node.
  auto g = std::make_shared<Grouping>();
  for (const topo::RankPlacement& p : sys.ranks) g->groupOf.push_back(p.node);
  std::vector<std::string> switches;
  for (const topo::NodeInfo& n : sys.nodes) {
    auto it = std::find(switches.begin(), switches.end(), n.switchName);
    if (it == switches.end()) it = switches.insert(switches.end(), n.switchName);
    g->superOf.push_back(static_cast<int>(it - switches.begin()));
  }
  c->grouping = g;

  if (c->rank == 0) {
    const std::string& dump = c->settings.topoDumpFile;
    if (!dump.empty()) {
      FILE* f = openForWriting(dump);
      if (!f) HWARN(kSubInit, "cannot write HOCCL_TOPO_DUMP_FILE %s: %s", dump.c_str(),
                    errno == ENXIO ? "a FIFO that no process reads" : strerror(errno));
      else {
        fputs(topo::toTopoFile(sys).c_str(), f);
        fclose(f);
      }
    }
    if (logEnabled(LogLevel::Info, kSubInit)) {
      std::string tree = topo::describeSystem(sys);
      HINFO(kSubInit, "topology:\n%s", tree.c_str());
    }
  }
  return Status();
}

}  // namespace hoccl

hoccl::Status hocclComm::openDeviceConnections(const hoccl::cuda::DeviceConnOptions& o,
                                               std::unique_ptr<hoccl::cuda::DeviceConnections>* out) {
  using namespace hoccl;
  cuda::DeviceConnOptions withNvml = o;
  if (!withNvml.peerWrite)
    withNvml.peerWrite = [](const std::string& fromBus, const std::string& toBus) {
      const topo::P2pAnswer a = topo::p2pWrite(topo::processNvml(), fromBus, toBus);
      return cuda::PeerWriteAnswer{a.kind == topo::P2pAnswer::Yes  ? cuda::PeerWriteAnswer::Yes
                                   : a.kind == topo::P2pAnswer::No ? cuda::PeerWriteAnswer::No
                                                                   : cuda::PeerWriteAnswer::Unknown,
                                   a.why};
    };
  return links->openDeviceConnections(withNvml, out);
}
