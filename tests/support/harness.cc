#include "tests/support/harness.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <numeric>
#include <thread>

#include "transport/net/net.h"

namespace hoccl {
// The test hook for emulated nodes (the communicator's header declares it);
// declared here so the harness does not pull in the whole communicator.
void setThreadHostIdOverride(const std::string& id);
}  // namespace hoccl

namespace testutil {

Options inProcesses(int ranks, double timeoutSec) {
  Options o;
  o.ranks = ranks;
  o.mode = Mode::Processes;
  o.timeoutSec = timeoutSec;
  return o;
}

namespace {

int nodeCount(const Options& o) { return o.nodeSizes.empty() ? 1 : static_cast<int>(o.nodeSizes.size()); }

// Why these options describe no world ("" if they do).
std::string invalid(const Options& o) {
  if (o.ranks < 1) return "ranks must be at least 1";
  if (!o.nodeSizes.empty()) {
    for (int s : o.nodeSizes)
      if (s < 1) return "every node needs at least one rank";
    int sum = std::accumulate(o.nodeSizes.begin(), o.nodeSizes.end(), 0);
    if (sum != o.ranks) return "nodeSizes add up to " + std::to_string(sum) + ", not ranks " + std::to_string(o.ranks);
  }
  if (o.net == Net::Shm && nodeCount(o) > 1) return "several nodes need a network: Socket or Ib, not Shm";
  if (o.leaves > nodeCount(o)) return "more leaf switches than nodes";
  return "";
}

hocclConfig_t configFor(const Options& o) {
  hocclConfig_t c = HOCCL_CONFIG_INITIALIZER;
  if (!o.algorithm.empty()) c.algorithm = o.algorithm.c_str();
  if (o.net == Net::Socket) c.netName = "Socket";
  if (o.net == Net::Ib) c.netName = "IB";
  if (o.timeoutSec > 0) c.timeoutMs = static_cast<int>(std::lround(o.timeoutSec * 1000));
  if (o.minCTAs > 0) c.minCTAs = o.minCTAs;
  if (o.maxCTAs > 0) c.maxCTAs = o.maxCTAs;
  return c;
}

std::string nodeName(const Options& o, int node) { return o.nodePrefix + "-" + std::to_string(node); }

// This thread's rank: its node identity, then its communicator.
hocclResult_t initRank(const Options& o, const hocclUniqueId& id, int rank, hocclComm_t* comm) {
  hoccl::setThreadHostIdOverride(nodeCount(o) > 1 ? nodeName(o, o.nodeOfRank()[rank]) : "");
  if (o.beforeInit) o.beforeInit(rank);
  hocclConfig_t config = configFor(o);
  return hocclCommInitRankConfig(comm, o.ranks, id, rank, &config);
}

// With leaves > 1: a topology file naming the leaf switch of every node,
// in HOCCL_TOPO_FILE while ranks initialise (they read it at init).
class TopologyFile {
 public:
  explicit TopologyFile(const Options& o) {
    if (o.leaves <= 1) return;
    const char* tmp = getenv("TMPDIR");
    path_ = std::string(tmp && *tmp ? tmp : P_tmpdir) + "/hoccl-test-topo-XXXXXX";
    int fd = mkstemp(path_.data());
    if (fd < 0) {
      error_ = "cannot create " + path_;
      return;
    }
    const int nodes = nodeCount(o);
    std::string json = "{\"version\":1,\"switches\":[";
    for (int l = 0; l < o.leaves; ++l) {
      json += std::string(l ? "," : "") + "{\"name\":\"leaf" + std::to_string(l) + "\",\"nodes\":[";
      bool first = true;
      for (int i = 0; i < nodes; ++i) {
        if (i * o.leaves / nodes != l) continue;
        json += std::string(first ? "" : ",") + "\"" + nodeName(o, i) + "\"";
        first = false;
      }
      json += "],\"link_gbps\":1,\"uplink_gbps\":0.5}";
    }
    json += "]}";
    bool written = write(fd, json.data(), json.size()) == static_cast<ssize_t>(json.size());
    close(fd);
    if (!written) error_ = "cannot write " + path_;
    setenv("HOCCL_TOPO_FILE", path_.c_str(), 1);
    hoccl::reloadSettingsForTesting();  // the library reads the environment once per process
  }
  ~TopologyFile() {
    if (path_.empty()) return;
    unsetenv("HOCCL_TOPO_FILE");
    hoccl::reloadSettingsForTesting();
    unlink(path_.c_str());
  }
  const std::string& error() const { return error_; }

