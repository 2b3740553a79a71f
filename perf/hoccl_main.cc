// hoccl's perf programs: the hoccl backend of the benchmark driver and the
// launch modes. Written against the public API (hoccl.h) only.
#include "perf/hoccl_main.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "perf/common/device_mem.h"
#include "perf/common/launcher_env.h"

#ifdef HOCCL_PERF_HAVE_MPI
#include <mpi.h>
#endif

namespace {

using bench::Coll;

class HocclBackend : public bench::Backend {
 public:
  // `algo`: the communicator's config->algorithm, or null for HOCCL_ALGO.
  HocclBackend(hocclComm_t comm, int rank, int nranks, const char* algo)
      : comm_(comm), rank_(rank), nranks_(nranks) {
    const char* env = getenv("HOCCL_ALGO");
    algo_ = algo ? algo : env && *env ? env : "auto";
  }
  const char* library() const override { return "hoccl"; }
  std::string algorithm() const override { return algo_; }
  int rank() const override { return rank_; }
  int nranks() const override { return nranks_; }
  bool supports(Coll, hocclDataType_t, hocclRedOp_t) const override { return true; }
  // Sending from and receiving into one buffer in one group is not defined.
  bool timesInPlace(Coll c) const override { return c != Coll::SendRecv; }
  bool supportsDeviceMemory() const override { return true; }
  void setStream(void* s) override { stream_ = static_cast<hocclStream_t>(s); }
  std::string asyncError() override {
    hocclResult_t e = hocclSuccess;
    if (hocclCommGetAsyncError(comm_, &e) != hocclSuccess || e == hocclSuccess || e == hocclInProgress) return "";
    return std::string("hocclCommGetAsyncError: ") + hocclGetErrorString(e) + ": " + hocclGetLastError(comm_);
  }

  std::string run(Coll c, const void* send, void* recv, size_t count, hocclDataType_t t, hocclRedOp_t op,
                  int root) override {
    hocclResult_t rc = hocclSuccess;
    switch (c) {
      case Coll::AllReduce: rc = hocclAllReduce(send, recv, count, t, op, comm_, stream_); break;
      case Coll::ReduceScatter: rc = hocclReduceScatter(send, recv, count, t, op, comm_, stream_); break;
      case Coll::AllGather: rc = hocclAllGather(send, recv, count, t, comm_, stream_); break;
      case Coll::Broadcast: rc = hocclBroadcast(send, recv, count, t, root, comm_, stream_); break;
      case Coll::Reduce: rc = hocclReduce(send, recv, count, t, op, root, comm_, stream_); break;
      case Coll::AllToAll: rc = hocclAlltoAll(send, recv, count, t, comm_, stream_); break;
      case Coll::SendRecv:
        // A ring shift, as nccl-tests' sendrecv_perf: to rank+1, from rank-1.
        rc = hocclGroupStart();
        if (rc == hocclSuccess) rc = hocclSend(send, count, t, (rank_ + 1) % nranks_, comm_, stream_);
        if (rc == hocclSuccess) rc = hocclRecv(recv, count, t, (rank_ + nranks_ - 1) % nranks_, comm_, stream_);
        {
          hocclResult_t end = hocclGroupEnd();
          if (rc == hocclSuccess) rc = end;
        }
        break;
    }
    return rc == hocclSuccess ? "" : errorText(rc);
  }
  void aggregateBegin() override { hocclGroupStart(); }
  std::string aggregateEnd() override {
    hocclResult_t rc = hocclGroupEnd();
    return rc == hocclSuccess ? "" : errorText(rc);
  }
  double allReduceDouble(double v, hocclRedOp_t op) override {
    double out = v;
    hocclAllReduce(&v, &out, 1, hocclDouble, op, comm_, nullptr);
    return out;
  }
  void barrier() override {
    int32_t x = 0, y = 0;
    hocclAllReduce(&x, &y, 1, hocclInt32, hocclSum, comm_, nullptr);
  }
  std::string deviceDescription() const override { return bench::deviceLine(rank_, "host memory"); }
  std::vector<std::string> allGatherLine(const std::string& mine) override {
    std::vector<char> all(bench::kLineBytes * nranks_, 0);
    char* slot = all.data() + bench::kLineBytes * rank_;
    snprintf(slot, bench::kLineBytes, "%s", mine.c_str());
    hocclAllGather(slot, all.data(), bench::kLineBytes, hocclInt8, comm_, nullptr);
    std::vector<std::string> lines;
    for (int r = 0; r < nranks_; ++r) lines.emplace_back(all.data() + bench::kLineBytes * r);
    return lines;
  }

