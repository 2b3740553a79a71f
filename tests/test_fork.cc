// Ranks fork()ed from a process that holds hoccl state (the rendezvous
// thread hocclGetUniqueId starts, a communicator) initialise as fast as
// exec'd ones; what cannot cross a fork is refused by name; and two ranks
// given one number are named as such on every rank, at once.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "hoccl.h"
#include "tests/support/child.h"

namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }
bool has(const std::string& s, const char* what) { return s.find(what) != std::string::npos; }

constexpr int kTimeoutSec = 20;  // HOCCL_TIMEOUT of every rank: a hang shows as ~20 s, never as a pass

// One rank in a forked process: init, one all-reduce, and the line
// "init <seconds> ok" or "init <seconds> error <message>".
int forkedRank(FILE* out, const hocclUniqueId& id, int nranks, int rank) {
  hocclConfig_t config = HOCCL_CONFIG_INITIALIZER;
  config.timeoutSec = kTimeoutSec;
  hocclComm_t comm = nullptr;
  auto t0 = Clock::now();
  hocclResult_t rc = hocclCommInitRankConfig(&comm, nranks, id, rank, &config);
  double secs = since(t0);
  if (rc != hocclSuccess) {
    fprintf(out, "init %.3f error %s\n", secs, hocclGetLastError(nullptr));
    return 1;
  }
  float x = 1.0f;
  rc = hocclAllReduce(&x, &x, 1, hocclFloat, hocclSum, comm, nullptr);
  if (rc != hocclSuccess || x != nranks) {
    fprintf(out, "init %.3f error all-reduce: %s (sum %g)\n", secs, hocclGetLastError(comm), x);
    return 1;
  }
  fprintf(out, "init %.3f ok\n", secs);
  hocclCommDestroy(comm);
  return 0;
}

struct RankLine {
  double seconds = -1;
  bool ok = false;
  std::string error;
};

RankLine parse(const testutil::ChildOutcome& o) {
  RankLine r;
  for (const std::string& line : o.lines) {
    char status[16] = {0};
    int used = 0;
    if (sscanf(line.c_str(), "init %lf %15s %n", &r.seconds, status, &used) >= 2) {
      r.ok = strcmp(status, "ok") == 0;
      if (!r.ok) r.error = line.substr(static_cast<size_t>(used));
    }
  }
  return r;
}

// Forks one process per entry of `ranks` (the rank each passes), all with
// the same id and nranks; returns what each reported.
std::vector<RankLine> forkRanks(const hocclUniqueId& id, int nranks, const std::vector<int>& ranks) {
  std::vector<testutil::Child> children;
  for (int r : ranks)
    children.push_back(testutil::startChild([&, r](FILE* out) { return forkedRank(out, id, nranks, r); }));
  std::vector<RankLine> lines;
  for (size_t i = 0; i < children.size(); ++i) {
    testutil::ChildOutcome o = testutil::waitChild(children[i], kTimeoutSec + 10);
    EXPECT_FALSE(o.hung()) << "forked rank " << ranks[i] << " outlived " << kTimeoutSec + 10 << " s";
    lines.push_back(parse(o));
  }
  return lines;
}

// The launcher makes the id (starting the rendezvous in its own process)
// and forks the ranks: the rendezvous answers them from the launcher, and
// each rank's init returns as soon as it has the table. It took 10 s:
// each child waited for a rendezvous thread that existed only in its parent.
TEST(Fork, RanksForkedAfterGetUniqueIdInitAtOnce) {
  hocclUniqueId id;
  ASSERT_EQ(hocclGetUniqueId(&id), hocclSuccess);
  std::vector<RankLine> got = forkRanks(id, 2, {0, 1});
  for (size_t r = 0; r < got.size(); ++r) {
    EXPECT_TRUE(got[r].ok) << "rank " << r << ": " << got[r].error;
    EXPECT_GE(got[r].seconds, 0) << "rank " << r << " reported nothing";
    EXPECT_LT(got[r].seconds, 1.0) << "rank " << r << "'s init";
  }
}