 private:
  std::string path_, error_;
};

// Failed assertions recorded in the current test after index `from`.
int failuresSince(int from) {
  const ::testing::TestInfo* info = ::testing::UnitTest::GetInstance()->current_test_info();
  if (!info) return 0;
  const ::testing::TestResult* result = info->result();
  int failed = 0;
  for (int i = from; i < result->total_part_count(); ++i) failed += result->GetTestPartResult(i).failed();
  return failed;
}

int partCount() {
  const ::testing::TestInfo* info = ::testing::UnitTest::GetInstance()->current_test_info();
  return info ? info->result()->total_part_count() : 0;
}

// Exit codes of a forked rank.
constexpr int kChildFailed = 1, kChildInitFailed = 2, kChildNoId = 3;

[[noreturn]] void childRank(const Options& o, const Body& body, int rank, std::vector<int>& fds, int partsBefore) {
  const int n = o.ranks;
  hocclUniqueId id;
  if (rank == 0) {
    for (int r = 0; r < n; ++r) close(fds[2 * r]);  // read ends
    if (hocclGetUniqueId(&id) != hocclSuccess) {
      fprintf(stderr, "rank 0: hocclGetUniqueId: %s\n", hocclGetLastError(nullptr));
      _exit(kChildNoId);
    }
    for (int r = 1; r < n; ++r)
      if (write(fds[2 * r + 1], &id, sizeof id) != static_cast<ssize_t>(sizeof id)) _exit(kChildNoId);
  } else {
    for (int r = 0; r < n; ++r) close(fds[2 * r + 1]);  // write ends: rank 0 dying means EOF
    if (!readAll(fds[2 * rank], &id, sizeof id)) _exit(kChildNoId);
  }
  hocclComm_t comm = nullptr;
  if (initRank(o, id, rank, &comm) != hocclSuccess) {
    fprintf(stderr, "rank %d: init: %s\n", rank, hocclGetLastError(nullptr));
    fflush(nullptr);
    _exit(kChildInitFailed);
  }
  body(comm, rank);
  hocclCommDestroy(comm);
  int failed = failuresSince(partsBefore);
  fflush(nullptr);
  _exit(failed ? kChildFailed : 0);
}

bool spawnProcesses(const Options& o, const Body& body, std::string* error) {
  auto fail = [&](const std::string& why) {
    if (error) *error = why;
    return false;
  };
  // What the library discovers once per process (the machine's topology
  // through hwloc, seconds on a busy machine) is discovered here, before
  // the fork, so that the ranks inherit it instead of each repeating it.
  static const bool warm = [] {
    Options one;
    return spawn(one, [](hocclComm_t, int) {});
  }();
  (void)warm;
  TopologyFile topo(o);  // children inherit HOCCL_TOPO_FILE
  if (!topo.error().empty()) return fail(topo.error());
  const int n = o.ranks;
  std::vector<int> fds(2 * n, -1);  // one pipe per rank: rank 0 writes the unique id into it
  for (int r = 0; r < n; ++r)
    if (pipe(&fds[2 * r]) != 0) {
      for (int fd : fds)
        if (fd >= 0) close(fd);
      return fail("pipe failed");
    }
  const int partsBefore = partCount();
  fflush(nullptr);  // or the children would print what is buffered again
  std::vector<pid_t> pids(n, -1);
  for (int r = 0; r < n; ++r) {
    pids[r] = fork();
    if (pids[r] == 0) childRank(o, body, r, fds, partsBefore);
  }
  for (int fd : fds) close(fd);
  const double limitSec = (o.timeoutSec > 0 ? o.timeoutSec : 300) + 60;
  const auto start = std::chrono::steady_clock::now();
  std::vector<int> status(n, -1);
  std::string why;
  int left = 0;
  for (int r = 0; r < n; ++r) {
    if (pids[r] < 0) why = "fork failed for rank " + std::to_string(r);
    else ++left;
  }
  while (left > 0) {
    for (int r = 0; r < n; ++r) {
      int st = 0;
      if (pids[r] > 0 && status[r] == -1 && waitpid(pids[r], &st, WNOHANG) == pids[r]) {
        status[r] = st;
        --left;
      }
    }
    if (std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() > limitSec) {
      for (int r = 0; r < n; ++r)
        if (pids[r] > 0 && status[r] == -1) {
          kill(pids[r], SIGKILL);
          waitpid(pids[r], nullptr, 0);
          if (why.empty()) why = "rank " + std::to_string(r) + " still ran after " + std::to_string(limitSec) + " s";
        }
      break;
    }
    if (left > 0) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  for (int r = 0; r < n && why.empty(); ++r) {
    int st = status[r];
    std::string rank = "rank " + std::to_string(r) + " (pid " + std::to_string(pids[r]) + ")";
    const bool toBeKilled = std::find(o.killedRanks.begin(), o.killedRanks.end(), r) != o.killedRanks.end();
    if (toBeKilled) {
      if (!WIFSIGNALED(st) || WTERMSIG(st) != SIGKILL)
        why = rank + " was to die of SIGKILL but " +
              (WIFSIGNALED(st) ? "died of signal " + std::to_string(WTERMSIG(st))
                               : "exited with " + std::to_string(WEXITSTATUS(st)));
    } else if (WIFSIGNALED(st)) why = rank + " died of signal " + std::to_string(WTERMSIG(st));
    else if (WEXITSTATUS(st) == kChildFailed) why = rank + " failed (its failures are printed above)";
    else if (WEXITSTATUS(st) == kChildInitFailed) why = rank + " failed to initialise (its error is printed above)";
    else if (WEXITSTATUS(st) != 0) why = rank + " exited with " + std::to_string(WEXITSTATUS(st));
  }
  return why.empty() ? true : fail(o.describe() + ": " + why);
}

}  // namespace

bool readAll(int fd, void* buf, size_t bytes) {
  char* p = static_cast<char*>(buf);
  while (bytes > 0) {
    ssize_t got = read(fd, p, bytes);
    if (got <= 0) return false;
    p += got;
    bytes -= static_cast<size_t>(got);
  }
  return true;
}

hocclResult_t initRankAs(const Options& o, const hocclUniqueId& id, int rank, hocclComm_t* comm) {
  return initRank(o, id, rank, comm);
}

std::vector<int> Options::nodeOfRank() const {
  std::vector<int> node;
  if (nodeSizes.empty()) return std::vector<int>(ranks, 0);
  for (size_t i = 0; i < nodeSizes.size(); ++i) node.insert(node.end(), nodeSizes[i], static_cast<int>(i));
  return node;
}

std::string Options::describe() const {
  std::string s = std::to_string(ranks) + (ranks == 1 ? " rank" : " ranks");
  if (nodeCount(*this) > 1) {
    s += " on nodes ";
    for (size_t i = 0; i < nodeSizes.size(); ++i) s += (i ? "+" : "") + std::to_string(nodeSizes[i]);
    if (leaves > 1) s += " under " + std::to_string(leaves) + " leaves";
  }
  if (!algorithm.empty()) s += ", " + algorithm;
  if (net == Net::Socket) s += ", socket";
  if (net == Net::Ib) s += ", ib";
  if (mode == Mode::Processes) s += ", processes";
  return s;
}

struct World::Ranks {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::thread> threads;
  std::vector<std::string> errors;
  int initialised = 0;
  uint64_t generation = 0;  // one per run()
  const Body* body = nullptr;
  int finished = 0;
  bool stop = false;
};

World::World(const Options& options) : options_(options) {
  initError_ = invalid(options_);
  if (!initError_.empty()) return;
  if (options_.mode != Mode::Threads) {
    initError_ = "World keeps thread ranks; spawn() runs processes";
    return;
  }
  TopologyFile topo(options_);
  if (!topo.error().empty()) {
    initError_ = topo.error();
    return;
  }
  hocclUniqueId id;
  if (hocclGetUniqueId(&id) != hocclSuccess) {
    initError_ = std::string("hocclGetUniqueId: ") + hocclGetLastError(nullptr);
    return;
  }
  const int n = options_.ranks;
  ranks_ = std::make_unique<Ranks>();
  Ranks& k = *ranks_;
  k.errors.resize(n);
  for (int r = 0; r < n; ++r) {
    k.threads.emplace_back([this, &k, id, r] {
      hocclComm_t comm = nullptr;
      hocclResult_t rc = initRank(options_, id, r, &comm);
      std::unique_lock<std::mutex> lock(k.mu);
      if (rc != hocclSuccess) k.errors[r] = hocclGetLastError(nullptr);
      ++k.initialised;
      k.cv.notify_all();
      for (uint64_t seen = 0;;) {
        k.cv.wait(lock, [&] { return k.stop || k.generation != seen; });
        if (k.stop) break;
        seen = k.generation;
        const Body* body = k.body;
        lock.unlock();
        if (comm) (*body)(comm, r);
        lock.lock();
        ++k.finished;
        k.cv.notify_all();
      }
      lock.unlock();
      if (comm) hocclCommDestroy(comm);
    });
  }
  std::unique_lock<std::mutex> lock(k.mu);
  k.cv.wait(lock, [&] { return k.initialised == n; });
  for (int r = 0; r < n && initError_.empty(); ++r)
    if (!k.errors[r].empty()) initError_ = options_.describe() + ": rank " + std::to_string(r) + ": " + k.errors[r];
}

World::~World() {
  if (!ranks_) return;
  {
    std::lock_guard<std::mutex> lock(ranks_->mu);
    ranks_->stop = true;
  }
  ranks_->cv.notify_all();
  for (auto& t : ranks_->threads) t.join();
}

bool World::run(const Body& body, std::string* error) {
  if (!initError_.empty() || !ranks_) {
    if (error) *error = initError_.empty() ? "no ranks" : initError_;
    return false;
  }
  Ranks& k = *ranks_;
  std::unique_lock<std::mutex> lock(k.mu);
  k.body = &body;
  k.finished = 0;
  ++k.generation;
  k.cv.notify_all();
  k.cv.wait(lock, [&] { return k.finished == options_.ranks; });
  k.body = nullptr;
  return true;
}

bool spawn(const Options& options, const Body& body, std::string* error) {
  if (options.mode == Mode::Processes) {
    std::string why = invalid(options);
    if (!why.empty()) {
      if (error) *error = why;
      return false;
    }
    return spawnProcesses(options, body, error);
  }
  World world(options);
  return world.run(body, error);
}

bool runThreads(int nranks, const Body& body, std::string* error) {
  Options o;
  o.ranks = nranks;
  return spawn(o, body, error);
}

const std::string& ibUnavailable() {
  static const std::string why = [] {
    hoccl::IbNetOptions o;
    o.ifnameRule = "lo";
    if (const char* h = getenv("HOCCL_IB_HCA")) o.hcaRule = h;
    std::unique_ptr<hoccl::NetTransport> probe;
    hoccl::Status st = hoccl::createIbTransport(o, &probe);
    return st.ok() ? std::string() : "no IB transport here: " + st.message();
  }();
  return why;
}

}  // namespace testutil
