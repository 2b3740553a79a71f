// TCP network transport: internals shared by its two files.
//
// A connection is one control stream (a 16-byte header per message: size
// and tag) plus N data streams. Messages up to kInlineMax bytes follow their
// header on the control stream (one segment on one socket: the receiver
// that reads the header has the data). Larger ones go whole to one data
// stream in turn, or from kSplitMin up are cut into N equal parts, one per
// stream, so one connection can fill a link that one TCP stream cannot. Sender and
// receiver compute the same split from the size, and every stream carries
// its parts in message order, so the k-th isend matches the k-th irecv.
// One progress thread per transport moves the bytes with non-blocking
// sockets and poll(). Two ranks that send to each other pair their two
// connections (pairControl): both directions' headers and inline messages
// then travel on one control socket, so that each direction's TCP
// acknowledgements ride on the other's messages instead of costing a bare
// segment (and, over veth, the whole receive path of the peer) per message.
#pragma once

#include <atomic>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "base/socket.h"
#include "transport/net/net.h"

namespace hoccl {
namespace socknet {

constexpr uint64_t kMagic = 0x484f434c534f434bull;  // "HOCLSOCK"
constexpr size_t kSplitMin = 256 << 10;            // smaller messages use one stream
constexpr int kMaxStreams = 16;
// A control-stream header with this size is a goodbye, not a message: the
// side that closes a connection in order sends it (the receiver sends it
// back the other way) so that the peer can tell a closed communicator from
// a process that exited or was killed, which the kernel closes just alike.
constexpr uint64_t kGoodbye = ~0ull;
// Receives one irecv may group (NCCL's maxRecvs). The i-th message of a
// group goes to the first unfilled buffer whose tag is the message's tag,
// so the senders sharing one connection (NCCL's PXN) may send in any order
// within the group; groups themselves are matched in FIFO order.
constexpr int kMaxRecvs = 8;
// Messages up to this size travel on the control stream right behind their
// header: one segment, one socket, and the receiver that reads the header
// has the payload (small messages never wait on a data stream).
constexpr uint64_t kInlineMax = 4096;
// The receiver's control-stream buffer: room for several inline messages.
constexpr size_t kCtrlBuffer = 64 << 10;
inline bool carriedInline(uint64_t size) { return size > 0 && size <= kInlineMax; }

struct ConnectState;

struct Handle {
  uint64_t magic;
  SockAddr addr;
  int32_t streams;
  ConnectState* state;  // the connector's progress between connect() calls
};
static_assert(sizeof(Handle) <= kNetHandleBytes);

struct Hello {
  uint64_t magic;
  uint64_t connId;
  int32_t index;  // -1: control stream
  int32_t streams;
};

struct Comm;

// One buffer of a request: a send has one, a grouped receive up to kMaxRecvs.
struct Slot {
  char* buf = nullptr;
  size_t size = 0;      // bytes sent / received
  size_t capacity = 0;  // receive buffer size
  int tag = 0;
  bool matched = false; // receive: a message header was paired with it
};

struct Request {
  Comm* comm = nullptr;
  bool isSend = false;
  int n = 1;            // slots in use
  Slot slots[kMaxRecvs];
  int matchedSlots = 0;
  bool anyTag = false;  // irecv without tags: buffers taken in order
  int partsLeft = 0;
  bool headerDone = false;  // send: header written; receive: every slot matched
  bool done = false;
  Status error;
};

struct Piece {
  char* ptr;
  size_t left;
  Request* req;
};

struct Stream {
  int fd = -1;
  std::deque<Piece> queue;
};

struct Comm {
  bool isSend = false;
  std::string peer;        // address, for messages
  int ctrlFd = -1;
  std::vector<Stream> streams;
  uint64_t nextMessage = 0;  // message index, picks the stream of small messages
  // Sender: serialized headers not yet written.
  std::string ctrlOut;
  size_t ctrlOutDone = 0;
  // Where each message's bytes end in ctrlOut, and its request (null: an
  // inline message, complete when queued).
  std::deque<std::pair<size_t, Request*>> headerOwners;
  // Receiver: control-stream bytes read and not yet parsed (one recv takes
  // as many headers and inline payloads as have arrived), headers without a
  // posted receive, posted receives without a header.
  std::vector<char> ctrlIn;
  size_t ctrlInLen = 0;
  struct Arrived {
    uint64_t size;
    int32_t tag;
    std::string payload;  // inline messages
  };
  std::deque<Arrived> arrived;
  std::deque<Request*> posted;
  int inflight = 0;
  Status failed;
  // Receiver: the peer closed the control stream. Messages whose header
  // arrived still complete from the data streams; later receives fail.
  Status ctrlClosed;
  // The peer sent its goodbye: it closed its side in order.
  bool goodbye = false;
  // Sender: the control stream reached its end (only goodbyes travel back).
  bool ctrlEof = false;
  // The connection ended without a goodbye (the peer's process died, or the
  // link did): reported by health() even when no request was pending.
  Status lost;
  std::vector<std::unique_ptr<Request>> requests;  // owned until tested done
  // Both directions between two ranks on one control socket (pair()): each
  // direction's small messages then carry the TCP acknowledgements of the
  // other's, where two one-way sockets send a bare acknowledgement for
  // every message. The owner's ctrlFd is that socket; its twin (the other
  // direction's comm) uses it as sharedFd, and closes it if the owner is
  // destroyed first (ownsShared). A sender's own socket, when its twin
  // reads it, carries the peer's headers: the sender reads no goodbye there
  // (and, once the twin is gone, discards what comes: drainBack).
  Comm* twin = nullptr;
  int sharedFd = -1;
  bool ownsShared = false;
  bool drainBack = false;
  // Sender: its socket holds bytes that are not a goodbye (the peer paired
  // first): left for the twin to read once this side pairs.
  bool heldBack = false;
};

// The socket this comm's headers travel on (written by a sender, read by a
// receiver).
inline int controlFd(const Comm* c) { return c->sharedFd >= 0 ? c->sharedFd : c->ctrlFd; }
// A paired comm that owns the shared socket: for a sender, its twin reads
// that socket (the sender reads no goodbye there).
inline bool ownsPairedSocket(const Comm* c) { return c->twin && c->sharedFd < 0; }

struct ListenComm {
  Socket listener;
  SockAddr addr;
  int streams = 2;
  struct Partial {
    int fd;
    char buf[sizeof(Hello)];
    size_t len;
  };
  std::vector<Partial> unidentified;
  std::map<uint64_t, std::vector<int>> byConn;  // connId -> fds (index+1; 0 = control)
};

struct ConnectState {
  uint64_t connId = 0;
  std::vector<int> fds;  // 0: control, 1..N: data
  std::vector<bool> ready;
};

// Splits a message of `size` bytes over `n` streams: part i of message
// number k is [start, start+len) on stream `stream`.
struct Part {
  int stream;
  size_t start, len;
};
std::vector<Part> splitMessage(uint64_t k, size_t size, int n);

}  // namespace socknet
}  // namespace hoccl
