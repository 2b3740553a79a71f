// The connection interface every transport implements. A connection is one
// direction of one channel between two ranks, made of fixed-size slots:
// the sender fills a slot and posts it, the receiver peeks at it, consumes
// it in place and releases it. All calls are non-blocking; the executor
// polls them and sleeps on the rank's doorbell when nothing moves.
//
// This header is the whole transport-neutral interface: the executor and
// the communicator use nothing else of a transport. Backends
// (transport/shm, transport/net) implement it and never include each
// other; transport/links owns one of each and routes every connection to one.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace hoccl {

// Travels at the head of every slot: which call the data belongs to, so a
// call that differs across ranks is caught on its first message.
struct SlotHeader {
  uint64_t opSeq;   // per-communicator sequence number of the call
  uint64_t count;   // the call's count argument
  uint32_t bytes;   // payload bytes in this slot
  uint8_t coll;
  uint8_t dtype;
  uint8_t op;
  uint8_t flags;
  int32_t root;
  int32_t sender;
  // The transport's own: shared memory carries payloads of up to 24 bytes
  // here and the slot's sequence stamp last, so a small message is one
  // cache line from sender to receiver.
  uint8_t reserved[32];
};
static_assert(sizeof(SlotHeader) == 64, "one cache line");

// SlotHeader::flags: the payload is not the data but a DirectRef to it in
// the sender's memory, which the receiver reads itself (one copy instead of
// two). The sender keeps that memory unchanged until the slot is released.
constexpr uint8_t kSlotDirect = 0x1;
struct DirectRef {
  uint64_t address;  // in the sender's address space
};

enum class DirectPath : uint8_t { None, Mapped, Fetched };

class SendConn {
 public:
  virtual ~SendConn() = default;
  // A free slot (header + payload of slotBytes()), or false if all are in
  // flight.
  virtual bool tryAcquire(SlotHeader** header, void** payload) = 0;
  // Publishes the slot returned by the last tryAcquire and wakes the peer.
  virtual void post() = 0;
  virtual size_t slotBytes() const = 0;
  virtual int peer() const = 0;
  // How the receiver can read this rank's memory, if it can, so that a slot
  // may carry a DirectRef: Mapped (same process: in place), Fetched
  // (cross-memory attach: it copies it out once, with a system call).
  virtual DirectPath direct() const { return DirectPath::None; }
  // True once the receiver has released every slot posted so far.
  virtual bool drained() const { return true; }
  // Why the connection can no longer make progress (a dead peer, a reset
  // socket), or "" while it is healthy.
  virtual std::string failure() const { return ""; }
  // Why the connection broke while idle (the peer's process is gone, the
  // link failed), found without a pending send; "" while it is healthy or
  // the peer closed it in order.
  virtual std::string health() const { return ""; }
};

class RecvConn {
 public:
  virtual ~RecvConn() = default;
  // The oldest unreleased slot, or false if none has arrived.
  virtual bool tryPeek(const SlotHeader** header, const void** payload) = 0;
  // Returns the slot from the last tryPeek to the sender and wakes it.
  virtual void release() = 0;
  virtual int peer() const = 0;
  // Copies `bytes` at `ref` in the sender's memory to `dst` (for slots
  // flagged kSlotDirect). False if the read failed.
  virtual bool fetch(const DirectRef& ref, void* dst, size_t bytes) { return false; }
  // The sender's memory at `ref` as a pointer, if it is in this process.
  virtual const void* mapDirect(const DirectRef& ref) { return nullptr; }
  virtual std::string failure() const { return ""; }
  virtual std::string health() const { return ""; }  // as SendConn::health
};

// A connection to set up: this rank sends to or receives from `peer` on
// `channel`.
struct ConnRequest {
  int peer;
  int channel;
  bool send;
  bool operator<(const ConnRequest& o) const {
    return peer != o.peer ? peer < o.peer : channel != o.channel ? channel < o.channel : send < o.send;
  }
};

// The connections of one rank, by peer and channel: what the executor
// reads its connections from (null: never connected).
class OneShotSlots;
class Connections {
 public:
  virtual ~Connections() = default;
  virtual SendConn* sendConn(int peer, int channel) = 0;
  virtual RecvConn* recvConn(int peer, int channel) = 0;
  // The one-shot slots every rank of the communicator reads directly, or
  // null (some rank is on another node).
  virtual OneShotSlots* oneShotSlots() { return nullptr; }
};

// What a rank's one-shot slot says about the call it holds: enough to tell
// that two ranks are in different calls. (A one-shot call's count fits 32
// bits: its input fits a slot.)
struct OneShotNote {
  uint64_t opSeq = 0;
  uint32_t count = 0;
  uint32_t bytes = 0;  // payload bytes
  int32_t root = 0;    // broadcast, reduce
  uint8_t coll = 0, dtype = 0, op = 0;
};

// The slots of one-shot calls over shared memory (oneshot_shm, formerly
// "the board"): per rank, two small slots in memory that every rank of the
// communicator reads in place (shared memory: lines in the rank's control
// block). A one-shot call writes its input to its slot once and reads every
// peer's slot, instead of sending a copy to each peer over a connection:
// one posted line per call instead of one per peer, and no releases.
// One-shot calls are numbered from 1 on every rank alike; call b uses slot b % 2,
// which its owner rewrites only at call b + 2. Every rank posts in every
// one-shot call (a broadcast's non-roots a note without payload) and ends the
// call only once every rank has posted it; so a rank that starts call b + 2
// has seen every rank post call b + 1, which each did after finishing call
// b and its reads of call b's slots.
class OneShotSlots {
 public:
  virtual ~OneShotSlots() = default;
  // Payload bytes a slot holds.
  virtual size_t capacity() const = 0;
  // This rank's payload area for one-shot call `seq`.
  virtual void* slot(uint64_t seq) = 0;
  // Publishes the payload written to slot(seq), and wakes sleeping peers.
  virtual void post(uint64_t seq, const OneShotNote& note) = 0;
  // `rank`'s payload for one-shot call `seq` and its note, or null while that
  // rank has not posted it.
  virtual const void* peek(int rank, uint64_t seq, OneShotNote* note) = 0;
};

// How a sleeping rank is woken. The rank's progress loop reads value(),
// polls its connections, and when nothing moved waits until the value
// differs; a transport that completes something for the rank (a peer's
// post, a finished network request) rings it. Each transport brings its
// own mechanism (shared memory: a futex word its local peers ring too);
// the others ring whatever doorbell they are given.
//
// Ringing costs a shared write only while someone sleeps: a ringer first
// publishes what it completed, then rings, and ring() skips the doorbell
// when no sleeper has announced itself. So a rank about to sleep announces
// itself (arm), polls everything once more (what was published before its
// announcement is seen there; what comes after rings), and only then
// waits, or disarms if the poll moved something.
class Doorbell {
 public:
  virtual ~Doorbell() = default;
  virtual void ring() = 0;
  // Announces a sleeper; returns the value wait() compares against.
  virtual uint32_t arm() = 0;
  // Withdraws the announcement (the poll after arm() found work).
  virtual void disarm() = 0;
  // After arm(): returns once the value differs from `seen`, or after
  // about timeoutMs, and withdraws the announcement.
  virtual void wait(uint32_t seen, int timeoutMs) = 0;
  // For C-style callbacks (a network transport's completion notifier).
  static void ringCallback(void* doorbell) { static_cast<Doorbell*>(doorbell)->ring(); }
};

}  // namespace hoccl
