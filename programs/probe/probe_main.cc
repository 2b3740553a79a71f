// hoccl-topo probe: calibrates a cluster by measurement (probe_plan.h) and
// writes the topology and tune files hoccl reads.
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <algorithm>
#include <vector>

#include "hoccl.h"
#include "base/clock.h"
#include "base/socket.h"
#include "src/topo/topology.h"
#include "perf/common/launcher_env.h"
#include "src/topo/probe/probe_plan.h"
#include "src/topo/probe/probe_run.h"
#include "programs/probe/probe_sim.h"

using namespace hoccl;
using namespace hoccl::probe;

namespace {

void usage(FILE* f) {
  fprintf(f,
          "usage: hoccl-topo probe --out DIR [--flow-sec S] [--pings N] [--repeats N] [--max-flows N] [--sample N]\n"
          "                        [--quiet]\n"
          "       hoccl-topo probe --plan NODES[:LEAVES] [--sample N] [...]\n"
          "\n"
          "Measures the network between the nodes of a job and writes DIR/topology.json\n"
          "(leaf groups, node-link and uplink rates) and DIR/tune.conf (queues and token\n"
          "buckets), for HOCCL_TOPO_FILE and HOCCL_TUNE_FILE (docs/topology-file.md).\n"
          "Launch it like any hoccl job, one or more processes per node: torchrun-style\n"
          "RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT, Slurm (SLURM_PROCID/SLURM_NTASKS) or\n"
          "Open MPI (OMPI_COMM_WORLD_*) with MASTER_ADDR/MASTER_PORT or HOCCL_COMM_ID.\n"
          "Nodes are told apart as hoccl does (HOCCL_HOSTID, else the host); one process\n"
          "per node measures, the others wait. Rank 0 writes the files and prints them.\n"
          "\n"
          "  --out DIR        where the files go (created; on rank 0's machine)\n"
          "  --flow-sec S     length of each bandwidth round (default 0.6)\n"
          "  --pings N        round trips per pair of nodes (default 64)\n"
          "  --repeats N      passes over the pair and loaded uplink rounds; medians and majorities\n"
          "                   decide, so a host busy for a moment does not (default 3)\n"
          "  --max-flows N    at most N flows at once in the node-link rounds (default: no limit)\n"
          "  --sample N       pair and uplink rounds among N nodes spread over the job; the others are\n"
          "                   placed into their groups by test (fewer rounds on many nodes; default: all)\n"
          "  --plan N[:L]     print the plan for N nodes under L leaves, 4:1 (rounds, seconds), measure\n"
          "                   nothing; after the other options\n"
          "  --quiet          no progress lines\n");
}

bool parseDouble(const char* s, double lo, double hi, double* out) {
  char* end = nullptr;
  errno = 0;
  const double v = strtod(s, &end);
  if (errno || end == s || *end || !(v >= lo && v <= hi)) return false;
  *out = v;
  return true;
}

// The plan for n nodes under `leaves` leaves, on a simulated network.
int printPlan(int n, int leaves, const Options& o) {
  std::vector<int> leafOf(n);
  for (int i = 0; i < n; ++i) leafOf[i] = int(int64_t(i) * leaves / n);
  Prober p(n, o);
  int rounds[4] = {0, 0, 0, 0};
  double secs = 0;
  // The plan's shape: every round carried out with the answers of a 4:1
  // network of `leaves` leaves.
  SimNet net;
  net.leafOf = leafOf;
  net.nodeGbps.assign(n, 100);
  net.uplinkGbps.assign(leaves, 100.0 * n / leaves / 4);
  while (!p.done()) {
    const Round& r = p.round();
    rounds[r.kind == "ping" ? 0 : r.kind == "loaded" || r.kind == "solo" ? 2 : r.kind == "place" ? 3 : 1]++;
    secs += p.roundSeconds(r, 20);
    p.record(net.run(r));
  }
  const Result& res = p.result();
  std::vector<int> groupOf(n, -1);  // the probe's groups against the simulated leaves
  for (size_t g = 0; g < res.groups.size(); ++g)
    for (int v : res.groups[g].nodes) groupOf[v] = int(g);
  std::vector<int> groupOfLeaf(leaves, -1), leafOfGroup(res.groups.size(), -1);
  bool exact = int(res.groups.size()) == leaves;
  for (int i = 0; i < n && exact; ++i) {
    if (groupOf[i] < 0) {
      exact = false;
      break;
    }
    int& g = groupOfLeaf[leafOf[i]];
    int& l = leafOfGroup[size_t(groupOf[i])];
    exact = (g < 0 || g == groupOf[i]) && (l < 0 || l == leafOf[i]);
    g = groupOf[i], l = leafOf[i];
  }
  printf("plan for %d nodes under %d leaves (4:1)%s: %d latency rounds, %d pair and node-link rounds, %d uplink "
         "rounds, %d placement rounds;\n"
         "measuring time %.1f s (flows %.2f s, %d pings per pair at 20 us), plus one all-gather\n"
         "of the reports per round; %zu groups found (%s), %d nodes placed\n",
         n, leaves, res.sampled < n ? (", sample " + std::to_string(res.sampled)).c_str() : "", rounds[0], rounds[1],
         rounds[2], rounds[3], secs, o.flowSec, o.pings, res.groups.size(),
         exact ? "the simulated leaves exactly" : "NOT the simulated leaves", res.placed);
  return 0;
}

Status localAddress(SockAddr* out, std::string* ifname) {
  const char* rule = getenv("HOCCL_SOCKET_IFNAME");
  if (rule && *rule) return chooseLocalAddress(rule, out, ifname);
  const char* id = getenv("HOCCL_COMM_ID");
  SockAddr remote;
  if (id && parseHostPort(id, &remote).ok()) return probeRouteTo(remote, out, ifname);
  return chooseLocalAddress("", out, ifname);
}

}  // namespace

