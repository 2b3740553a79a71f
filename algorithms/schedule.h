// Schedules: what every rank does for one collective, as pure data.
//
// A schedule is built by a pure function of (collective, nranks, rank, count,
// options); it can be printed, verified symbolically (verifier.h) and run by
// the executor (src/exec) without the builder knowing which transport sits
// underneath. Offsets and counts are in elements, never bytes.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace hoccl {

enum class CollKind : uint8_t {
  AllReduce = 0,
  ReduceScatter = 1,
  AllGather = 2,
  Broadcast = 3,
  Reduce = 4,
  // Point-to-point family (algorithms/pairwise.cc): every rank exchanges
  // its own messages with the peers it names; no reduction.
  AllToAll = 5,   // count per peer: Input and Output hold nranks x count
  AllToAllv = 6,  // per-peer counts and displacements (ScheduleKey::vlayout)
  SendRecv = 7,   // a group's hocclSend/hocclRecv on one communicator
};
// The collectives that combine values with a reduction operator.
inline bool collReduces(CollKind k) {
  return k == CollKind::AllReduce || k == CollKind::ReduceScatter || k == CollKind::Reduce;
}
inline const char* collName(CollKind k) {  // on every call's path: inline
  switch (k) {
    case CollKind::AllReduce: return "AllReduce";
    case CollKind::ReduceScatter: return "ReduceScatter";
    case CollKind::AllGather: return "AllGather";
    case CollKind::Broadcast: return "Broadcast";
    case CollKind::Reduce: return "Reduce";
    case CollKind::AllToAll: return "AllToAll";
    case CollKind::AllToAllv: return "AllToAllv";
    case CollKind::SendRecv: return "SendRecv";
  }
  return "unknown";
}

// The buffers a step can name. Input is the caller's send buffer, Output its
// receive buffer (they may alias: in-place calls), Scratch is owned by the
// executor and sized by Schedule::scratchCount. Part is one of the buffers
// a point-to-point call names (Slice::part indexes the call's list).
enum class Buf : uint8_t { None = 0, Input = 1, Output = 2, Scratch = 3, Part = 4 };

struct Slice {
  Buf buf = Buf::None;
  uint64_t offset = 0;  // elements
  uint32_t part = 0;    // Buf::Part only
  bool present() const { return buf != Buf::None; }
};

// One step of a channel. Per element, with v the value it produces:
//   v = recv ? (reduce ? recv (op) src : recv) : (reduce ? src (op) dst : src)
//   if dst present: dst = v
//   if send:        send v to sendPeer
// (A reduce without a receive combines two of the rank's own buffers: src
// plays the received value's part, dst the local operand's, and is then
// overwritten.) Named kinds (see stepKindName): send, recv, recvReduce,
// recvReduceSend, recvCopySend, copy, copySend, recvReduceCopySend,
// localReduce, localReduceSend, and sync: a zero-count send and/or receive
// naming no buffer, whose message is only its header.
struct Step {
  int32_t recvPeer = -1;  // rank to receive `count` elements from, or -1
  int32_t sendPeer = -1;  // rank to send `count` elements to, or -1
  bool reduce = false;    // combine the received value with src
  Slice src;              // local operand (reduce) or the data to copy/send
  Slice dst;              // where the produced value is stored, if anywhere
  uint64_t count = 0;     // elements
  // Cross-channel dependency: this step starts only after step `depStep` of
  // channel `depChannel` has completed (-1: none).
  int32_t depChannel = -1;
  int32_t depStep = -1;
  // Set by markZeroCopyEligible(): the value this step sends stays unchanged
  // in this rank's buffers until the call ends (nothing later writes it),
  // so the executor may let the receiver read it in place. The verifier
  // checks the weaker contract the executor relies on: nothing overwrites
  // it before the receiving step has completed.
  bool zeroCopyEligible = false;
};
const char* stepKindName(const Step& s);

// Where the value a sending step produces lives in this rank's buffers,
// which is what a zero-copy eligible step sends by reference: src for a
// step that receives and reduces nothing (copySend sends it before its own
// copy to dst, so the receiver starts sooner), else dst; null when the
// value is built in the send slot.
inline const Slice* sentValue(const Step& s) {
  if (s.recvPeer < 0 && !s.reduce && s.src.present()) return &s.src;
  return s.dst.present() ? &s.dst : nullptr;
}

