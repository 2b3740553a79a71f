// One-shot calls over shared memory (oneshot_shm; transport/connection.h,
// OneShotSlots): a small
// all-reduce, all-gather, reduce-scatter, broadcast or reduce of a
// communicator whose ranks all share memory writes this rank's input to its
// one-shot slot once (a broadcast: the root's only), then takes every rank's
// input straight from its slot, in rank order, so every rank reduces the
// same values in the same order and all get the same bits. Every rank
// waits for every rank's post, the slots' rule for reusing them (a
// reduce's non-roots and a broadcast's root read only the notes). No
// schedule steps, no per-peer copies, no releases.
#include <cstring>

#include "src/exec/executor.h"

namespace hoccl {

uint64_t oneShotShmInputBytes(const ScheduleKey& key, size_t esize) {
  switch (key.coll) {
    case CollKind::AllReduce:
    case CollKind::AllGather:
    case CollKind::ReduceScatter:
    case CollKind::Broadcast:
    case CollKind::Reduce: return inputCount(key) * esize;
    default: return 0;
  }
}

Status CollTask::crossCheckOneShotShm() const {
  if (oneShot_) {
    // A message for this very call, or a point-to-point one, waiting on a
    // connection from the rank this one waits for: that rank made another
    // call (a collective over connections would have read it too).
    if (done_ || oneShotNext_ < 0) return Status();
    RecvConn* rc = links_->recvConn(oneShotNext_, 0);
    const SlotHeader* h = nullptr;
    const void* payload = nullptr;
    if (!rc || !rc->tryPeek(&h, &payload) ||
        (h->opSeq != call_.opSeq && h->coll != static_cast<uint8_t>(CollKind::SendRecv)))
      return Status();
    Status st = checkHeader(*h, h->bytes, oneShotNext_);
    if (!st.ok()) return st;
    return errorf(hocclInvalidUsage,
                  "collective mismatch: rank %d ran %s (call #%llu) one-shot over shared memory, but rank %d sent it "
                  "a message for that call over a connection: the ranks disagree about the call",
                  sched_->key.rank, describeCall(call_.coll, call_.count, call_.dtype, call_.op, call_.root).c_str(),
                  static_cast<unsigned long long>(call_.opSeq), oneShotNext_);
  }
  // A call over connections: a rank it waits for that posted this very
  // call in its one-shot slot.
  OneShotSlots* slots = links_->oneShotSlots();
  if (!slots || done_ || call_.coll == CollKind::SendRecv) return Status();
  for (int peer : waitingOn()) {
    OneShotNote note;
    if (slots->peek(peer, call_.oneShotSeq, &note) && note.opSeq == call_.opSeq)
      return callMismatch(peer, static_cast<CollKind>(note.coll), note.count, static_cast<DType>(note.dtype),
                          static_cast<RedOp>(note.op), note.root, note.opSeq, " (one-shot over shared memory)");
  }
  return Status();
}

Status CollTask::oneShotShmProgress(bool* progressed) {
  const ScheduleKey& k = sched_->key;
  const uint64_t seq = call_.oneShotSeq;
  // A broadcast's non-roots post only their note.
  const uint64_t inBytes = k.coll == CollKind::Broadcast && k.rank != call_.root ? 0 : oneShotShmInputBytes(k, esize_);
  if (oneShotNext_ < 0) {
    if (inBytes) memcpy(oneShot_->slot(seq), call_.sendbuff, inBytes);
    OneShotNote note;
    note.opSeq = call_.opSeq;
    note.count = static_cast<uint32_t>(call_.count);
    note.bytes = static_cast<uint32_t>(inBytes);
    note.root = call_.root;  // 0 for the unrooted collectives, as in a slot header
    note.coll = static_cast<uint8_t>(call_.coll);
    note.dtype = static_cast<uint8_t>(call_.dtype);
    note.op = static_cast<uint8_t>(call_.op);
    oneShot_->post(seq, note);
    oneShotNext_ = 0;
    *progressed = true;
  }
  const RedOp op = call_.op == RedOp::PreMulSum ? RedOp::Sum : call_.op;  // inputs were scaled before
  const ReduceFn reduce = ops_.reduce[static_cast<int>(call_.dtype)][static_cast<int>(op)];
  const uint64_t outBytes = call_.count * esize_;
  // A reduce-scatter takes this rank's block of each input.
  const uint64_t from = k.coll == CollKind::ReduceScatter ? static_cast<uint64_t>(k.rank) * outBytes : 0;
  char* out = static_cast<char*>(call_.recvbuff);
  // A reduce's output is the root's only.
  const bool writes = k.coll == CollKind::Reduce ? k.rank == call_.root : true;
  for (; oneShotNext_ < k.nranks; ++oneShotNext_) {
    const int r = oneShotNext_;
    OneShotNote note;
    const char* in = static_cast<const char*>(oneShot_->peek(r, seq, &note));
    if (!in) return Status();
    if (note.opSeq != call_.opSeq || note.coll != static_cast<uint8_t>(call_.coll) || note.count != call_.count ||
        note.dtype != static_cast<uint8_t>(call_.dtype) || note.op != static_cast<uint8_t>(call_.op) ||
        note.root != call_.root)
      return callMismatch(r, static_cast<CollKind>(note.coll), note.count, static_cast<DType>(note.dtype),
                          static_cast<RedOp>(note.op), note.root, note.opSeq, "");
    *progressed = true;
    const size_t n = call_.count;
    if (!writes) continue;
    if (k.coll == CollKind::Broadcast) {
      // The root's output is its input: copied only out of place.
      if (r == call_.root && (k.rank != call_.root || out != call_.sendbuff)) memcpy(out, in, outBytes);
    } else if (k.coll == CollKind::AllGather) {
      memcpy(out + r * outBytes, in, outBytes);
    } else if (r == 0) {
      oneShotFirst_ = in + from;  // stays: its owner rewrites it at one-shot call seq + 2 at the earliest
    } else {
      reduce(out, r == 1 ? oneShotFirst_ : out, in + from, n);
    }
  }
  finish();
  return Status();
}

}  // namespace hoccl
