// GPUs (CUDA driver, NVML for NVLink) and verbs devices, probed at run time
// through dlopen so that the library never links CUDA or libibverbs. Each
// probe says in one line what it found or why it found nothing.

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "build_info.h"
#include "base/cuda_driver.h"
#include "base/verbs.h"  // the verbs loader the IB transport uses too
#include "src/topo/nvml.h"
#include "src/topo/topology.h"

namespace hoccl {
namespace topo {
namespace detail {

void probeGpus(NodeInfo* n);
void probeVerbs(NodeInfo* n);
// From discover.cc.
bool readSmallFile(const std::string& path, std::string* out);
std::string pciDeviceDir(const std::string& deviceLink);
int pciNumaNode(const std::string& pciDir);

namespace {

std::string format(const char* fmt, int a) {
  char buf[160];
  snprintf(buf, sizeof buf, fmt, a);
  return buf;
}

}  // namespace

void probeGpus(NodeInfo* n) {
  n->gpus.clear();
  // The process's driver, loaded and initialised once (base/cuda_driver.h);
  // its status says why there is no GPU ("no driver: ...", "stub library (no
  // GPU): ...", "no device: ...").
  const cuda::Driver& driver = cuda::processDriver();
  if (!driver.usable()) {
    n->gpuStatus = driver.status;
    return;
  }
  const int devices = driver.devices;
  for (int i = 0; i < devices; ++i) {
    GpuInfo g;
    g.index = i;
    int dev = 0;
    char buf[256] = {0};
    if (driver.api.deviceGet(&dev, i) == 0) {
      if (driver.api.deviceGetName(buf, sizeof buf - 1, dev) == 0) g.name = buf;
      memset(buf, 0, sizeof buf);
      if (driver.api.deviceGetPciBusId(buf, sizeof buf - 1, dev) == 0) g.pciBusId = canonicalBusId(buf);
    }
    if (!g.pciBusId.empty()) g.numaNode = pciNumaNode("/sys/bus/pci/devices/" + g.pciBusId);
    n->gpus.push_back(g);
  }
  int links = probeNvml(processNvml(), &n->gpus);
  n->gpuStatus = format(devices == 1 ? "%d GPU" : "%d GPUs", devices);
  if (links > 0) n->gpuStatus += format(", %d active NVLinks", links);
}

#ifdef HOCCL_HAVE_IBVERBS

namespace {

// Gbit/s per lane (nominal data rate) times the number of lanes.
double portGbps(uint8_t speed, uint8_t width) {
  double lane = 0;
  switch (speed) {
    case 1: lane = 2.5; break;    // SDR
    case 2: lane = 5; break;      // DDR
    case 4: lane = 10; break;     // QDR
    case 8: lane = 10; break;     // FDR10
    case 16: lane = 14; break;    // FDR
    case 32: lane = 25; break;    // EDR
    case 64: lane = 50; break;    // HDR
    case 128: lane = 100; break;  // NDR
  }
  int lanes = 0;
  switch (width) {
    case 1: lanes = 1; break;
    case 2: lanes = 4; break;
    case 4: lanes = 8; break;
    case 8: lanes = 12; break;
    case 16: lanes = 2; break;
  }
  return lane * lanes;
}

std::string gidString(const ibv_gid& gid) {
  char buf[48];
  const uint8_t* r = gid.raw;
  snprintf(buf, sizeof buf, "%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x", r[0], r[1],
           r[2], r[3], r[4], r[5], r[6], r[7], r[8], r[9], r[10], r[11], r[12], r[13], r[14], r[15]);
  return buf;
}

}  // namespace

void probeVerbs(NodeInfo* n) {
  std::string why;
  const Verbs* loaded = loadVerbs(&why);  // kept loaded: providers do not expect unloading
  if (!loaded) {
    n->verbsStatus = "no verbs: " + why;
    return;
  }
  const Verbs& v = *loaded;
  int count = 0;
  ibv_device** list = v.getDeviceList(&count);
  if (!list) {
    // ENOSYS: the kernel has no uverbs (no /sys/class/infiniband_verbs).
    int err = errno;
    n->verbsStatus = err == ENOSYS ? "no verbs devices (libibverbs found, no RDMA support in the kernel)"
                                   : "no verbs: ibv_get_device_list failed: " + std::string(strerror(err));
    return;
  }
  int hcas = 0, ports = 0, failed = 0;
  for (int d = 0; d < count; ++d) {
    const char* devName = v.getDeviceName(list[d]);
    std::string name = devName ? devName : "?";
    ibv_context* ctx = v.openDevice(list[d]);
    if (!ctx) {
      ++failed;
      continue;
    }
    ++hcas;
    ibv_device_attr dattr;
    memset(&dattr, 0, sizeof dattr);
    int nports = v.queryDevice(ctx, &dattr) == 0 && dattr.phys_port_cnt > 0 ? dattr.phys_port_cnt : 1;
    std::string pci = pciDeviceDir("/sys/class/infiniband/" + name + "/device");
    for (int p = 1; p <= nports; ++p) {
      ibv_port_attr pattr;
      if (v.queryPort(ctx, static_cast<uint8_t>(p), &pattr) != 0) continue;
      ++ports;
      NicInfo nic;
      nic.name = name;
      nic.port = p;
      nic.kind = pattr.link_layer == IBV_LINK_LAYER_ETHERNET ? "roce" : "infiniband";
      nic.speedGbps = portGbps(pattr.active_speed, pattr.active_width);
      nic.up = pattr.state == IBV_PORT_ACTIVE;
      nic.pciPath = pci;
      nic.numaNode = pciNumaNode(pci);
      ibv_gid gid;
      if (pattr.gid_tbl_len > 0 && v.queryGid(ctx, static_cast<uint8_t>(p), 0, &gid) == 0) nic.address = gidString(gid);
      n->nics.push_back(nic);
    }
    v.closeDevice(ctx);
  }
  v.freeDeviceList(list);
  if (count == 0) {
    n->verbsStatus = "no verbs devices";
    return;
  }
  n->verbsStatus = format(hcas == 1 ? "%d HCA" : "%d HCAs", hcas) + format(ports == 1 ? ", %d port" : ", %d ports", ports);
  if (failed) n->verbsStatus += format(", %d could not be opened", failed);
}

#else

void probeVerbs(NodeInfo* n) {
  n->verbsStatus = strcmp(HOCCL_BUILD_IBVERBS_SWITCH, "OFF") == 0 ? "no verbs: built with HOCCL_IBVERBS=OFF"
                                                                  : "no verbs: not built with verbs headers";
}

#endif

}  // namespace detail
}  // namespace topo
}  // namespace hoccl