int probeMain(int argc, char** argv) {
  Options o;
  std::string outDir;
  bool quiet = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool hasValue = i + 1 < argc;
    double v = 0;
    if (a == "--help" || a == "-h") {
      usage(stdout);
      return 0;
    } else if (a == "--quiet") {
      quiet = true;
    } else if (a == "--out" && hasValue) {
      outDir = argv[++i];
    } else if (a == "--flow-sec" && hasValue && parseDouble(argv[i + 1], 0.05, 60, &v)) {
      o.flowSec = v, ++i;
    } else if (a == "--pings" && hasValue && parseDouble(argv[i + 1], 1, 100000, &v)) {
      o.pings = int(v), ++i;
    } else if (a == "--repeats" && hasValue && parseDouble(argv[i + 1], 1, 100, &v)) {
      o.repeats = int(v), ++i;
    } else if (a == "--max-flows" && hasValue && parseDouble(argv[i + 1], 0, 1e6, &v)) {
      o.maxFlows = int(v), ++i;
    } else if (a == "--sample" && hasValue && parseDouble(argv[i + 1], 2, 1e6, &v)) {
      o.sample = int(v), ++i;
    } else if (a == "--plan" && hasValue) {
      int n = 0, l = 1;
      if (sscanf(argv[++i], "%d:%d", &n, &l) < 1 || n < 1 || n > 100000 || l < 1 || l > n) {
        fprintf(stderr, "hoccl-topo probe: --plan wants NODES[:LEAVES], 1 <= LEAVES <= NODES\n");
        return 2;
      }
      return printPlan(n, l, o);
    } else {
      fprintf(stderr, "hoccl-topo probe: %s: %s\n", a.c_str(),
              hasValue || a.rfind("--", 0) != 0 ? "unknown option or bad value" : "needs a value");
      usage(stderr);
      return 2;
    }
  }
  if (outDir.empty()) {
    fprintf(stderr, "hoccl-topo probe: --out DIR is required\n");
    return 2;
  }
  // Placement, as the benchmarks take it.
  hoccl_launch::Placement place;
  std::string launchError;
  if (hoccl_launch::placementFromEnv(&place, &launchError) == hoccl_launch::Launch::Error) {
    fprintf(stderr, "hoccl-topo probe: %s\n", launchError.c_str());
    return 2;
  }
  const int rank = place.rank, size = place.size;
  // The probe is the topology's source: a file given for the job is not
  // read (a wrong one must not stop the measurement).
  unsetenv("HOCCL_TOPO_FILE");
  unsetenv("HOCCL_TOPO_PROBE");  // nor measured twice
  hocclUniqueId id;
  hocclComm_t world = nullptr, lead = nullptr;
  if (hocclGetUniqueId(&id) != hocclSuccess || hocclCommInitRank(&world, size, id, rank) != hocclSuccess) {
    fprintf(stderr, "hoccl-topo probe: rank %d: %s\n", rank, hocclGetLastError(world));
    return 1;
  }
  int node = 0, nnodes = 1, local = 0, locals = 1;
  hocclCommNodeInfo(world, &node, &nnodes, &local, &locals);
  if (hocclCommSplit(world, local == 0 ? 0 : HOCCL_SPLIT_NOCOLOR, node, &lead, nullptr) != hocclSuccess) {
    fprintf(stderr, "hoccl-topo probe: rank %d: split: %s\n", rank, hocclGetLastError(world));
    return 1;
  }
  if (!lead) {  // not the node's measuring process
    hocclCommDestroy(world);
    return 0;
  }
  int me = 0;
  hocclCommUserRank(lead, &me);
  const bool writer = me == 0;
  auto fail = [&](const std::string& msg) {
    fprintf(stderr, "hoccl-topo probe: node %d: %s\n", me, msg.c_str());
    hocclCommAbort(lead);
    hocclCommAbort(world);
    return 1;
  };
  struct stat sb;
  if (writer && mkdir(outDir.c_str(), 0755) != 0 &&
      (errno != EEXIST || stat(outDir.c_str(), &sb) != 0 || !S_ISDIR(sb.st_mode)))
    return fail("cannot create the directory " + outDir + ": " + (errno == EEXIST ? "a file has that name" : strerror(errno)));
  Session session;
  session.slot = session.node = me;
  session.slots = session.nodes = nnodes;
  Status st = localAddress(&session.listen, &session.ifname);
  if (!st.ok()) return fail(st.message());
  session.listen.setPort(0);
  const char* hostId = getenv("HOCCL_HOSTID");
  char host[160] = {0};
  gethostname(host, sizeof host - 1);
  session.host = hostId && *hostId ? hostId : host;
  session.allGather = [&](void* all, size_t bytes) {
    if (hocclAllGather(static_cast<char*>(all) + size_t(me) * bytes, all, bytes, hocclUint8, lead, nullptr) !=
        hocclSuccess)
      return Status(hocclSystemError, hocclGetLastError(lead));
    return Status();
  };
  if (writer && !quiet) {
    fprintf(stderr, "probe: %d nodes, %d processes\n", nnodes, size);
    session.progress = [](int index, const Round& r) {
      fprintf(stderr, "probe: round %d: %s\n", index + 1, r.what.c_str());
    };
  }
  Outcome outcome;
  st = run(session, o, &outcome);
  if (!st.ok()) {
    if (writer) fprintf(stderr, "hoccl-topo probe: %s\n", st.message().c_str());
    hocclCommDestroy(lead);
    hocclCommDestroy(world);
    return 1;
  }
  const std::vector<std::string>& hosts = outcome.hosts;
  int rc = 0;
  if (writer) {
    const Result& r = outcome.result;
    const std::string topoPath = outDir + "/topology.json", tunePath = outDir + "/tune.conf";
    for (const auto& [path, text] : {std::make_pair(topoPath, topologyJson(r, hosts)),
                                      std::make_pair(tunePath, tuneConf(r))}) {
      std::ofstream f(path);
      f << text;
      f.close();
      if (!f) {
        fprintf(stderr, "hoccl-topo probe: cannot write %s: %s\n", path.c_str(), strerror(errno));
        rc = 1;
      }
    }
    printf("%s", summary(r, hosts).c_str());
    printf("measured in %.1f s; wrote %s and %s\n\n", outcome.seconds, topoPath.c_str(), tunePath.c_str());
    // The result as hoccl will see it.
    topo::TopoOverrides ov;
    topo::System sys;
    for (int i = 0; i < nnodes; ++i) {
      topo::NodeInfo n;
      n.hostId = n.hostname = hosts[i];
      sys.nodes.push_back(n);
      topo::RankPlacement p;
      p.node = i;
      sys.ranks.push_back(p);
    }
    st = topo::loadOverridesFile(topoPath, false, &ov);
    if (st.ok()) st = topo::applyOverrides(ov, &sys);
    if (!st.ok()) {
      fprintf(stderr, "hoccl-topo probe: the file written does not read back: %s\n", st.message().c_str());
      rc = 1;
    } else {
      printf("%s\n%s", topo::describeSystem(sys).c_str(), topo::linkMatrix(sys).c_str());
    }
  }
  hocclCommDestroy(lead);
  hocclCommDestroy(world);
  return rc;
}
