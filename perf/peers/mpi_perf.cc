// mpi_perf: nccl-tests-style benchmark of MPI collectives (one rank per
// process, started by mpirun), measured by the same driver, flags and table
// as hoccl's perf programs.
//
//   mpirun -np 4 mpi_perf <all_reduce|reduce_scatter|all_gather|broadcast|reduce> [nccl-tests flags]
//
// --extra out_of_place: in-place calls are not timed (their columns say
// N/A): Open MPI 4.1.4's coll/han crashes on an in-place all-reduce larger
// than one segment (it offsets MPI_IN_PLACE as if it were a buffer).
#include <fcntl.h>
#include <unistd.h>

#include <mpi.h>

#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "perf/common/bench.h"

namespace {

using bench::Coll;

const Coll kColls[] = {Coll::AllReduce, Coll::ReduceScatter, Coll::AllGather, Coll::Broadcast, Coll::Reduce};

MPI_Datatype mpiType(hocclDataType_t t) {
  switch (t) {
    case hocclInt8: return MPI_INT8_T;
    case hocclUint8: return MPI_UINT8_T;
    case hocclInt32: return MPI_INT32_T;
    case hocclUint32: return MPI_UINT32_T;
    case hocclInt64: return MPI_INT64_T;
    case hocclUint64: return MPI_UINT64_T;
    case hocclFloat32: return MPI_FLOAT;
    case hocclFloat64: return MPI_DOUBLE;
    default: return MPI_DATATYPE_NULL;  // half, bfloat16: no standard MPI type
  }
}

MPI_Op mpiOp(hocclRedOp_t op) {
  switch (op) {
    case hocclSum: return MPI_SUM;
    case hocclProd: return MPI_PROD;
    case hocclMax: return MPI_MAX;
    case hocclMin: return MPI_MIN;
    default: return MPI_OP_NULL;  // avg: no MPI op
  }
}

size_t typeBytes(hocclDataType_t t) {
  switch (t) {
    case hocclInt8: case hocclUint8: return 1;
    case hocclFloat16: case hocclBfloat16: return 2;
    case hocclInt32: case hocclUint32: case hocclFloat32: return 4;
    default: return 8;
  }
}

std::string mpiError(int rc) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, text, &len);
  return std::string(text, static_cast<size_t>(len));
}

class MpiBackend : public bench::Backend {
 public:
  explicit MpiBackend(bool inPlace) : inPlace_(inPlace) {
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks_);
    // Errors come back as codes (and become the driver's error line)
    // instead of aborting the job.
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  }

  const char* library() const override { return "mpi"; }
  std::string algorithm() const override { return "default"; }
  int rank() const override { return rank_; }
  int nranks() const override { return nranks_; }
  bool supports(Coll c, hocclDataType_t t, hocclRedOp_t op) const override {
    if (c == Coll::AllToAll || c == Coll::SendRecv) return false;  // not driven here
    return mpiType(t) != MPI_DATATYPE_NULL && mpiOp(op) != MPI_OP_NULL;
  }
  bool timesInPlace(Coll) const override { return inPlace_; }

  std::string run(Coll c, const void* send, void* recv, size_t count, hocclDataType_t t, hocclRedOp_t op,
                  int root) override {
    if (count > static_cast<size_t>(INT_MAX)) return "count does not fit MPI's int";
    const int n = static_cast<int>(count);
    const size_t bytes = count * typeBytes(t);
    const MPI_Datatype type = mpiType(t);
    const MPI_Op mop = mpiOp(op);
    char* out = static_cast<char*>(recv);
    int rc = MPI_SUCCESS;
    switch (c) {
      case Coll::AllReduce:
        rc = MPI_Allreduce(send == recv ? MPI_IN_PLACE : send, recv, n, type, mop, MPI_COMM_WORLD);
        break;
      case Coll::ReduceScatter: {
        // NCCL in place: recv = send + rank * count, inside the full input.
        // MPI in place takes the full input in recvbuf and leaves this
        // rank's block at its start, so the block then moves into place
        // (timed: an MPI user with NCCL's layout pays it too).
        char* in = static_cast<char*>(const_cast<void*>(send));
        if (out == in + static_cast<size_t>(rank_) * bytes) {
          rc = MPI_Reduce_scatter_block(MPI_IN_PLACE, in, n, type, mop, MPI_COMM_WORLD);
          if (rc == MPI_SUCCESS && out != in) memmove(out, in, bytes);
        } else {
          rc = MPI_Reduce_scatter_block(send, recv, n, type, mop, MPI_COMM_WORLD);
        }
        break;
      }
      case Coll::AllGather:
        // NCCL in place: send = recv + rank * count, which is MPI's in place.
        if (send == out + static_cast<size_t>(rank_) * bytes)
          rc = MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, recv, n, type, MPI_COMM_WORLD);
        else
          rc = MPI_Allgather(send, n, type, recv, n, type, MPI_COMM_WORLD);
        break;
      case Coll::Broadcast:
        // MPI broadcasts one buffer: out of place, the root first copies
        // send to recv (timed: an MPI user pays it too).
        if (rank_ == root && send != recv) memcpy(recv, send, bytes);
        rc = MPI_Bcast(recv, n, type, root, MPI_COMM_WORLD);
        break;
      case Coll::Reduce:
        // In place on the root is MPI_IN_PLACE; other ranks only send.
        rc = MPI_Reduce(send == recv && rank_ == root ? MPI_IN_PLACE : send, recv, n, type, mop, root,
                        MPI_COMM_WORLD);
        break;
      default: return "not driven here";
    }
    return rc == MPI_SUCCESS ? "" : mpiError(rc);
  }

  double allReduceDouble(double v, hocclRedOp_t op) override {
    double out = v;
    MPI_Allreduce(&v, &out, 1, MPI_DOUBLE, mpiOp(op), MPI_COMM_WORLD);
    return out;
  }
  void barrier() override { MPI_Barrier(MPI_COMM_WORLD); }
  std::string deviceDescription() const override { return bench::deviceLine(rank_, "host memory (mpi)"); }
  std::vector<std::string> allGatherLine(const std::string& mine) override {
    std::vector<char> line(bench::kLineBytes, 0), all(bench::kLineBytes * static_cast<size_t>(nranks_), 0);
    snprintf(line.data(), line.size(), "%s", mine.c_str());
    const int len = static_cast<int>(bench::kLineBytes);
    MPI_Allgather(line.data(), len, MPI_CHAR, all.data(), len, MPI_CHAR, MPI_COMM_WORLD);
    std::vector<std::string> lines;
    for (int r = 0; r < nranks_; ++r) lines.emplace_back(all.data() + static_cast<size_t>(r) * bench::kLineBytes);
    return lines;
  }

 private:
  int rank_ = 0, nranks_ = 1;
  bool inPlace_ = true;
};

