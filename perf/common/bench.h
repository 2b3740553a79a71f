// The benchmark driver shared by hoccl's perf programs and the peer
// benchmarks (Gloo, MPI): nccl-tests' flags, size sweep, timing, checking,
// table and JSON lines. A Backend is one rank of one library; the driver
// measures every library the same way.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "hoccl.h"  // enums only (NCCL's numbering)

namespace bench {

// AllToAll and SendRecv (each rank sends to rank+1, receives from rank-1)
// are hoccl's only: the peer benchmarks do not offer them.
enum class Coll { AllReduce, ReduceScatter, AllGather, Broadcast, Reduce, AllToAll, SendRecv };
const char* collTestName(Coll c);  // "all_reduce_perf", ...
const char* collShortName(Coll c); // "all_reduce", ...

struct Options {
  size_t minBytes = 32 << 20, maxBytes = 32 << 20, stepBytes = 1 << 20;
  double stepFactor = 1;
  int iters = 20, warmup = 1, aggIters = 1, cycles = 1, check = 1;
  int average = 1;          // -a: 0 rank 0, 1 mean, 2 min, 3 max
  int blocking = 0;         // -z
  int timeoutSec = 0;       // -T
  int nthreads = 1;         // -t
  int nprocs = 0;           // --np
  int root = 0;             // -r (-1: every root)
  std::vector<hocclDataType_t> types = {hocclFloat};
  std::vector<hocclRedOp_t> ops = {hocclSum};
  std::string jsonPath;     // -J
  std::string algo = "";    // --algo (hoccl only), as given
  std::vector<std::string> algos;  // --algo split at commas: more than one runs side by side
  int blocks = 0;           // --blocks: timed blocks per size side by side; 0 = min(iters, 10)
  bool verbose = false;     // --verbose: every rank prints its own lines
  std::string extra;        // --extra: a peer benchmark's own option (gloo_perf: algorithm)
  bool deviceMemory = false;  // --buffers device: buffers on the rank's GPU (device_mem.h)
};

// Parses nccl-tests' flags (and ours). On error prints why and the usage to
// stderr and returns false; *exitCode is 0 for --help.
bool parseOptions(int argc, char** argv, Coll coll, Options* opt, int* exitCode);
void printUsage(const char* prog, Coll coll);

// One rank of one library.
class Backend {
 public:
  virtual ~Backend() = default;
  virtual const char* library() const = 0;   // "hoccl", "gloo", "mpi"
  virtual std::string algorithm() const = 0;  // as it goes in the JSON rows
  virtual int rank() const = 0;
  virtual int nranks() const = 0;
  // False if the library cannot run this combination (the row is skipped).
  virtual bool supports(Coll c, hocclDataType_t t, hocclRedOp_t op) const = 0;
  // False: in-place calls are not timed (the row's in-place columns say
  // N/A, its JSON "ip" is null), for a library whose in-place call fails.
  virtual bool timesInPlace(Coll) const { return true; }
  // Runs one collective with NCCL's argument meaning; returns "" or an error.
  virtual std::string run(Coll c, const void* send, void* recv, size_t count, hocclDataType_t t,
                          hocclRedOp_t op, int root) = 0;
  // --buffers device: whether the library takes GPU buffers, and the stream
  // (a CUstream) its calls are queued on; a call then returns before it is
  // done, and the driver waits for the stream before reading the clock.
  virtual bool supportsDeviceMemory() const { return false; }
  virtual void setStream(void*) {}
  // An asynchronous error of the backend's communicator ("" if none),
  // asked while its calls on device buffers run, as nccl-tests asks
  // ncclCommGetAsyncError: a failure elsewhere (a dead peer) ends the wait.
  virtual std::string asyncError() { return ""; }
  // Wraps -m aggregated calls (hoccl: a group); default no-op.
  virtual void aggregateBegin() {}
  virtual std::string aggregateEnd() { return ""; }
  // Small helpers over the same library, used for timing and checking.
  virtual double allReduceDouble(double v, hocclRedOp_t op) = 0;  // sum, min or max
  virtual void barrier() = 0;
  // This rank's line for "# Using devices" (see deviceLine).
  virtual std::string deviceDescription() const = 0;
  // Every rank's line, in rank order (collective).
  virtual std::vector<std::string> allGatherLine(const std::string& mine) = 0;
};

// nccl-tests' device line: "#  Rank  0 Group  0 Pid  1234 on   host device -1 [...] what".
std::string deviceLine(int rank, const std::string& what);
// Lines travel as fixed-size records of this many bytes.
constexpr size_t kLineBytes = 192;

// Runs the sweep for `coll` on every rank (each rank calls it with its own
// backend). Global rank 0 prints the preamble, table and footer (all ranks
// with --verbose) and writes the JSON lines. Returns the number of wrong
// elements found (summed over ranks), or -1 on an error.
long long runBenchmark(Backend& b, const Options& opt, Coll coll, int threadsPerProcess);
// Side by side: the same ranks in several backends (one communicator per
// algorithm, same rank order). Each size's timed iterations are split into
// blocks; block k runs every backend in turn, in reverse order on odd k, so
// that slow phases of the host fall on all of them alike. One row per
// backend, with its algorithm as an extra last column.
long long runBenchmark(const std::vector<Backend*>& backends, const Options& opt, Coll coll,
                       int threadsPerProcess);

// Formats a number into `width` characters as nccl-tests does: fewer
// decimals as the value grows, then an exponent.
std::string fitNumber(double v, int width);

}  // namespace bench
