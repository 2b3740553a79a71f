// NVML at run time (nvml.h): NVLink peers and P2P status.
#include "src/topo/nvml.h"

#include <dlfcn.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <set>

namespace hoccl::topo {
namespace {

template <typename Fn>
void sym(void* lib, const char* name, Fn* out) {
  *out = reinterpret_cast<Fn>(dlsym(lib, name));
}

NvmlApi loadNvml() {
  NvmlApi api;
  void* lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char* err = dlerror();
    api.status = std::string("libnvidia-ml.so.1 not found (") + (err ? err : "dlopen failed") + ")";
    return api;
  }
  sym(lib, "nvmlInit_v2", &api.init);
  sym(lib, "nvmlShutdown", &api.shutdown);
  sym(lib, "nvmlDeviceGetHandleByPciBusId_v2", &api.byBusId);
  sym(lib, "nvmlDeviceGetNvLinkState", &api.linkState);
  sym(lib, "nvmlDeviceGetNvLinkRemotePciInfo_v2", &api.remotePci);
  sym(lib, "nvmlDeviceGetP2PStatus", &api.p2pStatus);
  if (!api.usable()) api.status = "libnvidia-ml.so.1 lacks an entry point hoccl uses (an NVML older than 9?)";
  return api;
}

std::atomic<const NvmlApi*> testApi{nullptr};

// NVML's answer for a pair, by name and meaning (nvmlGpuP2PStatus_t).
std::string p2pStatusName(int s) {
  switch (s) {
    case 1: return "NVML_P2P_STATUS_CHIPSET_NOT_SUPPORTED (the chipset does not support P2P between them)";
    case 2: return "NVML_P2P_STATUS_GPU_NOT_SUPPORTED (the GPU does not support P2P)";
    case 3: return "NVML_P2P_STATUS_IOH_TOPOLOGY_NOT_SUPPORTED (no P2P across the PCIe host bridges between them)";
    case 4: return "NVML_P2P_STATUS_DISABLED_BY_REGKEY (P2P is disabled by a driver registry key)";
    case 5: return "NVML_P2P_STATUS_NOT_SUPPORTED";
    default: return "NVML_P2P_STATUS_UNKNOWN (" + std::to_string(s) + ")";
  }
}

// A session of NVML: init on construction, shutdown with it (NVML counts).
struct Session {
  explicit Session(const NvmlApi& a) : api(a), rc(a.usable() ? a.init() : -1) {}
  ~Session() {
    if (ok()) api.shutdown();
  }
  bool ok() const { return rc == kNvmlSuccess; }
  const NvmlApi& api;
  int rc;
};

}  // namespace

const NvmlApi& processNvml() {
  if (const NvmlApi* t = testApi.load(std::memory_order_acquire)) return *t;
  static const NvmlApi api = loadNvml();
  return api;
}

void setNvmlForTesting(const NvmlApi* api) { testApi.store(api, std::memory_order_release); }

std::string canonicalBusId(const char* id) {
  unsigned domain, bus, dev, fn;
  if (sscanf(id, "%x:%x:%x.%x", &domain, &bus, &dev, &fn) != 4) return "";
  char buf[32];
  snprintf(buf, sizeof buf, "%04x:%02x:%02x.%x", domain & 0xffff, bus & 0xff, dev & 0xff, fn & 0xf);
  return buf;
}

int probeNvml(const NvmlApi& nvml, std::vector<GpuInfo>* gpus) {
  Session s(nvml);
  if (!s.ok()) return 0;
  const size_t n = gpus->size();
  std::vector<NvmlDevice> devs(n, nullptr);
  for (size_t i = 0; i < n; ++i)
    if (nvml.byBusId((*gpus)[i].pciBusId.c_str(), &devs[i]) != kNvmlSuccess) devs[i] = nullptr;
  int active = 0;
  std::vector<bool> onSwitch(n, false);
  for (size_t i = 0; i < n; ++i) {
    if (!devs[i]) continue;
    std::set<int> peers;
    for (unsigned link = 0; link < kNvmlMaxLinks; ++link) {
      int state = 0;
      NvmlPciInfo remote;
      std::memset(&remote, 0, sizeof remote);
      if (nvml.linkState(devs[i], link, &state) != kNvmlSuccess || state != 1 ||
          nvml.remotePci(devs[i], link, &remote) != kNvmlSuccess)
        continue;
      ++active;
      remote.busId[sizeof remote.busId - 1] = '\0';
      const std::string peer = canonicalBusId(remote.busId);
      bool gpu = false;
      for (size_t j = 0; j < n; ++j)
        if (j != i && (*gpus)[j].pciBusId == peer) peers.insert(static_cast<int>(j)), gpu = true;
      if (!gpu) onSwitch[i] = true;  // the far end is an NVSwitch
    }
    (*gpus)[i].nvlinkPeers.assign(peers.begin(), peers.end());
  }
  for (size_t i = 0; i < n; ++i) {  // GPUs on NVSwitches all reach each other
    if (!onSwitch[i]) continue;
    std::set<int> peers((*gpus)[i].nvlinkPeers.begin(), (*gpus)[i].nvlinkPeers.end());
    for (size_t j = 0; j < n; ++j)
      if (j != i && onSwitch[j]) peers.insert(static_cast<int>(j));
    (*gpus)[i].nvlinkPeers.assign(peers.begin(), peers.end());
  }
  if (nvml.p2pStatus)
    for (size_t i = 0; i < n; ++i) {
      if (!devs[i]) continue;
      GpuInfo& g = (*gpus)[i];
      g.p2pPeers.clear();
      g.p2pProbed = true;
      for (size_t j = 0; j < n; ++j) {
        int status = -1;
        if (j != i && devs[j] && nvml.p2pStatus(devs[i], devs[j], kNvmlP2pWrite, &status) == kNvmlSuccess &&
            status == kNvmlP2pOk)
          g.p2pPeers.push_back(static_cast<int>(j));
      }
    }
  return active;
}

P2pAnswer p2pWrite(const NvmlApi& nvml, const std::string& fromBus, const std::string& toBus) {
  P2pAnswer a;
  if (!nvml.usable()) {
    a.why = "no NVML: " + (nvml.status.empty() ? std::string("not loaded") : nvml.status);
    return a;
  }
  if (!nvml.p2pStatus) {
    a.why = "this NVML has no nvmlDeviceGetP2PStatus";
    return a;
  }
  Session s(nvml);
  if (!s.ok()) {
    a.why = "nvmlInit_v2 returned " + std::to_string(s.rc);
    return a;
  }
  NvmlDevice from = nullptr, to = nullptr;
  int rc = nvml.byBusId(fromBus.c_str(), &from);
  if (rc == kNvmlSuccess) rc = nvml.byBusId(toBus.c_str(), &to);
  if (rc != kNvmlSuccess) {
    a.why = "NVML does not know GPU " + (from ? toBus : fromBus) + " (error " + std::to_string(rc) + ")";
    return a;
  }
  int status = -1;
  rc = nvml.p2pStatus(from, to, kNvmlP2pWrite, &status);
  if (rc != kNvmlSuccess) {
    a.why = "nvmlDeviceGetP2PStatus returned " + std::to_string(rc);
    return a;
  }
  a.kind = status == kNvmlP2pOk ? P2pAnswer::Yes : P2pAnswer::No;
  if (a.kind == P2pAnswer::No) a.why = "NVML says " + p2pStatusName(status);
  return a;
}

}  // namespace hoccl::topo
