// What a real NCCL (libnccl.so, e.g. 2.28.9) allows us to check on a machine
// without a GPU:
//   1. which plugin symbols that NCCL looks up (the ncclNetPlugin_vN and
//      ncclTunerPlugin_vN names its binary holds) and that our libraries
//      export the newest of each, so that NCCL would take those;
//   2. that both plugins dlopen with RTLD_NOW | RTLD_LOCAL into a process
//      that has that libnccl loaded (no unresolved symbol);
//   3. NCCL itself, with NCCL_DEBUG=INFO, NCCL_NET_PLUGIN=<our net library>
//      and NCCL_TUNER_PLUGIN=<our tuner>: ncclGetUniqueId and a one-rank
//      ncclCommInitRank in a child process. Its log must show no
//      unresolved symbol; where NCCL gets past CUDA (a GPU machine) it must
//      also show our plugins loaded. Without a GPU NCCL stops at CUDA before
//      loading net and tuner plugins, and this says so.
// Exit 77 (skipped) when no libnccl is given or it does not load, except in
// CI (CI set and not 0/false/no/off, the rule of tests/ci-rule.sh), where
// that is a failure: CI machines have NCCL in CUDA's prefix.
//
//   hoccl-real-nccl-check LIBNCCL NET_PLUGIN_PATH TUNER_PLUGIN_PATH
#include <dlfcn.h>
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace {

int failures = 0;

// tests/ci-rule.sh's rule, in C++.
bool inCi() {
  const char* v = getenv("CI");
  if (!v || !*v) return false;
  std::string s(v);
  for (char& c : s) c = static_cast<char>(tolower(static_cast<unsigned char>(c)));
  return s != "0" && s != "false" && s != "no" && s != "off";
}

// A skip, or a failure in CI.
int cannotRun(const std::string& why) {
  if (inCi()) {
    printf("[real nccl] FAILED: %s; CI=%s requires this check (tests/ci-rule.sh)\n", why.c_str(), getenv("CI"));
    return 1;
  }
  printf("[real nccl] SKIPPED: %s\n", why.c_str());
  return 77;
}

void fail(const std::string& what) {
  fprintf(stderr, "[real nccl] FAIL %s\n", what.c_str());
  ++failures;
}

// The versions N for which `prefix`N appears as a string in the file.
std::set<int> versionsNamedIn(const std::string& path, const std::string& prefix) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  const std::string bytes = ss.str();
  std::set<int> out;
  for (size_t pos = bytes.find(prefix); pos != std::string::npos; pos = bytes.find(prefix, pos + 1)) {
    size_t i = pos + prefix.size();
    int v = 0, digits = 0;
    while (i < bytes.size() && bytes[i] >= '0' && bytes[i] <= '9' && digits < 3) v = v * 10 + (bytes[i++] - '0'), ++digits;
    if (digits > 0 && i < bytes.size() && bytes[i] == '\0') out.insert(v);
  }
  return out;
}

std::string join(const std::set<int>& s) {
  std::string out;
  for (int v : s) out += (out.empty() ? "v" : ", v") + std::to_string(v);
  return out.empty() ? "none" : out;
}

// What NCCL would resolve in `lib`: the newest of `known` that dlsym finds.
int newestResolved(void* lib, const std::string& prefix, const std::set<int>& known) {
  for (auto it = known.rbegin(); it != known.rend(); ++it)
    if (dlsym(lib, (prefix + std::to_string(*it)).c_str())) return *it;
  return 0;
}

