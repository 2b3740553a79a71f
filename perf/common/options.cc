// nccl-tests' command line, with the same flags, meanings and defaults where
// they apply to host memory, plus hoccl's own (--algo, --np, --verbose).
#include <getopt.h>
#include <strings.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "perf/common/bench.h"

namespace bench {
namespace {

const char* kTypeNames[] = {"int8", "uint8", "int32", "uint32", "int64", "uint64",
                            "half", "float", "double", "bfloat16", "f8e4m3", "f8e5m2"};
static_assert(sizeof(kTypeNames) / sizeof(kTypeNames[0]) == hocclNumTypes);
const char* kOpNames[] = {"sum", "prod", "max", "min", "avg"};

bool parseBytes(const char* s, size_t* out) {
  char* end = nullptr;
  double v = strtod(s, &end);
  if (end == s || v < 0) return false;
  double mult = 1;
  switch (*end) {
    case 'K': case 'k': mult = 1024.0; ++end; break;
    case 'M': case 'm': mult = 1024.0 * 1024; ++end; break;
    case 'G': case 'g': mult = 1024.0 * 1024 * 1024; ++end; break;
    default: break;
  }
  if (*end == 'B' || *end == 'b') ++end;
  if (*end != '\0') return false;
  *out = static_cast<size_t>(v * mult);
  return true;
}

bool parseInt(const char* s, int lo, int hi, int* out) {
  char* end = nullptr;
  long v = strtol(s, &end, 10);
  if (end == s || *end != '\0' || v < lo || v > hi) return false;
  *out = static_cast<int>(v);
  return true;
}

}  // namespace

const char* collTestName(Coll c) {
  switch (c) {
    case Coll::AllReduce: return "all_reduce_perf";
    case Coll::ReduceScatter: return "reduce_scatter_perf";
    case Coll::AllGather: return "all_gather_perf";
    case Coll::Broadcast: return "broadcast_perf";
    case Coll::Reduce: return "reduce_perf";
    case Coll::AllToAll: return "alltoall_perf";
    case Coll::SendRecv: return "sendrecv_perf";
  }
  return "?";
}

const char* collShortName(Coll c) {
  switch (c) {
    case Coll::AllReduce: return "all_reduce";
    case Coll::ReduceScatter: return "reduce_scatter";
    case Coll::AllGather: return "all_gather";
    case Coll::Broadcast: return "broadcast";
    case Coll::Reduce: return "reduce";
    case Coll::AllToAll: return "alltoall";
    case Coll::SendRecv: return "sendrecv";
  }
  return "?";
}

void printUsage(const char* prog, Coll coll) {
  fprintf(stderr,
          "usage: %s [options]   (%s, nccl-tests flags)\n"
          "  -t,--nthreads <n>       ranks as threads of this process (default 1)\n"
          "  -g,--ngpus <n>          accepted; must be 1 (one GPU per rank with --buffers device)\n"
          "  --buffers host|device   where the buffers live: host memory (default) or the\n"
          "                          rank's GPU (the rank's number modulo the GPU count; hoccl\n"
          "                          only; calls queue on a stream per rank, timed until done)\n"
          "  -b,--minbytes <size>    first size (K/M/G suffixes; default 32M)\n"
          "  -e,--maxbytes <size>    last size (default 32M)\n"
          "  -i,--stepbytes <size>   additive step (default 1M)\n"
          "  -f,--stepfactor <f>     multiplicative step; replaces -i when > 1\n"
          "  -n,--iters <n>          timed iterations (default 20)\n"
          "  -w,--warmup_iters <n>   warm-up iterations per size (default 1)\n"
          "  -m,--agg_iters <n>      calls aggregated in one group per iteration (default 1)\n"
          "  -N,--run_cycles <n>     repeat the sweep; 0 = forever (default 1)\n"
          "  -c,--check <n>          correctness checks per size; 0 = none, #wrong N/A (default 1)\n"
          "  -o,--op <op>            sum, prod, max, min, avg or all (default sum)\n"
          "  -d,--datatype <type>    int8 uint8 int32 uint32 int64 uint64 half float double bfloat16\n"
          "                          f8e4m3 f8e5m2 or all\n"
          "  -r,--root <rank>        root of broadcast/reduce; -1 = every root (default 0)\n"
          "  -a,--average <0-3>      time across ranks: 0 rank 0, 1 mean, 2 min, 3 max (default 1)\n"
          "  -z,--blocking <0-3>     accepted (host calls are blocking)\n"
          "  -T,--timeout <s>        fail a test that runs longer (default off)\n"
          "  -J,--output_file <file> JSON lines, one per table row\n"
          "  --algo <name>[,<name>]  the algorithm: auto (the tuner) or ring|hierarchical|horing|doubling|\n"
          "                          leaderdoubling|oneshot;\n"
          "                          several run side by side: one communicator each, timed in\n"
          "                          interleaved blocks, one row each with the algorithm at the end\n"
          "  --blocks <n>            timed blocks per size when algorithms run side by side\n"
          "                          (default: min(iters, 10))\n"
          "  --np <n>                fork n local processes, one rank per thread each\n"
          "  --verbose               every rank prints, not only rank 0\n"
          "  --extra <option>        a peer benchmark's own option (gloo_perf: its algorithm)\n"
          "Launchers: mpirun; torchrun/Slurm/Open MPI environments (RANK/WORLD_SIZE with\n"
          "MASTER_ADDR/MASTER_PORT, SLURM_PROCID/SLURM_NTASKS, OMPI_COMM_WORLD_*) with\n"
          "HOCCL_COMM_ID=host:port or MASTER_ADDR/MASTER_PORT for the rendezvous.\n",
          prog, collTestName(coll));
}

bool parseOptions(int argc, char** argv, Coll coll, Options* opt, int* exitCode) {
  enum { kAlgo = 1000, kNp, kVerbose, kExtra, kBlocks, kBuffers };
  static const option longOpts[] = {
      {"nthreads", required_argument, nullptr, 't'},     {"ngpus", required_argument, nullptr, 'g'},
      {"minbytes", required_argument, nullptr, 'b'},     {"maxbytes", required_argument, nullptr, 'e'},
      {"stepbytes", required_argument, nullptr, 'i'},    {"stepfactor", required_argument, nullptr, 'f'},
      {"iters", required_argument, nullptr, 'n'},        {"agg_iters", required_argument, nullptr, 'm'},
      {"warmup_iters", required_argument, nullptr, 'w'}, {"run_cycles", required_argument, nullptr, 'N'},
      {"parallel_init", required_argument, nullptr, 'p'}, {"check", required_argument, nullptr, 'c'},
      {"op", required_argument, nullptr, 'o'},           {"datatype", required_argument, nullptr, 'd'},
      {"root", required_argument, nullptr, 'r'},         {"blocking", required_argument, nullptr, 'z'},
      {"stream_null", required_argument, nullptr, 'y'},  {"timeout", required_argument, nullptr, 'T'},
      {"cudagraph", required_argument, nullptr, 'G'},    {"report_cputime", required_argument, nullptr, 'C'},
      {"average", required_argument, nullptr, 'a'},      {"local_register", required_argument, nullptr, 'R'},
      {"output_file", required_argument, nullptr, 'J'},  {"report_timestamps", required_argument, nullptr, 'S'},
      {"memory", required_argument, nullptr, 'M'},       {"unalign", required_argument, nullptr, 'u'},
      {"help", no_argument, nullptr, 'h'},               {"algo", required_argument, nullptr, kAlgo},
      {"np", required_argument, nullptr, kNp},           {"verbose", no_argument, nullptr, kVerbose},
      {"extra", required_argument, nullptr, kExtra},     {"blocks", required_argument, nullptr, kBlocks},
      {"buffers", required_argument, nullptr, kBuffers},
      {nullptr, 0, nullptr, 0}};
  *exitCode = 1;
  optind = 1;
  int c;
  auto bad = [&](const char* what, const char* value) {
    fprintf(stderr, "%s: invalid %s \"%s\"\n", argv[0], what, value ? value : "");
    return false;
  };
  while ((c = getopt_long(argc, argv, "t:g:b:e:i:f:n:m:w:N:p:c:o:d:r:z:y:T:G:C:a:R:J:S:M:u:x:D:V:I:K:h", longOpts,
                          nullptr)) != -1) {
    switch (c) {
      case 't': if (!parseInt(optarg, 1, 1024, &opt->nthreads)) return bad("-t", optarg); break;
      case 'g': {
        int g;
        if (!parseInt(optarg, 1, 1024, &g)) return bad("-g", optarg);
        if (g != 1) fprintf(stderr, "%s: -g %d: host memory has no GPUs; using 1 rank per thread\n", argv[0], g);
        break;
      }
      case 'b': if (!parseBytes(optarg, &opt->minBytes)) return bad("-b", optarg); break;
      case 'e': if (!parseBytes(optarg, &opt->maxBytes)) return bad("-e", optarg); break;
      case 'i': if (!parseBytes(optarg, &opt->stepBytes)) return bad("-i", optarg); break;
      case 'f': {
        char* end;
        opt->stepFactor = strtod(optarg, &end);
        if (*end || !(opt->stepFactor >= 1) || !std::isfinite(opt->stepFactor)) return bad("-f", optarg);
        break;
      }
      case 'n': if (!parseInt(optarg, 0, 1 << 30, &opt->iters)) return bad("-n", optarg); break;
      case 'm': if (!parseInt(optarg, 1, 1 << 20, &opt->aggIters)) return bad("-m", optarg); break;
      case 'w': if (!parseInt(optarg, 0, 1 << 30, &opt->warmup)) return bad("-w", optarg); break;
      case 'N': if (!parseInt(optarg, 0, 1 << 30, &opt->cycles)) return bad("-N", optarg); break;
      case 'c': if (!parseInt(optarg, 0, 1 << 20, &opt->check)) return bad("-c", optarg); break;
      case 'a': if (!parseInt(optarg, 0, 3, &opt->average)) return bad("-a", optarg); break;
      case 'z': if (!parseInt(optarg, 0, 3, &opt->blocking)) return bad("-z", optarg); break;
      case 'T': if (!parseInt(optarg, 0, 1 << 30, &opt->timeoutSec)) return bad("-T", optarg); break;
      case 'r': if (!parseInt(optarg, -1, 1 << 20, &opt->root)) return bad("-r", optarg); break;
      case 'J': opt->jsonPath = optarg; break;
      case 'o': {
        opt->ops.clear();
        for (int i = 0; i < 5; ++i)
          if (!strcasecmp(optarg, "all") || !strcasecmp(optarg, kOpNames[i])) opt->ops.push_back(static_cast<hocclRedOp_t>(i));
        if (opt->ops.empty()) return bad("-o (sum, prod, max, min, avg, all)", optarg);
        break;
      }
      case 'd': {
        opt->types.clear();
        for (int i = 0; i < hocclNumTypes; ++i)
          if (!strcasecmp(optarg, "all") || !strcasecmp(optarg, kTypeNames[i])) opt->types.push_back(static_cast<hocclDataType_t>(i));
        if (opt->types.empty()) return bad("-d (int8 uint8 int32 uint32 int64 uint64 half float double bfloat16 f8e4m3 f8e5m2 all)", optarg);
        break;
      }
      case kAlgo: {
        opt->algo = optarg;
        opt->algos.clear();
        std::string list = optarg;
        for (size_t start = 0;;) {
          size_t comma = list.find(',', start);
          std::string name = list.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
          if (name.empty()) return bad("--algo (names separated by commas)", optarg);
          opt->algos.push_back(name);
          if (comma == std::string::npos) break;
          start = comma + 1;
        }
        break;
      }
      case kBlocks: if (!parseInt(optarg, 1, 1 << 20, &opt->blocks)) return bad("--blocks", optarg); break;
      case kNp: if (!parseInt(optarg, 1, 4096, &opt->nprocs)) return bad("--np", optarg); break;
      case kVerbose: opt->verbose = true; break;
      case kExtra: opt->extra = optarg; break;
      case kBuffers:
        if (strcmp(optarg, "host") == 0) opt->deviceMemory = false;
        else if (strcmp(optarg, "device") == 0) opt->deviceMemory = true;
        else return bad("--buffers (host or device)", optarg);
        break;
      case 'p': case 'y': case 'G': case 'C': case 'R': case 'S': case 'M': case 'u':
      case 'x': case 'D': case 'V': case 'I': case 'K':
        break;  // GPU-only or reporting options: accepted, no effect on host memory
      case 'h':
        printUsage(argv[0], coll);
        *exitCode = 0;
        return false;
      default:
        printUsage(argv[0], coll);
        return false;
    }
  }
  if (optind < argc) return bad("argument", argv[optind]);
  if (opt->minBytes > opt->maxBytes) {
    fprintf(stderr, "%s: -b %zu is larger than -e %zu\n", argv[0], opt->minBytes, opt->maxBytes);
    return false;
  }
  if (opt->stepFactor <= 1 && opt->stepBytes == 0) {
    fprintf(stderr, "%s: -i 0 without -f > 1 would never end\n", argv[0]);
    return false;
  }
  return true;
}

}  // namespace bench