void usage(const char* prog) {
  fprintf(stderr,
          "usage: mpirun -np <n> %s <all_reduce|reduce_scatter|all_gather|broadcast|reduce> [nccl-tests flags]\n"
          "  one rank per process; %s <collective> --help lists the flags\n",
          prog, prog);
}

// Parses the flags; on other ranks than 0 the parser's messages are muted
// (every rank parses the same command line).
bool parse(int argc, char** argv, Coll coll, bench::Options* opt, int* exitCode, int rank) {
  int saved = -1;
  if (rank != 0) {
    fflush(stderr);
    saved = dup(2);
    int null = open("/dev/null", O_WRONLY);
    if (null >= 0) {
      dup2(null, 2);
      close(null);
    }
  }
  bool ok = bench::parseOptions(argc, argv, coll, opt, exitCode);
  if (saved >= 0) {
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
  }
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  auto quit = [](int code) {
    MPI_Finalize();
    return code;
  };
  if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
    if (rank == 0) usage(argv[0]);
    return quit(argc < 2 ? 1 : 0);
  }
  Coll coll = Coll::AllReduce;
  bool known = false;
  for (Coll c : kColls)
    if (!strcmp(argv[1], bench::collShortName(c))) {
      coll = c;
      known = true;
    }
  if (!known) {
    if (rank == 0) {
      fprintf(stderr, "%s: unknown collective \"%s\"\n", argv[0], argv[1]);
      usage(argv[0]);
    }
    return quit(1);
  }
  // The driver's parser sees "mpi_perf <collective>" as the program name.
  std::string prog = std::string(argv[0]) + " " + argv[1];
  std::vector<char*> args{prog.data()};
  for (int i = 2; i < argc; ++i) args.push_back(argv[i]);
  args.push_back(nullptr);
  bench::Options opt;
  int exitCode = 0;
  if (!parse(argc - 1, args.data(), coll, &opt, &exitCode, rank)) return quit(exitCode);
  if (opt.nthreads > 1 || opt.nprocs > 0) {
    if (rank == 0)
      fprintf(stderr, "%s: MPI runs one rank per process: start ranks with mpirun -np <n> %s %s, not -t or --np\n",
              prog.c_str(), argv[0], argv[1]);
    return quit(1);
  }
  if (!opt.algo.empty() || (!opt.extra.empty() && opt.extra != "out_of_place")) {
    if (rank == 0)
      fprintf(stderr, "%s: MPI's algorithm is the MPI library's choice (mpirun --mca ...); --algo does not apply, "
                      "--extra takes only out_of_place\n", prog.c_str());
    return quit(1);
  }
  MpiBackend backend(opt.extra != "out_of_place");
  long long wrong = bench::runBenchmark(backend, opt, coll, 1);
  if (wrong < 0) {
    // The other ranks may be waiting in a collective this one left: end the job.
    fflush(stdout);
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  int code = wrong == 0 ? 0 : 1;
  int worst = code;
  MPI_Allreduce(&code, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  return quit(worst);
}
