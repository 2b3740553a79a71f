// The TCP transport's byte movers (see socket_pump.h).
#include "transport/net/socket/socket_pump.h"

#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "base/log.h"

namespace hoccl {
namespace socknet {

// Best effort: a goodbye that does not fit the socket buffer now, or a
// sender with a header half written, leaves the peer to see an unexplained
// close, which is what an abandoned connection is.
void SocketPump::sayGoodbye(Comm* c) {
  if (!c->failed.ok() || c->ctrlFd < 0) return;
  if (c->isSend && c->ctrlOutDone < c->ctrlOut.size()) return;
  // Nor into a header its twin has half written on this socket.
  const Comm* t = c->twin;
  if (!c->isSend && t && t->sharedFd == c->ctrlFd && t->ctrlOutDone < t->ctrlOut.size()) return;
  uint64_t hdr[2] = {kGoodbye, 0};
  ssize_t n = ::send(c->isSend ? controlFd(c) : c->ctrlFd, hdr, sizeof hdr, MSG_NOSIGNAL | MSG_DONTWAIT);
  (void)n;
  // Unread bytes at close() would make the kernel reset the connection
  // instead of closing it, and a reset can overtake the goodbye: drained
  // on the sockets destroy() closes (not one the twin still reads).
  char sink[256];
  if (!(c->isSend && ownsPairedSocket(c)))
    while (::recv(c->ctrlFd, sink, sizeof sink, MSG_DONTWAIT) > 0) {
    }
  if (c->ownsShared)
    while (::recv(c->sharedFd, sink, sizeof sink, MSG_DONTWAIT) > 0) {
    }
}

void SocketPump::destroy(Comm* c) {
  if (Comm* t = c->twin) {
    t->twin = nullptr;
    if (t->sharedFd >= 0 && t->sharedFd == c->ctrlFd) {
      t->ownsShared = true;  // the twin still uses the socket
      c->ctrlFd = -1;
    } else if (t->isSend) {
      t->drainBack = true;  // the peer's headers still come to t's socket
    }
  }
  if (c->ctrlFd >= 0) close(c->ctrlFd);
  if (c->ownsShared) close(c->sharedFd);
  for (Stream& s : c->streams)
    if (s.fd >= 0) close(s.fd);
  delete c;
}

Status SocketPump::pair(Comm* s, Comm* r, bool sendOwns) {
  if (!s->isSend || r->isSend || s->twin || r->twin)
    return errorf(hocclInternalError, "socket transport: pairing needs an unpaired send and receive connection");
  // Nothing may have travelled on the socket that is given up.
  if (sendOwns ? r->ctrlInLen > 0 || !r->arrived.empty() || r->nextMessage > 0
               : s->nextMessage > 0 || !s->ctrlOut.empty())
    return errorf(hocclInternalError, "socket transport: connections with %s paired after use", s->peer.c_str());
  s->twin = r;
  r->twin = s;
  if (!sendOwns) {
    s->sharedFd = r->ctrlFd;
    return Status();
  }
  r->sharedFd = s->ctrlFd;
  s->heldBack = false;
  readControl(r);  // what the peer sent before this side paired
  return Status();
}

// Pairs arrived headers with posted receives, in order: each header takes
// the first unmatched buffer of the oldest receive with its tag (mu_ held).
void SocketPump::match(Comm* c) {
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
      fail(c, errorf(hocclInvalidUsage,
                     "socket transport: a %llu-byte message from %s does not fit the %zu-byte receive",
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
void SocketPump::failUnmatchable(Comm* c) {
  if (c->ctrlClosed.ok()) return;
  for (Request* r : c->posted)
    if (r->error.ok()) r->error = c->ctrlClosed;
  completed_ = true;
}

void SocketPump::complete(Request* r) {
  r->done = true;
  completed_ = true;
}

// Marks the comm and all its unfinished requests failed (mu_ held).
void SocketPump::fail(Comm* c, const Status& why) {
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

Status SocketPump::brokenPeer(Comm* c, const char* what, int err) {
  return errorf(hocclRemoteError, "socket transport: connection %s %s %s: %s", c->isSend ? "to" : "from",
                c->peer.c_str(), what, err ? strerror(err) : "closed by the peer");
}

// Writes or reads as much of stream s as the socket takes now.
void SocketPump::pumpStream(Comm* c, Stream& s) {
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
void SocketPump::markLost(Comm* c, int err) {
  if (c->goodbye || !c->lost.ok()) return;
  c->lost = errorf(hocclRemoteError,
                   "socket transport: connection %s %s lost: %s without a goodbye (the peer process exited or was "
                   "killed, or the link failed)",
                   c->isSend ? "to" : "from", c->peer.c_str(), err ? strerror(err) : "closed");
  completed_ = true;
  HINFO(kSubNet, "%s", c->lost.message().c_str());
}

// Sender: the only bytes that travel back are the receiver's goodbye,
// then the stream's end. Read by the progress thread, which polls for
// them: a send in the caller's thread makes no extra system call. Peeked
// first: a header that is not a goodbye is the peer's, who paired the two
// directions before this side did (pair() hands it to the twin).
void SocketPump::readBack(Comm* c) {
  if (ownsPairedSocket(c)) return;  // the twin reads this socket
  char buf[256];
  while (!c->ctrlEof && !c->heldBack) {
    const size_t want = c->drainBack ? sizeof buf : sizeof(uint64_t[2]);
    ssize_t n = ::recv(c->ctrlFd, buf, want, MSG_DONTWAIT | (c->drainBack ? 0 : MSG_PEEK));
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return;
    if (n <= 0) return socketEnded(c, n < 0 ? errno : 0, true);
    if (c->drainBack) continue;
    if (static_cast<size_t>(n) < want) return;  // the rest of the header is on its way
    uint64_t hdr[2];
    memcpy(hdr, buf, sizeof hdr);
    if (hdr[0] != kGoodbye) {
      c->heldBack = true;
      return;
    }
    n = ::recv(c->ctrlFd, buf, want, MSG_DONTWAIT);
    c->goodbye = true;
  }
}

// The control socket of c reached its end (err 0) or failed: for a sender
// reading back, or a receiver (and then its twin, if the socket is the
// twin's own).
void SocketPump::socketEnded(Comm* c, int err, bool sender) {
  if (sender) {
    c->ctrlEof = true;
    markLost(c, err);
    if (!c->goodbye) fail(c, brokenPeer(c, "failed", err));
    return;
  }
  Comm* t = c->twin;
  if (t && c->sharedFd >= 0 && c->sharedFd == t->ctrlFd) socketEnded(t, err, true);
  markLost(c, err);
  if (err) return fail(c, brokenPeer(c, "failed", err));
  // The peer closed: what was sent before it still arrives.
  c->ctrlClosed = brokenPeer(c, "failed", 0);
  failUnmatchable(c);
  HINFO(kSubNet, "socket transport: %s closed its connection", c->peer.c_str());
}

void SocketPump::writeControl(Comm* c) {
  while (c->ctrlOutDone < c->ctrlOut.size()) {
    ssize_t n = ::send(controlFd(c), c->ctrlOut.data() + c->ctrlOutDone, c->ctrlOut.size() - c->ctrlOutDone,
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
}

// Receiver: reads what the control stream has, one recv for as many
// headers and inline payloads as have arrived, and matches them.
void SocketPump::readControl(Comm* c) {
  if (c->ctrlIn.size() < kCtrlBuffer) c->ctrlIn.resize(kCtrlBuffer);
  while (c->ctrlClosed.ok() && c->failed.ok()) {
    const size_t room = c->ctrlIn.size() - c->ctrlInLen;
    ssize_t n = ::recv(controlFd(c), c->ctrlIn.data() + c->ctrlInLen, room, MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return;
    if (n <= 0) return socketEnded(c, n < 0 ? errno : 0, false);
    c->ctrlInLen += static_cast<size_t>(n);
    parseControl(c);
    // A short read emptied the socket; what comes later, the next pump
    // reads (the progress thread's poll is level-triggered).
    if (static_cast<size_t>(n) < room) return;
  }
}

// Takes every whole header (and inline payload) out of ctrlIn.
void SocketPump::parseControl(Comm* c) {
  constexpr size_t kHeader = sizeof(uint64_t[2]);
  size_t at = 0;
  while (c->failed.ok() && c->ctrlInLen - at >= kHeader) {
    uint64_t hdr[2];
    memcpy(hdr, c->ctrlIn.data() + at, kHeader);
    if (hdr[0] == kGoodbye) {
      c->goodbye = true;  // the peer closes in order: both directions
      if (c->twin) c->twin->goodbye = true;
      at += kHeader;
      continue;
    }
    const auto tag = static_cast<int32_t>(hdr[1]);
    if (carriedInline(hdr[0])) {
      if (c->ctrlInLen - at - kHeader < hdr[0]) break;  // the payload's rest is on its way
      c->arrived.push_back({hdr[0], tag, std::string(c->ctrlIn.data() + at + kHeader, size_t(hdr[0]))});
      at += kHeader + size_t(hdr[0]);
    } else {
      c->arrived.push_back({hdr[0], tag, std::string()});
      at += kHeader;
    }
    match(c);
  }
  if (at == 0) return;
  memmove(c->ctrlIn.data(), c->ctrlIn.data() + at, c->ctrlInLen - at);
  c->ctrlInLen -= at;
}

// The progress thread's pump of a control stream.
void SocketPump::pumpControl(Comm* c) {
  if (!c->isSend) return readControl(c);
  readBack(c);
  if (c->failed.ok()) writeControl(c);
}

bool SocketPump::pumpAll(Comm* c) {
  if (c->isSend) writeControl(c);
  else readControl(c);
  bool pending = c->isSend && c->ctrlOut.size() > c->ctrlOutDone;
  for (Stream& s : c->streams) {
    if (!c->failed.ok()) return false;
    if (!s.queue.empty()) pumpStream(c, s);
    pending |= !s.queue.empty();
  }
  return pending && c->failed.ok();
}

}  // namespace socknet
}  // namespace hoccl
