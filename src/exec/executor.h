// The executor: one engine that runs any schedule. A collective becomes a
// CollTask; progress() advances every channel as far as it can without
// blocking (a channel waiting on one peer never holds up another channel),
// slice by slice. A host call with a NULL stream runs its task to
// completion in the caller's thread (engine.h: hostExecutor()); a GPU backend will
// enqueue the same task on a stream instead.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <type_traits>
#include <vector>

#include "algorithms/schedule.h"
#include "base/error.h"
#include "src/exec/dataops.h"
#include "transport/connection.h"

namespace hoccl {

// Scratch memory kept across calls. A schedule's scratch (a hierarchical
// reduce-scatter leader holds P x count elements) allocated per call costs
// page faults on every call once it is too large for the allocator to
// reuse: at 64 MiB, ~40 ms a call on this class of machine. A pool hands the
// same pages to the next call instead; buffers are not zeroed (schedules
// write scratch before they read it). Idle buffers too small for a request
// are freed, so what the pool keeps is bounded by the most scratch the
// communicator's tasks held at once.
class ScratchPool {
 public:
  class Lease {
   public:
    Lease() = default;
    Lease(Lease&& o) noexcept { *this = std::move(o); }
    Lease& operator=(Lease&& o) noexcept;
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    ~Lease();
    char* data() const { return buf_.get(); }

   private:
    friend class ScratchPool;
    ScratchPool* pool_ = nullptr;
    std::unique_ptr<char[]> buf_;
    size_t cap_ = 0;
  };
  // A buffer of at least `bytes` (no pool: a buffer of its own); data() is
  // null when memory runs out.
  static Lease take(ScratchPool* pool, size_t bytes);
  size_t idleBytes();

 private:
  void give(std::unique_ptr<char[]> buf, size_t cap);
  std::mutex mu_;
  std::vector<std::pair<size_t, std::unique_ptr<char[]>>> idle_;
};

// One buffer of a point-to-point call (CollKind::SendRecv), which the
// schedule's Buf::Part slices index. The schedule counts bytes; the
// caller's count and type travel in the messages' headers so that a send
// and a receive that disagree are caught.
struct PeerPart {
  void* ptr = nullptr;
  uint64_t count = 0;
  DType dtype = DType::Uint8;
  int peer = -1;
  bool send = false;
  uint64_t seq = 0;  // this rank's n-th send to (receive from) peer, from 1
};

struct CollCall {
  CollKind coll = CollKind::AllReduce;
  const void* sendbuff = nullptr;
  void* recvbuff = nullptr;
  uint64_t count = 0;
  DType dtype = DType::Float32;
  RedOp op = RedOp::Sum;
  int root = 0;
  uint64_t opSeq = 0;
  // A oneshot_shm call's number among its communicator's oneshot_shm
  // calls (from 1); for any other call, the number the next one will take.
  uint64_t oneShotSeq = 0;
  // PreMulSum: this rank's scalar, one element of dtype, read from
  // scalarAt when the call runs if that is set, else kept in scalar.
  const void* scalarAt = nullptr;
  alignas(8) unsigned char scalar[8] = {};
  std::vector<PeerPart> parts;  // SendRecv only
  // Device buffers: the call runs as a launch on `stream` (a CUstream;
  // null: the default stream), queued when the API call returns.
  bool device = false;
  void* stream = nullptr;
};

// "AllReduce(count=1000, float, sum)" as it appears in messages.
std::string describeCall(CollKind coll, uint64_t count, DType dtype, RedOp op, int root);

// What every rank must agree on about a collective: its kind, count, type,
// operator, root and its number on the communicator.
struct CallSignature {
  uint64_t opSeq = 0;
  uint64_t count = 0;
  int root = 0;
  CollKind coll = CollKind::AllReduce;
  DType dtype = DType::Float32;
  RedOp op = RedOp::Sum;
  bool operator==(const CallSignature& o) const {
    return opSeq == o.opSeq && count == o.count && root == o.root && coll == o.coll && dtype == o.dtype && op == o.op;
  }
};
inline CallSignature signatureOf(const CollCall& c) { return {c.opSeq, c.count, c.root, c.coll, c.dtype, c.op}; }
// "collective mismatch: rank 0 called <mine> as call #n, but rank `peer`
// called <theirs> as call #m<where>; every rank must make the same calls
// in the same order" (hocclInvalidUsage).
Status collectiveMismatch(int rank, const CallSignature& mine, int peer, const CallSignature& theirs,
                          const char* where);

// Bytes a call puts in a rank's one-shot slot (all-reduce, broadcast, reduce:
// the buffer; all-gather: the send buffer; reduce-scatter: the whole send
// buffer); 0 for calls that never go there. A broadcast's non-roots post no
// payload, but the decision takes the root's bytes on every rank.
uint64_t oneShotShmInputBytes(const ScheduleKey& key, size_t esize);

class CollTask {
 public:
  // `call` and `schedule` must outlive the task (the caller's Work holds
  // them: a small call copies neither). `links`: the rank's connections
  // (transport/connection.h). `scratch`: where the task takes its scratch
  // from (null: it allocates its own). Slices of at least directMinBytes
  // whose value stays put go by reference where the connection allows (0:
  // never); to another process (DirectPath::Fetched) only if `cma` is 1, or
  // -1 (auto) where that pays: calls that reduce nothing (a reduction only
  // swaps the sender's copy for the receiver's system call), up to 1 MiB,
  // slices of at least 32 KiB.
  CollTask(const CollCall& call, const Schedule& schedule, Connections* links, ScratchPool* scratch,
           size_t sliceBytes, bool checkCalls, size_t directMinBytes, int cma);
  // Advances all channels as far as possible without waiting. Returns an
  // error for a mismatched message; sets *progressed if anything moved.
  Status progress(bool* progressed);
  bool done() const { return done_; }
  const CollCall& call() const { return call_; }
  int channelCount() const { return static_cast<int>(chans_.size()); }
  // A stalled call's check (now and then, not every poll) that the rank it
  // waits on did not run this call the other way: one-shot over shared
  // memory while this one uses connections, or over connections while this
  // one runs one-shot over shared memory. An error names both calls.
  Status crossCheckOneShotShm() const;
  // Where the task waits now: "channel 0 step 3 (recvReduceSend): waiting to
  // receive from rank 1; last completed step 2".
  std::string describeWait() const;
  // Peers the unfinished channels wait on now (for liveness checks).
  std::vector<int> waitingOn() const;

