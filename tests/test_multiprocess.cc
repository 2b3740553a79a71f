// Ranks as separate processes (fork/exec of hoccl_test_worker).
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace {

struct Outcome {
  std::vector<int> exitCodes;
  double seconds = 0;
};

// Starts n workers; kills them all if they outlive `limitSec` (exit -9).
// Rank `reapLast` (if any) is reaped only after every other rank ended, as
// a launcher that waits for its children in order would: until then it
// stays a zombie if it dies.
Outcome launch(const std::string& scenario, int n, double limitSec,
               const std::vector<std::vector<std::string>>& extraEnv = {}, int reapLast = -1) {
  char tmpl[] = "/tmp/hoccl-mp-XXXXXX";
  std::string dir = mkdtemp(tmpl);
  std::string idfile = dir + "/id";
  std::vector<pid_t> pids(n);
  auto start = std::chrono::steady_clock::now();
  for (int r = 0; r < n; ++r) {
    std::vector<std::string> args = {HOCCL_TEST_WORKER, scenario, std::to_string(r), std::to_string(n), idfile};
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    std::vector<std::string> env;
    for (char** e = environ; *e; ++e) env.emplace_back(*e);
    if (r < static_cast<int>(extraEnv.size()))
      for (auto& e : extraEnv[r]) env.push_back(e);
    std::vector<char*> envp;
    for (auto& e : env) envp.push_back(e.data());
    envp.push_back(nullptr);
    EXPECT_EQ(posix_spawn(&pids[r], HOCCL_TEST_WORKER, nullptr, nullptr, argv.data(), envp.data()), 0);
  }
  Outcome out;
  out.exitCodes.assign(n, -1);
  int left = n;
  while (left > 0) {
    for (int r = 0; r < n; ++r) {
      if (out.exitCodes[r] != -1 || (r == reapLast && left > 1)) continue;
      int status = 0;
      if (waitpid(pids[r], &status, WNOHANG) == pids[r]) {
        out.exitCodes[r] = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        --left;
      }
    }
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (secs > limitSec) {
      for (int r = 0; r < n; ++r)
        if (out.exitCodes[r] == -1) {
          kill(pids[r], SIGKILL);
          waitpid(pids[r], nullptr, 0);
          out.exitCodes[r] = -9;
        }
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  unlink(idfile.c_str());
  rmdir(dir.c_str());
  return out;
}

void expectAllZero(const Outcome& o) {
  for (size_t r = 0; r < o.exitCodes.size(); ++r) EXPECT_EQ(o.exitCodes[r], 0) << "rank " << r;
}

// By default (HOCCL_CMA=auto) the all-gathers of 65537 elements, up to
// 1 MiB, send their slices by reference and read them with
// process_vm_readv; the reductions copy through shared memory.
TEST(MultiProcess, TwoRanksEveryTypeAndOp) { expectAllZero(launch("full", 2, 300)); }
TEST(MultiProcess, FourRanksEveryTypeAndOp) { expectAllZero(launch("full", 4, 400)); }

// Every call's slices by reference, the reductions' too.
TEST(MultiProcess, CrossMemoryAttachEveryTypeAndOp) {
  expectAllZero(launch("full", 2, 300, {{"HOCCL_CMA=1"}, {"HOCCL_CMA=1"}}));
}

// No call's slices by reference: everything through shared memory.
TEST(MultiProcess, SharedMemoryCopiesOnlyEveryTypeAndOp) {
  expectAllZero(launch("full", 2, 300, {{"HOCCL_CMA=0"}, {"HOCCL_CMA=0"}}));
}

TEST(MultiProcess, MismatchedCountsFailOnBothRanks) {
  Outcome o = launch("mismatch", 2, 60);
  expectAllZero(o);
  EXPECT_LT(o.seconds, 30);
}

TEST(MultiProcess, DeadPeerBecomesRemoteErrorQuickly) {
  Outcome o = launch("die", 3, 60);
  EXPECT_EQ(o.exitCodes[0], 0);
  EXPECT_EQ(o.exitCodes[1], 0);
  EXPECT_EQ(o.exitCodes[2], 42);
  EXPECT_LT(o.seconds, 20);
}

// kill -9 of one rank in the middle of a long all-reduce loop: every
// survivor returns hocclRemoteError naming it (the worker checks the
// message), long before the timeout. results/scripts/soak-kill.sh repeats this.
TEST(MultiProcess, KilledRankMidLoopIsNamedByEverySurvivor) {
  std::vector<std::string> env = {"HOCCL_TEST_SELF_KILL=2:0.5"};
  Outcome o = launch("loop", 4, 60, {env, env, env, env});
  EXPECT_EQ(o.exitCodes[0], 0);
  EXPECT_EQ(o.exitCodes[1], 0);
  EXPECT_EQ(o.exitCodes[2], 128 + SIGKILL);
  EXPECT_EQ(o.exitCodes[3], 0);
  EXPECT_LT(o.seconds, 30);
}

// The same with the killed rank left a zombie (its parent has not reaped
// it): kill(pid, 0) still succeeds on it, so the survivors on its node must
// read its state to see that it is gone. Before they did, they waited for
// the timeout (found with torch.multiprocessing, whose join waits in rank
// order).
TEST(MultiProcess, KilledRankLeftAZombieIsNamedByEverySurvivor) {
  std::vector<std::string> env = {"HOCCL_TEST_SELF_KILL=2:0.5"};
  Outcome o = launch("loop", 4, 60, {env, env, env, env}, 2);
  EXPECT_EQ(o.exitCodes[0], 0);
  EXPECT_EQ(o.exitCodes[1], 0);
  EXPECT_EQ(o.exitCodes[2], 128 + SIGKILL);
  EXPECT_EQ(o.exitCodes[3], 0);
  EXPECT_LT(o.seconds, 30);
}

// A rank that dies between calls is reported by hocclCommGetAsyncError on
// the idle survivors (no call is running to notice it); one that frees its
// communicator and exits is not. Over shared memory (pid liveness) and
// over TCP (a connection closed without its goodbye).
std::vector<std::vector<std::string>> ownNodes(int n) {
  std::vector<std::vector<std::string>> env(n);
  for (int r = 0; r < n; ++r) env[r] = {"HOCCL_HOSTID=mp-node-" + std::to_string(r)};
  return env;
}

TEST(MultiProcess, DeathBetweenCallsIsAnAsyncError) {
  for (bool tcp : {false, true}) {
    SCOPED_TRACE(tcp ? "TCP" : "shared memory");
    Outcome o = launch("idle-die", 3, 60, tcp ? ownNodes(3) : std::vector<std::vector<std::string>>{});
    EXPECT_EQ(o.exitCodes[0], 0);
    EXPECT_EQ(o.exitCodes[1], 0);
    EXPECT_EQ(o.exitCodes[2], 42);
    EXPECT_LT(o.seconds, 30);
  }
}

TEST(MultiProcess, OrderlyExitBetweenCallsIsNoError) {
  for (bool tcp : {false, true}) {
    SCOPED_TRACE(tcp ? "TCP" : "shared memory");
    expectAllZero(launch("idle-leave", 3, 60, tcp ? ownNodes(3) : std::vector<std::vector<std::string>>{}));
  }
}

TEST(MultiProcess, DifferentSettingsAreRefusedAtInit) {
  expectAllZero(launch("config", 2, 60, {{}, {"HOCCL_SLOTS=4"}}));
}

// The flight recorder across processes: every rank writes its own file
// (HOCCL_DEBUG_DUMP with %p), and hoccl-info --why, given them all, names
// the culprit. *files: how many dumps there were; *exitCode: hoccl-info's.
std::string flightWhy(const std::string& scenario, const std::vector<std::string>& env, int* files, int* exitCode) {
  char tmpl[] = "/tmp/hoccl-flight-XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  std::vector<std::string> all = env;
  all.push_back("HOCCL_DEBUG_DUMP=" + dir + "/rank-%p.json");
  expectAllZero(launch(scenario, 4, 120, std::vector<std::vector<std::string>>(4, all)));
  std::string out;
  FILE* p = popen(("ls " + dir + "/*.json | wc -l; " + HOCCL_INFO + " --why " + dir + "/*.json").c_str(), "r");
  char buf[4096];
  size_t n;
  while (p && (n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  const int status = p ? pclose(p) : -1;
  *exitCode = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  *files = atoi(out.c_str());
  out.erase(0, out.find('\n') + 1);
  if (system(("rm -rf " + dir).c_str()) != 0) ADD_FAILURE() << "could not remove " << dir;
  return out;
}

TEST(MultiProcess, FlightRecorderNamesTheRankThatNeverCalled) {
  int files = 0, rc = 0;
  std::string why = flightWhy("flight-hang", {"HOCCL_TIMEOUT=2"}, &files, &rc);
  EXPECT_EQ(files, 4);  // the last rank's by its signal
  EXPECT_EQ(rc, 1) << why;
  EXPECT_NE(why.find(": rank 3 (host "), std::string::npos) << why;
  EXPECT_NE(why.find(") never started call #3 AllReduce(count=1048576, float, sum); ranks 0-2 are in it"),
            std::string::npos)
      << why;
  EXPECT_NE(why.find("waiting to receive from rank 3"), std::string::npos) << why;
  EXPECT_NE(why.find("last call every rank completed: #2 AllReduce(count=1048576, float, sum)"), std::string::npos)
      << why;
  printf("%s", why.c_str());
}

TEST(MultiProcess, FlightRecorderNamesTheRankThatDisagrees) {
  int files = 0, rc = 0;
  std::string why = flightWhy("flight-mismatch", {}, &files, &rc);
  EXPECT_EQ(files, 4);
  EXPECT_EQ(rc, 1) << why;
  EXPECT_NE(why.find(": call #3 disagrees: ranks 0-2 AllReduce(count=1048576, float, sum); rank 3 "
                     "AllReduce(count=2097152, float, sum)"),
            std::string::npos)
      << why;
  EXPECT_NE(why.find("rank 3 (host "), std::string::npos) << why;
  EXPECT_NE(why.find("is the odd one out: it called AllReduce(count=2097152, float, sum) as call #3"),
            std::string::npos)
      << why;
  printf("%s", why.c_str());
}

}  // namespace
