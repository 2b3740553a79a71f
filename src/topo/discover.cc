// Discovering this machine. The sysfs / procfs path always runs (CPUs, NUMA,
// network interfaces); hwloc, when built in, then refines CPUs, NUMA and
// device locality; CUDA and verbs devices are probed through dlopen.
#include <arpa/inet.h>
#include <dirent.h>
#include <ifaddrs.h>
#include <limits.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "src/topo/topology.h"

namespace hoccl {
namespace topo {
namespace detail {

// Defined in discover_hwloc.cc: true if hwloc described CPUs and NUMA.
bool probeHwloc(NodeInfo* n);
// Defined in discover_devices.cc.
void probeGpus(NodeInfo* n);
void probeVerbs(NodeInfo* n);

// Shared with discover_devices.cc.
bool readSmallFile(const std::string& path, std::string* out);
std::string pciDeviceDir(const std::string& deviceLink);
int pciNumaNode(const std::string& pciDir);

bool readSmallFile(const std::string& path, std::string* out) {
  FILE* f = fopen(path.c_str(), "r");
  if (!f) return false;
  char buf[4096];
  std::string s;
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, f)) > 0 && s.size() < (1u << 20)) s.append(buf, n);
  bool ok = !ferror(f);
  fclose(f);
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ' || s.back() == '\r' || s.back() == '\t')) s.pop_back();
  *out = s;
  return ok;
}

namespace {

bool isPciAddress(const std::string& c) {
  // dddd:bb:dd.f (hex)
  if (c.size() != 12 || c[4] != ':' || c[7] != ':' || c[10] != '.') return false;
  for (size_t i = 0; i < c.size(); ++i)
    if (i != 4 && i != 7 && i != 10 && !isxdigit(static_cast<unsigned char>(c[i]))) return false;
  return true;
}

}  // namespace

// The sysfs directory of the PCI function behind a device link
// ("/sys/class/net/eth0/device" -> "/sys/devices/pci0000:00/0000:00:03.0"),
// or "" for virtual devices.
std::string pciDeviceDir(const std::string& deviceLink) {
  char real[PATH_MAX];
  if (!realpath(deviceLink.c_str(), real)) return "";
  std::string p = real;
  while (p.size() > 1) {
    size_t slash = p.rfind('/');
    if (slash == std::string::npos) break;
    if (isPciAddress(p.substr(slash + 1))) return p;
    p.resize(slash);
  }
  return "";
}

int pciNumaNode(const std::string& pciDir) {
  std::string s;
  if (pciDir.empty() || !readSmallFile(pciDir + "/numa_node", &s)) return -1;
  return atoi(s.c_str()) >= 0 ? atoi(s.c_str()) : -1;
}

}  // namespace detail

namespace {

using detail::readSmallFile;

// "0-3,8,10-11" -> {0,1,2,3,8,10,11}; empty on malformed input.
std::vector<int> parseCpuList(const std::string& s) {
  std::vector<int> cpus;
  std::stringstream ss(s);
  std::string part;
  while (std::getline(ss, part, ',')) {
    if (part.empty()) continue;
    int a = 0, b = 0;
    if (sscanf(part.c_str(), "%d-%d", &a, &b) == 2) {
    } else if (sscanf(part.c_str(), "%d", &a) == 1) {
      b = a;
    } else {
      return {};
    }
    if (a < 0 || b < a || b - a > 65536 || cpus.size() > 65536) return {};
    for (int c = a; c <= b; ++c) cpus.push_back(c);
  }
  return cpus;
}

uint64_t memTotalBytes(const std::string& meminfo) {
  size_t at = meminfo.find("MemTotal:");
  if (at == std::string::npos) return 0;
  unsigned long long kb = strtoull(meminfo.c_str() + at + 9, nullptr, 10);
  return static_cast<uint64_t>(kb) * 1024;
}

void discoverNuma(NodeInfo* n) {
  const std::string root = "/sys/devices/system/node";
  DIR* d = opendir(root.c_str());
  if (d) {
    while (dirent* e = readdir(d)) {
      if (strncmp(e->d_name, "node", 4) != 0 || !isdigit(static_cast<unsigned char>(e->d_name[4]))) continue;
      NumaInfo m;
      m.id = atoi(e->d_name + 4);
      std::string dir = root + "/" + e->d_name, meminfo;
      readSmallFile(dir + "/cpulist", &m.cpus);
      if (readSmallFile(dir + "/meminfo", &meminfo)) m.memBytes = memTotalBytes(meminfo);
      n->numa.push_back(m);
    }
    closedir(d);
  }
  std::sort(n->numa.begin(), n->numa.end(), [](const NumaInfo& a, const NumaInfo& b) { return a.id < b.id; });
  if (n->numa.empty()) {  // a kernel without NUMA: the whole machine is node 0
    NumaInfo m;
    std::string meminfo;
    readSmallFile("/sys/devices/system/cpu/online", &m.cpus);
    if (readSmallFile("/proc/meminfo", &meminfo)) m.memBytes = memTotalBytes(meminfo);
    n->numa.push_back(m);
  }
}

void discoverCpus(NodeInfo* n) {
  std::string online;
  std::vector<int> cpus;
  if (readSmallFile("/sys/devices/system/cpu/online", &online)) cpus = parseCpuList(online);
  std::set<std::string> packages, cores;
  for (int c : cpus) {
    std::string base = "/sys/devices/system/cpu/cpu" + std::to_string(c) + "/topology/", pkg, core;
    if (readSmallFile(base + "physical_package_id", &pkg) && readSmallFile(base + "core_id", &core)) {
      packages.insert(pkg);
      cores.insert(pkg + "/" + core);
    }
  }
  n->pus = static_cast<int>(cpus.size());
  n->packages = static_cast<int>(packages.size());
  n->cores = static_cast<int>(cores.size());
  if (n->pus > 0 && n->cores > 0) return;
  // /proc/cpuinfo: "processor", "physical id", "core id" lines.
  std::ifstream f("/proc/cpuinfo");
  std::string line, phys = "0";
  int processors = 0;
  packages.clear();
  cores.clear();
  while (std::getline(f, line)) {
    size_t colon = line.find(':');
    if (colon == std::string::npos || colon == 0) continue;
    std::string key = line.substr(0, line.find_last_not_of(" \t", colon - 1) + 1);
    std::string value = colon + 2 <= line.size() ? line.substr(colon + 2) : "";
    if (key == "processor") ++processors;
    else if (key == "physical id") phys = value, packages.insert(value);
    else if (key == "core id") cores.insert(phys + "/" + value);
  }
  if (processors == 0) processors = static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
  n->pus = std::max(processors, 1);
  n->packages = std::max(static_cast<int>(packages.size()), 1);
  n->cores = cores.empty() ? n->pus : static_cast<int>(cores.size());
}

// IPv4 if the interface has one, else a global IPv6, else a link-local one.
std::map<std::string, std::string> interfaceAddresses() {
  std::map<std::string, std::pair<int, std::string>> best;
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return {};
  for (ifaddrs* a = list; a; a = a->ifa_next) {
    if (!a->ifa_addr || !a->ifa_name) continue;
    char buf[INET6_ADDRSTRLEN] = {0};
    int rank;
    if (a->ifa_addr->sa_family == AF_INET) {
      inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(a->ifa_addr)->sin_addr, buf, sizeof buf);
      rank = 3;
    } else if (a->ifa_addr->sa_family == AF_INET6) {
      const in6_addr& x = reinterpret_cast<sockaddr_in6*>(a->ifa_addr)->sin6_addr;
      inet_ntop(AF_INET6, &x, buf, sizeof buf);
      rank = IN6_IS_ADDR_LINKLOCAL(&x) ? 1 : 2;
    } else {
      continue;
    }
    auto& slot = best[a->ifa_name];
    if (rank > slot.first) slot = {rank, buf};
  }
  freeifaddrs(list);
  std::map<std::string, std::string> out;
  for (auto& [name, v] : best) out[name] = v.second;
  return out;
}

