// Ranks that disagree about a collective — its root, its kind, its count,
// type or operator — get hocclInvalidUsage naming both calls, on every rank
// and on every path: the shared-memory one-shot, ring, doubling, the
// chains of broadcast and reduce, all-to-all's pairwise exchange, the
// hierarchical algorithms across
// emulated nodes, ranks as threads and as processes. Differences that
// change who sends (two roots, a reduce against a broadcast) leave every
// rank waiting to receive; the stalled-call notices must name them, not the
// timeout. Each communicator's timeout is 20 s, so an error found only by
// the timeout fails the test by its code (hocclTimeout), not by a clock.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "tests/support/harness.h"

using namespace testutil;

namespace {

struct Field {
  const char* name;
  bool rooted;  // only for algorithms that run broadcast and reduce
  // The call rank `r` makes on `b` (room for `n` doubles).
  std::function<hocclResult_t(hocclComm_t c, int r, void* b, size_t n)> call;
  // Both calls' descriptions hold these.
  std::vector<const char*> named;
};

std::vector<Field> fields() {
  return {
      {"reduce roots", true,
       [](hocclComm_t c, int r, void* b, size_t n) {
         return hocclReduce(b, b, n, hocclFloat, hocclSum, r == 0 ? 0 : 1, c, nullptr);
       },
       {"root=0", "root=1"}},
      {"broadcast roots", true,
       [](hocclComm_t c, int r, void* b, size_t n) {
         return hocclBroadcast(b, b, n, hocclFloat, r == 0 ? 0 : 1, c, nullptr);
       },
       {"root=0", "root=1"}},
      {"reduce against broadcast", true,
       [](hocclComm_t c, int r, void* b, size_t n) {
         return r == 0 ? hocclReduce(b, b, n, hocclFloat, hocclSum, 0, c, nullptr)
                       : hocclBroadcast(b, b, n, hocclFloat, 0, c, nullptr);
       },
       {"Reduce(", "Broadcast("}},
      {"broadcast against reduce", true,
       [](hocclComm_t c, int r, void* b, size_t n) {
         return r == 0 ? hocclBroadcast(b, b, n, hocclFloat, 0, c, nullptr)
                       : hocclReduce(b, b, n, hocclFloat, hocclSum, 0, c, nullptr);
       },
       {"Reduce(", "Broadcast("}},
      {"all-reduce against all-gather", false,
       [](hocclComm_t c, int r, void* b, size_t n) {
         float* f = static_cast<float*>(b);
         return r == 0 ? hocclAllReduce(f, f, n, hocclFloat, hocclSum, c, nullptr)
                       : hocclAllGather(f, f + n, n / 4, hocclFloat, c, nullptr);
       },
       {"AllReduce(", "AllGather("}},
      {"all-to-all counts", false,
       [](hocclComm_t c, int r, void* b, size_t n) {
         float* f = static_cast<float*>(b);
         int p = 0;
         hocclCommCount(c, &p);
         const size_t each = n / static_cast<size_t>(p);
         return hocclAlltoAll(f, f + n, r == 0 ? each : each - 1, hocclFloat, c, nullptr);
       },
       {"AllToAll("}},
      {"count", false,
       [](hocclComm_t c, int r, void* b, size_t n) {
         return hocclAllReduce(b, b, r == 0 ? n : n - 1, hocclFloat, hocclSum, c, nullptr);
       },
       {"mismatch"}},
      {"type", false,
       [](hocclComm_t c, int r, void* b, size_t n) {
         return hocclAllReduce(b, b, n, r == 0 ? hocclFloat : hocclInt32, hocclSum, c, nullptr);
       },
       {"float", "int32"}},
      {"operator", false,
       [](hocclComm_t c, int r, void* b, size_t n) {
         return hocclAllReduce(b, b, n, hocclFloat, r == 0 ? hocclSum : hocclMax, c, nullptr);
       },
       {"sum", "max"}},
  };
}

struct Shape {
  const char* name;
  Options options;
};

Options shape(int ranks, std::vector<int> nodes, Net net, Mode mode, const char* algo) {
  Options o;
  o.ranks = ranks;
  o.nodeSizes = std::move(nodes);
  o.net = net;
  o.mode = mode;
  o.algorithm = algo;
  o.timeoutSec = 20;
  return o;
}

// Runs `f` on a new communicator of `o` at `count` floats and checks that
// every rank ends with the mismatch: from the call itself, or, for a rank
// whose own part of the call could complete (a reduce's leaf whose root
// ran something else), from its next call at the latest.
void expectMismatch(const Options& o, const Field& f, size_t count) {
  const std::string what = std::string(f.name) + ", " + std::to_string(count) + " floats, " + o.describe();
  // HOCCL_TEST_CASE=substring runs only the cases whose description has it.
  const char* only = getenv("HOCCL_TEST_CASE");
  if (only && what.find(only) == std::string::npos) return;
  std::vector<hocclResult_t> rc(o.ranks, hocclSuccess);
  std::vector<std::string> msg(o.ranks);
  std::vector<int> firstCallFailed(o.ranks, 0);
  std::string err;
  const auto start = std::chrono::steady_clock::now();
  ASSERT_TRUE(spawn(o, [&](hocclComm_t comm, int rank) {
    std::vector<float> buf(2 * count + 64, 1.0f);
    hocclResult_t r = f.call(comm, rank, buf.data(), count);
    firstCallFailed[rank] = r != hocclSuccess;
    if (r == hocclSuccess) r = hocclAllReduce(buf.data(), buf.data(), 1, hocclFloat, hocclSum, comm, nullptr);
    std::string m = hocclGetLastError(comm);
    // Processes: the parent sees only the child's assertions.
    EXPECT_EQ(r, hocclInvalidUsage) << what << ", rank " << rank << ": " << m;
    EXPECT_NE(m.find("mismatch"), std::string::npos) << what << ", rank " << rank << ": " << m;
    for (const char* word : f.named) EXPECT_NE(m.find(word), std::string::npos) << what << ": " << m;
    rc[rank] = r;
    msg[rank] = m;
  }, &err)) << what << ": " << err;
  // Found by a notice, a difference takes a tenth of a second or so; a case
  // this slow is worth a look (the timeout itself would fail above). On
  // shared cores a waiting rank yields its polls before it first checks its
  // peers, which can take seconds while other processes keep the cores busy.
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (secs > 3) std::printf("slow case (%.1f s): %s\n", secs, what.c_str());
  // A call that changed nothing on either side must fail on the spot: every
  // rank took part in the difference.
  if (o.mode == Mode::Threads && !f.rooted) {
    for (int r = 0; r < o.ranks; ++r) EXPECT_TRUE(firstCallFailed[r]) << what << ", rank " << r << ": " << msg[r];
  }
}

// 32 floats: one-shot over shared memory (oneshot_shm); 129: just past it, over
// connections; 300,000: sliced and pipelined.
const size_t kCounts[] = {32, 129, 300000};

TEST(MismatchEveryPath, OneNodeThreads) {
  for (const char* algo : {"", "ring", "doubling", "oneshot"})
    for (int ranks : {2, 4})
      for (const Field& f : fields()) {
        if (f.rooted && algo[0] && std::string(algo) != "ring") continue;
        for (size_t count : kCounts) expectMismatch(shape(ranks, {}, Net::Shm, Mode::Threads, algo), f, count);
      }
}

TEST(MismatchEveryPath, OneNodeProcesses) {
  for (const Field& f : fields())
    for (size_t count : {size_t{32}, size_t{129}, size_t{300000}})
      expectMismatch(shape(3, {}, Net::Shm, Mode::Processes, ""), f, count);
}

// Two emulated nodes of two ranks over TCP: the hierarchical algorithms and
// the leaders' exchanges run across the network.
TEST(MismatchEveryPath, TwoNodesOverSockets) {
  for (const char* algo : {"", "ring", "hierarchical", "horing", "leaderdoubling"})
    for (const Field& f : fields()) {
      if (f.rooted && algo[0] && std::string(algo) != "ring") continue;
      if (std::string(algo) == "leaderdoubling" && std::string(f.name) == "all-reduce against all-gather") continue;
      for (size_t count : {size_t{129}, size_t{300000}})
        expectMismatch(shape(4, {2, 2}, Net::Socket, Mode::Threads, algo), f, count);
    }
}

}  // namespace
