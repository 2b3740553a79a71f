// Device connections to other hosts through the network proxy
// (net_device.h): set-up and what the executor asks of them; the proxy
// itself is net_proxy.cc.
#include "transport/net/net_device.h"

#include <algorithm>
#include <cstring>

#include "base/log.h"
#include "transport/net/net_conn.h"
#include "transport/net/net_proxy.h"

namespace hoccl::cuda {
namespace {

constexpr uint32_t kTagDevNet = 0x70000000;  // | link: a receive half's listen handle
constexpr uint32_t kMaxLink = 0x00ffffff;

}  // namespace

NetWrap NetDeviceConnections::wrapForTesting = nullptr;

Status NetDeviceConnections::open(const DeviceConnOptions& o, NetChoice choice, int localIndex,
                                  std::unique_ptr<NetDeviceConnections>* out) {
  const std::string& p = o.settings.netPath;
  if (p != "auto" && p != "host" && p != "copy" && p != "gdr")
    return Status(hocclInvalidArgument, "HOCCL_NET_DEVICE_PATH=" + p + ": expected auto, host, copy or gdr");
  std::unique_ptr<NetDeviceConnections> c(new NetDeviceConnections(o));
  c->proxy_ = std::make_unique<NetProxy>(o);
  // Its own transport: its progress thread wakes the proxy, not the rank.
  choice.socket.notify = choice.ib.notify = &NetProxy::notify;
  choice.socket.notifyArg = choice.ib.notifyArg = c->proxy_.get();
  choice.socket.consumerPolls = false;
  choice.socket.timeoutSec = choice.ib.timeoutSec = o.timeoutSec;
  std::unique_ptr<NetTransport> net;
  std::string how;
  HOCCL_TRY(createNetTransport(choice, &net, &how).context("device buffers: the network proxy's transport"));
  if (wrapForTesting) net = wrapForTesting(std::move(net));
  const int dev = localIndex % std::max(1, net->devices());
  c->netName_ = how + ", device " + std::to_string(dev);
  NetProperties props;
  c->gdrWhy_ = net->getProperties(dev, &props).ok() ? props.gdrWhy : "its properties are unknown";
  c->gdrOffered_ = (props.ptrSupport & kPtrDmabuf) != 0;
  HOCCL_TRY(c->proxy_->start(std::move(net), dev));
  *out = std::move(c);
  return Status();
}

NetDeviceConnections::NetDeviceConnections(const DeviceConnOptions& o) : o_(o) {}
NetDeviceConnections::~NetDeviceConnections() = default;

Status NetDeviceConnections::connect(const std::vector<DeviceEdge>& edges) {
  const int rank = o_.oob->rank();
  std::vector<ConnRequest> want;
  for (const DeviceEdge& e : edges) {
    if (proxy_->find(e)) continue;
    if (uint32_t(e.link) > kMaxLink)
      return errorf(hocclInternalError, "device buffers: link %d of edge %d->%d is beyond the network proxy's tags",
                    e.link, e.from, e.to);
    if (e.from == rank) want.push_back(ConnRequest{e.to, e.link, true});
    else if (e.to == rank) want.push_back(ConnRequest{e.from, e.link, false});
  }
  if (want.empty()) return Status();
  std::vector<NetCommMade> made;
  const Status st = connectNetComms(proxy_->net(), proxy_->dev(), *o_.oob, kTagDevNet, want, o_.timeoutSec, &made)
                        .context("device buffers: connecting to other hosts through the network proxy");
  // auto takes host: GPUDirect RDMA stays asked-for (gdr) until it has
  // run on hardware, where a device offers it (docs/gpu.md).
  const std::string& asked = o_.settings.netPath;
  const Path path = asked == "copy" ? Path::Copy : asked == "gdr" ? Path::Gdr : Path::Host;
  const std::string why = path == Path::Gdr ? "GPUDirect RDMA by dma-buf, as asked"
                          : gdrOffered_     ? "GPUDirect RDMA offered by the device: HOCCL_NET_DEVICE_PATH=gdr takes it"
                                            : "no GPUDirect RDMA: " + gdrWhy_;
  Status mine;
  for (const NetCommMade& m : made) {
    std::unique_ptr<Half> h;
    if (mine.ok()) {
      mine = proxy_->makeHalf(m, path, &h);
      if (path == Path::Gdr && !mine.ok())
        mine = Status(mine.code(), "HOCCL_NET_DEVICE_PATH=gdr: " + mine.message() + " (" + netName_ +
                                       (gdrOffered_ || mine.message().find(gdrWhy_) != std::string::npos
                                            ? ")"
                                            : "; " + gdrWhy_ + ")"));
    }
    if (!h) {  // made, but not kept: closed again
      (void)(m.e.send ? proxy_->net().closeSend(m.comm) : proxy_->net().closeRecv(m.comm));
      continue;
    }
    HINFO(kSubNet, "device buffers: %s: %s, %s (HOCCL_NET_DEVICE_PATH=%s; %s)", h->describe(rank).c_str(),
          netName_.c_str(), pathName(path), asked.c_str(), why.c_str());
    proxy_->add(std::move(h));
  }
  HOCCL_TRY(st);
  return mine;
}

DevPtr NetDeviceConnections::conn(const DeviceEdge& e) const {
  const Half* h = proxy_->find(e);
  return h ? h->memDev : 0;
}

void NetDeviceConnections::launched() { proxy_->wake(); }

void NetDeviceConnections::quiesce() { proxy_->shutDown(); }

std::string NetDeviceConnections::describeWait(const DeviceEdge& e) const { return proxy_->describeWait(e); }

}  // namespace hoccl::cuda