// Channels run concurrently; the steps of one channel run in order. A
// channel's messages travel on the connections of its link, which is its
// own index unless `link` says otherwise: a message sent by a channel of
// rank a on link l is received by the channel of rank b that receives from
// a on link l. Collective builders leave `link` unset (channel c of rank a
// talks to channel c of rank b); point-to-point builders run one channel
// per peer and direction, all on link 0, so no send waits behind another.
// At most one channel of a rank sends to a given peer on a given link, and
// at most one receives from it, so each connection carries one ordered
// stream (the verifier checks this).
struct Channel {
  std::vector<Step> steps;
  int32_t link = -1;
};
inline int linkOf(const std::vector<Channel>& chs, size_t c) {
  return chs[c].link >= 0 ? chs[c].link : static_cast<int>(c);
}

// How ranks are grouped, for hierarchical builders: group (node) of each
// rank and super-group (leaf switch) of each group. Flat builders ignore it.
struct Grouping {
  std::vector<int> groupOf;       // per rank: its group index, 0..ngroups-1
  std::vector<int> superOf;       // per group: its super-group (switch) index; empty = one
  int ngroups() const;
};

struct ScheduleKey {
  CollKind coll = CollKind::AllReduce;
  int nranks = 1;
  int rank = 0;
  uint64_t count = 0;  // NCCL meaning: total for all-reduce/broadcast/reduce,
                       // per-rank for reduce-scatter (recvcount) and
                       // all-gather (sendcount)
  int root = 0;        // broadcast/reduce only
  bool inPlace = false;
  int nchannels = 1;
  // Largest message (elements) one step may carry; 0: unlimited. A ring is
  // a cycle: every rank sends before it receives, so each connection must
  // hold two whole messages or the ring stalls. Builders cut ring phases
  // into rounds whose messages fit; the executor sets this to half of a
  // connection's slots.
  uint64_t maxStepCount = 0;
  // HO-Ring pipeline depth: chunks per channel (0: the builder's default).
  int pipelineChunks = 0;
  // Hierarchical builders need it; null means every rank in one group.
  std::shared_ptr<const Grouping> groups;
  // AllToAllv only: this rank's layout, 4 x nranks elements counts:
  // sendcounts, sdispls, recvcounts, rdispls (MPI_Alltoallv's meaning).
  std::shared_ptr<const std::vector<uint64_t>> vlayout;
};

struct Schedule {
  ScheduleKey key;
  const char* algorithm = "";
  uint64_t scratchCount = 0;  // elements of scratch the executor must provide
  std::vector<Channel> channels;
  // No steps: the call runs one-shot over shared memory (oneshot_shm) on a
  // communicator whose ranks share memory (transport/connection.h,
  // OneShotSlots; src/exec/oneshot_shm.cc).
  bool oneShotShm = false;

  size_t stepCount() const;
  // Human-readable listing, one line per step, e.g.
  //   rank 1 ch 0 step 2 recvReduceSend  from 0 to 2 src in[6+3] dst - n 3
  std::string toString() const;
};

// The memory behind `count` elements at a slice. In-place calls alias
// Input and Output, so both map to one space: 0 output memory, 1 input
// memory (out of place), 2 scratch, 3 + i part i of a point-to-point call.
struct MemSpan {
  int64_t space;
  uint64_t begin, end;
};
MemSpan memorySpan(const ScheduleKey& k, const Slice& sl, uint64_t count);

// Sets Step::zeroCopyEligible on every sending step whose value lives in the
// caller's buffers (sentValue) and is not written by any later step of its
// channel or any step of another channel, nor by the step's own copy when
// that lands on part of it, with in-place aliasing taken into account.
void markZeroCopyEligible(Schedule* s);

// Number of elements in the input and output buffers a rank passes for a key.
uint64_t inputCount(const ScheduleKey& k);
uint64_t outputCount(const ScheduleKey& k);

// Offset of this rank's piece inside the other buffer when a call is
// in-place, as NCCL defines it (reduce-scatter: recvbuff == sendbuff +
// rank*recvcount; all-gather: sendbuff == recvbuff + rank*sendcount).
// Returns the offset of Input inside Output (all-gather) or of Output inside
// Input (reduce-scatter); 0 for the others.
uint64_t inPlaceOffset(const ScheduleKey& k);

// Near-equal partition of `count` elements into `parts` pieces; piece i
// starts at partStart(count, parts, i) and the first (count % parts) pieces
// are one element longer.
uint64_t partStart(uint64_t count, uint64_t parts, uint64_t i);
inline uint64_t partSize(uint64_t count, uint64_t parts, uint64_t i) {
  return partStart(count, parts, i + 1) - partStart(count, parts, i);
}

}  // namespace hoccl
