// The TCP transport's requests and progress thread (see socket_net.h).
#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "src/base/log.h"
#include "transport/net/handle_steps.h"
#include "transport/net/socket/socket_net.h"
#include "src/base/thread_name.h"

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

class SocketTransport : public NetTransport {
 public:
  explicit SocketTransport(const SocketNetOptions& opt) : opt_(opt) {
    wake_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    thread_ = std::thread([this] { progressLoop(); });
  }
  ~SocketTransport() override {
    stop_ = true;
    kick();
    thread_.join();
    for (Comm* c : comms_) destroy(c);
    close(wake_);
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

  // Best effort: a goodbye that does not fit the socket buffer now, or a
  // sender with a header half written, leaves the peer to see an unexplained
  // close, which is what an abandoned connection is.
  static void sayGoodbye(Comm* c) {
    if (!c->failed.ok() || c->ctrlFd < 0) return;
    if (c->isSend && c->ctrlOutDone < c->ctrlOut.size()) return;
    uint64_t hdr[2] = {kGoodbye, 0};
    ssize_t n = ::send(c->ctrlFd, hdr, sizeof hdr, MSG_NOSIGNAL | MSG_DONTWAIT);
    (void)n;
    // Unread bytes at close() would make the kernel reset the connection
    // instead of closing it, and a reset can overtake the goodbye.
    char sink[256];
    while (::recv(c->ctrlFd, sink, sizeof sink, MSG_DONTWAIT) > 0) {
    }
  }

  static void destroy(Comm* c) {
    if (c->ctrlFd >= 0) close(c->ctrlFd);
    for (Stream& s : c->streams)
      if (s.fd >= 0) close(s.fd);
    delete c;
  }

  // Pairs arrived headers with posted receives, in order: each header takes
  // the first unmatched buffer of the oldest receive with its tag (mu_ held).
  void match(Comm* c) {
    while (!c->arrived.empty() && !c->posted.empty()) {
      Comm::Arrived a = std::move(c->arrived.front());
      const uint64_t size = a.size;
      const int32_t tag = a.tag;
      Request* r = c->posted.front();
      c->arrived.pop_front();
      Slot* slot = nullptr;
      for (int i = 0; i < r->n && !slot; ++i)
        if (!r->slots[i].matched && (r->anyTag || r->slots[i].tag == tag)) slot = &r->slots[i];
      if (!slot) {
        fail(c, errorf(hocclInvalidUsage, "socket transport: a message with tag %d from %s matches no buffer of the "
                       "%d-buffer receive posted for it", tag, c->peer.c_str(), r->n));
        return;
      }
      if (size > slot->capacity) {
        fail(c, errorf(hocclInvalidUsage, "socket transport: a %llu-byte message from %s does not fit the %zu-byte receive",
                       static_cast<unsigned long long>(size), c->peer.c_str(), slot->capacity));
        return;
      }
      slot->matched = true;
      slot->size = size;
      if (carriedInline(size)) memcpy(slot->buf, a.payload.data(), size);
      else for (const Part& p : splitMessage(c->nextMessage, size, static_cast<int>(c->streams.size()))) {
        pollSetStale_ |= c->streams[p.stream].queue.empty();
        c->streams[p.stream].queue.push_back({slot->buf + p.start, p.len, r});
        ++r->partsLeft;
      }
      ++c->nextMessage;
      if (++r->matchedSlots < r->n) continue;
      c->posted.pop_front();
      r->headerDone = true;
      if (r->partsLeft == 0) complete(r);
    }
  }

  // After the peer closed its control stream, receives with no header can
  // never complete (mu_ held).
  void failUnmatchable(Comm* c) {
    if (c->ctrlClosed.ok()) return;
    for (Request* r : c->posted)
      if (r->error.ok()) r->error = c->ctrlClosed;
    completed_ = true;
  }

  void complete(Request* r) {
    r->done = true;
    completed_ = true;
  }

  // Marks the comm and all its unfinished requests failed (mu_ held).
  void fail(Comm* c, const Status& why) {
    if (!c->failed.ok()) return;
    c->failed = why;
    for (auto& r : c->requests)
      if (!r->done) r->error = why;
    for (Stream& s : c->streams) s.queue.clear();
    completed_ = true;
    // A peer closing an idle connection is how a job ends; only a failure
    // with work outstanding is worth a warning.
    if (!c->requests.empty()) HWARN(kSubNet, "%s", why.message().c_str());
    else HINFO(kSubNet, "%s", why.message().c_str());
  }

  Status brokenPeer(Comm* c, const char* what, int err) {
    return errorf(hocclRemoteError, "socket transport: connection %s %s %s: %s", c->isSend ? "to" : "from",
                  c->peer.c_str(), what, err ? strerror(err) : "closed by the peer");
  }

  // Writes or reads as much of stream s as the socket takes now.
  void pumpStream(Comm* c, Stream& s) {
    while (!s.queue.empty()) {
      Piece& p = s.queue.front();
      ssize_t n = c->isSend ? ::send(s.fd, p.ptr, p.left, MSG_NOSIGNAL | MSG_DONTWAIT)
                            : ::recv(s.fd, p.ptr, p.left, MSG_DONTWAIT);
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return;
      if (n <= 0) {
        fail(c, brokenPeer(c, c->isSend ? "failed while sending" : "failed while receiving", n < 0 ? errno : 0));
        return;
      }
      p.ptr += n;
      p.left -= static_cast<size_t>(n);
      if (p.left == 0) {
        Request* r = p.req;
        s.queue.pop_front();
        if (--r->partsLeft == 0 && r->headerDone) complete(r);
      }
    }
  }

  // The peer went away without a goodbye (mu_ held).
  void markLost(Comm* c, int err) {
    if (c->goodbye || !c->lost.ok()) return;
    c->lost = errorf(hocclRemoteError,
                     "socket transport: connection %s %s lost: %s without a goodbye (the peer process exited or was "
                     "killed, or the link failed)",
                     c->isSend ? "to" : "from", c->peer.c_str(), err ? strerror(err) : "closed");
    completed_ = true;
    HINFO(kSubNet, "%s", c->lost.message().c_str());
  }

  // Reads the control stream into buf until *have reaches want: 1 when it
  // has, 0 if the stream has no more bytes now, -1 at its end (*err = 0) or
  // on an error (*err = errno) (mu_ held).
  static int readControl(Comm* c, char* buf, size_t want, size_t* have, int* err) {
    while (*have < want) {
      ssize_t n = ::recv(c->ctrlFd, buf + *have, want - *have, MSG_DONTWAIT);
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return 0;
      if (n <= 0) {
        *err = n < 0 ? errno : 0;
        return -1;
      }
      *have += static_cast<size_t>(n);
    }
    return 1;
  }

  // The next 16-byte header of the control stream (readControl's results).
  static int readHeader(Comm* c, uint64_t hdr[2], int* err) {
    const int got = readControl(c, c->ctrlIn, sizeof c->ctrlIn, &c->ctrlInLen, err);
    if (got == 1) {
      memcpy(hdr, c->ctrlIn, sizeof c->ctrlIn);
      c->ctrlInLen = 0;
    }
    return got;
  }

  void pumpControl(Comm* c) {
    uint64_t hdr[2];
    int err = 0;
    if (c->isSend) {
      // The only bytes that travel back are the receiver's goodbye; then
      // the stream's end.
      while (!c->ctrlEof) {
        const int got = readHeader(c, hdr, &err);
        if (got == 0) break;
        if (got < 0) {
          c->ctrlEof = true;
          markLost(c, err);
          if (!c->goodbye) return fail(c, brokenPeer(c, "failed", err));
          break;
        }
        if (hdr[0] != kGoodbye)
          return fail(c, errorf(hocclInternalError, "socket transport: unexpected bytes from receiver %s", c->peer.c_str()));
        c->goodbye = true;
      }
      while (c->ctrlOutDone < c->ctrlOut.size()) {
        ssize_t n = ::send(c->ctrlFd, c->ctrlOut.data() + c->ctrlOutDone, c->ctrlOut.size() - c->ctrlOutDone,
                           MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return;
        if (n <= 0) return fail(c, brokenPeer(c, "failed while sending", errno));
        c->ctrlOutDone += static_cast<size_t>(n);
        while (!c->headerOwners.empty() && c->headerOwners.front().first <= c->ctrlOutDone) {
          Request* r = c->headerOwners.front().second;
          c->headerOwners.pop_front();
          if (!r) continue;  // inline: completed when queued
          r->headerDone = true;
          if (r->partsLeft == 0) complete(r);
        }
      }
      c->ctrlOut.clear();
      c->ctrlOutDone = 0;
      return;
    }
    while (c->ctrlClosed.ok()) {
      if (c->reading) {
        // The rest of an inline payload.
        Comm::Arrived& a = *c->reading;
        const int got = readControl(c, a.payload.data(), a.size, &c->readingLen, &err);
        if (got == 0) return;
        if (got < 0) return fail(c, brokenPeer(c, "failed while receiving", err));
        c->arrived.push_back(std::move(a));
        c->reading.reset();
        match(c);
        continue;
      }
      const int got = readHeader(c, hdr, &err);
      if (got == 0) return;
      if (got < 0) {
        markLost(c, err);
        if (err) return fail(c, brokenPeer(c, "failed", err));
        // The peer closed: what was sent before it still arrives.
        c->ctrlClosed = brokenPeer(c, "failed", 0);
        failUnmatchable(c);
        HINFO(kSubNet, "socket transport: %s closed its connection", c->peer.c_str());
        return;
      }
      if (hdr[0] == kGoodbye) {
        c->goodbye = true;
        continue;
      }
      if (carriedInline(hdr[0])) {
        c->reading = Comm::Arrived{hdr[0], static_cast<int32_t>(hdr[1]), std::string(size_t(hdr[0]), '\0')};
        c->readingLen = 0;
        continue;
      }
      c->arrived.push_back({hdr[0], static_cast<int32_t>(hdr[1]), std::string()});
      match(c);
    }
  }

  // Moves what can move on every socket of c without waiting; returns true
  // if work remains for the progress thread (mu_ held).
  bool pumpAll(Comm* c) {
    pumpControl(c);
    bool pending = c->isSend && c->ctrlOut.size() > c->ctrlOutDone;
    for (Stream& s : c->streams) {
      if (!c->failed.ok()) return false;
      if (!s.queue.empty()) pumpStream(c, s);
      pending |= !s.queue.empty();
    }
    return pending && c->failed.ok();
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
          short ctrlEvents = c->isSend ? static_cast<short>((c->ctrlOut.size() > c->ctrlOutDone ? POLLOUT : 0) |
                                                           (c->ctrlEof ? 0 : POLLIN))
                                       : (c->ctrlClosed.ok() ? (watch ? POLLIN : POLLRDHUP) : 0);
          if (ctrlEvents) {
            fds.push_back({c->ctrlFd, ctrlEvents, 0});
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
  std::atomic<bool> completed_{false};
  std::atomic<int> sleepers_{0};  // consumers asleep on their doorbell (consumerWaiting)
  // A stream got work after the progress thread built its poll set (mu_).
  bool pollSetStale_ = false;
  std::thread thread_;
};

}  // namespace socknet

Status createSocketTransport(const SocketNetOptions& opt, std::unique_ptr<NetTransport>* out) {
  if (opt.streams < 1 || opt.streams > socknet::kMaxStreams)
    return errorf(hocclInvalidArgument, "socket transport: %d streams (1 to %d)", opt.streams, socknet::kMaxStreams);
  out->reset(new socknet::SocketTransport(opt));
  return Status();
}

}  // namespace hoccl
