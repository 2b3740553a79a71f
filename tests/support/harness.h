// The one way tests start ranks: every rank of one communicator runs a body,
// as threads of this process or as forked processes, on emulated nodes, with
// the algorithm and the network passed through hocclConfig_t (never the
// environment). In the spirit of Gloo's test/base_test.h spawn().
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "hoccl.h"

namespace testutil {

enum class Mode { Threads, Processes };

// The network between emulated nodes (hocclConfig_t.netName). Ranks on one
// node always talk over shared memory; Shm means the shape has one node.
enum class Net { Shm, Socket, Ib };

struct Options {
  int ranks = 1;
  // Ranks per emulated node, in rank order; empty: all ranks on one node.
  // Nodes are told apart by per-rank host ids ("<nodePrefix>-<i>").
  std::vector<int> nodeSizes;
  // More than 1: a topology file puts node i under leaf switch
  // i * leaves / nodes (the only setting here that goes through the
  // environment, HOCCL_TOPO_FILE, because hocclConfig_t has no field for it).
  int leaves = 1;
  // hocclConfig_t.algorithm ("auto" too, over HOCCL_ALGO); empty: unset.
  std::string algorithm;
  Net net = Net::Shm;
  Mode mode = Mode::Threads;
  // hocclConfig_t.timeoutMs when > 0: a hang becomes an error. Fractions
  // of a second are fine (0.5), for tests that wait for a timeout to fire.
  double timeoutSec = 0;
  int minCTAs = 0, maxCTAs = 0;  // hocclConfig_t's when > 0
  std::string nodePrefix = "node";
  // Called on each rank's thread (in its process) just before it
  // initialises: per-rank settings in processes (setenv, then
  // reloadSettingsForTesting). Threads share one environment.
  std::function<void(int rank)> beforeInit;
  // Processes only: ranks the test kills (SIGKILL, kill -9): each must die
  // of it, and that death is not a failure.
  std::vector<int> killedRanks;

  // The node of each rank (0 for all on one node).
  std::vector<int> nodeOfRank() const;
  // One line for messages: "4 ranks", "6 ranks on nodes 3+1+2, ring, socket, processes".
  std::string describe() const;
};

// `ranks` ranks as processes, with a timeout so that a hang becomes an
// error (60 s unless given).
Options inProcesses(int ranks, double timeoutSec = 60);

using Body = std::function<void(hocclComm_t comm, int rank)>;

// Initialises rank `rank` of a communicator described by `o` (its node
// identity, its config) as spawn does, on this thread.
hocclResult_t initRankAs(const Options& o, const hocclUniqueId& id, int rank, hocclComm_t* comm);

// Ranks as threads with their communicators kept between runs, so a test
// that runs many small bodies on the same ranks pays for init once. Each
// rank's body runs on the thread that created its communicator.
class World {
 public:
  // Creates options.ranks communicators (threads only; processes are
  // started per run by spawn()).
  explicit World(const Options& options);
  ~World();
  World(const World&) = delete;
  World& operator=(const World&) = delete;

  const Options& options() const { return options_; }
  // Empty when every rank initialised; else the first failing rank's error.
  const std::string& initError() const { return initError_; }
  // Runs body on every rank and waits for all; false (with *error) if the
  // ranks could not run it. Failed assertions inside body are reported by
  // GoogleTest as usual.
  bool run(const Body& body, std::string* error = nullptr);

 private:
  struct Ranks;
  Options options_;
  std::string initError_;
  std::unique_ptr<Ranks> ranks_;
};

// Runs body on every rank of a new communicator and destroys it. Threads:
// as World. Processes: one fork per rank; rank 0 makes the unique id and
// hands it to the others through pipes, each child exits non-zero if any
// assertion failed in it (its failures are printed in its output). Returns
// false, with *error, if a rank failed to initialise, or (processes) a
// child failed, crashed or outlived the timeout.
bool spawn(const Options& options, const Body& body, std::string* error = nullptr);

// The communicator's rank and size (-1 if the handle is refused).
inline int commRank(hocclComm_t c) {
  int r = -1;
  hocclCommUserRank(c, &r);
  return r;
}
inline int commSize(hocclComm_t c) {
  int n = -1;
  hocclCommCount(c, &n);
  return n;
}

// Reads exactly `bytes` from `fd`; false at end of file or on an error.
bool readAll(int fd, void* buf, size_t bytes);

// spawn() of n ranks as threads on one node, with default settings.
bool runThreads(int nranks, const Body& body, std::string* error = nullptr);

// Empty if this machine has an IB / RoCE port the verbs transport can use;
// else why not (checked once per process).
const std::string& ibUnavailable();

}  // namespace testutil