void discoverNics(NodeInfo* n) {
  const std::string root = "/sys/class/net";
  DIR* d = opendir(root.c_str());
  if (!d) return;
  std::map<std::string, std::string> addresses = interfaceAddresses();
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] == '.') continue;
    std::string dir = root + "/" + e->d_name, type, s;
    if (!readSmallFile(dir + "/type", &type)) continue;
    NicInfo nic;
    nic.name = e->d_name;
    int t = atoi(type.c_str());
    if (t == 1) nic.kind = "ethernet";            // ARPHRD_ETHER
    else if (t == 32) nic.kind = "infiniband";    // ARPHRD_INFINIBAND (IPoIB)
    else if (t == 772) nic.kind = "loopback";     // ARPHRD_LOOPBACK
    else continue;                                // tunnels and the like carry no traffic of ours
    std::string operstate, flags;
    readSmallFile(dir + "/operstate", &operstate);
    readSmallFile(dir + "/flags", &flags);
    bool ifUp = strtoul(flags.c_str(), nullptr, 16) & IFF_UP;
    nic.up = operstate == "up" || (operstate == "unknown" && ifUp);
    // speed is in Mb/s; reading it fails (EINVAL) or gives -1 when unknown.
    if (readSmallFile(dir + "/speed", &s) && !s.empty() && atol(s.c_str()) > 0) nic.speedGbps = atol(s.c_str()) / 1000.0;
    nic.pciPath = detail::pciDeviceDir(dir + "/device");
    nic.numaNode = detail::pciNumaNode(nic.pciPath);
    auto a = addresses.find(nic.name);
    if (a != addresses.end()) nic.address = a->second;
    n->nics.push_back(nic);
  }
  closedir(d);
  std::sort(n->nics.begin(), n->nics.end(), [](const NicInfo& a, const NicInfo& b) { return a.name < b.name; });
}

}  // namespace

NodeInfo discoverLocalNode(const std::string& hostId) {
  NodeInfo n;
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  n.hostname = host;
  n.hostId = hostId.empty() ? n.hostname : hostId;
  n.source = "sysfs";
  discoverCpus(&n);
  discoverNuma(&n);
  discoverNics(&n);
  detail::probeVerbs(&n);
  detail::probeGpus(&n);
  // Last, so that it can also place the verbs devices found above.
  if (detail::probeHwloc(&n)) n.source = "hwloc";
  // With one NUMA node every PCI device is local to it (sysfs says -1 in VMs).
  if (n.numa.size() == 1) {
    for (NicInfo& c : n.nics)
      if (c.numaNode < 0 && !c.pciPath.empty()) c.numaNode = n.numa[0].id;
    for (GpuInfo& g : n.gpus)
      if (g.numaNode < 0) g.numaNode = n.numa[0].id;
  }
  return n;
}

}  // namespace topo
}  // namespace hoccl
