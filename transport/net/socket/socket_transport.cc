// The TCP transport's requests and progress thread (see socket_net.h).
#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "base/log.h"
#include "transport/net/handle_steps.h"
#include "transport/net/socket/socket_pump.h"
#include "base/thread_name.h"

namespace hoccl {
namespace socknet {

std::vector<Part> splitMessage(uint64_t k, size_t size, int n) {
  std::vector<Part> parts;
  if (size == 0) return parts;
  if (size < kSplitMin || n == 1) {
    parts.push_back({static_cast<int>(k % n), 0, size});
    return parts;
  }
  for (int i = 0; i < n; ++i) {
    size_t a = size * i / n, b = size * (i + 1) / n;
    if (b > a) parts.push_back({i, a, b - a});
  }
  return parts;
}

Status connectStep(ConnectState* st, const Handle& h, Comm** out);  // socket_connect.cc
Status acceptStep(ListenComm* lc, Comm** out);                       // socket_connect.cc
Status listenOn(const SocketNetOptions& opt, ListenComm** out, Handle* h);
Status localAddress(const SocketNetOptions& opt, SockAddr* addr, std::string* ifname);

class SocketTransport : public NetTransport, private SocketPump {
 public:
  explicit SocketTransport(const SocketNetOptions& opt) : opt_(opt) {}
  // The progress thread and its wake-up descriptor: a process out of
  // either gets an error naming it.
  Status start() {
    wake_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (wake_ < 0) return sysErrorf("socket transport: eventfd");
    return startThread("the socket transport's progress thread", &thread_, [this] { progressLoop(); });
  }
  ~SocketTransport() override {
    stop_ = true;
    if (thread_.joinable()) {
      kick();
      thread_.join();
    }
    for (Comm* c : comms_) destroy(c);
    if (wake_ >= 0) close(wake_);
  }

  const char* name() const override { return "Socket"; }
  int devices() const override { return 1; }

  Status getProperties(int dev, NetProperties* p) const override {
    if (dev != 0) return errorf(hocclInvalidArgument, "socket transport: device %d does not exist (1 device)", dev);
    SockAddr a;
    std::string ifname;
    HOCCL_TRY(localAddress(opt_, &a, &ifname));
    *p = NetProperties();
    p->name = ifname;
    p->ptrSupport = kPtrHost;
    p->gdrWhy = "TCP sockets send from and receive into host memory";
    p->speedMbps = readSpeedMbps(ifname);
    p->maxRecvs = kMaxRecvs;
    p->maxP2pBytes = size_t(1) << 30;
    char path[256];
    snprintf(path, sizeof path, "/sys/class/net/%s/device", ifname.c_str());
    char real[4096];
    if (realpath(path, real)) p->pciPath = real;
    return Status();
  }

  Status listen(int dev, void* handle, void** listenComm) override {
    if (dev != 0) return errorf(hocclInvalidArgument, "socket transport: device %d does not exist", dev);
    ListenComm* lc = nullptr;
    Handle h{};
    HOCCL_TRY(listenOn(opt_, &lc, &h));
    memset(handle, 0, kNetHandleBytes);
    memcpy(handle, &h, sizeof h);
    *listenComm = lc;
    return Status();
  }

  Status connect(int dev, void* handle, void** sendComm) override {
    *sendComm = nullptr;
    Handle h;
    memcpy(&h, handle, sizeof h);
    if (h.magic != kMagic) return errorf(hocclInvalidArgument, "socket transport: not a socket transport handle");
    return hoccl::connectStep<Handle, Comm>(
        handle, [] { return new ConnectState(); }, [](const Handle& h, Comm** c) { return connectStep(h.state, h, c); },
        [](ConnectState* s) { delete s; }, [this](Comm* c) { adopt(c); }, sendComm);
  }

  Status accept(void* listenComm, void** recvComm) override {
    return hoccl::acceptStep<Comm>([&](Comm** c) { return acceptStep(static_cast<ListenComm*>(listenComm), c); },
                                   [this](Comm* c) { adopt(c); }, recvComm);
  }

  Status regMr(void*, void*, size_t, int type, void** mhandle) override {
    if (!(type & kPtrHost))
      return errorf(hocclInvalidArgument, "socket transport registers host memory only (type %#x)", type);
    *mhandle = this;
    return Status();
  }
  Status deregMr(void*, void*) override { return Status(); }

