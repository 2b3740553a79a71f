// hoccl-topo: what hoccl discovers on this machine, with a topology file or
// Slurm topology.conf applied, as a tree or in the topology file format.
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "base/config.h"
#include "src/topo/topology.h"

using namespace hoccl;
using namespace hoccl::topo;

static void usage(FILE* f) {
  fprintf(f,
          "usage: hoccl-topo [--file FILE | --slurm FILE] [--json]\n"
          "       hoccl-topo probe --out DIR ...   (measure a cluster: hoccl-topo probe --help)\n"
          "\n"
          "Discovers this machine (hwloc or sysfs/procfs: CPUs, NUMA, NICs; CUDA GPUs and\n"
          "verbs devices when their libraries are present) and prints it as a one-node\n"
          "system with rank 0, after applying a topology file.\n"
          "\n"
          "  --file FILE   apply FILE, a topology file (JSON, docs/topology-file.md)\n"
          "  --slurm FILE  apply FILE, a Slurm topology.conf (SwitchName=... Nodes=...)\n"
          "  --json        print the system in the topology file format instead of the tree;\n"
          "                the output can be edited and given back as HOCCL_TOPO_FILE\n"
          "  --help        this text\n"
          "\n"
          "Environment:\n"
          "  HOCCL_HOSTID     this node's identity (default: the host name)\n"
          "  HOCCL_TOPO_FILE  topology file applied when no --file/--slurm is given; a name\n"
          "                   ending in .conf is read as a Slurm topology.conf\n"
          "\n"
          "This shows one machine. For the whole job (every node and rank, as the ranks\n"
          "see it), in a job, set HOCCL_TOPO_DUMP_FILE=PATH: the library writes the job's\n"
          "topology there in the topology file format.\n");
}

int probeMain(int argc, char** argv);  // programs/probe/probe_main.cc

int main(int argc, char** argv) {
  if (argc > 1 && std::string(argv[1]) == "probe") return probeMain(argc - 1, argv + 1);
  std::string file, slurm;
  bool asJson = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      usage(stdout);
      return 0;
    } else if (a == "--json") {
      asJson = true;
    } else if ((a == "--file" || a == "--slurm") && i + 1 < argc) {
      (a == "--file" ? file : slurm) = argv[++i];
    } else {
      fprintf(stderr, "hoccl-topo: %s: %s\n", a.c_str(),
              a == "--file" || a == "--slurm" ? "needs a file name" : "unknown option");
      usage(stderr);
      return 2;
    }
  }
  if (!file.empty() && !slurm.empty()) {
    fprintf(stderr, "hoccl-topo: give --file or --slurm, not both\n");
    return 2;
  }
  // HOCCL_TOPO_FILE (unless an option names a file) and HOCCL_HOSTID, as
  // the library reads them.
  std::shared_ptr<const SettingsSnapshot> env = processSettings();
  const bool topoFromEnv = file.empty() && slurm.empty();
  for (const char* name : {"HOCCL_TOPO_FILE", "HOCCL_HOSTID"}) {
    if (!env->problem(name).empty() && (topoFromEnv || strcmp(name, "HOCCL_TOPO_FILE") != 0)) {
      fprintf(stderr, "hoccl-topo: %s\n", env->problem(name).c_str());
      return 1;
    }
  }
  const std::string& envTopo = env->values().topoFile;
  if (topoFromEnv && !envTopo.empty()) (isSlurmTopologyPath(envTopo) ? slurm : file) = envTopo;

  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  System sys;
  sys.nodes.push_back(discoverLocalNode(!env->values().hostId.empty() ? env->values().hostId : host));
  RankPlacement r;
  r.pid = static_cast<int>(getpid());
  sys.ranks.push_back(r);

  if (!file.empty() || !slurm.empty()) {
    TopoOverrides o;
    Status st = loadOverridesFile(file.empty() ? slurm : file, file.empty(), &o);
    // A dump of a job (it lists ranks) is shown as that whole system.
    if (st.ok()) st = o.ranks.empty() ? applyOverrides(o, &sys) : systemFromDump(o, &sys);
    if (!st.ok()) {
      fprintf(stderr, "hoccl-topo: %s\n", st.message().c_str());
      return 1;
    }
  }

  if (asJson) {
    fputs(toTopoFile(sys).c_str(), stdout);
  } else {
    fputs(describeSystem(sys).c_str(), stdout);
    fputs("\n", stdout);
    fputs(linkMatrix(sys).c_str(), stdout);
  }
  return 0;
}