 private:
  std::string errorText(hocclResult_t rc) const {
    return std::string(hocclGetErrorString(rc)) + ": " + hocclGetLastError(comm_);
  }
  hocclComm_t comm_;
  hocclStream_t stream_ = nullptr;  // --buffers device: the rank's stream
  int rank_, nranks_;
  std::string algo_;
};

// Where this process sits in the job.
struct Placement {
  int procRank = 0;
  int nprocs = 1;
  const char* how = "single process";
  bool mpi = false;
};

using hoccl_launch::envOr;
using hoccl_launch::underMpiLauncher;

// Launchers that set rank and size in the environment (torchrun, Slurm, Open
// MPI without MPI support in this build). Returns false if none did, or
// with *error when what they set is wrong.
bool placementFromEnv(Placement* p, std::string* error) {
  hoccl_launch::Placement l;
  if (hoccl_launch::placementFromEnv(&l, error) != hoccl_launch::Launch::Found) return false;
  p->procRank = l.rank;
  p->nprocs = l.size;
  p->how = "launcher environment";
  return true;
}

// Runs this process's ranks (one per thread); returns the process exit code.
int runProcess(const bench::Options& opt, Coll coll, const Placement& p, const hocclUniqueId& id) {
  int nranks = p.nprocs * opt.nthreads;
  std::vector<int> codes(opt.nthreads, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < opt.nthreads; ++t) {
    threads.emplace_back([&, t] {
      int rank = p.procRank * opt.nthreads + t;
      // One communicator per --algo name: the first from the unique id, the
      // others split from it with the same ranks.
      std::vector<hocclComm_t> comms;
      const size_t nalgos = std::max<size_t>(1, opt.algos.size());
      for (size_t a = 0; a < nalgos; ++a) {
        hocclConfig_t config = HOCCL_CONFIG_INITIALIZER;
        if (opt.timeoutSec > 0) config.timeoutSec = opt.timeoutSec;
        if (!opt.algos.empty()) config.algorithm = opt.algos[a].c_str();
        hocclComm_t comm = nullptr;
        hocclResult_t rc = a == 0 ? hocclCommInitRankConfig(&comm, nranks, id, rank, &config)
                                  : hocclCommSplit(comms[0], 0, rank, &comm, &config);
        if (rc != hocclSuccess) {
          fprintf(stderr, "# rank %d: init failed: %s\n", rank, hocclGetLastError(a == 0 ? nullptr : comms[0]));
          codes[t] = 2;
          break;
        }
        comms.push_back(comm);
      }
      if (codes[t] == 0) {
        std::vector<std::unique_ptr<HocclBackend>> backends;
        std::vector<bench::Backend*> use;
        for (size_t a = 0; a < comms.size(); ++a) {
          backends.emplace_back(new HocclBackend(comms[a], rank, nranks,
                                                 opt.algos.empty() ? nullptr : opt.algos[a].c_str()));
          use.push_back(backends.back().get());
        }
        long long wrong = bench::runBenchmark(use, opt, coll, opt.nthreads);
        codes[t] = wrong == 0 ? 0 : wrong < 0 ? 2 : 1;
      }
      for (size_t a = comms.size(); a-- > 0;) hocclCommDestroy(comms[a]);
    });
  }
  for (auto& th : threads) th.join();
  int code = 0;
  for (int c : codes) code = std::max(code, c);
  return code;
}

// --np: children are forked before any library thread exists; the parent
// then makes the unique id, hands it to each child through a pipe, serves
// the rendezvous and waits.
int runForked(const bench::Options& opt, Coll coll) {
  int fds[2];
  if (pipe(fds) != 0) {
    perror("pipe");
    return 2;
  }
  std::vector<pid_t> kids;
  for (int r = 0; r < opt.nprocs; ++r) {
    pid_t pid = fork();
    if (pid < 0) {
      perror("fork");
      return 2;
    }
    if (pid == 0) {
      close(fds[1]);
      hocclUniqueId id;
      if (read(fds[0], &id, sizeof id) != static_cast<ssize_t>(sizeof id)) _exit(2);
      close(fds[0]);
      Placement p;
      p.procRank = r;
      p.nprocs = opt.nprocs;
      fflush(stdout);
      _exit(runProcess(opt, coll, p, id));
    }
    kids.push_back(pid);
  }
  close(fds[0]);
  hocclUniqueId id;
  if (hocclGetUniqueId(&id) != hocclSuccess) {
    fprintf(stderr, "# hocclGetUniqueId: %s\n", hocclGetLastError(nullptr));
    return 2;
  }
  for (int r = 0; r < opt.nprocs; ++r)
    if (write(fds[1], &id, sizeof id) != static_cast<ssize_t>(sizeof id)) return 2;
  close(fds[1]);
  int code = 0;
  for (pid_t k : kids) {
    int st = 0;
    waitpid(k, &st, 0);
    int c = WIFEXITED(st) ? WEXITSTATUS(st) : 3;
    code = std::max(code, c);
  }
  return code;
}

}  // namespace

