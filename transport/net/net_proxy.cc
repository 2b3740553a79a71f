// The network proxy's thread and its data paths (net_proxy.h): each half's
// memory, and moving messages between the kernel's slots and the network.
#include "transport/net/net_proxy.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>


namespace hoccl::cuda {

const char* pathName(Path p) {
  return p == Path::Host   ? "host-pinned slots"
         : p == Path::Copy ? "GPU slots, copied through host"
                           : "GPU slots the NIC reads and writes (GPUDirect RDMA by dma-buf)";
}

Status NetProxy::makeGpuFrames(Half& h, size_t frameBytes) {
  if (!api_.memGetHandleForAddressRange)
    return Status(hocclInvalidUsage, "GPUDirect RDMA: this driver has no cuMemGetHandleForAddressRange (CUDA 11.7 "
                                     "and later export GPU memory as dma-bufs)");
  HOCCL_TRY(cuCheck(api_.memAlloc(&h.framesDev, frameBytes), "cuMemAlloc(network frames)"));
  int fd = -1;
  HOCCL_TRY(cuCheck(api_.memGetHandleForAddressRange(&fd, h.framesDev, frameBytes, kMemRangeHandleTypeDmaBufFd, 0),
                    "cuMemGetHandleForAddressRange(DMA_BUF_FD)"));
  // The registration holds the dma-buf; the fd is not needed after it.
  Status st = net_->regMrDmaBuf(h.comm, reinterpret_cast<void*>(uintptr_t(h.framesDev)), frameBytes,
                                      kPtrCuda | kPtrDmabuf, 0, fd, &h.mr);
  close(fd);
  return st.context("GPUDirect RDMA: registering a network connection's GPU frames");
}

Status NetProxy::makeHalf(const NetCommMade& m, Path path, std::unique_ptr<Half>* out) {
  auto h = std::make_unique<Half>();
  h->send = m.e.send;
  h->peer = m.e.peer;
  h->e = m.e.send ? DeviceEdge{rank_, m.e.peer, m.e.channel} : DeviceEdge{m.e.peer, rank_, m.e.channel};
  h->comm = m.comm;
  h->path = path;
  h->payload = o_.slotBytes;
  const size_t frameBytes = kDevSlots * (kFrameHeader + h->payload);
  const size_t memBytes = (sizeof(DevConnMem) + 63) & ~size_t(63);
  // Whatever fails below, the half owns what was made so far (release()).
  *out = nullptr;
  Status st = cuCheck(api_.memHostAlloc(&h->block, memBytes + (path == Path::Host ? frameBytes : 0),
                                        kHostAllocPortableMapped),
                      "cuMemHostAlloc(DEVICEMAP) for a network connection");
  if (st.ok()) st = cuCheck(api_.memHostGetDevicePointer(&h->memDev, h->block, 0), "cuMemHostGetDevicePointer");
  if (st.ok() && path == Path::Copy) {
    st = cuCheck(api_.memHostAlloc(&h->framesBlock, frameBytes, kHostAllocPortableMapped),
                 "cuMemHostAlloc for a network connection's frames");
    if (st.ok()) st = cuCheck(api_.memAlloc(&h->slotsDev, kDevSlots * h->payload), "cuMemAlloc(network slots)");
  }
  if (st.ok() && path == Path::Gdr) st = makeGpuFrames(*h, frameBytes);
  if (path != Path::Host) {
    for (uint32_t i = 0; st.ok() && i < kDevSlots; ++i)
      st = cuCheck(api_.eventCreate(&h->events[i], kEventDisableTiming), "cuEventCreate(network proxy)");
    if (st.ok()) st = ensureStream();
  }
  if (st.ok()) {
    h->mem = static_cast<DevConnMem*>(h->block);
    std::memset(static_cast<void*>(h->mem), 0, sizeof(DevConnMem));
    if (path == Path::Host) {
      h->frames = static_cast<uint8_t*>(h->block) + memBytes;
      // The kernel's slot k is frame k's payload: frames are the stride.
      h->mem->slotBytes = kFrameHeader + h->payload;
      h->mem->dataOffset = uint64_t(memBytes + kFrameHeader);
    } else if (path == Path::Gdr) {
      // The same layout in GPU memory; headers reach it by copy.
      h->mem->slotBytes = kFrameHeader + h->payload;
      h->mem->dataOffset = h->framesDev + kFrameHeader - h->memDev;  // modulo 2^64
    } else {
      h->frames = static_cast<uint8_t*>(h->framesBlock);
      h->mem->slotBytes = h->payload;
      h->mem->dataOffset = h->slotsDev - h->memDev;  // modulo 2^64
    }
    if (path != Path::Gdr)
      st = net_->regMr(h->comm, h->frames, frameBytes, kPtrHost, &h->mr)
               .context("registering a network connection's frames");
  }
  if (!st.ok()) {
    if (h->mr) net_->deregMr(h->comm, h->mr);
    h->mr = nullptr;
    h->comm = nullptr;  // the caller closes it (or gives it another path)
    release(*h);
    return st;
  }
  *out = std::move(h);
  return Status();
}

void NetProxy::release(Half& h) {
  if (h.mr) net_->deregMr(h.comm, h.mr);
  if (h.comm) (void)(h.send ? net_->closeSend(h.comm) : net_->closeRecv(h.comm));
  for (CuHandle ev : h.events)
    if (ev) api_.eventDestroy(ev);
  if (h.slotsDev) api_.memFree(h.slotsDev);
  if (h.framesDev) api_.memFree(h.framesDev);
  if (h.framesBlock) api_.memFreeHost(h.framesBlock);
  if (h.block) api_.memFreeHost(h.block);
  h = Half();
}

void NetProxy::fail(Half& h, const std::string& what, const Status& st) {
  if (h.failed) return;
  h.failed = true;
  const DevicePeer& p = o_.peers[size_t(h.peer)];
  Status s(st.ok() ? hocclRemoteError : st.code(),
           "device buffers: " + h.describe(rank_) + " (pid " + std::to_string(p.pid) + " on " + p.host +
               ", through the network proxy over " + net_->name() + "): " + what +
               (st.message().empty() ? "" : ": " + st.message()));
  HWARN(kSubNet, "%s", s.message().c_str());
  if (o_.fail) o_.fail(s);
}

// A request failed. If the connection broke (the transport's health says
// so: a killed peer, a cut link) that is a failure; if the peer closed it
// in order, its communicator is gone and nothing more will come: the
// kernel learns it from the closed word if, and only if, it waits for more.
void NetProxy::lost(Half& h, const std::string& what, const Status& st) {
  const Status health = net_->health(h.comm);
  if (!health.ok()) {
    fail(h, what, health);
    return;
  }
  // What arrived is published first (the copy path's copies, the gdr
  // path's flushes and header copies may be in flight): the closed word
  // must come after the last `tail`.
  if (!h.send && h.path == Path::Gdr && h.published < h.received) {
    const Deadline dl = Deadline::in(std::min(1.0, o_.timeoutSec));
    while (h.flushed < h.received && !h.failed && !dl.expired()) flushRecv(h);
    if (h.failed || h.flushed < h.received || api_.streamSynchronize(stream_) != kCudaSuccess) {
      fail(h, what, st);
      return;
    }
    for (; h.published < h.received; ++h.published)
      if (!arrivedWhole(h, h.published, h.mem->header[h.published % kDevSlots])) return;
    storeRelease(&h.mem->tail, h.published);
  }
  if (!h.send && h.published < h.received && h.path == Path::Copy) {
    if (api_.streamSynchronize(stream_) != kCudaSuccess) {
      fail(h, what, st);
      return;
    }
    while (h.published < h.received) {
      std::memcpy(&h.mem->header[h.published % kDevSlots], h.frame(h.published), kFrameHeader);
      storeRelease(&h.mem->tail, ++h.published);
    }
  }
  h.closed = true;
  __atomic_store_n(&h.mem->closed, 1u, __ATOMIC_RELEASE);
  HINFO(kSubNet, "device buffers: %s: the peer closed the connection (%s)", h.describe(rank_).c_str(),
        st.message().c_str());
}

// Send half: stage what the kernel posted, send it, and free each slot
// (its `head`) once the transport is done with it.
bool NetProxy::progressSend(Half& h) {
  bool moved = false;
  const uint64_t tail = loadAcquire(&h.mem->tail);
  while (h.staged < tail && h.staged < h.done + kDevSlots) {
    const uint64_t k = h.staged;
    const DevSlotHeader hd = h.mem->header[k % kDevSlots];
    if (hd.bytes > h.payload || hd.seq != uint32_t(k)) {
      fail(h, "the kernel posted message " + std::to_string(k) + " with " + std::to_string(hd.bytes) +
                  " bytes, sequence " + std::to_string(hd.seq) + " (a slot holds " + std::to_string(h.payload) + ")",
           Status(hocclInternalError, ""));
      return moved;
    }
    if (h.path != Path::Host) {
      // copy: the payload out to the host frame; gdr: the header in before
      // the payload the kernel wrote (the NIC sends the frame as one).
      const Status st = recordCopy(
          h, k,
          h.path == Path::Copy
              ? cuCheck(api_.memcpyDtoHAsync(h.frame(k) + kFrameHeader, h.slotDev(k), hd.bytes, stream_),
                        "cuMemcpyDtoHAsync(network proxy)")
              : cuCheck(api_.memcpyHtoDAsync(h.frameDev(k), &h.mem->header[k % kDevSlots], kFrameHeader, stream_),
                        "cuMemcpyHtoDAsync(network proxy: a header into a GPU frame)"));
      if (!st.ok()) {
        fail(h, h.path == Path::Copy ? "copying a message out of GPU memory" : "writing a header into GPU memory",
             st);
        return moved;
      }
    }
    if (h.path != Path::Gdr) std::memcpy(h.frame(k), &hd, kFrameHeader);
    ++h.staged;
    moved = true;
  }
  while (h.sent < h.staged) {
    const uint64_t k = h.sent;
    if (h.path != Path::Host) {
      const int rc = copyEnded(h, k, "copying a message out of GPU memory");
      if (rc == kCudaErrorNotReady) break;
      if (rc != kCudaSuccess) return moved;
    }
    // The kernel's header, in host memory the slot's release protects.
    const DevSlotHeader hd = h.mem->header[k % kDevSlots];
    void* req = nullptr;
    const Status st = net_->isend(h.comm, h.wire(k), kFrameHeader + hd.bytes, 0, h.mr, &req);
    if (!st.ok()) {
      lost(h, "sending message " + std::to_string(k), st);
      return moved;
    }
    if (!req) break;  // the transport is full: next pass
    h.reqs.push_back(req);
    ++h.sent;
    moved = true;
  }
  while (!h.reqs.empty()) {
    int done = 0;
    const Status st = net_->test(h.reqs.front(), &done, nullptr);
    if (!st.ok()) {
      lost(h, "sending message " + std::to_string(h.done), st);
      return moved;
    }
    if (!done) break;
    h.reqs.pop_front();
    storeRelease(&h.mem->head, ++h.done);
    moved = true;
  }
  return moved;
}

// Receive half: keep a receive posted on every slot the kernel has freed,
// and publish each message (its header, then `tail`) once it is in the slot.
bool NetProxy::progressRecv(Half& h) {
  bool moved = false;
  const uint64_t head = loadAcquire(&h.mem->head);
  while (h.posted < head + kDevSlots) {
    void* data = h.wire(h.posted);
    size_t size = kFrameHeader + h.payload;
    int tag = 0;
    void* req = nullptr;
    const Status st = net_->irecv(h.comm, 1, &data, &size, &tag, &h.mr, &req);
    if (!st.ok()) {
      lost(h, "posting a receive", st);
      return moved;
    }
    if (!req) break;
    h.reqs.push_back(req);
    ++h.posted;
    moved = true;
  }
  while (!h.reqs.empty()) {
    int done = 0, size = 0;
    const uint64_t k = h.received;
    const Status st = net_->test(h.reqs.front(), &done, &size);
    if (!st.ok()) {
      lost(h, "receiving message " + std::to_string(k), st);
      return moved;
    }
    if (!done) break;
    if (h.path == Path::Gdr) {
      // Its header is in GPU memory: checked once copied out (flushRecv).
      h.reqs.pop_front();
      h.sizes[k % kDevSlots] = size;
      void* data = h.wire(k);
      void* flush = nullptr;
      const Status fs = net_->iflush(h.comm, 1, &data, &size, &h.mr, &flush);
      if (!fs.ok()) {
        fail(h, "flushing message " + std::to_string(k) + " into GPU memory", fs);
        return moved;
      }
      h.flushes.push_back(flush);
      ++h.received;
      moved = true;
      continue;
    }
    DevSlotHeader hd;
    std::memcpy(&hd, h.frame(k), kFrameHeader);
    h.sizes[k % kDevSlots] = size;
    if (!arrivedWhole(h, k, hd)) return moved;
    h.reqs.pop_front();
    if (h.path == Path::Copy) {
      const Status cs = recordCopy(h, k, cuCheck(api_.memcpyHtoDAsync(h.slotDev(k), h.frame(k) + kFrameHeader,
                                                                     hd.bytes, stream_),
                                                 "cuMemcpyHtoDAsync(network proxy)"));
      if (!cs.ok()) {
        fail(h, "copying a message into GPU memory", cs);
        return moved;
      }
    }
    ++h.received;
    moved = true;
  }
  if (h.path == Path::Gdr) {
    moved = flushRecv(h) || moved;
    if (h.failed) return moved;
  }
  while (h.published < (h.path == Path::Gdr ? h.flushed : h.received)) {
    const uint64_t k = h.published;
    if (h.path != Path::Host) {
      const int rc = copyEnded(h, k, h.path == Path::Copy ? "copying a message into GPU memory"
                                                           : "reading a header out of GPU memory");
      if (rc == kCudaErrorNotReady) break;
      if (rc != kCudaSuccess) return moved;
    }
    if (h.path == Path::Gdr) {
      if (!arrivedWhole(h, k, h.mem->header[k % kDevSlots])) return moved;
    } else {
      std::memcpy(&h.mem->header[k % kDevSlots], h.frame(k), kFrameHeader);
    }
    storeRelease(&h.mem->tail, ++h.published);
    moved = true;
  }
  return moved;
}

Status NetProxy::recordCopy(Half& h, uint64_t k, const Status& copy) {
  HOCCL_TRY(copy);
  return cuCheck(api_.eventRecord(h.events[k % kDevSlots], stream_), "cuEventRecord(network proxy)");
}

bool NetProxy::arrivedWhole(Half& h, uint64_t k, const DevSlotHeader& hd) {
  const int size = h.sizes[k % kDevSlots];
  if (size_t(size) >= kFrameHeader && hd.bytes <= h.payload && size_t(size) == kFrameHeader + hd.bytes) return true;
  fail(h, "message " + std::to_string(k) + " arrived with " + std::to_string(size) + " bytes for a header of " +
              std::to_string(hd.bytes) + " (a slot holds " + std::to_string(h.payload) + ")",
       Status(hocclInternalError, ""));
  return false;
}

// gdr receive half: once a message's flush is done, its payload is where
// the kernel will read it; its header is copied out of the GPU frame to the
// kernel's side (DevConnMem::header), checked and published after.
bool NetProxy::flushRecv(Half& h) {
  bool moved = false;
  while (h.flushed < h.received) {
    const uint64_t k = h.flushed;
    if (void* flush = h.flushes.front()) {
      int done = 0;
      const Status st = net_->test(flush, &done, nullptr);
      if (!st.ok()) {
        fail(h, "flushing message " + std::to_string(k) + " into GPU memory", st);
        return moved;
      }
      if (!done) break;
    }
    h.flushes.pop_front();
    const Status st = recordCopy(h, k, cuCheck(api_.memcpyDtoHAsync(&h.mem->header[k % kDevSlots], h.frameDev(k),
                                                                    kFrameHeader, stream_),
                                                "cuMemcpyDtoHAsync(network proxy: a header out of a GPU frame)"));
    if (!st.ok()) {
      fail(h, "reading a header out of GPU memory", st);
      return moved;
    }
    ++h.flushed;
    moved = true;
  }
  return moved;
}

bool NetProxy::progress(Half& h) {
  return h.failed || h.closed ? false : h.send ? progressSend(h) : progressRecv(h);
}

void NetProxy::run() {
  // The device's context, for the copy path's copies and the executor's
  // event queries; never captured into a graph.
  if (o_.ctx) api_.ctxSetCurrent(o_.ctx);
  int mode = kCaptureModeRelaxed;
  if (api_.threadExchangeStreamCaptureMode) api_.threadExchangeStreamCaptureMode(&mode);
  const double spinSec = o_.settings.proxySpinUs * 1e-6;
  const auto idle = std::chrono::microseconds(int64_t(std::max(1.0, o_.settings.proxyIdleUs)));
  double lastMoved = nowSec(), lastHealth = lastMoved, lastWatch = lastMoved;
  bool watchFailed = false;
  int64_t backoffUs = kPendingPollUs;  // the next look's delay while a launch runs and nothing moves
  for (;;) {
    uint64_t seen;
    {
      std::lock_guard<std::mutex> l(sleepMu_);
      if (stop_) return;
      seen = wakes_;
    }
    bool moved = false;
    const double now = nowSec();
    {
      std::lock_guard<std::mutex> l(halvesMu_);
      for (auto& h : halves_) moved = progress(*h) || moved;
      // A connection that broke while idle (a killed peer, a cut link).
      if (now - lastHealth > 0.1) {
        lastHealth = now;
        for (auto& h : halves_)
          if (!h->failed && !h->closed)
            if (Status st = net_->health(h->comm); !st.ok()) fail(*h, "the connection broke", st);
      }
    }
    // News of a failure elsewhere, for launches that wait on it.
    if (now - lastWatch > 0.1 && !watchFailed && o_.watch && o_.launchPending && o_.launchPending()) {
      lastWatch = now;
      if (Status st = o_.watch(); !st.ok()) {
        watchFailed = true;
        if (o_.fail) o_.fail(st);
      }
    }
    if (moved) {
      lastMoved = now;
      backoffUs = kPendingPollUs;
      continue;
    }
    if (now - lastMoved < spinSec) {
      std::this_thread::yield();
      continue;
    }
    // While a launch runs the kernel may post at any moment, and nothing
    // tells the proxy when: it looks every kPendingPollUs (a message that
    // waits for a slow peer costs that much more), and at once when the
    // transport completes something or the executor launches.
    const bool pending = o_.launchPending && o_.launchPending();
    const auto wait = pending ? std::min(idle, std::chrono::microseconds(backoffUs)) : idle;
    if (pending) backoffUs = std::min<int64_t>(backoffUs * 2, idle.count());
    std::unique_lock<std::mutex> l(sleepMu_);
    cv_.wait_for(l, wait, [&] { return stop_ || wakes_ != seen; });
  }
}

std::string NetProxy::describeWait(const DeviceEdge& e) const {
  std::lock_guard<std::mutex> l(halvesMu_);
  for (const auto& h : halves_) {
    if (h->e.from != e.from || h->e.to != e.to || h->e.link != e.link) continue;
    char buf[256];
    if (h->send)
      snprintf(buf, sizeof buf, "network proxy: kernel posted %llu, sent %llu, completed %llu",
               (unsigned long long)loadAcquire(&h->mem->tail), (unsigned long long)h->sent,
               (unsigned long long)h->done);
    else
      snprintf(buf, sizeof buf, "network proxy: receives posted %llu, arrived %llu, kernel released %llu",
               (unsigned long long)h->posted, (unsigned long long)h->received,
               (unsigned long long)loadAcquire(&h->mem->head));
    return buf;
  }
  return "";
}

}  // namespace hoccl::cuda
