// The network proxy of device connections to other hosts (net_device.h):
// one rank's halves of its edges and the thread that serves them. Private
// to transport/net: net_device.cc sets connections up, net_proxy.cc moves
// their messages.
#pragma once

#include <condition_variable>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "base/clock.h"
#include "base/log.h"
#include "base/thread_name.h"
#include "transport/net/net_conn.h"
#include "transport/net/net_device.h"

namespace hoccl::cuda {
inline constexpr size_t kFrameHeader = sizeof(DevSlotHeader);
// How soon the proxy looks at its connections again while a launch runs
// and nothing moved for HOCCL_PROXY_SPIN_US; the delay doubles while
// nothing moves, up to HOCCL_PROXY_IDLE_US (every look is a system call,
// and a rank's processes share the cores with the proxies of its host).
inline constexpr int64_t kPendingPollUs = 20;

enum class Path { Host, Copy, Gdr };

const char* pathName(Path p);

// One rank's end of one edge to another host.
struct Half {
  DeviceEdge e;
  bool send = false;
  int peer = 0;
  Path path = Path::Host;
  void* comm = nullptr;   // the transport's sendComm or recvComm
  void* mr = nullptr;     // the frames' registration
  void* block = nullptr;  // cuMemHostAlloc'ed: the DevConnMem, then (host path) the frames
  DevConnMem* mem = nullptr;
  DevPtr memDev = 0;          // mem as the kernel sees it
  void* framesBlock = nullptr;  // copy path: the frames' own host memory
  uint8_t* frames = nullptr;  // kDevSlots frames of kFrameHeader + payload bytes
  DevPtr slotsDev = 0;        // copy path: the slots, in GPU memory
  DevPtr framesDev = 0;       // gdr path: the frames, in GPU memory the NIC registered as a dma-buf
  size_t payload = 0;         // bytes a slot holds
  CuHandle events[kDevSlots] = {};  // copy path: each slot's last copy; gdr: its header's copy
  // Receive half: each message's size; gdr: its flush (nullptr: none
  // needed) until done; `flushed` counts messages flushed whose header
  // copy to the kernel's side has been issued.
  int sizes[kDevSlots] = {};
  std::deque<void*> flushes;
  uint64_t flushed = 0;
  // Send half: messages staged (copy path: their copy to host issued),
  // handed to the transport, and sent. Receive half: receives posted,
  // completed, and published to the kernel (its `tail`).
  uint64_t staged = 0, sent = 0, done = 0;
  uint64_t posted = 0, received = 0, published = 0;
  std::deque<void*> reqs;  // in flight, oldest first
  bool failed = false;
  bool closed = false;  // the peer closed the connection in order (DevConnMem::closed)
  uint8_t* frame(uint64_t k) const { return frames + (k % kDevSlots) * (kFrameHeader + payload); }
  DevPtr frameDev(uint64_t k) const { return framesDev + (k % kDevSlots) * (kFrameHeader + payload); }
  // Where message k goes on the wire: its frame, in host or GPU memory.
  void* wire(uint64_t k) const {
    return framesDev ? reinterpret_cast<void*>(uintptr_t(frameDev(k))) : static_cast<void*>(frame(k));
  }
  DevPtr slotDev(uint64_t k) const { return slotsDev + (k % kDevSlots) * payload; }
  std::string describe(int rank) const {
    char buf[160];
    snprintf(buf, sizeof buf, "rank %d %s rank %d link %d", rank, send ? "->" : "<-", peer, e.link);
    return buf;
  }
};

inline uint64_t loadAcquire(const uint64_t* p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
inline void storeRelease(uint64_t* p, uint64_t v) { __atomic_store_n(p, v, __ATOMIC_RELEASE); }

// The proxy thread and what it serves.
class NetProxy {
 public:
  NetProxy(const DeviceConnOptions& o) : o_(o), api_(*o.api), rank_(o.oob->rank()) {}
  ~NetProxy() {
    drain();
    stopThread();
    std::lock_guard<std::mutex> l(halvesMu_);
    for (auto& h : halves_) release(*h);
    halves_.clear();
    if (stream_) api_.streamDestroy(stream_);
    net_.reset();  // its progress thread calls wake() until it ends
  }
  static void notify(void* arg) { static_cast<NetProxy*>(arg)->wake(); }
  void wake() {
    {
      std::lock_guard<std::mutex> l(sleepMu_);
      ++wakes_;
    }
    cv_.notify_one();
  }
  // A thread the system refuses is an error naming it (startThread).
  Status start(std::unique_ptr<NetTransport> net, int dev) {
    net_ = std::move(net);
    dev_ = dev;
    return startThread("the network proxy's thread for device buffers", &thread_, [this] {
      nameThisThread("hoccl-proxy");
      run();
    });
  }
  // quiesce: the thread stops, then the network closes (its progress
  // thread ends, peers see the connections closed); the halves' memory,
  // which a launch that did not end may still use, stays.
  void shutDown() {
    stopThread();
    if (!net_) return;  // shut down already
    std::lock_guard<std::mutex> l(halvesMu_);
    for (auto& h : halves_) {
      if (h->mr) net_->deregMr(h->comm, h->mr);
      if (h->comm) (void)(h->send ? net_->closeSend(h->comm) : net_->closeRecv(h->comm));
      h->mr = nullptr;
      h->comm = nullptr;
    }
    net_.reset();
  }
  void stopThread() {
    if (!thread_.joinable()) return;
    {
      std::lock_guard<std::mutex> l(sleepMu_);
      stop_ = true;
    }
    cv_.notify_one();
    thread_.join();
  }
  // Waits (up to the timeout) until every message a kernel posted has been
  // sent: a kernel ends once its last message is in a slot, so its rank
  // may destroy the communicator while the proxy still has to send it.
  void drain() {
    if (!thread_.joinable()) return;
    const Deadline dl = Deadline::in(o_.timeoutSec);
    for (;;) {
      bool busy = false;
      {
        std::lock_guard<std::mutex> l(halvesMu_);
        for (const auto& h : halves_)
          busy = busy || (h->send && !h->failed && !h->closed && h->done < loadAcquire(&h->mem->tail));
      }
      if (!busy) return;
      if (dl.expired()) {
        HWARN(kSubNet, "device buffers: rank %d: the network proxy still had messages to send after %g s; "
              "closing its connections anyway", rank_, o_.timeoutSec);
        return;
      }
      wake();
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
  }
  NetTransport& net() { return *net_; }
  int dev() const { return dev_; }
  Status makeHalf(const NetCommMade& m, Path path, std::unique_ptr<Half>* out);
  void add(std::unique_ptr<Half> h) {
    std::lock_guard<std::mutex> l(halvesMu_);
    halves_.push_back(std::move(h));
  }
  const Half* find(const DeviceEdge& e) const {
    std::lock_guard<std::mutex> l(halvesMu_);
    for (const auto& h : halves_)
      if (h->e.from == e.from && h->e.to == e.to && h->e.link == e.link) return h.get();
    return nullptr;
  }
  std::string describeWait(const DeviceEdge& e) const;
  Status ensureStream() {
    if (stream_) return Status();
    return cuCheck(api_.streamCreate(&stream_, kStreamNonBlocking), "cuStreamCreate(network proxy)");
  }

 private:
  void run();
  bool progress(Half& h);
  bool progressSend(Half& h);
  bool progressRecv(Half& h);
  bool flushRecv(Half& h);
  // A copy issued on the proxy's stream for message k (its status), then
  // the message's event recorded behind it (copyEnded asks).
  Status recordCopy(Half& h, uint64_t k, const Status& copy);
  // Whether message k's size matches its header; else fails the half.
  bool arrivedWhole(Half& h, uint64_t k, const DevSlotHeader& hd);
  // gdr: the GPU frames and their dma-buf registration.
  Status makeGpuFrames(Half& h, size_t frameBytes);
  void fail(Half& h, const std::string& what, const Status& st);
  void lost(Half& h, const std::string& what, const Status& st);
  // The copy path: whether message k's copy has ended (kCudaSuccess) or
  // still runs (kCudaErrorNotReady); any other answer fails the half,
  // naming `what`.
  int copyEnded(Half& h, uint64_t k, const char* what) {
    const int rc = api_.eventQuery(h.events[k % kDevSlots]);
    if (rc != kCudaSuccess && rc != kCudaErrorNotReady) fail(h, what, cuCheck(rc, "cuEventQuery(network proxy)"));
    return rc;
  }
  void release(Half& h);

  DeviceConnOptions o_;
  const DeviceApi& api_;
  int rank_;
  std::unique_ptr<NetTransport> net_;
  int dev_ = 0;
  CuHandle stream_ = nullptr;  // the copy path's copies
  mutable std::mutex halvesMu_;
  std::vector<std::unique_ptr<Half>> halves_;
  std::mutex sleepMu_;
  std::condition_variable cv_;
  uint64_t wakes_ = 0;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace hoccl::cuda
