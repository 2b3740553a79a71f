// The verbs transport's NetTransport calls (see ib_transport.h), and its
// factory, which also exists without verbs headers.
#include <arpa/inet.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <mutex>
#include <thread>

#include "build_info.h"
#include "base/log.h"
#include "base/thread_name.h"
#include "transport/net/handle_steps.h"
#include "transport/net/ib/ib_net.h"
#include "transport/net/ib/ib_transport.h"
#include "transport/net/ib/ib_select.h"

namespace hoccl {
namespace {

// Checked before anything is loaded, and also in a build without verbs, so
// that a malformed HOCCL_IB_HCA is an error everywhere, never a quiet
// fall back to TCP because IB happened to be missing.
Status checkHcaRule(const IbNetOptions& opt) {
  ibnet::HcaRule rule;
  std::string why;
  if (ibnet::parseHcaRule(opt.hcaRule, &rule, &why)) return Status();
  return errorf(hocclInvalidArgument, "HOCCL_IB_HCA=\"%s\" is invalid: %s", opt.hcaRule.c_str(), why.c_str());
}

}  // namespace
}  // namespace hoccl

#ifdef HOCCL_HAVE_IBVERBS

namespace hoccl {
namespace ibnet {

IbTransport::IbTransport(const IbNetOptions& opt, const Verbs* v, std::vector<std::unique_ptr<Device>> devs)
    : opt_(opt), v_(*v), devs_(std::move(devs)) {
  for (auto& d : devs_) fcntl(d->channel->fd, F_SETFL, fcntl(d->channel->fd, F_GETFL) | O_NONBLOCK);
}

Status IbTransport::start() {
  wake_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (wake_ < 0) return sysErrorf("IB transport: eventfd");
  return startThread("the IB transport's progress thread", &thread_, [this] { progressLoop(); });
}

IbTransport::~IbTransport() {
  stop_ = true;
  if (thread_.joinable()) {
    kick();
    thread_.join();
  }
  for (Comm* c : comms_) destroyComm(v_, c);
  for (auto& d : devs_) closeDevice(v_, d.get());
  if (wake_ >= 0) close(wake_);
}

Status IbTransport::getProperties(int dev, NetProperties* p) const {
  HOCCL_TRY(checkDev(dev));
  const Device& d = *devs_[dev];
  *p = NetProperties();
  p->name = d.hca;
  p->port = d.port;
  p->pciPath = d.pciPath;
  p->guid = d.guid;
  // GPU memory for the NCCL net plugin's callers: dma-bufs where the probe
  // passed, device pointers where nvidia_peermem pins them.
  p->ptrSupport = kPtrHost | (d.dmabuf ? kPtrDmabuf | kPtrCuda : 0) | (d.peermem ? kPtrCuda : 0);
  p->gdrWhy = d.dmabuf ? "" : d.dmabufWhy;
  p->regIsGlobal = 1;
  p->speedMbps = d.speedMbps;
  p->maxRecvs = 1;
  p->maxP2pBytes = kMaxMessage;
  return Status();
}

Status IbTransport::listen(int dev, void* handle, void** listenComm) {
  HOCCL_TRY(checkDev(dev));
  ListenComm* lc = nullptr;
  Handle h;
  HOCCL_TRY(listenOn(opt_, devs_[dev].get(), &lc, &h));
  memset(handle, 0, kNetHandleBytes);
  memcpy(handle, &h, sizeof h);
  *listenComm = lc;
  return Status();
}

Status IbTransport::connect(int dev, void* handle, void** sendComm) {
  *sendComm = nullptr;
  HOCCL_TRY(checkDev(dev));
  Handle h;
  memcpy(&h, handle, sizeof h);
  if (h.magic != kMagic)
    return errorf(hocclInvalidUsage, "IB transport: the peer's handle is not an IB one (it uses another network "
                  "transport: set HOCCL_NET to the same value on every rank)");
  Device* d = devs_[dev].get();
  return hoccl::connectStep<Handle, Comm>(
      handle, [] { return newConnectState(); },
      [&](const Handle& h, Comm** c) { return connectStep(v_, opt_, d, h.state, h, c); },
      [this](ConnectState* s) { destroyConnectState(v_, s); }, [this](Comm* c) { adopt(c); }, sendComm);
}

Status IbTransport::accept(void* listenComm, void** recvComm) {
  return hoccl::acceptStep<Comm>(
      [&](Comm** c) { return acceptStep(v_, opt_, static_cast<ListenComm*>(listenComm), c); },
      [this](Comm* c) { adopt(c); }, recvComm);
}

Status IbTransport::regMr(void* comm, void* data, size_t size, int type, void** mhandle) {
  *mhandle = nullptr;
  Comm* c = static_cast<Comm*>(comm);
  const bool gpu = (type & kPtrCuda) != 0;
  if (gpu && !c->dev->peermem)
    return errorf(hocclInvalidUsage, "IB: %s cannot register a device pointer (type %#x): nvidia_peermem is not "
                  "loaded; register GPU memory as a dma-buf (regMrDmaBuf)%s", c->dev->name.c_str(), type,
                  c->dev->dmabuf ? "" : (", which this device refuses too: " + c->dev->dmabufWhy).c_str());
  if (!gpu && !(type & kPtrHost))
    return errorf(hocclInvalidArgument, "IB: memory type %#x is neither host nor CUDA", type);
  if (size == 0) return Status();
  std::lock_guard<std::mutex> lock(mu_);
  Mr* mr = nullptr;
  HOCCL_TRY(c->dev->mrs.acquire(v_, c->dev->pd, c->dev->name, data, size, &mr, gpu));
  *mhandle = mr;
  return Status();
}

Status IbTransport::regMrDmaBuf(void* comm, void* data, size_t size, int type, uint64_t offset, int fd,
                                void** mhandle) {
  *mhandle = nullptr;
  Comm* c = static_cast<Comm*>(comm);
  if (!c->dev->dmabuf)
    return errorf(hocclInvalidUsage, "IB: %s cannot register dma-bufs (type %#x): %s", c->dev->name.c_str(), type,
                  c->dev->dmabufWhy.c_str());
  if (fd < 0 || size == 0)
    return errorf(hocclInvalidArgument, "IB: regMrDmaBuf of %zu bytes from fd %d (a dma-buf fd and a size > 0)",
                  size, fd);
  std::lock_guard<std::mutex> lock(mu_);
  Mr* mr = nullptr;
  HOCCL_TRY(c->dev->mrs.acquireDmabuf(v_, c->dev->pd, c->dev->name, data, size, offset, fd, &mr));
  *mhandle = mr;
  return Status();
}

Status IbTransport::iflush(void* recvComm, int n, void** data, int* sizes, void** mhandles, void** request) {
  *request = nullptr;
  Comm* c = static_cast<Comm*>(recvComm);
  if (c->isSend) return errorf(hocclInvalidArgument, "IB: iflush on a send connection");
  if (n < 1 || n > kNetMaxRequests) return errorf(hocclInvalidArgument, "IB: iflush of %d buffers", n);
  // NCCL flushes the last buffer that received data; a read behind it is
  // behind every earlier write of the connection too (one QP, in order).
  int last = -1;
  for (int i = 0; i < n; ++i) {
    const Mr* mr = mhandles ? static_cast<const Mr*>(mhandles[i]) : nullptr;
    if (sizes[i] > 0 && mr && (mr->gpu ? opt_.gdrFlush : opt_.flushHost)) last = i;
  }
  if (last < 0) return Status();  // host memory, or flushes off: nothing to do
  std::lock_guard<std::mutex> lock(mu_);
  HOCCL_TRY(c->failed);
  auto r = std::make_unique<Request>();
  r->comm = c;
  r->flush = true;
  HOCCL_TRY(postFlush(v_, opt_, c->dev, *static_cast<const Mr*>(mhandles[last]), data[last], &r->ticket));
  ++c->inflight;
  *request = r.get();
  c->requests.push_back(std::move(r));
  return Status();
}

Status IbTransport::newRequest(Comm* c, bool isSend, void* data, size_t size, int tag, Mr* given,
                               std::unique_ptr<Request>* out) {
  auto r = std::make_unique<Request>();
  r->comm = c;
  r->isSend = isSend;
  r->data = static_cast<char*>(data);
  r->size = size;
  r->tag = tag;
  HOCCL_TRY(attachMr(c, r.get(), given));
  r->seq = c->nextSeq++;
  *out = std::move(r);
  return Status();
}

void IbTransport::launch(Comm* c, std::unique_ptr<Request> r, void** request) {
  ++c->inflight;
  *request = r.get();
  c->requests.push_back(std::move(r));
  pollCq(c);
  progress(c);
}

Status IbTransport::isend(void* sendComm, void* data, size_t size, int tag, void* mhandle, void** request) {
  *request = nullptr;
  Comm* c = static_cast<Comm*>(sendComm);
  if (size > kMaxMessage)
    return errorf(hocclInvalidArgument, "IB transport: a %zu-byte message is over the %zu-byte limit", size, kMaxMessage);
  std::lock_guard<std::mutex> lock(mu_);
  HOCCL_TRY(c->failed);
  if (c->inflight >= kFifoDepth) return Status();
  std::unique_ptr<Request> r;
  HOCCL_TRY(newRequest(c, true, data, size, tag, static_cast<Mr*>(mhandle), &r));
  splitParts(r.get(), static_cast<int>(c->qps.size()));
  c->unposted.push_back(r.get());
  launch(c, std::move(r), request);
  return Status();
}

Status IbTransport::irecv(void* recvComm, int n, void** data, size_t* sizes, int* tags, void** mhandles,
                          void** request) {
  *request = nullptr;
  if (n != 1) return errorf(hocclInvalidArgument, "IB transport: %d grouped receives (maxRecvs is 1)", n);
  Comm* c = static_cast<Comm*>(recvComm);
  std::lock_guard<std::mutex> lock(mu_);
  HOCCL_TRY(c->failed);
  int slot = static_cast<int>(c->nextSeq % kFifoDepth);
  if (c->inflight >= kFifoDepth || c->slots[slot]) return Status();
  std::unique_ptr<Request> r;
  HOCCL_TRY(newRequest(c, false, data[0], sizes[0], tags ? tags[0] : 0,
                       mhandles ? static_cast<Mr*>(mhandles[0]) : nullptr, &r));
  c->slots[slot] = r.get();
  c->fifoPending.push_back(r.get());
  launch(c, std::move(r), request);
  return Status();
}

Status IbTransport::test(void* request, int* done, int* sizes) {
  Request* r = static_cast<Request*>(request);
  std::lock_guard<std::mutex> lock(mu_);
  *done = 0;
  Comm* c = r->comm;
  if (r->flush) {
    bool flushed = false;
    HOCCL_TRY(flushDone(v_, c->dev, r->ticket, &flushed));
    if (!flushed) return Status();
    *done = 1;
    if (sizes) *sizes = 0;
    retireRequest(c, r);
    return Status();
  }
  if (!r->done && r->error.ok() && c->failed.ok()) {
    pollCq(c);
    progress(c);
  }
  if (!r->error.ok()) return r->error;
  if (!r->done) return c->failed;
  *done = 1;
  if (sizes) *sizes = static_cast<int>(r->isSend ? r->size : r->received);
  retireRequest(c, r);
  return Status();
}

void IbTransport::kick() {
  uint64_t one = 1;
  ssize_t rc = write(wake_, &one, sizeof one);
  (void)rc;
}

Status IbTransport::closeComm(Comm* c) {
  std::lock_guard<std::mutex> lock(mu_);
  comms_.erase(std::remove(comms_.begin(), comms_.end(), c), comms_.end());
  if (c->sideFd >= 0 && c->failed.ok()) {
    // Best effort; the peer reads it as "closed in order".
    ssize_t n = ::send(c->sideFd, &kGoodbyeByte, 1, MSG_NOSIGNAL | MSG_DONTWAIT);
    (void)n;
    char sink[64];
    while (::recv(c->sideFd, sink, sizeof sink, MSG_DONTWAIT) > 0) {
    }
  }
  destroyComm(v_, c);
  kick();
  return Status();
}

}  // namespace ibnet

Status createIbTransport(const IbNetOptions& opt, std::unique_ptr<NetTransport>* out) {
  HOCCL_TRY(checkHcaRule(opt));
  if (opt.qpsPerConn < 1 || opt.qpsPerConn > ibnet::kMaxQps)
    return errorf(hocclInvalidArgument, "HOCCL_IB_QPS_PER_CONN=%d: expected 1 to %d", opt.qpsPerConn, ibnet::kMaxQps);
  std::string why;
  const Verbs* v = loadVerbs(&why);
  if (!v) return Status(hocclSystemError, why);
  std::vector<std::unique_ptr<ibnet::Device>> devs;
  HOCCL_TRY(ibnet::openDevices(*v, opt, &devs));
  std::unique_ptr<ibnet::IbTransport> t(new ibnet::IbTransport(opt, v, std::move(devs)));
  HOCCL_TRY(t->start());
  *out = std::move(t);
  return Status();
}

bool ibRegistrationStats(NetTransport& net, int dev, IbRegistrationStats* out) {
  auto* ib = dynamic_cast<ibnet::IbTransport*>(&net);
  if (!ib || dev < 0 || dev >= ib->devices()) return false;
  *out = ib->stats(dev);
  return true;
}

}  // namespace hoccl

#else  // !HOCCL_HAVE_IBVERBS

namespace hoccl {

Status createIbTransport(const IbNetOptions& opt, std::unique_ptr<NetTransport>*) {
  HOCCL_TRY(checkHcaRule(opt));
  return errorf(hocclSystemError, "this hoccl was built without the IB transport (%s)",
                strcmp(HOCCL_BUILD_IBVERBS_SWITCH, "OFF") == 0 ? "configured with HOCCL_IBVERBS=OFF"
                                                               : "no verbs headers at build time: libibverbs-dev");
}

bool ibRegistrationStats(NetTransport&, int, IbRegistrationStats*) { return false; }

}  // namespace hoccl

#endif  // HOCCL_HAVE_IBVERBS
