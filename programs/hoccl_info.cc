// hoccl-info: what this build can do and every setting it reads.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <strings.h>

#include "algorithms/registry.h"
#include "build_info.h"
#include "hoccl.h"
#include "base/config.h"
#include "base/cuda_device_api.h"
#include "base/cuda_driver.h"
#include "base/regular_file.h"
#include "src/exec/cuda/image.h"
#include "src/exec/dataops.h"
#include "src/exec/flight_why.h"
#include "src/topo/nvml.h"
#include "programs/machine_args.h"
#include "transport/net/net.h"

using namespace hoccl;

static void usage() {
  printf("usage: hoccl-info [--settings | --algorithms | --build]\n"
         "       hoccl-info --settings-markdown\n"
         "       hoccl-info --dump-selection [machine options] [-b MIN] [-e MAX] [-f F]\n"
         "       hoccl-info --why DUMP...\n"
         "Prints the build's features, the algorithms and every HOCCL_* setting with its\n"
         "default, current value and meaning. --dump-selection prints the tuner's choice per\n"
         "collective and size for a machine (HOCCL_TOPO_FILE, HOCCL_TUNE_FILE and HOCCL_ALGO\n"
         "apply) and every algorithm's predicted time. --settings-markdown prints the settings\n"
         "table as markdown (names, defaults, meaning; not this environment's values), the table\n"
         "docs/environment.md is generated from (tools/environment_doc.py). --why reads the\n"
         "flight recorder's dumps of all ranks (HOCCL_DEBUG_DUMP) and names, per communicator,\n"
         "the call ranks disagree on or the rank that never started the call the others wait\n"
         "in; it exits 1 when it names a problem, 0 when every rank completed its calls, 2 when\n"
         "a file cannot be read:\n%s",
         tune::machineArgsHelp().c_str());
}

// HOCCL_ALGO's problem, if any: the table checks the form of the name, and
// the registry knows the names (the communicator checks them the same way).
static std::string algoProblem(const SettingsSnapshot& env) {
  if (!env.problem("HOCCL_ALGO").empty()) return env.problem("HOCCL_ALGO");
  const std::string& algo = env.values().algo;
  if (algo == "auto" || findAlgorithm(algo.c_str())) return "";  // former names too
  std::vector<std::string> names = {"auto"};
  for (const AlgoInfo& a : allAlgorithms()) names.push_back(a.name);
  return invalidSetting("HOCCL_ALGO", env.text("HOCCL_ALGO"), expectOneOf(algo, names));
}

// The settings table as a markdown table: what docs/environment.md holds,
// regenerated and compared by tools/environment_doc.py (ctest
// environment_doc). Defaults and docs only, so the output does not depend
// on the environment it runs in.
static std::string markdownCell(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '|') out += "\\|";
    else if (c == '\n') out += ' ';
    else out += c;
  }
  return out;
}

static int settingsMarkdown() {
  printf("| variable | default | same on every rank | meaning |\n|---|---|---|---|\n");
  for (const SettingDecl& d : allSettings())
    printf("| `%s` | %s | %s | %s |\n", d.name,
           d.defaultValue[0] ? ("`" + markdownCell(d.defaultValue) + "`").c_str() : "unset",
           d.mustMatchAcrossRanks ? "yes" : "", markdownCell(d.doc).c_str());
  return 0;
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
  // HOCCL_ALGO and HOCCL_NCHANNELS as a communicator takes them.
  std::shared_ptr<const SettingsSnapshot> env = processSettings();
  for (const std::string& bad : {algoProblem(*env), env->problem("HOCCL_NCHANNELS")}) {
    if (!bad.empty()) {
      fprintf(stderr, "hoccl-info: %s\n", bad.c_str());
      return 1;
    }
  }
  const Settings& s = env->values();
  const AlgoInfo* forced = s.algo != "auto" ? findAlgorithm(s.algo.c_str()) : nullptr;
  // The one-shot slots a communicator of this machine would have, and
  // HOCCL_BOARD_BYTES, so the table shows oneshot_shm where it would run.
  tune::Tuner t(m, tf.rules, tf.path, forced, s.nchannels, tune::SharedSlots::ofMachine(m, s.oneShotShmBytes));
  printf("# selection for %s\n%s", desc.c_str(), t.table(lo, hi, factor).c_str());
  return 0;
}