  Status isend(void* sendComm, void* data, size_t size, int tag, void*, void** request) override {
    *request = nullptr;
    Comm* c = static_cast<Comm*>(sendComm);
    std::lock_guard<std::mutex> lock(mu_);
    HOCCL_TRY(c->failed);
    // A receiver may group kMaxRecvs sends in each of its kNetMaxRequests
    // receives, so a sender must take that many before refusing.
    if (c->inflight >= kNetMaxRequests * kMaxRecvs) return Status();
    auto r = std::make_unique<Request>();
    r->comm = c;
    r->isSend = true;
    Slot& slot = r->slots[0];
    slot.buf = static_cast<char*>(data);
    slot.size = size;
    slot.tag = tag;
    uint64_t hdr[2] = {size, static_cast<uint64_t>(static_cast<uint32_t>(tag))};
    c->ctrlOut.append(reinterpret_cast<const char*>(hdr), sizeof hdr);
    if (carriedInline(size)) {
      // Copied behind the header: the buffer is free at once.
      c->ctrlOut.append(slot.buf, size);
      c->headerOwners.emplace_back(c->ctrlOut.size(), nullptr);
      r->headerDone = true;
      complete(r.get());
    } else {
      c->headerOwners.emplace_back(c->ctrlOut.size(), r.get());
      for (const Part& p : splitMessage(c->nextMessage, size, static_cast<int>(c->streams.size()))) {
        c->streams[p.stream].queue.push_back({slot.buf + p.start, p.len, r.get()});
        ++r->partsLeft;
      }
    }
    ++c->nextMessage;
    ++c->inflight;
    *request = r.get();
    c->requests.push_back(std::move(r));
    // Write what the sockets take now, in the caller's thread: a small
    // message then leaves without waking the progress thread.
    if (pumpAll(c)) kick();
    return Status();
  }

  Status irecv(void* recvComm, int n, void** data, size_t* sizes, int* tags, void**, void** request) override {
    *request = nullptr;
    if (n < 1 || n > kMaxRecvs)
      return errorf(hocclInvalidArgument, "socket transport: %d grouped receives (1 to %d)", n, kMaxRecvs);
    Comm* c = static_cast<Comm*>(recvComm);
    std::lock_guard<std::mutex> lock(mu_);
    HOCCL_TRY(c->failed);
    if (c->inflight >= kNetMaxRequests) return Status();
    auto r = std::make_unique<Request>();
    r->comm = c;
    r->n = n;
    r->anyTag = tags == nullptr;
    for (int i = 0; i < n; ++i) {
      r->slots[i].buf = static_cast<char*>(data[i]);
      r->slots[i].capacity = sizes[i];
      r->slots[i].tag = tags ? tags[i] : 0;
    }
    c->posted.push_back(r.get());
    ++c->inflight;
    *request = r.get();
    c->requests.push_back(std::move(r));
    match(c);
    failUnmatchable(c);
    if (pumpAll(c)) kick();
    return Status();
  }

  Status test(void* request, int* done, int* sizes) override {
    Request* r = static_cast<Request*>(request);
    std::lock_guard<std::mutex> lock(mu_);
    *done = 0;
    const bool pending = !r->done && r->error.ok() && r->comm->failed.ok() && pumpAll(r->comm);
    // A header read here queued parts on streams the progress thread does
    // not poll yet: it would find them only at its next 100 ms timeout.
    // Parts this pump already moved need no one (a small message then
    // costs the progress thread no wake-up).
    if (pollSetStale_) {
      pollSetStale_ = false;
      if (pending) kick();
    }
    if (!r->error.ok()) return r->error;
    if (!r->done) return Status();
    *done = 1;
    if (sizes)
      for (int i = 0; i < r->n; ++i) sizes[i] = static_cast<int>(r->slots[i].size);
    Comm* c = r->comm;
    retireRequest(c, r);
    return Status();
  }

  Status pairControl(void* sendComm, void* recvComm, bool sendOwns) override {
    if (!opt_.duplex) return Status();
    std::lock_guard<std::mutex> lock(mu_);
    HOCCL_TRY(pair(static_cast<Comm*>(sendComm), static_cast<Comm*>(recvComm), sendOwns));
    kick();  // the poll set changes
    return Status();
  }

  void consumerWaiting(bool sleeping) override {
    if (!opt_.consumerPolls) return;
    // The first sleeper has the progress thread rebuild its poll set with
    // the headers' sockets; level-triggered, it sees what already came.
    if (sleeping) {
      if (sleepers_.fetch_add(1, std::memory_order_acq_rel) == 0) kick();
    } else {
      sleepers_.fetch_sub(1, std::memory_order_acq_rel);
    }
  }

  Status health(void* comm) override {
    Comm* c = static_cast<Comm*>(comm);
    std::lock_guard<std::mutex> lock(mu_);
    if (c->goodbye) return Status();
    return c->lost.ok() ? c->failed : c->lost;
  }

  Status closeSend(void* comm) override { return closeComm(static_cast<Comm*>(comm)); }
  Status closeRecv(void* comm) override { return closeComm(static_cast<Comm*>(comm)); }
  Status closeListen(void* listenComm) override {
    auto* lc = static_cast<ListenComm*>(listenComm);
    for (auto& p : lc->unidentified) close(p.fd);
    for (auto& [id, fds] : lc->byConn)
      for (int fd : fds)
        if (fd >= 0) close(fd);
    delete lc;
    return Status();
  }

