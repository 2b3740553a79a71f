// Command-line machines for the programs (machine_args.h).
#include "programs/machine_args.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "base/config.h"
#include "src/topo/topology.h"

namespace hoccl {
namespace tune {
namespace {

bool number(const char* s, double lo, double hi, double* out) {
  char* end = nullptr;
  const double v = std::strtod(s, &end);
  if (!s[0] || *end || !(v >= lo && v <= hi)) return false;
  *out = v;
  return true;
}

}  // namespace

std::string machineArgsHelp() {
  return "  --nodes N              nodes [2]\n"
         "  --ranks-per-node G     ranks per node [4]\n"
         "  --leaves L             leaf switches, node i under leaf i*L/N [1] (also --switches)\n"
         "  --node-gbit R          each node's link, Gbit/s per direction [the topology's, else 1]\n"
         "  --nics K               network links (rails) per node, each of --node-gbit [1]\n"
         "  --uplink-gbit U        each leaf's uplink, Gbit/s per direction; 0 = not oversubscribed\n"
         "  --net-latency-us X     per message over the network [40]\n"
         "  --shm-gbps X           one rank's copy rate inside a node, Gbit/s [40]\n"
         "  --node-mem-gbps X      all copies of one node together, Gbit/s (memory bandwidth) [80]\n"
         "  --reduce-gbps X        one rank's local reduction rate, Gbit/s [40]\n"
         "  --reduce-mem-ratio X   node memory per reduced byte, per copied byte [1.5; the\n"
         "                         emulated cluster's tune file: 1]\n"
         "  --oversubscription X   ranks per core (latencies scale with it, and a node's ranks\n"
         "                         share ranks/X cores; the emulated cluster runs 8 ranks\n"
         "                         on 2 cores: 4) [1]\n"
         "  --ranks-as-threads     a node's ranks are threads of one process: messages go by\n"
         "                         reference, no sender stages a copy [processes]\n"
         "  --msg-cpu-us X         CPU per message a rank sends or receives, counted when\n"
         "                         ranks outnumber cores [10]\n"
         "  --net-msg-cpu-us X     extra CPU per network message (the TCP stack) [30]\n"
         "  --local-msg-cpu-us X   --msg-cpu-us where all ranks are on one node (no network\n"
         "                         threads; waiting ranks spin through small steps) [1]\n"
         "  --topo-file F          nodes and switches from a topology file or Slurm topology.conf\n"
         "                         (a dump carries its ranks; otherwise --ranks-per-node applies)\n"
         "                         [HOCCL_TOPO_FILE]\n"
         "  --tune-file F          link parameters and rules [HOCCL_TUNE_FILE]\n";
}

bool parseMachineArg(int argc, char** argv, int* i, MachineArgs* a, std::string* err) {
  const char* opt = argv[*i];
  auto value = [&]() -> const char* {
    if (*i + 1 >= argc) {
      *err = std::string(opt) + " needs a value";
      return nullptr;
    }
    return argv[++*i];
  };
  double x = 0;
  auto count = [&](int* out, int hi) {
    const char* v = value();
    if (!v) return true;
    if (!number(v, 1, hi, &x) || x != int(x)) *err = std::string(opt) + " " + v + ": expected 1.." + std::to_string(hi);
    else *out = int(x);
    a->shapeGiven = true;
    return true;
  };
  auto real = [&](double* out, double lo) {
    const char* v = value();
    if (!v) return true;
    if (!number(v, lo, 1e6, &x)) *err = std::string(opt) + " " + v + ": expected a number >= " + std::to_string(int(lo));
    else *out = x;
    return true;
  };
  if (!strcmp(opt, "--nodes")) return count(&a->nodes, 1 << 20);
  if (!strcmp(opt, "--ranks-per-node")) return count(&a->ranksPerNode, 4096);
  if (!strcmp(opt, "--leaves") || !strcmp(opt, "--switches")) return count(&a->leaves, 1 << 20);
  if (!strcmp(opt, "--nics")) return count(&a->nics, 64);
  if (!strcmp(opt, "--node-gbit")) return real(&a->nodeGbit, 0);
  if (!strcmp(opt, "--uplink-gbit")) return real(&a->uplinkGbit, 0);
  if (!strcmp(opt, "--net-latency-us")) return real(&a->netLatencyUs, 0);
  if (!strcmp(opt, "--shm-gbps")) return real(&a->shmGbps, 0);
  if (!strcmp(opt, "--node-mem-gbps")) return real(&a->nodeMemGbps, 0);
  if (!strcmp(opt, "--reduce-gbps")) return real(&a->reduceGbps, 0);
  if (!strcmp(opt, "--reduce-mem-ratio")) return real(&a->reduceMemRatio, 0);
  if (!strcmp(opt, "--msg-cpu-us")) return real(&a->msgCpuUs, 0);
  if (!strcmp(opt, "--net-msg-cpu-us")) return real(&a->netMsgCpuUs, 0);
  if (!strcmp(opt, "--local-msg-cpu-us")) return real(&a->localMsgCpuUs, 0);
  if (!strcmp(opt, "--oversubscription")) return real(&a->oversubscription, 1);
  if (!strcmp(opt, "--ranks-as-threads")) return a->threads = true;
  if (!strcmp(opt, "--topo-file") || !strcmp(opt, "--tune-file")) {
    const char* v = value();
    if (v) (opt[2] == 't' && opt[3] == 'o' ? a->topoFile : a->tuneFile) = v;
    return true;
  }
  return false;
}

Status buildMachine(const MachineArgs& a0, Machine* m, TuneFile* tune, std::string* description) {
  MachineArgs a = a0;
  // Options win over HOCCL_TOPO_FILE and HOCCL_TUNE_FILE, which are taken
  // as the library takes them (a bad one is an error here too).
  std::shared_ptr<const SettingsSnapshot> env = processSettings();
  auto fromEnv = [&](const char* name, const std::string& value, std::string* out) {
    if (!env->problem(name).empty()) return Status(hocclInvalidArgument, env->problem(name));
    *out = value;
    return Status();
  };
  if (a.topoFile.empty() && !a.shapeGiven) HOCCL_TRY(fromEnv("HOCCL_TOPO_FILE", env->values().topoFile, &a.topoFile));
  if (a.tuneFile.empty()) HOCCL_TRY(fromEnv("HOCCL_TUNE_FILE", env->values().tuneFile, &a.tuneFile));
  LinkModel links;
  *tune = TuneFile();
  if (!a.tuneFile.empty()) {
    HOCCL_TRY(loadTuneFile(a.tuneFile, links, tune));
    links = tune->links;
  }
  if (a.netLatencyUs >= 0) links.net.latencyUs = a.netLatencyUs;
  if (a.shmGbps > 0) links.shm.gbps = a.shmGbps;
  if (a.nodeMemGbps > 0) links.nodeMemGbps = a.nodeMemGbps;
  if (a.reduceGbps > 0) links.reduceGbps = a.reduceGbps;
  if (a.reduceMemRatio > 0) links.reduceMemRatio = a.reduceMemRatio;
  if (a.msgCpuUs >= 0) links.msgCpuUs = a.msgCpuUs;
  if (a.netMsgCpuUs >= 0) links.netMsgCpuUs = a.netMsgCpuUs;
  if (a.localMsgCpuUs >= 0) links.localMsgCpuUs = a.localMsgCpuUs;
  char buf[256];
  if (!a.topoFile.empty()) {
    topo::TopoOverrides o;
    HOCCL_TRY(topo::loadOverridesFile(a.topoFile, topo::isSlurmTopologyPath(a.topoFile), &o));
    topo::System sys;
    if (!o.ranks.empty()) {
      HOCCL_TRY(topo::systemFromDump(o, &sys));
    } else {
      // Nodes as the switches list them, each with --ranks-per-node ranks.
      for (const topo::SwitchInfo& s : o.switches) {
        for (const std::string& n : s.nodes) {
          topo::NodeInfo node;
          node.hostId = n;
          node.hostname = n;
          node.switchName = s.name;
          sys.nodes.push_back(node);
        }
      }
      if (sys.nodes.empty())
        return Status(hocclInvalidArgument, a.topoFile + ": no ranks and no nodes under switches: nothing to cost");
      sys.switches = o.switches;
      for (size_t n = 0; n < sys.nodes.size(); ++n)
        for (int l = 0; l < a.ranksPerNode; ++l) sys.ranks.push_back({int(n), l, 0});
    }
    *m = Machine::fromSystem(sys, links);
    std::snprintf(buf, sizeof buf, "%s: ", a.topoFile.c_str());
    *description = buf;
  } else {
    *m = Machine::rectangular(a.nodes, a.ranksPerNode, a.leaves, links);
    description->clear();
  }
  m->links.oversubscription = a.oversubscription;
  m->links.shmByReference = a.threads;
  if (a.nics > 1) m->nicsOf.assign(size_t(m->nnodes()), a.nics);
  if (a.nodeGbit >= 0) m->links.net.gbps = a.nodeGbit;
  if (a.uplinkGbit >= 0) m->links.spine.gbps = a.uplinkGbit;
  char up[64] = "not limited";
  if (m->links.spine.gbps > 0) std::snprintf(up, sizeof up, "%g Gbit/s", m->links.spine.gbps);
  std::snprintf(buf, sizeof buf, "%d ranks on %d nodes under %d leaves; node links %dx %g Gbit/s, uplinks %s%s%s",
                m->nranks(), m->nnodes(), m->nleaves(), m->nics(0), m->links.net.gbps, up,
                tune->path.empty() ? "" : "; tune file ", tune->path.c_str());
  *description += buf;
  return Status();
}

}  // namespace tune
}  // namespace hoccl