// Runs NCCL in a child with the plugin variables set; returns its log.
std::string runNcclChild(const char* self, const std::string& libnccl, const std::string& net,
                         const std::string& tuner, int* status) {
  char logPath[] = "/tmp/hoccl-real-nccl-XXXXXX";
  int fd = mkstemp(logPath);
  close(fd);
  pid_t pid = fork();
  if (pid == 0) {
    setenv("NCCL_DEBUG", "INFO", 1);
    setenv("NCCL_DEBUG_SUBSYS", "INIT,NET,TUNING,ENV", 1);
    setenv("NCCL_DEBUG_FILE", logPath, 1);
    setenv("NCCL_NET_PLUGIN", net.c_str(), 1);
    setenv("NCCL_TUNER_PLUGIN", tuner.c_str(), 1);
    int devnull = open("/dev/null", O_WRONLY);
    dup2(devnull, 1);
    execl(self, self, "--child", libnccl.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  waitpid(pid, status, 0);
  std::ifstream f(logPath);
  std::stringstream ss;
  ss << f.rdbuf();
  unlink(logPath);
  return ss.str();
}

// The child: what an NCCL program does first.
int child(const char* libnccl) {
  void* lib = dlopen(libnccl, RTLD_NOW | RTLD_GLOBAL);
  if (!lib) return 3;
  struct UniqueId {  // ncclUniqueId: 128 bytes, passed by value
    char internal[128];
  };
  using GetId = int (*)(UniqueId*);
  using InitRank = int (*)(void**, int, UniqueId, int);
  using LastError = const char* (*)(void*);
  auto getId = reinterpret_cast<GetId>(dlsym(lib, "ncclGetUniqueId"));
  auto initRank = reinterpret_cast<InitRank>(dlsym(lib, "ncclCommInitRank"));
  auto lastError = reinterpret_cast<LastError>(dlsym(lib, "ncclGetLastError"));
  if (!getId || !initRank) return 4;
  UniqueId id;
  if (getId(&id) != 0) return 5;
  void* comm = nullptr;
  int r = initRank(&comm, 1, id, 0);
  if (r != 0) {
    fprintf(stderr, "ncclCommInitRank: %d %s\n", r, lastError ? lastError(nullptr) : "");
    return 10;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 3 && strcmp(argv[1], "--child") == 0) return child(argv[2]);
  if (argc != 4) {
    fprintf(stderr, "usage: %s LIBNCCL NET_PLUGIN_PATH TUNER_PLUGIN_PATH\n", argv[0]);
    return 2;
  }
  const std::string libnccl = argv[1], net = argv[2], tuner = argv[3];
  if (libnccl.empty() || libnccl.find("NOTFOUND") != std::string::npos || access(libnccl.c_str(), R_OK) != 0) {
    return cannotRun("no libnccl.so found at configure time (set NCCL_HOME or CUDA_HOME and re-run cmake); "
                     "nothing to check against");
  }
  void* nccl = dlopen(libnccl.c_str(), RTLD_NOW | RTLD_GLOBAL);
  if (!nccl) return cannotRun(libnccl + " does not load here: " + dlerror());
  int version = 0;
  if (auto getVersion = reinterpret_cast<int (*)(int*)>(dlsym(nccl, "ncclGetVersion"))) getVersion(&version);
  printf("[real nccl] %s: NCCL %d.%d.%d\n", libnccl.c_str(), version / 10000, version / 100 % 100, version % 100);

  // 1. The symbols this NCCL looks up, and what it would take from us.
  std::set<int> netKnown = versionsNamedIn(libnccl, "ncclNetPlugin_v");
  std::set<int> tunerKnown = versionsNamedIn(libnccl, "ncclTunerPlugin_v");
  printf("[real nccl] it looks up ncclNetPlugin_%s and ncclTunerPlugin_%s\n", join(netKnown).c_str(),
         join(tunerKnown).c_str());
  if (netKnown.empty() || tunerKnown.empty()) fail("no plugin symbol names found in " + libnccl);

  // 2. Our libraries load next to it, every symbol resolved now.
  void* netLib = dlopen(net.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!netLib) fail(std::string("net plugin does not load next to NCCL: ") + dlerror());
  void* tunerLib = dlopen(tuner.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!tunerLib) fail(std::string("tuner plugin does not load next to NCCL: ") + dlerror());
  if (netLib && tunerLib && !netKnown.empty() && !tunerKnown.empty()) {
    int n = newestResolved(netLib, "ncclNetPlugin_v", netKnown);
    int t = newestResolved(tunerLib, "ncclTunerPlugin_v", tunerKnown);
    int tn = newestResolved(netLib, "ncclTunerPlugin_v", tunerKnown);
    printf("[real nccl] NCCL would take ncclNetPlugin_v%d and ncclTunerPlugin_v%d (v%d through the net library)\n", n,
           t, tn);
    if (n != *netKnown.rbegin()) fail("net: NCCL's newest v" + std::to_string(*netKnown.rbegin()) + " not exported");
    if (t != *tunerKnown.rbegin() || tn != t)
      fail("tuner: NCCL's newest v" + std::to_string(*tunerKnown.rbegin()) + " not exported by both libraries");
  }

  // 3. NCCL itself, as far as it goes here.
  int status = 0;
  std::string log = runNcclChild(argv[0], libnccl, net, tuner, &status);
  int rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  for (const char* bad : {"undefined symbol", "unresolved", "cannot open shared object"})
    if (log.find(bad) != std::string::npos) fail(std::string("NCCL's log mentions '") + bad + "':\n" + log);
  bool loadedNet = log.find("Loaded net plugin hoccl") != std::string::npos;
  bool loadedTuner = log.find("TUNER/Plugin: Using hoccl") != std::string::npos;
  if (rc == 0) {
    if (!loadedNet) fail("NCCL created a communicator but did not log 'Loaded net plugin hoccl':\n" + log);
    if (!loadedTuner) fail("NCCL created a communicator but did not log 'TUNER/Plugin: Using hoccl':\n" + log);
    printf("[real nccl] NCCL created a communicator with both plugins loaded\n");
  } else if (log.find("Cuda failure") != std::string::npos || log.find("CUDA") != std::string::npos) {
    printf("[real nccl] NCCL's log (NCCL_DEBUG=INFO) shows no unresolved symbol; NCCL stopped at CUDA (no GPU "
           "here) before loading net and tuner plugins, so loading by NCCL itself is NOT verified here:\n");
    std::istringstream lines(log);
    std::string line;
    while (std::getline(lines, line))
      if (line.find("WARN") != std::string::npos || line.find("Plugin") != std::string::npos)
        printf("[real nccl]   %s\n", line.c_str());
  } else {
    fail("NCCL's child exited with " + std::to_string(rc) + " for another reason than CUDA:\n" + log);
  }
  return failures == 0 ? 0 : 1;
}