// --why: every dump named, read together (src/exec/flight_why.h).
static int why(int argc, char** argv) {
  if (argc < 3) {
    usage();
    return 2;
  }
  std::vector<DumpedRank> ranks;
  for (int i = 2; i < argc; ++i) {
    std::string text;
    Status st = readRegularFile(argv[i], size_t(256) << 20, &text);
    if (st.ok()) st = readFlightDump(text, argv[i], &ranks);
    if (!st.ok()) {
      fprintf(stderr, "hoccl-info --why: %s\n", st.message().c_str());
      return 2;
    }
  }
  FlightVerdict v = explainFlight(std::move(ranks));
  fputs(v.text.c_str(), stdout);
  return v.problem ? 1 : 0;
}

int main(int argc, char** argv) {
  bool all = argc == 1, build = all, settings = all, algos = all;
  if (argc > 1 && !strcmp(argv[1], "--why")) return why(argc, argv);
  if (argc > 1 && !strcmp(argv[1], "--dump-selection")) return dumpSelection(argc, argv);
  if (argc == 2 && !strcmp(argv[1], "--settings-markdown")) return settingsMarkdown();
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
    printf("  CUDA kernels     : %s\n", HOCCL_BUILD_CUDA_KERNELS);
    {
      cuda::KernelImage k = cuda::kernelImage();
      std::vector<cuda::FatbinEntry> entries;
      std::string why;
      if (k.data && cuda::readFatbin(k.data, k.size, &entries, &why))
        printf("  CUDA image       : %zu bytes: %s\n", k.size, cuda::describeEntries(entries).c_str());
      else if (k.data)
        printf("  CUDA image       : %zu bytes, unreadable: %s\n", k.size, why.c_str());
      const cuda::Driver& d = cuda::processDriver();
      printf("  CUDA driver here : %s\n", d.status.c_str());
      printf("  CUDA devices     : %d\n", d.devices);
      const topo::NvmlApi& nvml = topo::processNvml();
      printf("  NVML here        : %s\n", !nvml.usable()   ? nvml.status.c_str()
                                         : nvml.p2pStatus ? "loaded: NVLink peers and P2P status per pair (hoccl-topo)"
                                                          : "loaded, without nvmlDeviceGetP2PStatus: NVLink peers only");
      // What a call on device buffers does on this machine with this build.
      if (!k.data) {
        printf("  device buffers   : no: this build embeds no CUDA kernels; a call on them fails with\n"
               "                     hocclInvalidUsage\n");
      } else if (!d.usable()) {
        printf("  device buffers   : not on this machine (no usable driver); a call on them fails with\n"
               "                     hocclInvalidUsage naming the driver's status\n");
      } else {
        cuda::DeviceApi api;
        const Status st = cuda::resolveDeviceApi(d, &api);
        if (!st.ok())
          printf("  device buffers   : not with this driver: %s\n", st.message().c_str());
        else
          printf("  device buffers   : ranks of one host: threads share pointers, processes map each other's\n"
                 "                     memory through CUDA VMM%s\n",
                 api.vmm.usable() ? "" : (" (not this driver: it lacks " + api.vmmMissing + ")").c_str());
      }
      // Across hosts: the network proxy's data path (transport/net/net_device.h).
      const std::string path = processSettings()->values().netDevicePath;
      printf("  across hosts     : a network proxy thread per communicator; data path %s%s\n"
             "                     (gdr, GPUDirect RDMA by dma-buf: where the IB device passes the probe;\n"
             "                     asked for only, never yet run on a NIC)\n",
             path.c_str(),
             path == "auto"   ? " = host (slots in mapped host memory)"
             : path == "host" ? " (slots in mapped host memory)"
             : path == "gdr"  ? " (slots in GPU memory the NIC registers as a dma-buf)"
                              : " (slots in GPU memory, copied through host frames)");
    }
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
      o.hcaRule = processSettings()->values().ibHca;
      o.gidIndex = processSettings()->values().ibGidIndex;
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
    std::shared_ptr<const SettingsSnapshot> env = processSettings();
    for (const SettingDecl& d : allSettings()) {
      const std::string& value = env->text(d.name);
      const std::string why = strcmp(d.name, "HOCCL_ALGO") ? env->problem(d.name) : algoProblem(*env);
      printf("  %s = %s%s%s\n      default \"%s\"%s. %s\n", d.name, value.empty() ? "\"\"" : value.c_str(),
             why.empty() ? "" : "   <- ", why.c_str(), d.defaultValue,
             d.mustMatchAcrossRanks ? "; must match on all ranks" : "", d.doc);
    }
  }
  return 0;
}