int hocclPerfMain(int argc, char** argv, Coll coll) {
  // Before anything can start the CUDA driver (hoccl's topology discovery
  // at init does): see bench::DeviceMemory.
  bench::askForDeviceQueues();
  bench::Options opt;
  int exitCode = 0;
  if (!bench::parseOptions(argc, argv, coll, &opt, &exitCode)) return exitCode;
  if (opt.nprocs > 0) return runForked(opt, coll);

  Placement p;
  hocclUniqueId id;
  std::string error;
#ifdef HOCCL_PERF_HAVE_MPI
  if (underMpiLauncher()) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &p.procRank);
    MPI_Comm_size(MPI_COMM_WORLD, &p.nprocs);
    p.how = "mpirun";
    p.mpi = true;
    hocclResult_t rc = hocclSuccess;
    if (p.procRank == 0) rc = hocclGetUniqueId(&id);
    MPI_Bcast(&rc, sizeof rc, MPI_BYTE, 0, MPI_COMM_WORLD);
    if (rc != hocclSuccess) {
      if (p.procRank == 0) fprintf(stderr, "# hocclGetUniqueId: %s\n", hocclGetLastError(nullptr));
      MPI_Finalize();
      return 2;
    }
    MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
    int code = runProcess(opt, coll, p, id);
    int worst = code;
    MPI_Allreduce(&code, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    MPI_Finalize();
    return worst;
  }
#else
  if (underMpiLauncher() && !envOr("HOCCL_COMM_ID", "MASTER_ADDR")) {
    fprintf(stderr, "# started by an MPI launcher, but this build has no MPI: set HOCCL_COMM_ID=host:port "
                    "for the rendezvous\n");
    return 2;
  }
#endif
  if (!placementFromEnv(&p, &error) && !error.empty()) {
    fprintf(stderr, "# %s\n", error.c_str());
    return 2;
  }
  if (hocclGetUniqueId(&id) != hocclSuccess) {
    fprintf(stderr, "# hocclGetUniqueId: %s\n", hocclGetLastError(nullptr));
    return 2;
  }
  return runProcess(opt, coll, p, id);
}