 private:
  struct ChannelState {
    size_t step = 0;
    uint64_t done = 0;  // elements of the current step completed
    int waitPeer = -1;
    bool waitSend = false;
    // The current step's connections, looked up once per step (a poll
    // that finds nothing to do looks nothing up).
    size_t connStep = SIZE_MAX;
    RecvConn* rc = nullptr;
    SendConn* sc = nullptr;
  };
  // Per-channel state, kept inside the task for up to four channels (the
  // tuner's most), so a small call allocates nothing for it; only the
  // channels the schedule has are initialised.
  class ChannelStates {
   public:
    explicit ChannelStates(size_t n) : n_(n) {
      if (n > kInline) heap_.reset(new ChannelState[n]);
      p_ = n > kInline ? heap_.get() : reinterpret_cast<ChannelState*>(inline_);
      if (n <= kInline)
        for (size_t i = 0; i < n; ++i) new (&p_[i]) ChannelState();
    }
    ChannelStates(const ChannelStates&) = delete;
    ChannelStates& operator=(const ChannelStates&) = delete;
    size_t size() const { return n_; }
    ChannelState& operator[](size_t i) { return p_[i]; }
    const ChannelState& operator[](size_t i) const { return p_[i]; }

   private:
    static constexpr size_t kInline = 4;
    static_assert(std::is_trivially_destructible_v<ChannelState>);
    size_t n_;
    ChannelState* p_;
    alignas(ChannelState) unsigned char inline_[kInline * sizeof(ChannelState)];
    std::unique_ptr<ChannelState[]> heap_;
  };
  bool stepDone(int channel, int step) const;
  Status advance(int channel, bool* progressed);
  char* bufferAt(const Slice& s);
  Status checkHeader(const SlotHeader& h, uint32_t expectBytes, int peer) const;
  Status checkPeerHeader(const SlotHeader& h, const PeerPart& mine) const;
  // "collective mismatch: rank 0 called <this call> as call #n, but rank
  // `peer` called <that one> as call #m<where>; ...".
  Status callMismatch(int peer, CollKind coll, uint64_t count, DType dtype, RedOp op, int root, uint64_t opSeq,
                      const char* where) const;
  Status directFailure(int peer) const;
  void finish();
  // One-shot over shared memory (Schedule::oneShotShm; oneshot_shm.cc):
  // post this rank's input once, then take each rank's in rank order as it
  // appears.
  Status oneShotShmProgress(bool* progressed);

  const CollCall& call_;
  const Schedule* sched_;
  Connections* links_;
  const DataOps& ops_;
  size_t esize_;
  uint64_t sliceElems_;
  bool checkCalls_;
  size_t directMinBytes_;
  int cma_;  // HOCCL_CMA: which slices may go by reference to another process
  ChannelStates chans_;
  ScratchPool::Lease scratch_;
  Status setupError_;  // scratch could not be allocated: progress() returns it
  std::vector<SendConn*> directSends_;  // connections that carried references
  std::vector<uint64_t> byRef_;          // addresses sent by reference (ThreadSanitizer annotations)
  OneShotSlots* oneShot_ = nullptr;      // a oneshot_shm call's
  int oneShotNext_ = -1;                 // the rank whose input it takes next (-1: not posted yet)
  const void* oneShotFirst_ = nullptr;   // rank 0's input, until rank 1's arrives
  bool done_ = false;
};

}  // namespace hoccl
