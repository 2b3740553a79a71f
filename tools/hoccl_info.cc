// hoccl-info: what this build can do and every setting it reads.
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "algorithms/registry.h"
#include "build_info.h"
#include "hoccl.h"
#include "src/core/config.h"
#include "src/exec/dataops.h"
#include "transport/net/net.h"

using namespace hoccl;

static void usage() {
  printf("usage: hoccl-info [--settings | --algorithms | --build]\n"
         "Prints the build's features, the algorithms and every HOCCL_* setting with its\n"
         "default, current value and meaning.\n");
}

int main(int argc, char** argv) {
  bool all = argc == 1, build = all, settings = all, algos = all;
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
                                         : "not built (no verbs headers): no IB transport");
    printf("  hwloc            : %s\n", !strcmp(HOCCL_BUILD_HAVE_HWLOC, "ON") ? "found at build time" : "not built");
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
