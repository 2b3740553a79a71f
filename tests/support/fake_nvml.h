// A fake NVML (src/topo/nvml.h) for tests: GPUs by PCI bus id, each with
// its active NVLinks (the far end's bus id: another GPU's, or an NVSwitch
// that is no GPU) and the P2P write status of each pair. The table is
// process-wide; install() makes it processNvml() until uninstall().
#pragma once

#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "src/topo/nvml.h"

namespace hoccl::fakenvml {

struct State {
  std::vector<std::string> buses;               // GPU i's bus id, as byBusId matches it
  std::vector<std::vector<std::string>> links;  // per GPU: the far end of each active link
  std::map<std::pair<int, int>, int> p2p;       // (from, to) -> nvmlGpuP2PStatus_t; absent: OK
  int initRc = 0;
  int sessions = 0;  // nvmlInit_v2 calls not yet shut down
};

inline State& state() {
  static State s;
  return s;
}

inline int index(const std::string& bus) {
  const std::string want = topo::canonicalBusId(bus.c_str());
  for (size_t i = 0; i < state().buses.size(); ++i) {
    const std::string& b = state().buses[i];
    if (b == bus || (!want.empty() && topo::canonicalBusId(b.c_str()) == want)) return int(i);
  }
  return -1;
}
inline int gpuOf(topo::NvmlDevice d) { return int(reinterpret_cast<intptr_t>(d)) - 1; }

inline int init() {
  if (state().initRc == 0) ++state().sessions;
  return state().initRc;
}
inline int shutdown() {
  --state().sessions;
  return 0;
}
inline int byBusId(const char* bus, topo::NvmlDevice* d) {
  const int i = index(bus);
  if (i < 0) return 6;  // NVML_ERROR_NOT_FOUND
  *d = reinterpret_cast<topo::NvmlDevice>(intptr_t(i + 1));
  return 0;
}
inline int linkState(topo::NvmlDevice d, unsigned link, int* active) {
  const int g = gpuOf(d);
  if (g < 0 || link >= topo::kNvmlMaxLinks) return 2;  // NVML_ERROR_INVALID_ARGUMENT
  *active = link < state().links[size_t(g)].size() ? 1 : 0;
  return 0;
}
inline int remotePci(topo::NvmlDevice d, unsigned link, topo::NvmlPciInfo* pci) {
  const int g = gpuOf(d);
  if (g < 0 || link >= state().links[size_t(g)].size()) return 2;
  std::memset(pci, 0, sizeof *pci);
  snprintf(pci->busId, sizeof pci->busId, "%s", state().links[size_t(g)][link].c_str());
  return 0;
}
inline int p2pStatus(topo::NvmlDevice from, topo::NvmlDevice to, int caps, int* status) {
  if (caps != topo::kNvmlP2pWrite || gpuOf(from) < 0 || gpuOf(to) < 0) return 2;
  auto it = state().p2p.find({gpuOf(from), gpuOf(to)});
  *status = it == state().p2p.end() ? topo::kNvmlP2pOk : it->second;
  return 0;
}

// The fake's entry points; withP2p false leaves nvmlDeviceGetP2PStatus out.
inline topo::NvmlApi api(bool withP2p = true) {
  topo::NvmlApi a;
  a.init = &init;
  a.shutdown = &shutdown;
  a.byBusId = &byBusId;
  a.linkState = &linkState;
  a.remotePci = &remotePci;
  if (withP2p) a.p2pStatus = &p2pStatus;
  return a;
}

// Makes a fresh table of `buses` (no links, every pair OK) processNvml().
inline void install(std::vector<std::string> buses) {
  static topo::NvmlApi table;
  state() = State();
  state().links.resize(buses.size());
  state().buses = std::move(buses);
  table = api();
  topo::setNvmlForTesting(&table);
}
inline void uninstall() { topo::setNvmlForTesting(nullptr); }

}  // namespace hoccl::fakenvml