// A process with a communicator forks: the child makes communicators of its
// own (a new id, its own rendezvous) as fast as any process, is refused
// the parent's communicator by name, and the parent's keeps working.
TEST(Fork, ChildOfAProcessWithACommunicatorMakesItsOwn) {
  hocclUniqueId id;
  ASSERT_EQ(hocclGetUniqueId(&id), hocclSuccess);
  std::vector<hocclComm_t> comms(2, nullptr);
  {
    std::vector<std::thread> threads;
    for (int r = 0; r < 2; ++r)
      threads.emplace_back([&, r] { ASSERT_EQ(hocclCommInitRank(&comms[r], 2, id, r), hocclSuccess); });
    for (auto& t : threads) t.join();
  }
  ASSERT_TRUE(comms[0] && comms[1]);
  testutil::ChildOutcome o = testutil::runInChild(kTimeoutSec + 10, [&](FILE* out) {
    float x = 1.0f;
    hocclResult_t rc = hocclAllReduce(&x, &x, 1, hocclFloat, hocclSum, comms[0], nullptr);
    fprintf(out, "inherited %d %s\n", static_cast<int>(rc), rc == hocclSuccess ? "" : hocclGetLastError(nullptr));
    hocclUniqueId mine;
    if (hocclGetUniqueId(&mine) != hocclSuccess) {
      fprintf(out, "init 0 error hocclGetUniqueId: %s\n", hocclGetLastError(nullptr));
      return 1;
    }
    std::vector<int> rcs(2, 0);
    std::vector<std::thread> ranks;
    for (int r = 0; r < 2; ++r)
      ranks.emplace_back([&, r] {
        char path[] = "/tmp/hoccl-fork-XXXXXX";
        int fd = mkstemp(path);
        FILE* mineOut = fdopen(fd, "w+");
        rcs[r] = forkedRank(mineOut, mine, 2, r);
        fflush(mineOut);
        rewind(mineOut);
        char line[2048];
        while (fgets(line, sizeof line, mineOut)) fputs(line, out);
        fclose(mineOut);
        unlink(path);
      });
    for (auto& t : ranks) t.join();
    return rcs[0] | rcs[1];
  });
  ASSERT_FALSE(o.hung()) << "the child outlived " << kTimeoutSec + 10 << " s";
  int inits = 0;
  for (const std::string& line : o.lines) {
    if (line.compare(0, 10, "inherited ") == 0) {
      EXPECT_NE(line.compare(0, 12, "inherited 0 "), 0) << "the child used its parent's communicator";
      EXPECT_TRUE(has(line, "fork")) << line;
      continue;
    }
    testutil::ChildOutcome one;
    one.lines = {line};
    RankLine r = parse(one);
    ++inits;
    EXPECT_TRUE(r.ok) << line;
    EXPECT_LT(r.seconds, 1.0) << line;
  }
  EXPECT_EQ(inits, 2);
  EXPECT_EQ(o.exitCode, 0);
  // The parent's communicator is untouched by the child.
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r)
    threads.emplace_back([&, r] {
      float x = 1.0f;
      EXPECT_EQ(hocclAllReduce(&x, &x, 1, hocclFloat, hocclSum, comms[r], nullptr), hocclSuccess)
          << hocclGetLastError(comms[r]);
      EXPECT_EQ(x, 2.0f);
    });
  for (auto& t : threads) t.join();
  for (hocclComm_t c : comms) EXPECT_EQ(hocclCommDestroy(c), hocclSuccess);
}

// Forked processes pass the same rank (two of two, or two of three): every
// process fails at once with an error that names the rank given twice.
TEST(Fork, DuplicateRankIsNamedOnEveryRank) {
  struct Case {
    int nranks;
    std::vector<int> ranks;
    const char* named;
  };
  for (const Case& c : {Case{2, {0, 0}, "rank 0 joined twice"}, Case{3, {0, 1, 1}, "rank 1 joined twice"}}) {
    SCOPED_TRACE(std::to_string(c.ranks.size()) + " processes of " + std::to_string(c.nranks) + " ranks");
    hocclUniqueId id;
    ASSERT_EQ(hocclGetUniqueId(&id), hocclSuccess);
    auto t0 = Clock::now();
    std::vector<RankLine> got = forkRanks(id, c.nranks, c.ranks);
    EXPECT_LT(since(t0), 5.0);
    for (size_t i = 0; i < got.size(); ++i) {
      EXPECT_FALSE(got[i].ok) << "process " << i << " initialised";
      EXPECT_LT(got[i].seconds, 2.0) << "process " << i << ": " << got[i].error;
      EXPECT_TRUE(has(got[i].error, c.named)) << "process " << i << ": " << got[i].error;
    }
  }
}

}  // namespace
