// gloo_perf: nccl-tests-style benchmark of Gloo (TCP transport), measured by
// the same driver, flags and table as hoccl's perf programs.
//
//   gloo_perf <all_reduce|reduce_scatter|all_gather|broadcast|reduce> [nccl-tests flags]
//
// Ranks are threads of this process (-t N; rendezvous through an in-memory
// gloo::rendezvous::HashStore) or forked processes (--np N, each with -t
// threads; rendezvous through a gloo::rendezvous::FileStore in a fresh
// temporary directory). --extra <algorithm> picks Gloo's algorithm.
//
// Started by a launcher instead (one rank per process, as on the emulated
// cluster of tests/cluster): RANK and WORLD_SIZE name the rank, GLOO_PERF_STORE
// a directory that every rank sees (a FileStore: the rendezvous; it must be
// new for each job), GLOO_SOCKET_IFNAME the interface to bind (default: the
// loopback address 127.0.0.1, one host).
#include <sys/wait.h>
#include <unistd.h>

#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/rendezvous/hash_store.h>
#include <gloo/transport/tcp/device.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "perf/peers/gloo_backend.h"

namespace {

using bench::Coll;

const Coll kColls[] = {Coll::AllReduce, Coll::ReduceScatter, Coll::AllGather, Coll::Broadcast, Coll::Reduce};

void usage(const char* prog) {
  fprintf(stderr,
          "usage: %s <all_reduce|reduce_scatter|all_gather|broadcast|reduce> [nccl-tests flags]\n"
          "  -t <n>            ranks as threads of this process\n"
          "  --np <n>          fork n processes (each with -t threads)\n"
          "  --extra <algo>    Gloo algorithm (first is the default):\n",
          prog);
  for (Coll c : kColls) {
    std::string algo, choices;
    glooperf::resolveAlgorithm(c, "", &algo, &choices);
    fprintf(stderr, "                      %-15s %s\n", bench::collShortName(c), choices.c_str());
  }
  fprintf(stderr, "  %s <collective> --help lists the other flags\n", prog);
}

struct Job {
  bench::Options opt;
  std::string iface;        // GLOO_SOCKET_IFNAME: bind there instead of 127.0.0.1
  Coll coll = Coll::AllReduce;
  std::string algo;
  int nprocs = 1;           // processes in the job
  std::string storePath;    // FileStore directory (--np), else the shared HashStore
  gloo::rendezvous::Store* sharedStore = nullptr;
};

// One rank: connect, run the sweep, wait for every rank, disconnect.
// Returns 0 (all correct), 1 (wrong elements) or 2 (error).
int runRank(const Job& job, int rank) {
  const int nranks = job.nprocs * job.opt.nthreads;
  try {
    gloo::transport::tcp::attr attr;
    if (job.iface.empty()) attr.hostname = "127.0.0.1";  // one host: the loopback interface
    else attr.iface = job.iface;
    auto device = gloo::transport::tcp::CreateDevice(attr);
    auto context = std::make_shared<gloo::rendezvous::Context>(rank, nranks);
    int timeoutSec = job.opt.timeoutSec > 0 ? job.opt.timeoutSec : 300;
    context->setTimeout(std::chrono::seconds(timeoutSec));
    if (job.storePath.empty()) {
      context->connectFullMesh(*job.sharedStore, device);
    } else {
      gloo::rendezvous::FileStore store(job.storePath);
      context->connectFullMesh(store, device);
    }
    std::unique_ptr<bench::Backend> backend = glooperf::makeGlooBackend(context, job.coll, job.algo);
    long long wrong = bench::runBenchmark(*backend, job.opt, job.coll, job.opt.nthreads);
    if (wrong >= 0) backend->barrier();  // no rank closes its connections while another still uses them
    return wrong == 0 ? 0 : wrong < 0 ? 2 : 1;
  } catch (const std::exception& e) {
    fprintf(stderr, "# rank %d: gloo: %s\n", rank, e.what());
    return 2;
  }
}

// This process's ranks, one per thread; returns the worst exit code.
int runProcess(const Job& job, int procRank) {
  std::vector<int> codes(job.opt.nthreads, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < job.opt.nthreads; ++t)
    threads.emplace_back([&, t] { codes[t] = runRank(job, procRank * job.opt.nthreads + t); });
  for (std::thread& th : threads) th.join();
  int code = 0;
  for (int c : codes) code = std::max(code, c);
  return code;
}

// --np: the parent makes the rendezvous directory, forks the ranks' processes
// (before any thread exists), waits for them and removes the directory.
int runForked(Job job) {
  const char* tmp = getenv("TMPDIR");
  std::string pattern = std::string(tmp && *tmp ? tmp : "/tmp") + "/gloo_perf.XXXXXX";
  std::vector<char> dir(pattern.begin(), pattern.end());
  dir.push_back('\0');
  if (!mkdtemp(dir.data())) {
    perror("gloo_perf: mkdtemp");
    return 2;
  }
  job.storePath = dir.data();
  job.nprocs = job.opt.nprocs;
  fflush(stdout);
  fflush(stderr);
  std::vector<pid_t> kids;
  int code = 0;
  for (int r = 0; r < job.nprocs; ++r) {
    pid_t pid = fork();
    if (pid < 0) {
      perror("gloo_perf: fork");
      code = 2;
      break;
    }
    if (pid == 0) {
      int rc = runProcess(job, r);
      fflush(stdout);
      fflush(stderr);
      _exit(rc);
    }
    kids.push_back(pid);
  }
  for (pid_t k : kids) {
    int st = 0;
    if (waitpid(k, &st, 0) < 0) st = 0x300;
    code = std::max(code, WIFEXITED(st) ? WEXITSTATUS(st) : 3);
  }
  std::error_code ec;
  std::filesystem::remove_all(job.storePath, ec);
  return code;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
    usage(argv[0]);
    return argc < 2 ? 1 : 0;
  }
  Job job;
  bool known = false;
  for (Coll c : kColls)
    if (!strcmp(argv[1], bench::collShortName(c))) {
      job.coll = c;
      known = true;
    }
  if (!known) {
    fprintf(stderr, "%s: unknown collective \"%s\"\n", argv[0], argv[1]);
    usage(argv[0]);
    return 1;
  }
  // The driver's parser sees "gloo_perf <collective>" as the program name,
  // then the flags.
  std::string prog = std::string(argv[0]) + " " + argv[1];
  std::vector<char*> args{prog.data()};
  for (int i = 2; i < argc; ++i) args.push_back(argv[i]);
  args.push_back(nullptr);
  int exitCode = 0;
  if (!bench::parseOptions(argc - 1, args.data(), job.coll, &job.opt, &exitCode)) {
    if (exitCode == 0) usage(argv[0]);
    return exitCode;
  }
  if (!job.opt.algo.empty()) {
    fprintf(stderr, "%s: --algo picks hoccl's algorithms; use --extra for Gloo's\n", prog.c_str());
    return 1;
  }
  std::string choices;
  if (!glooperf::resolveAlgorithm(job.coll, job.opt.extra, &job.algo, &choices)) {
    fprintf(stderr, "%s: unknown Gloo algorithm \"%s\" (%s)\n", prog.c_str(), job.opt.extra.c_str(),
            choices.c_str());
    return 1;
  }
  const char* mpiSize = getenv("OMPI_COMM_WORLD_SIZE");
  if (mpiSize && atoi(mpiSize) > 1) {
    fprintf(stderr, "%s: gloo_perf starts its own ranks: run one copy with -t <n> or --np <n>, not under mpirun\n",
            prog.c_str());
    return 1;
  }
  if (const char* ifname = getenv("GLOO_SOCKET_IFNAME"); ifname && *ifname) job.iface = ifname;
  if (const char* store = getenv("GLOO_PERF_STORE"); store && *store) {
    // Launched: this process is one rank of WORLD_SIZE.
    const char* rank = getenv("RANK");
    const char* size = getenv("WORLD_SIZE");
    int r = rank ? atoi(rank) : -1, n = size ? atoi(size) : 0;
    if (!rank || !size || r < 0 || n < 1 || r >= n || job.opt.nthreads != 1 || job.opt.nprocs > 0) {
      fprintf(stderr, "%s: GLOO_PERF_STORE is set: start one process per rank with RANK and WORLD_SIZE "
                      "(0 <= RANK < WORLD_SIZE), without -t or --np\n", prog.c_str());
      return 1;
    }
    job.storePath = store;
    job.nprocs = n;
    return runProcess(job, r);
  }
  if (job.opt.nprocs > 0) return runForked(job);
  gloo::rendezvous::HashStore store;
  job.sharedStore = &store;
  return runProcess(job, 0);
}
