// The verbs transport's devices (one per active HCA port the options allow)
// and their registration caches.
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>

#include "base/log.h"
#include "transport/net/ib/ib_net.h"
#include "transport/net/ib/ib_select.h"

#ifdef HOCCL_HAVE_IBVERBS

namespace hoccl {
namespace ibnet {
namespace {

std::string readLine(const std::string& path) {
  FILE* f = fopen(path.c_str(), "r");
  if (!f) return "";
  char buf[256] = {0};
  if (!fgets(buf, sizeof buf, f)) buf[0] = '\0';
  fclose(f);
  std::string s = buf;
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

// Nominal Gbit/s per lane times lanes (ibv_port_attr active_speed/width).
int portMbps(uint8_t speed, uint8_t width) {
  int lane = 0;
  switch (speed) {
    case 1: lane = 2500; break;     // SDR
    case 2: lane = 5000; break;     // DDR
    case 4: case 8: lane = 10000; break;  // QDR, FDR10
    case 16: lane = 14000; break;   // FDR
    case 32: lane = 25000; break;   // EDR
    case 64: lane = 50000; break;   // HDR
    case 128: lane = 100000; break; // NDR
  }
  int lanes = width == 1 ? 1 : width == 2 ? 4 : width == 4 ? 8 : width == 8 ? 12 : width == 16 ? 2 : 0;
  return lane * lanes;
}

const char* portStateName(ibv_port_state s) {
  switch (s) {
    case IBV_PORT_DOWN: return "DOWN";
    case IBV_PORT_INIT: return "INIT";
    case IBV_PORT_ARMED: return "ARMED";
    case IBV_PORT_ACTIVE: return "ACTIVE";
    default: return "not active";
  }
}

// The port's GID table with each entry's type from sysfs.
std::vector<GidEntry> gidTable(const Verbs& v, ibv_context* ctx, const std::string& hca, int port, int len) {
  std::vector<GidEntry> table;
  for (int i = 0; i < len && i < 256; ++i) {
    ibv_gid gid;
    if (v.queryGid(ctx, static_cast<uint8_t>(port), i, &gid) != 0) continue;
    GidEntry e;
    e.index = i;
    memcpy(e.raw, gid.raw, 16);
    if (gidIsZero(e.raw)) continue;
    e.type = readLine("/sys/class/infiniband/" + hca + "/ports/" + std::to_string(port) + "/gid_attrs/types/" +
                      std::to_string(i));
    table.push_back(e);
  }
  return table;
}

}  // namespace

Status openDevices(const Verbs& v, const IbNetOptions& opt, std::vector<std::unique_ptr<Device>>* out) {
  HcaRule rule;
  std::string why;
  if (!parseHcaRule(opt.hcaRule, &rule, &why)) return errorf(hocclInvalidArgument, "HOCCL_IB_HCA: %s", why.c_str());
  int count = 0;
  errno = 0;
  ibv_device** list = v.getDeviceList(&count);
  if (!list) {
    int err = errno;
    return errorf(hocclSystemError, "%s",
                  err == ENOSYS ? "no RDMA devices: libibverbs found, but the kernel has no RDMA support"
                                : ("ibv_get_device_list failed: " + std::string(strerror(err))).c_str());
  }
  if (count == 0) {
    v.freeDeviceList(list);
    return errorf(hocclSystemError, "no RDMA devices (libibverbs found none; is a provider such as "
                                    "ibverbs-providers installed and a driver loaded?)");
  }
  std::vector<std::string> seen;  // ports and why each was not taken
  for (int d = 0; d < count; ++d) {
    const char* n = v.getDeviceName(list[d]);
    std::string hca = n ? n : "?";
    ibv_context* probe = v.openDevice(list[d]);
    if (!probe) {
      seen.push_back(hca + " (cannot be opened: " + strerror(errno) + ")");
      continue;
    }
    ibv_device_attr dattr;
    memset(&dattr, 0, sizeof dattr);
    int nports = v.queryDevice(probe, &dattr) == 0 && dattr.phys_port_cnt > 0 ? dattr.phys_port_cnt : 1;
    v.closeDevice(probe);
    for (int p = 1; p <= nports; ++p) {
      std::string portName = hca + ":" + std::to_string(p);
      if (!hcaSelected(rule, hca, p)) {
        seen.push_back(portName + " (excluded by HOCCL_IB_HCA)");
        continue;
      }
      auto dev = std::make_unique<Device>();
      dev->hca = hca;
      dev->port = p;
      dev->name = portName;
      dev->guid = dattr.node_guid;
      dev->ctx = v.openDevice(list[d]);
      if (!dev->ctx) {
        seen.push_back(portName + " (cannot be opened)");
        continue;
      }
      std::string reject;
      if (v.queryPort(dev->ctx, static_cast<uint8_t>(p), &dev->attr) != 0) reject = "ibv_query_port failed";
      else if (dev->attr.state != IBV_PORT_ACTIVE) reject = std::string("port ") + portStateName(dev->attr.state);
      bool ethernet = dev->attr.link_layer == IBV_LINK_LAYER_ETHERNET;
      if (reject.empty()) {
        std::vector<GidEntry> table = gidTable(v, dev->ctx, hca, p, dev->attr.gid_tbl_len);
        int gi = opt.gidIndex;
        if (gi < 0) gi = chooseGidIndex(table, ethernet);
        const GidEntry* chosen = nullptr;
        for (const GidEntry& g : table)
          if (g.index == gi) chosen = &g;
        if (!chosen) {
          reject = opt.gidIndex >= 0 ? "GID index " + std::to_string(opt.gidIndex) + " (HOCCL_IB_GID_INDEX) is empty"
                                     : std::string("no usable GID (is an address configured on its netdev?)");
        } else {
          dev->gidIndex = gi;
          memcpy(dev->gid.raw, chosen->raw, 16);
          dev->gidType = chosen->type.empty() ? (ethernet ? "RoCE" : "IB") : chosen->type;
        }
      }
      if (reject.empty() && !(dev->pd = v.allocPd(dev->ctx))) reject = "ibv_alloc_pd failed";
      if (reject.empty() && !(dev->channel = v.createCompChannel(dev->ctx)))
        reject = "ibv_create_comp_channel failed";
      if (!reject.empty()) {
        seen.push_back(portName + " (" + reject + ")");
        closeDevice(v, dev.get());
        continue;
      }
      char real[PATH_MAX];
      std::string link = "/sys/class/infiniband/" + hca + "/device";
      if (realpath(link.c_str(), real)) dev->pciPath = real;
      dev->speedMbps = portMbps(dev->attr.active_speed, dev->attr.active_width);
      probeDmabuf(v, dev.get());
      dev->peermem = peerMemoryLoaded();
      HINFO(kSubNet, "IB: using %s (%s, GID %d %s %s, MTU %d, %d Mbit/s; dma-buf: %s; nvidia_peermem: %s)",
            dev->name.c_str(), ethernet ? "RoCE" : "InfiniBand", dev->gidIndex, dev->gidType.c_str(),
            gidText(dev->gid.raw).c_str(), 128 << dev->attr.active_mtu, dev->speedMbps,
            dev->dmabuf ? "yes" : ("no, " + dev->dmabufWhy).c_str(), dev->peermem ? "loaded" : "no");
      out->push_back(std::move(dev));
    }
  }
  v.freeDeviceList(list);
  if (out->empty()) {
    std::string all;
    for (const std::string& s : seen) all += (all.empty() ? "" : ", ") + s;
    return errorf(hocclSystemError, "no usable RDMA port: %s", all.empty() ? "none found" : all.c_str());
  }
  return Status();
}

void probeDmabuf(const Verbs& v, Device* d) {
  d->dmabuf = false;
  if (!v.regDmabufMr) {
    d->dmabufWhy = "libibverbs has no ibv_reg_dmabuf_mr (rdma-core older than 34)";
    return;
  }
  errno = 0;
  ibv_mr* mr = v.regDmabufMr(d->pd, 0, 4096, 0, -1, IBV_ACCESS_LOCAL_WRITE);
  const int err = errno;
  if (mr) {  // a provider that registered fd -1: not one to trust
    v.deregMr(mr);
    d->dmabufWhy = "ibv_reg_dmabuf_mr accepted an invalid fd";
  } else if (err == EBADF) {
    d->dmabuf = true;
    d->dmabufWhy.clear();
  } else {
    d->dmabufWhy = std::string("the provider does not register dma-bufs (ibv_reg_dmabuf_mr: ") + strerror(err) + ")";
  }
}

void closeDevice(const Verbs& v, Device* d) {
  closeFlush(v, d);
  d->mrs.clear(v);
  if (d->channel) v.destroyCompChannel(d->channel);
  if (d->pd) v.deallocPd(d->pd);
  if (d->ctx) v.closeDevice(d->ctx);
  d->channel = nullptr;
  d->pd = nullptr;
  d->ctx = nullptr;
}

Status MrCache::acquire(const Verbs& v, ibv_pd* pd, const std::string& devName, void* addr, size_t size, Mr** out,
                        bool gpu) {
  uintptr_t a = reinterpret_cast<uintptr_t>(addr);
  for (auto& m : mrs_)
    if (!m->dmabuf && m->gpu == gpu && m->start <= a && a + size <= m->end) {
      ++m->refs;
      ++hits_;
      *out = m.get();
      return Status();
    }
  static const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  uintptr_t start = a & ~(page - 1), end = (a + size + page - 1) & ~(page - 1);
  int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
  ibv_mr* mr = v.regMr(pd, reinterpret_cast<void*>(start), end - start, access);
  if (!mr)
    return errorf(hocclSystemError, "IB: ibv_reg_mr of %zu bytes at %p%s on %s failed: %s (%s)",
                  static_cast<size_t>(end - start), reinterpret_cast<void*>(start), gpu ? " (GPU memory)" : "",
                  devName.c_str(), strerror(errno),
                  gpu ? "is nvidia_peermem loaded for this GPU?" : "locked-memory limit: ulimit -l");
  keep(mr, start, end, gpu, false, out);
  return Status();
}

Status MrCache::acquireDmabuf(const Verbs& v, ibv_pd* pd, const std::string& devName, void* addr, size_t size,
                              uint64_t offset, int fd, Mr** out) {
  if (!v.regDmabufMr)
    return errorf(hocclInvalidUsage, "IB: libibverbs has no ibv_reg_dmabuf_mr (rdma-core older than 34)");
  const uintptr_t a = reinterpret_cast<uintptr_t>(addr);
  int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
  ibv_mr* mr = v.regDmabufMr(pd, offset, size, a, fd, access);
  if (!mr)
    return errorf(hocclSystemError, "IB: ibv_reg_dmabuf_mr of %zu bytes at offset %llu of dma-buf fd %d (device "
                  "address %p) on %s failed: %s", size, static_cast<unsigned long long>(offset), fd, addr,
                  devName.c_str(), strerror(errno));
  keep(mr, a, a + size, true, true, out);
  return Status();
}

void MrCache::keep(ibv_mr* mr, uintptr_t start, uintptr_t end, bool gpu, bool dmabuf, Mr** out) {
  auto m = std::make_unique<Mr>();
  m->mr = mr;
  m->start = start;
  m->end = end;
  m->refs = 1;
  m->gpu = gpu;
  m->dmabuf = dmabuf;
  ++registrations_;
  *out = m.get();
  mrs_.push_back(std::move(m));
}

void MrCache::release(const Verbs& v, Mr* mr) {
  if (!mr || --mr->refs > 0) return;
  for (auto it = mrs_.begin(); it != mrs_.end(); ++it)
    if (it->get() == mr) {
      v.deregMr(mr->mr);
      mrs_.erase(it);
      return;
    }
}

void MrCache::clear(const Verbs& v) {
  for (auto& m : mrs_) v.deregMr(m->mr);
  mrs_.clear();
}

MrCacheStats MrCache::stats() const {
  MrCacheStats s;
  s.registrations = registrations_;
  s.hits = hits_;
  s.live = static_cast<int>(mrs_.size());
  return s;
}

}  // namespace ibnet
}  // namespace hoccl

#endif  // HOCCL_HAVE_IBVERBS