 private:
  static int readSpeedMbps(const std::string& ifname) {
    char path[256];
    snprintf(path, sizeof path, "/sys/class/net/%s/speed", ifname.c_str());
    FILE* f = fopen(path, "r");
    int speed = 0;
    if (f) {
      if (fscanf(f, "%d", &speed) != 1 || speed < 0) speed = 0;
      fclose(f);
    }
    return speed > 0 ? speed : 10000;  // unknown (virtual): assume 10 Gbit/s
  }

  void kick() {
    uint64_t one = 1;
    ssize_t rc = write(wake_, &one, sizeof one);
    (void)rc;
  }

  void adopt(Comm* c) {
    std::lock_guard<std::mutex> lock(mu_);
    comms_.push_back(c);
    kick();
  }

  Status closeComm(Comm* c) {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = comms_.begin(); it != comms_.end(); ++it)
      if (*it == c) {
        comms_.erase(it);
        break;
      }
    sayGoodbye(c);
    destroy(c);
    return Status();
  }

  void progressLoop() {
    nameThisThread("hoccl-net");
    std::vector<pollfd> fds;
    std::vector<std::pair<Comm*, int>> who;  // stream index, -1 control
    while (!stop_) {
      fds.clear();
      who.clear();
      fds.push_back({wake_, POLLIN, 0});
      who.emplace_back(nullptr, 0);
      // Arriving headers: always, or while the consumer sleeps; otherwise
      // only the peer's close (a dead peer is reported between calls too).
      const bool watch = !opt_.consumerPolls || sleepers_.load(std::memory_order_acquire) > 0;
      {
        std::lock_guard<std::mutex> lock(mu_);
        pollSetStale_ = false;
        for (Comm* c : comms_) {
          if (!c->failed.ok()) continue;
          // A sender writes its headers on controlFd and reads back on
          // its own socket (not when a twin reads that one); the two differ
          // when it borrows its twin's (socket_net.h).
          const bool readsBack = c->isSend && !c->ctrlEof && !c->heldBack && !ownsPairedSocket(c);
          const short out = c->isSend && c->ctrlOut.size() > c->ctrlOutDone ? POLLOUT : 0;
          const short watchIn = c->ctrlClosed.ok() ? (watch ? POLLIN : POLLRDHUP) : 0;
          const short in = c->isSend ? (readsBack ? POLLIN : 0) : watchIn;
          const bool apart = c->isSend && controlFd(c) != c->ctrlFd;
          if (out | (apart ? 0 : in)) {
            fds.push_back({controlFd(c), static_cast<short>(out | (apart ? 0 : in)), 0});
            who.emplace_back(c, -1);
          }
          if (apart && in) {
            fds.push_back({c->ctrlFd, in, 0});
            who.emplace_back(c, -1);
          }
          for (size_t i = 0; i < c->streams.size(); ++i) {
            if (c->streams[i].queue.empty()) continue;
            fds.push_back({c->streams[i].fd, static_cast<short>(c->isSend ? POLLOUT : POLLIN), 0});
            who.emplace_back(c, static_cast<int>(i));
          }
        }
      }
      int rc = poll(fds.data(), fds.size(), 100);
      if (rc <= 0) continue;
      if (fds[0].revents) {
        uint64_t v;
        ssize_t r = read(wake_, &v, sizeof v);
        (void)r;
      }
      {
        std::lock_guard<std::mutex> lock(mu_);
        for (size_t i = 1; i < fds.size(); ++i) {
          if (!fds[i].revents) continue;
          Comm* c = who[i].first;
          if (std::find(comms_.begin(), comms_.end(), c) == comms_.end() || !c->failed.ok()) continue;
          if (who[i].second < 0) pumpControl(c);
          else pumpStream(c, c->streams[who[i].second]);
        }
      }
      if (completed_.exchange(false) && opt_.notify) opt_.notify(opt_.notifyArg);
    }
  }

  SocketNetOptions opt_;
  std::mutex mu_;
  std::vector<Comm*> comms_;
  int wake_ = -1;
  std::atomic<bool> stop_{false};
  std::atomic<int> sleepers_{0};  // consumers asleep on their doorbell (consumerWaiting)
  std::thread thread_;
};

}  // namespace socknet

Status createSocketTransport(const SocketNetOptions& opt, std::unique_ptr<NetTransport>* out) {
  if (opt.streams < 1 || opt.streams > socknet::kMaxStreams)
    return errorf(hocclInvalidArgument, "socket transport: %d streams (1 to %d)", opt.streams, socknet::kMaxStreams);
  std::unique_ptr<socknet::SocketTransport> t(new socknet::SocketTransport(opt));
  HOCCL_TRY(t->start());
  *out = std::move(t);
  return Status();
}

}  // namespace hoccl
