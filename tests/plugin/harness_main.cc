// hoccl-nccl-plugin-harness: loads NCCL plugins as NCCL does and drives them.
//
//   resolve --plugin-dir DIR                 name resolution and symbol lookup
//   net     --version N [--plugin NAME] [--max-bytes B] [--skip-if-unavailable]
//           two processes (this one and a child) unless RANK is set, as on
//           the emulated cluster: then this is rank RANK of 2 and rank 0
//           listens on MASTER_ADDR:MASTER_PORT for the handle exchange
//   tuner   --version N [--plugin NAME]      cost tables as NCCL fills them
//   table   [--plugin NAME] [--nodes N] [--ranks R] [--topo FILE]
//           the tuner's decisions next to NCCL's default ones
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "tests/plugin/check.h"
#include "tests/plugin/net_check.h"
#include "tests/plugin/oob.h"
#include "tests/plugin/resolve_check.h"
#include "tests/plugin/tuner_check.h"

using namespace pluginharness;

namespace {

int usage() {
  fprintf(stderr,
          "usage: hoccl-nccl-plugin-harness resolve --plugin-dir DIR\n"
          "       hoccl-nccl-plugin-harness net --version 8..12 [--plugin NAME] [--max-bytes B] [--skip-if-unavailable]\n"
          "       hoccl-nccl-plugin-harness tuner --version 3..6 [--plugin NAME]\n"
          "       hoccl-nccl-plugin-harness table [--plugin NAME] [--version N] [--nodes N] [--ranks R] [--topo FILE]\n");
  return 2;
}

// Runs rank 1 as a child process (this program, same arguments) and rank 0
// here; both must pass.
int runTwoProcesses(char** argv, NetCheckOptions o) {
  o.addr = "127.0.0.1";
  o.listenFd = listenLocal(&o.port);
  if (o.listenFd < 0) {
    perror("listen on 127.0.0.1");
    return 1;
  }
  pid_t child = fork();
  if (child < 0) {
    perror("fork");
    return 1;
  }
  if (child == 0) {
    setenv("RANK", "1", 1);
    setenv("MASTER_ADDR", o.addr.c_str(), 1);
    setenv("MASTER_PORT", std::to_string(o.port).c_str(), 1);
    execv("/proc/self/exe", argv);
    perror("execv");
    _exit(127);
  }
  o.rank = 0;
  int rc = runNetCheck(o);
  int status = 0;
  waitpid(child, &status, 0);
  int childRc = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  if (childRc != 0 && childRc != kSkipped) fprintf(stderr, "[net v%d] rank 1 failed (status %d)\n", o.version, childRc);
  return rc != 0 ? rc : childRc;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return usage();
  std::string mode = argv[1];
  std::string plugin = "hoccl", pluginDir, topo;
  int version = 0, nodes = 16, ranks = 16;
  size_t maxBytes = 64u << 20;
  bool skipIfUnavailable = false;
  for (int i = 2; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--skip-if-unavailable") {
      skipIfUnavailable = true;
      continue;
    }
    auto next = [&]() -> const char* { return i + 1 < argc ? argv[++i] : nullptr; };
    const char* v = next();
    if (!v) return usage();
    if (a == "--plugin") plugin = v;
    else if (a == "--plugin-dir") pluginDir = v;
    else if (a == "--version") version = atoi(v);
    else if (a == "--max-bytes") maxBytes = strtoull(v, nullptr, 0);
    else if (a == "--nodes") nodes = atoi(v);
    else if (a == "--ranks") ranks = atoi(v);
    else if (a == "--topo") topo = v;
    else return usage();
  }
  if (mode == "resolve") return pluginDir.empty() ? usage() : runResolveCheck(pluginDir);
  if (mode == "tuner") return version ? runTunerCheck(plugin, version) : usage();
  if (mode == "table") return printDecisionTable(plugin, version ? version : 6, nodes, ranks, topo);
  if (mode != "net" || version < 8 || version > 12) return usage();
  NetCheckOptions o;
  o.plugin = plugin;
  o.version = version;
  o.maxBytes = maxBytes;
  o.skipIfUnavailable = skipIfUnavailable;
  const char* rank = getenv("RANK");
  if (!rank) return runTwoProcesses(argv, o);
  o.rank = atoi(rank);
  const char* addr = getenv("MASTER_ADDR");
  const char* port = getenv("MASTER_PORT");
  if (!addr || !port || (o.rank != 0 && o.rank != 1)) {
    fprintf(stderr, "net: RANK (0 or 1), MASTER_ADDR and MASTER_PORT must be set together\n");
    return 2;
  }
  o.addr = addr;
  o.port = atoi(port);
  return runNetCheck(o);
}
