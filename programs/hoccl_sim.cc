// hoccl-sim: predicted time and bus bandwidth of every algorithm, per size,
// for a described cluster, and what the tuner would pick.
//
//   hoccl-sim --nodes 2 --ranks-per-node 4 --node-gbit 1 -b 64K -e 256M -f 4
//   hoccl-sim --nodes 2048 --ranks-per-node 8 --leaves 64 --node-gbit 400 --uplink-gbit 6400
//
// Two engines: "schedule" runs the builders' real schedules for every rank
// over the link model, piece by piece (src/tune/sim.h); "model" is the
// closed form the tuner uses (src/tune/model.h) and answers for any size of
// cluster. The default runs the schedules up to 512 ranks and the model
// beyond; --engine both prints both side by side.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "programs/machine_args.h"
#include "src/tune/sim.h"

using namespace hoccl;
using namespace hoccl::tune;

namespace {

void usage(FILE* f) {
  std::fprintf(f,
               "usage: hoccl-sim [machine options] [-b MIN] [-e MAX] [-f FACTOR] [--coll C] [--engine E]\n"
               "Predicts the time and bus bandwidth of each algorithm per size, and the tuner's choice.\n\n"
               "machine:\n%s\n"
               "  -b, --minbytes SIZE    smallest size (nccl-tests' size) [64K]\n"
               "  -e, --maxbytes SIZE    largest size [256M]\n"
               "  -f, --stepfactor F     size multiplier [4]\n"
               "  --coll C               allreduce, reducescatter, allgather or all [all]\n"
               "  --engine E             schedule, model, both or auto (schedule up to 512 ranks) [auto]\n"
               "  --csv                  comma-separated output\n"
               "  --device               calls on GPU buffers across hosts: the device machine (GPU links\n"
               "                         inside a node, the network proxy and PCIe between nodes), its\n"
               "                         assumptions printed; with:\n"
               "  --gpu-gbit X           one GPU's links to its node's GPUs, Gbit/s per direction [3600]\n"
               "  --gpu-step-us X        a GPU step's latency inside a node [3]\n"
               "  --proxy-us X           the network proxies' cost per message, both ends [8]\n"
               "  --pcie-gbit X          one GPU's PCIe link, Gbit/s per direction [400]\n"
               "  --window-kb X          bytes in flight per connection (the slot window), KiB [4096]\n"
               "  --copy-us X            the copy path (HOCCL_NET_DEVICE_PATH=copy): its cost per message,\n"
               "                         both ends [none: the host path]\n",
               machineArgsHelp().c_str());
}

// Per algorithm of the registry: its time, or -1 where it does not run.
struct Row {
  std::vector<double> us = std::vector<double>(allAlgorithms().size(), -1.0);
};

}  // namespace

