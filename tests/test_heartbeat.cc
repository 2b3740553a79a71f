// Heartbeats between ranks in processes that stand for different hosts
// (HOCCL_HOSTID), over loopback, with HOCCL_TIMEOUT=300: a rank frozen by
// SIGSTOP is named by every other rank within HOCCL_HEARTBEAT_TIMEOUT + 1 s,
// during a call and between calls (hocclCommGetAsyncError); a rank that is
// alive but late to a call for longer than that is not. The same on the
// emulated cluster, with a cut link too: tests/cluster/heartbeat.sh.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace {

constexpr double kHeartbeatSec = 1.5;

double epochSec() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

bool has(const std::string& s, const std::string& what) { return s.find(what) != std::string::npos; }

// hoccl_test_worker ranks, one process and one "host" each, stderr to a file.
class Ranks {
 public:
  // `defaultHeartbeat`: HOCCL_HEARTBEAT_TIMEOUT unset, whatever this
  // process has, so that the ranks run with the library's default.
  Ranks(const std::string& scenario, int n, const std::vector<std::string>& env, bool defaultHeartbeat = false)
      : n_(n) {
    char tmpl[] = "/tmp/hoccl-hb-XXXXXX";
    dir_ = mkdtemp(tmpl);
    for (int r = 0; r < n; ++r) {
      std::vector<std::string> args = {HOCCL_TEST_WORKER, scenario, std::to_string(r), std::to_string(n), dir_ + "/id"};
      // Ours first, the caller's `env` over them, then the rest of the
      // environment (getenv takes the first of a name).
      std::vector<std::string> envs = env;
      envs.push_back("HOCCL_HOSTID=hb-node" + std::to_string(r));
      envs.push_back("HOCCL_TIMEOUT=300");
      if (!defaultHeartbeat) envs.push_back("HOCCL_HEARTBEAT_TIMEOUT=" + std::to_string(kHeartbeatSec));
      for (char** e = environ; *e; ++e)
        if (!defaultHeartbeat || strncmp(*e, "HOCCL_HEARTBEAT_TIMEOUT=", 24) != 0) envs.emplace_back(*e);
      std::vector<char*> argv, envp;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      for (auto& e : envs) envp.push_back(e.data());
      envp.push_back(nullptr);
      posix_spawn_file_actions_t fa;
      posix_spawn_file_actions_init(&fa);
      posix_spawn_file_actions_addopen(&fa, 2, errFile(r).c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      pid_t pid = -1;
      EXPECT_EQ(posix_spawn(&pid, HOCCL_TEST_WORKER, &fa, nullptr, argv.data(), envp.data()), 0);
      posix_spawn_file_actions_destroy(&fa);
      pids_.push_back(pid);
    }
    codes_.assign(n, -1);
  }
  ~Ranks() {
    for (int r = 0; r < n_; ++r)
      if (codes_[r] == -1 && pids_[r] > 0) {
        kill(pids_[r], SIGKILL);
        waitpid(pids_[r], nullptr, 0);
      }
    for (int r = 0; r < n_; ++r) unlink(errFile(r).c_str());
    unlink((dir_ + "/id").c_str());
    rmdir(dir_.c_str());
  }
  std::string errFile(int r) const { return dir_ + "/rank" + std::to_string(r) + ".err"; }
  std::string err(int r) const {
    std::ifstream in(errFile(r));
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }
  pid_t pid(int r) const { return pids_[r]; }
  // Waits until every rank printed `line` (up to limitSec).
  bool allSaid(const std::string& line, double limitSec) {
    for (double end = epochSec() + limitSec; epochSec() < end;) {
      int said = 0;
      for (int r = 0; r < n_; ++r) said += has(err(r), line) ? 1 : 0;
      if (said == n_) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return false;
  }
  // Waits for rank r to exit (up to limitSec; then kills it: -9).
  int wait(int r, double limitSec) {
    for (double end = epochSec() + limitSec; codes_[r] == -1;) {
      int status = 0;
      if (waitpid(pids_[r], &status, WNOHANG) == pids_[r]) {
        codes_[r] = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        break;
      }
      if (epochSec() > end) {
        kill(pids_[r], SIGKILL);
        waitpid(pids_[r], nullptr, 0);
        codes_[r] = -9;
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return codes_[r];
  }
  // Rank r's "DETECTED <epoch> <code> <message>": seconds after `since`,
  // code, message; false if it has none.
  bool detected(int r, double since, double* secs, int* code, std::string* msg) const {
    std::istringstream in(err(r));
    for (std::string line; std::getline(in, line);) {
      if (line.rfind("DETECTED ", 0) != 0) continue;
      std::istringstream fields(line.substr(9));
      double at = 0;
      fields >> at >> *code;
      std::getline(fields, *msg);
      *secs = at - since;
      return true;
    }
    return false;
  }

 private:
  int n_;
  std::string dir_;
  std::vector<pid_t> pids_;
  std::vector<int> codes_;
};

// Every rank but `frozen` reports hocclRemoteError naming it, its host and
// its silence, within the heartbeat timeout (`timeoutSec`; 0: the library's
// default, 5 s) + 1 s of the SIGSTOP; then the frozen rank is let go and
// ends too.
void expectFrozenRankNamed(const std::string& scenario, int n, int frozen, double timeoutSec = kHeartbeatSec) {
  const bool byDefault = timeoutSec == 0;
  const double hb = byDefault ? 5.0 : timeoutSec;
  Ranks ranks(scenario, n, {}, byDefault);
  ASSERT_TRUE(ranks.allSaid("LOOPING", 60)) << ranks.err(0);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  const double stopped = epochSec();
  ASSERT_EQ(kill(ranks.pid(frozen), SIGSTOP), 0);
  for (int r = 0; r < n; ++r) {
    if (r == frozen) continue;
    EXPECT_EQ(ranks.wait(r, hb + 20), 0) << "rank " << r << ": " << ranks.err(r);
    double secs = 0;
    int code = 0;
    std::string msg;
    ASSERT_TRUE(ranks.detected(r, stopped, &secs, &code, &msg)) << "rank " << r << ": " << ranks.err(r);
    printf("rank %d: code %d after %.2f s: %s\n", r, code, secs, msg.c_str());
    EXPECT_EQ(code, 6) << msg;  // hocclRemoteError
    const std::string culprit = "peer rank " + std::to_string(frozen) + " (pid " +
                                std::to_string(ranks.pid(frozen)) + " on hb-node" + std::to_string(frozen) + ")";
    EXPECT_TRUE(has(msg, culprit)) << msg;
    EXPECT_TRUE(has(msg, "is silent: no heartbeat for ")) << msg;
    EXPECT_LT(secs, hb + 1) << msg;
    EXPECT_GE(secs, hb - 0.6) << "found before the heartbeat timeout could pass: " << msg;
  }
  kill(ranks.pid(frozen), SIGCONT);
  const int code = ranks.wait(frozen, 30);
  EXPECT_NE(code, -9) << "the frozen rank did not end once let go: " << ranks.err(frozen);
}

TEST(Heartbeat, AFrozenRankIsNamedByEveryRankInACall) { expectFrozenRankNamed("loop", 4, 2); }

TEST(Heartbeat, AFrozenRankIsAnAsyncErrorBetweenCalls) { expectFrozenRankNamed("idle-watch", 3, 0); }

// Nothing set: heartbeats are on, and a frozen rank is named within the
// default 5 s + 1 s.
TEST(Heartbeat, ByDefaultAFrozenRankIsNamedWithinFiveSeconds) { expectFrozenRankNamed("loop", 3, 1, 0); }

// A rank that is alive but reaches its call three heartbeat timeouts late:
// its heartbeat thread answers meanwhile, so nobody fails.
TEST(Heartbeat, ALateRankIsNotSilent) {
  Ranks ranks("late", 3, {"HOCCL_TEST_LATE_SEC=" + std::to_string(3 * kHeartbeatSec)});
  for (int r = 0; r < 3; ++r) EXPECT_EQ(ranks.wait(r, 60), 0) << "rank " << r << ": " << ranks.err(r);
}

// HOCCL_HEARTBEAT_TIMEOUT=0: no heartbeats, and a frozen rank is found only
// by HOCCL_TIMEOUT (here 4 s).
TEST(Heartbeat, ZeroTurnsThemOff) {
  Ranks ranks("loop", 2, {"HOCCL_HEARTBEAT_TIMEOUT=0", "HOCCL_TIMEOUT=4"});
  ASSERT_TRUE(ranks.allSaid("LOOPING", 60)) << ranks.err(0);
  const double stopped = epochSec();
  ASSERT_EQ(kill(ranks.pid(1), SIGSTOP), 0);
  EXPECT_EQ(ranks.wait(0, 30), 0) << ranks.err(0);
  double secs = 0;
  int code = 0;
  std::string msg;
  ASSERT_TRUE(ranks.detected(0, stopped, &secs, &code, &msg)) << ranks.err(0);
  EXPECT_EQ(code, 8) << msg;  // hocclTimeout
  EXPECT_FALSE(has(msg, "heartbeat")) << msg;
  EXPECT_GE(secs, 3.5) << msg;
  kill(ranks.pid(1), SIGCONT);
  ranks.wait(1, 30);
}

}  // namespace
