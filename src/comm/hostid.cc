#include <unistd.h>

#include <cstdio>
#include <cstring>

#include "base/tls.h"
#include "src/comm/comm.h"

namespace hoccl {

// Read once: it cannot change while the process runs, and a later read
// can fail (out of descriptors) and make this process's ranks disagree on
// which machine they are on.
std::string localMachineId() {
  static const std::string id = [] {
    std::string boot;
    FILE* f = fopen("/proc/sys/kernel/random/boot_id", "r");
    if (f) {
      char line[64] = {0};
      if (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = '\0';
        boot = line;
      }
      fclose(f);
    }
    return boot;
  }();
  return id;
}

namespace {
HOCCL_THREAD_LOCAL std::string threadHostId;
}

void setThreadHostIdOverride(const std::string& id) { threadHostId = id; }

std::string localHostId(const Settings& s) {
  if (!threadHostId.empty()) return threadHostId;
  if (!s.hostId.empty()) return s.hostId;
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  std::string id = host;
  // The boot id tells apart two containers or VMs that share a host name.
  std::string boot = localMachineId();
  if (!boot.empty()) id += ":" + boot;
  return id.substr(0, 127);
}

}  // namespace hoccl
