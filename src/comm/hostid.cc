#include <unistd.h>

#include <cstdio>
#include <cstring>

#include "src/base/tls.h"
#include "src/comm/comm.h"

namespace hoccl {

std::string localMachineId() {
  std::string id;
  FILE* f = fopen("/proc/sys/kernel/random/boot_id", "r");
  if (f) {
    char boot[64] = {0};
    if (fgets(boot, sizeof boot, f)) {
      boot[strcspn(boot, "\n")] = '\0';
      id = boot;
    }
    fclose(f);
  }
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
