// hoccl-info: what this build can do and every setting it reads.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <strings.h>

#include "algorithms/registry.h"
#include "build_info.h"
#include "hoccl.h"
#include "src/base/config.h"
#include "src/exec/dataops.h"
#include "tools/machine_args.h"
#include "transport/net/net.h"

using namespace hoccl;

static void usage() {
  printf("usage: hoccl-info [--settings | --algorithms | --build]\n"
         "       hoccl-info --dump-selection [machine options] [-b MIN] [-e MAX] [-f F]\n"
         "Prints the build's features, the algorithms and every HOCCL_* setting with its\n"
         "default, current value and meaning. --dump-selection prints the tuner's choice per\n"
         "collective and size for a machine (HOCCL_TOPO_FILE, HOCCL_TUNE_FILE and HOCCL_ALGO\n"
         "apply) and every algorithm's predicted time:\n%s",
         tune::machineArgsHelp().c_str());
}

static int dumpSelection(int argc, char** argv) {
  tune::MachineArgs ma;
  uint64_t lo = 1024, hi = uint64_t(256) << 20;
  int factor = 4;
  for (int i = 2; i < argc; ++i) {
    std::string err;
    if (tune::parseMachineArg(argc, argv, &i, &ma, &err)) {
      if (!err.empty()) {
        fprintf(stderr, "hoccl-info: %s\n", err.c_str());
        return 2;
      }
      continue;
    }
    const char* a = argv[i];
    if ((!strcmp(a, "-b") || !strcmp(a, "-e") || !strcmp(a, "-f")) && i + 1 < argc) {
      const char* v = argv[++i];
      uint64_t x = 0;
      if (a[1] == 'f') {
        factor = atoi(v);
        if (factor >= 2) continue;
      } else if (tune::parseSize(v, &x) && x > 0) {
        (a[1] == 'b' ? lo : hi) = x;
        continue;
      }
      fprintf(stderr, "hoccl-info: bad value %s for %s\n", v, a);
      return 2;
    }
    usage();
    return 2;
  }
  tune::Machine m;
  tune::TuneFile tf;
  std::string desc;
  Status st = tune::buildMachine(ma, &m, &tf, &desc);
  if (!st.ok()) {
    fprintf(stderr, "hoccl-info: %s\n", st.message().c_str());
    return 1;
  }
  const std::string forcedName = settingValue("HOCCL_ALGO");
  const AlgoInfo* forced = strcasecmp(forcedName.c_str(), "auto") ? findAlgorithm(forcedName.c_str()) : nullptr;
  const std::string nch = settingValue("HOCCL_NCHANNELS");
  tune::Tuner t(m, tf.rules, tf.path, forced, strcasecmp(nch.c_str(), "auto") ? atoi(nch.c_str()) : 0);
  printf("# selection for %s\n%s", desc.c_str(), t.table(lo, hi, factor).c_str());
  return 0;
}

int main(int argc, char** argv) {
  bool all = argc == 1, build = all, settings = all, algos = all;
  if (argc > 1 && !strcmp(argv[1], "--dump-selection")) return dumpSelection(argc, argv);
  for (int i = 1; i < argc; ++i) {
    if (!strcmp(argv[i], "--build")) build = true;
    else if (!strcmp(argv[i], "--settings")) settings = true;
    else if (!strcmp(argv[i], "--algorithms")) algos = true;
    else {
      usage();
      return strcmp(argv[i], "--help") && strcmp(argv[i], "-h") ? 2 : 0;
    }
  }
  if (build) {
    int v = 0;
    hocclGetVersion(&v);
    printf("hoccl %s (version code %d), %s build, %s\n", HOCCL_BUILD_VERSION, v, HOCCL_BUILD_TYPE,
           HOCCL_BUILD_COMPILER);
    printf("  data ops ISA     : %s (best on this CPU: %s)\n", isaName(dataOps().isa),
           isaName(bestSupportedIsa()));
    printf("  CUDA Toolkit     : %s\n", !strcmp(HOCCL_BUILD_HAVE_CUDA, "TRUE") || !strcmp(HOCCL_BUILD_HAVE_CUDA, "ON") ? "found at build time (no CUDA backend yet)" : "not built");
    printf("  libibverbs       : %s\n", !strcmp(HOCCL_BUILD_HAVE_IBVERBS, "ON")
                                         ? "headers found at build time: IB transport built (libibverbs loaded at run time)"
                                         : !strcmp(HOCCL_BUILD_IBVERBS_SWITCH, "OFF")
                                               ? "not built (HOCCL_IBVERBS=OFF): no IB transport"
                                               : "not built (no verbs headers): no IB transport");
    printf("  hwloc            : %s\n", !strcmp(HOCCL_BUILD_HAVE_HWLOC, "ON")       ? "found at build time"
                                     : !strcmp(HOCCL_BUILD_HWLOC_SWITCH, "OFF") ? "not built (HOCCL_HWLOC=OFF)"
                                                                                : "not built");
    printf("  transports       : shm (host memory, one node); net: socket (TCP), IB (verbs)\n");
    {
      IbNetOptions o;
      o.hcaRule = settingValue("HOCCL_IB_HCA");
      o.gidIndex = atoi(settingValue("HOCCL_IB_GID_INDEX").c_str());
      std::unique_ptr<NetTransport> ib;
      Status st = createIbTransport(o, &ib);
      if (st.ok()) {
        printf("  IB here          : %d port%s:", ib->devices(), ib->devices() == 1 ? "" : "s");
        for (int d = 0; d < ib->devices(); ++d) {
          NetProperties p;
          if (ib->getProperties(d, &p).ok()) printf(" %s:%d (%d Mbit/s)", p.name.c_str(), p.port, p.speedMbps);
        }
        printf("\n");
      } else {
        printf("  IB here          : unavailable: %s\n", st.message().c_str());
      }
    }
    printf("  sanitizers       : %s\n", HOCCL_BUILD_SANITIZE[0] ? HOCCL_BUILD_SANITIZE : "none");
  }
  if (algos) {
    printf("\nAlgorithms:\n");
    for (const AlgoInfo& a : allAlgorithms()) printf("  %-14s %s\n", a.name, a.description);
  }
  if (settings) {
    printf("\nSettings (environment):\n");
    for (const SettingDecl& d : allSettings()) {
      std::string value = settingValue(d.name);
      std::string why = d.validate(value);
      printf("  %s = %s%s%s\n      default \"%s\"%s. %s\n", d.name, value.empty() ? "\"\"" : value.c_str(),
             why.empty() ? "" : "   <- INVALID: expected ", why.c_str(), d.defaultValue,
             d.mustMatchAcrossRanks ? "; must match on all ranks" : "", d.doc);
    }
  }
  return 0;
}