int main(int argc, char** argv) {
  MachineArgs ma;
  uint64_t lo = 64 * 1024, hi = 256ull << 20;
  int factor = 4;
  std::string coll = "all", engine = "auto";
  bool csv = false, device = false;
  DeviceLinks dev;
  for (int i = 1; i < argc; ++i) {
    std::string err;
    const char* a = argv[i];
    if (parseMachineArg(argc, argv, &i, &ma, &err)) {
      if (!err.empty()) {
        std::fprintf(stderr, "hoccl-sim: %s\n", err.c_str());
        return 2;
      }
      continue;
    }
    auto val = [&]() -> const char* {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "hoccl-sim: %s needs a value\n", a);
        std::exit(2);
      }
      return argv[++i];
    };
    if (!strcmp(a, "-b") || !strcmp(a, "--minbytes") || !strcmp(a, "-e") || !strcmp(a, "--maxbytes")) {
      const char* v = val();
      uint64_t x = 0;
      if (!parseSize(v, &x) || x == 0) {
        std::fprintf(stderr, "hoccl-sim: %s %s: expected a size such as 64K or 256M\n", a, v);
        return 2;
      }
      (a[1] == 'b' || (a[2] == 'm' && a[3] == 'i') ? lo : hi) = x;
    } else if (!strcmp(a, "-f") || !strcmp(a, "--stepfactor")) {
      factor = std::atoi(val());
      if (factor < 2) {
        std::fprintf(stderr, "hoccl-sim: -f must be at least 2\n");
        return 2;
      }
    } else if (!strcmp(a, "--coll")) {
      coll = val();
    } else if (!strcmp(a, "--engine")) {
      engine = val();
    } else if (!strcmp(a, "--csv")) {
      csv = true;
    } else if (!strcmp(a, "--device")) {
      device = true;
    } else if (!strcmp(a, "--gpu-gbit") || !strcmp(a, "--gpu-step-us") || !strcmp(a, "--proxy-us") ||
               !strcmp(a, "--pcie-gbit") || !strcmp(a, "--window-kb") || !strcmp(a, "--copy-us")) {
      const char* v = val();
      char* end = nullptr;
      const double x = std::strtod(v, &end);
      if (!end || *end || !(x >= 0 && x <= 1e7)) {
        std::fprintf(stderr, "hoccl-sim: %s %s: expected a number from 0 to 10000000\n", a, v);
        return 2;
      }
      device = true;
      if (!strcmp(a, "--copy-us")) dev.copyPath = true;
      (!strcmp(a, "--gpu-gbit")     ? dev.gpu.gbps
       : !strcmp(a, "--gpu-step-us") ? dev.gpu.latencyUs
       : !strcmp(a, "--proxy-us")    ? dev.proxyUs
       : !strcmp(a, "--window-kb")   ? dev.windowKB
       : !strcmp(a, "--copy-us")     ? dev.copyUs
                                     : dev.pcieGbps) = x;
    } else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
      usage(stdout);
      return 0;
    } else {
      std::fprintf(stderr, "hoccl-sim: unknown option %s\n", a);
      usage(stderr);
      return 2;
    }
  }
  if (engine != "auto" && engine != "schedule" && engine != "model" && engine != "both") {
    std::fprintf(stderr, "hoccl-sim: --engine %s: expected schedule, model, both or auto\n", engine.c_str());
    return 2;
  }
  std::vector<CollKind> colls;
  if (coll == "all" || coll == "allreduce") colls.push_back(CollKind::AllReduce);
  if (coll == "all" || coll == "reducescatter") colls.push_back(CollKind::ReduceScatter);
  if (coll == "all" || coll == "allgather") colls.push_back(CollKind::AllGather);
  if (colls.empty()) {
    std::fprintf(stderr, "hoccl-sim: --coll %s: expected allreduce, reducescatter, allgather or all\n", coll.c_str());
    return 2;
  }
  Machine m;
  TuneFile tf;
  std::string desc;
  Status st = buildMachine(ma, &m, &tf, &desc);
  if (!st.ok()) {
    std::fprintf(stderr, "hoccl-sim: %s\n", st.message().c_str());
    return 1;
  }
  if (device) {
    if (m.nnodes() < 2) {
      std::fprintf(stderr, "hoccl-sim: --device prices calls across hosts: give at least 2 nodes\n");
      return 2;
    }
    m.links.device = dev;
    m = deviceMachine(m);
    desc += "; device buffers across hosts (assumed, not measured: GPU links " + std::to_string(int(dev.gpu.gbps)) +
            " Gbit/s and " + std::to_string(dev.gpu.latencyUs).substr(0, 4) + " us per step, proxy " +
            std::to_string(dev.proxyUs).substr(0, 4) + " us per message" +
            (dev.copyPath ? " + copy path " + std::to_string(dev.copyUs).substr(0, 4) + " us" : std::string()) +
            ", PCIe " + std::to_string(int(dev.pcieGbps)) + " Gbit/s per GPU, window " +
            std::to_string(int(dev.windowKB)) + " KiB per connection)";
  }
  const bool runSched = engine == "schedule" || engine == "both" || (engine == "auto" && m.nranks() <= 512);
  const bool runModel = engine == "model" || engine == "both" || (engine == "auto" && m.nranks() > 512);
  // Schedules of messages only: the tuners have no one-shot slots, so
  // oneshot_shm (no steps to simulate) is never chosen and its column stays
  // empty; where a one-node communicator would run it instead (calls of up
  // to HOCCL_BOARD_BYTES per rank), hoccl-info --dump-selection says so.
  Tuner tuner(m, tf.rules, tf.path, nullptr, 0);
  // Each algorithm forced (HOCCL_ALGO, the benchmarks' --algo): the channels
  // and depth the tuner then picks are what a forced run uses.
  std::vector<Tuner> forced;
  for (const AlgoInfo& a : allAlgorithms()) forced.emplace_back(m, tf.rules, tf.path, &a, 0);
  const size_t nalgos = allAlgorithms().size();
  std::printf("# hoccl-sim: %s\n", desc.c_str());
  for (CollKind c : colls) {
    const double bbf = busBwFactor(c, m.nranks());
    std::vector<std::string> engines;
    if (runSched) engines.push_back("schedule");
    if (runModel) engines.push_back("model");
    for (const std::string& eng : engines) {
      std::printf("# %s, engine %s: time in ms and busbw in GB/s per algorithm; auto = the tuner's choice\n",
                  collName(c), eng.c_str());
      if (csv) {
        std::printf("coll,engine,size,algo,ms,busbw,auto\n");
      } else {
        std::printf("%10s", "size");
        for (const AlgoInfo& a : allAlgorithms()) std::printf(" %21s", a.name);
        std::printf("  %-22s %s\n", "auto (ch,k)", "ring/horing");
      }
      for (uint64_t b = lo; b <= hi; b *= uint64_t(factor)) {
        const Choice ch = tuner.choose(c, b);
        Row row;
        for (size_t a = 0; a < nalgos; ++a) {
          const AlgoInfo& info = allAlgorithms()[a];
          if (!info.supports(c)) continue;
          if (info.grouped && m.nnodes() < 2) continue;
          if (info.sharedSlotsOnly) continue;  // see the tuners above
          const Choice f = forced[a].choose(c, b);
          const int nch = f.algo == info.id ? f.nchannels : 1;
          const int depth = f.algo == info.id ? f.pipelineChunks : 0;
          if (eng == "model") {
            row.us[a] = predict(m, c, info.id, b, nch, depth).us;
          } else {
            const SimResult r = simulate(m, c, info.id, b, nch, depth);
            if (!r.ok) {
              std::fprintf(stderr, "hoccl-sim: %s %s: %s\n", collName(c), info.name, r.error.c_str());
              return 1;
            }
            row.us[a] = r.us;
          }
        }
        char chosen[64];
        std::snprintf(chosen, sizeof chosen, "%s (%d,%d)", algorithmInfo(ch.algo).name, ch.nchannels,
                      ch.pipelineChunks);
        if (csv) {
          for (size_t a = 0; a < nalgos; ++a)
            if (row.us[a] >= 0)
              std::printf("%s,%s,%llu,%s,%.4f,%.4f,%s\n", collName(c), eng.c_str(), (unsigned long long)b,
                          allAlgorithms()[a].name,
                          row.us[a] / 1e3, double(b) / row.us[a] / 1e3 * bbf, algorithmInfo(ch.algo).name);
          continue;
        }
        std::printf("%10s", sizeText(b).c_str());
        for (size_t a = 0; a < nalgos; ++a) {
          if (row.us[a] < 0) std::printf(" %21s", "-");
          else std::printf(" %12.3f %8.3f", row.us[a] / 1e3, double(b) / row.us[a] / 1e3 * bbf);
        }
        std::printf("  %-22s", chosen);
        const size_t ring = size_t(AlgoId::Ring), horing = size_t(AlgoId::HoRing);
        if (row.us[ring] > 0 && row.us[horing] > 0) std::printf(" %.2fx", row.us[ring] / row.us[horing]);
        std::printf("\n");
      }
    }
  }
  return 0;
}
