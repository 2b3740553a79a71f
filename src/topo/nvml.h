// NVML, opened at run time (dlopen("libnvidia-ml.so.1")) so that the
// library never links it: what the topology asks of it, NVLink peers and
// the P2P status of each pair of GPUs. No NVML header is installed where
// hoccl builds, so the entry points and values used are declared here
// (nvml.h's names in the comments). Tests inject a table of their own.
#pragma once

#include <string>
#include <vector>

#include "src/topo/topology.h"

namespace hoccl::topo {

struct NvmlPciInfo {  // nvmlPciInfo_t (NVML >= 9)
  char busIdLegacy[16];
  unsigned domain, bus, device, pciDeviceId, pciSubSystemId;
  char busId[32];
};
using NvmlDevice = void*;  // nvmlDevice_t

inline constexpr int kNvmlSuccess = 0;         // NVML_SUCCESS
inline constexpr unsigned kNvmlMaxLinks = 18;  // NVML_NVLINK_MAX_LINKS
inline constexpr int kNvmlP2pWrite = 1;        // NVML_P2P_CAPS_INDEX_WRITE
inline constexpr int kNvmlP2pOk = 0;           // NVML_P2P_STATUS_OK

struct NvmlApi {
  int (*init)() = nullptr;                                           // nvmlInit_v2
  int (*shutdown)() = nullptr;                                       // nvmlShutdown
  int (*byBusId)(const char* busId, NvmlDevice* dev) = nullptr;      // nvmlDeviceGetHandleByPciBusId_v2
  int (*linkState)(NvmlDevice dev, unsigned link, int* active) = nullptr;  // nvmlDeviceGetNvLinkState
  int (*remotePci)(NvmlDevice dev, unsigned link, NvmlPciInfo* pci) = nullptr;  // ..GetNvLinkRemotePciInfo_v2
  // nvmlDeviceGetP2PStatus(from, to, caps index, status); optional.
  int (*p2pStatus)(NvmlDevice from, NvmlDevice to, int index, int* status) = nullptr;
  std::string status;  // why there is none: "libnvidia-ml.so.1 not found (...)"; "" when usable
  bool usable() const { return init && shutdown && byBusId && linkState && remotePci; }
};

// This process's NVML, opened once (never closed).
const NvmlApi& processNvml();
// Tests: makes processNvml() return `api` (null: the real one again).
void setNvmlForTesting(const NvmlApi* api);

// "0000:3B:00.0" or "00000000:3b:00.0" -> "0000:3b:00.0"; "" if malformed.
std::string canonicalBusId(const char* id);

// Fills each GPU's nvlinkPeers (GPUs at the far end of an active link, and
// all GPUs on NVSwitches reach each other) and, where NVML answers,
// p2pPeers; returns the number of active links seen (0 without NVML).
int probeNvml(const NvmlApi& nvml, std::vector<GpuInfo>* gpus);

// Whether GPU `from` can write into GPU `to` by P2P, as NVML sees it (by
// PCI bus id; NVML sees GPUs that CUDA_VISIBLE_DEVICES hides).
struct P2pAnswer {
  enum Kind { Yes, No, Unknown } kind = Unknown;
  std::string why;  // No: NVML's status by name and meaning; Unknown: why NVML could not say
};
P2pAnswer p2pWrite(const NvmlApi& nvml, const std::string& fromBus, const std::string& toBus);

}  // namespace hoccl::topo
