#include "src/exec/executor.h"

#include "src/exec/tsan.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <new>

namespace hoccl {

std::string describeCall(CollKind coll, uint64_t count, DType dtype, RedOp op, int root) {
  char buf[160];
  if (coll == CollKind::SendRecv) {
    snprintf(buf, sizeof buf, "hocclSend/hocclRecv group");
    return buf;
  }
  bool reduces = collReduces(coll);
  bool rooted = coll == CollKind::Broadcast || coll == CollKind::Reduce;
  int n = snprintf(buf, sizeof buf, "%s(count=%llu, %s", collName(coll),
                   static_cast<unsigned long long>(count), dtypeName(dtype));
  if (reduces) n += snprintf(buf + n, sizeof buf - n, ", %s", redOpName(op));
  if (rooted) n += snprintf(buf + n, sizeof buf - n, ", root=%d", root);
  snprintf(buf + n, sizeof buf - n, ")");
  return buf;
}

ScratchPool::Lease& ScratchPool::Lease::operator=(Lease&& o) noexcept {
  if (this != &o) {
    if (pool_ && buf_) pool_->give(std::move(buf_), cap_);
    pool_ = o.pool_;
    buf_ = std::move(o.buf_);
    cap_ = o.cap_;
    o.pool_ = nullptr;
    o.cap_ = 0;
  }
  return *this;
}

ScratchPool::Lease::~Lease() {
  if (pool_ && buf_) pool_->give(std::move(buf_), cap_);
}

ScratchPool::Lease ScratchPool::take(ScratchPool* pool, size_t bytes) {
  Lease l;
  l.pool_ = pool;
  if (pool) {
    std::lock_guard<std::mutex> lock(pool->mu_);
    auto& idle = pool->idle_;
    size_t best = idle.size();
    for (size_t i = 0; i < idle.size(); ++i)
      if (idle[i].first >= bytes && (best == idle.size() || idle[i].first < idle[best].first)) best = i;
    if (best < idle.size()) {
      l.cap_ = idle[best].first;
      l.buf_ = std::move(idle[best].second);
      idle.erase(idle.begin() + static_cast<std::ptrdiff_t>(best));
      return l;
    }
    idle.clear();  // all too small: keep only what calls of this size need
  }
  l.buf_.reset(new (std::nothrow) char[bytes]);  // not value-initialised: no zeroing pass
  l.cap_ = l.buf_ ? bytes : 0;
  return l;
}

size_t ScratchPool::idleBytes() {
  std::lock_guard<std::mutex> lock(mu_);
  size_t n = 0;
  for (const auto& b : idle_) n += b.first;
  return n;
}

void ScratchPool::give(std::unique_ptr<char[]> buf, size_t cap) {
  std::lock_guard<std::mutex> lock(mu_);
  idle_.emplace_back(cap, std::move(buf));
}

namespace {

// HOCCL_CMA=auto sends by reference across processes for calls that
// reduce nothing, up to 1 MiB in their larger buffer, slices of at least
// 32 KiB. Measured on
// 2-core VMs (results/20261127-slices-by-reference): one copy instead of two is 1.4-2.4x
// faster there at 128 KiB-1 MiB, but larger calls split two copies over
// two cores as fast, and then the receiver's system calls and page pinning
// make it slower (up to 2x for broadcast and send/recv at 8 MiB); 16 KiB
// slices were slower with 4 ranks on 2 cores. A reduction gains no copy.
constexpr uint64_t kAutoFetchedMaxBytes = 1 << 20;
constexpr size_t kAutoFetchedMinSlice = 32 << 10;

// The smallest slice sent by reference to another process (SIZE_MAX:
// none). Asked only for a slice that could go by reference, so small calls
// never pay for it.
size_t fetchedMinSlice(int cma, const CollCall& call, const ScheduleKey& k, size_t esize) {
  if (cma > 0) return 0;  // HOCCL_DIRECT_BYTES alone decides
  if (cma == 0) return SIZE_MAX;
  if (collReduces(k.coll)) return SIZE_MAX;
  uint64_t bytes = std::max(inputCount(k), outputCount(k)) * esize;
  for (const PeerPart& p : call.parts) bytes = std::max<uint64_t>(bytes, p.count * dtypeSize(p.dtype));
  return bytes <= kAutoFetchedMaxBytes ? kAutoFetchedMinSlice : SIZE_MAX;
}

}  // namespace

CollTask::CollTask(const CollCall& call, const Schedule& schedule, Connections* links, ScratchPool* scratch,
                   size_t sliceBytes, bool checkCalls, size_t directMinBytes, int cma)
    : call_(call),
      sched_(&schedule),
      links_(links),
      ops_(dataOps()),
      esize_(dtypeSize(call.dtype)),
      sliceElems_(std::max<uint64_t>(1, sliceBytes / dtypeSize(call.dtype))),
      checkCalls_(checkCalls),
      directMinBytes_(directMinBytes),
      cma_(cma),
      chans_(sched_->channels.size()) {
  if (sched_->oneShotShm) {
    oneShot_ = links->oneShotSlots();
    if (!oneShot_ || call.oneShotSeq == 0)
      setupError_ =
          errorf(hocclInternalError,
                 "rank %d: %s (call #%llu) was planned one-shot over shared memory, which this communicator lacks",
                 sched_->key.rank, describeCall(call_.coll, call_.count, call_.dtype, call_.op, call_.root).c_str(),
                 static_cast<unsigned long long>(call_.opSeq));
    return;
  }
  if (sched_->scratchCount) {
    const size_t bytes = sched_->scratchCount * esize_;
    scratch_ = ScratchPool::take(scratch, bytes);
    if (!scratch_.data()) {
      setupError_ = errorf(hocclSystemError, "rank %d could not allocate %zu bytes of scratch for %s (call #%llu)",
                           sched_->key.rank, bytes,
                           describeCall(call_.coll, call_.count, call_.dtype, call_.op, call_.root).c_str(),
                           static_cast<unsigned long long>(call_.opSeq));
      return;
    }
  }
  for (const Channel& ch : sched_->channels)
    if (!ch.steps.empty()) return;
  finish();  // nothing to do (one rank in place, or count 0)
}

char* CollTask::bufferAt(const Slice& s) {
  switch (s.buf) {
    case Buf::Input: return const_cast<char*>(static_cast<const char*>(call_.sendbuff)) + s.offset * esize_;
    case Buf::Output: return static_cast<char*>(call_.recvbuff) + s.offset * esize_;
    case Buf::Scratch: return scratch_.data() + s.offset * esize_;
    case Buf::Part: return static_cast<char*>(call_.parts[s.part].ptr) + s.offset * esize_;
    case Buf::None: break;
  }
  return nullptr;
}

bool CollTask::stepDone(int channel, int step) const {
  return chans_[channel].step > static_cast<size_t>(step);
}

namespace {

std::string describePart(const char* fn, uint64_t count, uint8_t dtype) {
  char buf[96];
  snprintf(buf, sizeof buf, "%s(count=%llu, %s)", fn, static_cast<unsigned long long>(count),
           dtypeName(static_cast<DType>(dtype)));
  return buf;
}

}  // namespace

// A receive of a point-to-point call: the k-th receive from a peer takes
// that peer's k-th send to this rank, which must agree on count and type.
Status CollTask::checkPeerHeader(const SlotHeader& h, const PeerPart& mine) const {
  const bool peerCall = h.coll == static_cast<uint8_t>(CollKind::SendRecv);
  if (peerCall && h.opSeq == mine.seq && h.count == mine.count && h.dtype == static_cast<uint8_t>(mine.dtype))
    return Status();  // every slice comes here: no strings unless it fails
  const auto seq = static_cast<unsigned long long>(mine.seq);
  const std::string want = describePart("hocclRecv", mine.count, static_cast<uint8_t>(mine.dtype));
  if (!peerCall)
    return errorf(hocclInvalidUsage,
                  "point-to-point mismatch: rank %d posted %s from rank %d (its receive #%llu from that rank), but "
                  "rank %d sent a message of %s (call #%llu) instead",
                  sched_->key.rank, want.c_str(), mine.peer, seq, mine.peer,
                  describeCall(static_cast<CollKind>(h.coll), h.count, static_cast<DType>(h.dtype),
                               static_cast<RedOp>(h.op), h.root).c_str(),
                  static_cast<unsigned long long>(h.opSeq));
  return errorf(hocclInvalidUsage,
                "point-to-point mismatch: rank %d's receive #%llu from rank %d is %s, but rank %d's send #%llu to "
                "rank %d is %s; a send and its receive must have the same count and datatype",
                sched_->key.rank, seq, mine.peer, want.c_str(), mine.peer, static_cast<unsigned long long>(h.opSeq),
                sched_->key.rank, describePart("hocclSend", h.count, h.dtype).c_str());
}

Status collectiveMismatch(int rank, const CallSignature& mine, int peer, const CallSignature& theirs,
                          const char* where) {
  return errorf(hocclInvalidUsage,
                "collective mismatch: rank %d called %s as call #%llu, but rank %d called %s as call #%llu%s; every "
                "rank must make the same calls in the same order",
                rank, describeCall(mine.coll, mine.count, mine.dtype, mine.op, mine.root).c_str(),
                static_cast<unsigned long long>(mine.opSeq), peer,
                describeCall(theirs.coll, theirs.count, theirs.dtype, theirs.op, theirs.root).c_str(),
                static_cast<unsigned long long>(theirs.opSeq), where);
}

Status CollTask::callMismatch(int peer, CollKind coll, uint64_t count, DType dtype, RedOp op, int root,
                              uint64_t opSeq, const char* where) const {
  return collectiveMismatch(sched_->key.rank, signatureOf(call_), peer, {opSeq, count, root, coll, dtype, op}, where);
}

Status CollTask::checkHeader(const SlotHeader& h, uint32_t expectBytes, int peer) const {
  if (checkCalls_ && call_.coll != CollKind::SendRecv && h.coll == static_cast<uint8_t>(CollKind::SendRecv))
    return errorf(hocclInvalidUsage,
                  "collective mismatch: rank %d called %s as call #%llu, but rank %d sent it %s (its send #%llu to "
                  "that rank) instead",
                  sched_->key.rank, describeCall(call_.coll, call_.count, call_.dtype, call_.op, call_.root).c_str(),
                  static_cast<unsigned long long>(call_.opSeq), peer, describePart("hocclSend", h.count, h.dtype).c_str(),
                  static_cast<unsigned long long>(h.opSeq));
  // (A point-to-point receive was checked by checkPeerHeader.)
  bool same = call_.coll == CollKind::SendRecv || (h.opSeq == call_.opSeq && h.coll == static_cast<uint8_t>(call_.coll) &&
              h.count == call_.count && h.dtype == static_cast<uint8_t>(call_.dtype) &&
              h.op == static_cast<uint8_t>(call_.op) && h.root == call_.root);
  if (checkCalls_ && !same)
    return callMismatch(peer, static_cast<CollKind>(h.coll), h.count, static_cast<DType>(h.dtype),
                        static_cast<RedOp>(h.op), h.root, h.opSeq, "");
  if (h.bytes != expectBytes)
    return errorf(hocclInvalidUsage,
                  "message size mismatch: rank %d expected %u bytes from rank %d in %s (call #%llu) "
                  "but got %u: the ranks disagree about the call",
                  sched_->key.rank, expectBytes, peer,
                  describeCall(call_.coll, call_.count, call_.dtype, call_.op, call_.root).c_str(),
                  static_cast<unsigned long long>(call_.opSeq), h.bytes);
  return Status();
}

Status CollTask::advance(int c, bool* progressed) {
  ChannelState& cs = chans_[c];
  const std::vector<Step>& steps = sched_->channels[c].steps;
  const RedOp op = call_.op == RedOp::PreMulSum ? RedOp::Sum : call_.op;  // inputs were scaled before
  const ReduceFn reduce = ops_.reduce[static_cast<int>(call_.dtype)][static_cast<int>(op)];
  const int link = linkOf(sched_->channels, c);
  // The channel waits for a message from, or a free slot to, `peer`.
  auto blocked = [&cs](int peer, bool send) {
    cs.waitPeer = peer;
    cs.waitSend = send;
    return Status();
  };
  while (cs.step < steps.size()) {
    const Step& s = steps[cs.step];
    if (s.depChannel >= 0 && !stepDone(s.depChannel, s.depStep)) return Status();
    uint64_t n = std::min(sliceElems_, s.count - cs.done);
    size_t bytes = n * esize_;
    if (cs.connStep != cs.step) {
      cs.rc = s.recvPeer >= 0 ? links_->recvConn(s.recvPeer, link) : nullptr;
      cs.sc = s.sendPeer >= 0 ? links_->sendConn(s.sendPeer, link) : nullptr;
      cs.connStep = cs.step;
      if ((s.recvPeer >= 0 && !cs.rc) || (s.sendPeer >= 0 && !cs.sc))
        return errorf(hocclInternalError, "rank %d: channel %d step %zu has no connection to rank %d",
                      sched_->key.rank, c, cs.step, cs.rc || s.recvPeer < 0 ? s.sendPeer : s.recvPeer);
    }
    const SlotHeader* rh = nullptr;
    const void* rdata = nullptr;
    RecvConn* rc = cs.rc;
    if (rc) {
      if (!rc->tryPeek(&rh, &rdata)) return blocked(s.recvPeer, false);
      if (s.dst.buf == Buf::Part && checkCalls_) HOCCL_TRY(checkPeerHeader(*rh, call_.parts[s.dst.part]));
      HOCCL_TRY(checkHeader(*rh, static_cast<uint32_t>(bytes), s.recvPeer));
    }
    SlotHeader* sh = nullptr;
    void* sdata = nullptr;
    SendConn* sc = cs.sc;
    if (sc && !sc->tryAcquire(&sh, &sdata)) return blocked(s.sendPeer, true);
    const char* src = s.src.present() ? bufferAt(s.src) + cs.done * esize_ : nullptr;
    char* dst = s.dst.present() ? bufferAt(s.dst) + cs.done * esize_ : nullptr;
    // A large slice whose value stays put in this rank's buffers is sent
    // as a reference: the receiver copies it once, straight from here.
    bool sendRef = sc && s.zeroCopyEligible && directMinBytes_ && bytes >= directMinBytes_;
    if (sendRef) {
      const DirectPath path = sc->direct();
      sendRef = path == DirectPath::Mapped ||
                (path == DirectPath::Fetched && bytes >= fetchedMinSlice(cma_, call_, sched_->key, esize_));
    }
    const bool recvRef = rc && (rh->flags & kSlotDirect);
    DirectRef ref{};
    if (recvRef) {
      memcpy(&ref, rdata, sizeof ref);
      HOCCL_TSAN_ACQUIRE(ref.address);  // the sender's writes before it posted
    }
    // The value this step produces lands first where it must be stored
    // (dst, else the send slot); a send then copies it from there.
    const char* value;
    bool copyAfterSend = false;  // a plain copy to dst, made once the value has left
    if (rc && s.reduce) {
      const void* in = rdata;
      if (recvRef && !(in = rc->mapDirect(ref))) {
        // Another process: pull the data into our own receive slot.
        if (!rc->fetch(ref, const_cast<void*>(rdata), bytes)) return directFailure(s.recvPeer);
        in = rdata;
      }
      char* target = dst ? dst : static_cast<char*>(sdata);
      reduce(target, in, src, n);
      value = target;
    } else if (rc) {
      char* into = dst ? dst : sc ? static_cast<char*>(sdata) : nullptr;
      if (recvRef) {
        if (into && bytes && !rc->fetch(ref, into, bytes)) return directFailure(s.recvPeer);
        value = into;
      } else {
        if (dst && bytes) copyBytes(dst, rdata, bytes);
        value = static_cast<const char*>(dst ? dst : rdata);
      }
    } else if (s.reduce) {  // a local reduce: dst = src (op) dst
      reduce(dst, src, dst, n);
      value = dst;
    } else {
      // A plain copy: the value is src. It is sent (by copy or by
      // reference) first and copied to dst after, so the receiver starts on
      // it sooner.
      value = src;
      copyAfterSend = dst && dst != src && bytes;
    }
    if (sc) {
      uint8_t flags = 0;
      if (sendRef) {
        DirectRef out{reinterpret_cast<uint64_t>(value)};
        memcpy(sdata, &out, sizeof out);
        flags = kSlotDirect;
        HOCCL_TSAN_RELEASE(out.address);
#if defined(__SANITIZE_THREAD__)
        byRef_.push_back(out.address);
#endif
        if (std::find(directSends_.begin(), directSends_.end(), sc) == directSends_.end()) directSends_.push_back(sc);
      } else if (value != sdata && bytes) {
        copyBytes(sdata, value, bytes);
      }
      const PeerPart* part = s.src.buf == Buf::Part ? &call_.parts[s.src.part] : nullptr;
      sh->opSeq = part ? part->seq : call_.opSeq;
      sh->count = part ? part->count : call_.count;
      sh->bytes = static_cast<uint32_t>(bytes);
      sh->coll = static_cast<uint8_t>(call_.coll);
      sh->dtype = static_cast<uint8_t>(part ? part->dtype : call_.dtype);
      sh->op = static_cast<uint8_t>(call_.op);
      sh->flags = flags;
      sh->root = call_.root;
      sh->sender = sched_->key.rank;
      sc->post();
    }
    if (copyAfterSend) copyBytes(dst, src, bytes);
    if (recvRef) HOCCL_TSAN_RELEASE(ref.address);  // our reads, before the sender reuses it
    if (rc) rc->release();
    *progressed = true;
    cs.done += n;
    if (cs.done == s.count) {
      cs.done = 0;
      ++cs.step;
    }
  }
  cs.waitPeer = -1;
  return Status();
}

Status CollTask::progress(bool* progressed) {
  if (done_) return Status();
  if (!setupError_.ok()) return setupError_;
  if (oneShot_) return oneShotShmProgress(progressed);
  bool all = true;
  for (size_t c = 0; c < chans_.size(); ++c) {
    HOCCL_TRY(advance(static_cast<int>(c), progressed));
    if (chans_[c].step < sched_->channels[c].steps.size()) all = false;
  }
  // Memory sent to receivers by reference must stay as it is until they
  // have read it: the call ends only when they have released every slot.
  if (all)
    for (SendConn* sc : directSends_)
      if (!sc->drained()) return Status();
  if (all) {
    for (uint64_t a : byRef_) HOCCL_TSAN_ACQUIRE(a);  // the receivers' reads
    finish();
  }
  return Status();
}

// The peer's buffer is gone (it returned from a failed call and freed it,
// or exited): a remote error, which the executor reports as the peer's own
// reason where the peer is telling everyone one.
Status CollTask::directFailure(int peer) const {
  return errorf(hocclRemoteError, "rank %d could not read rank %d's memory for %s (call #%llu): %s", sched_->key.rank,
                peer, describeCall(call_.coll, call_.count, call_.dtype, call_.op, call_.root).c_str(),
                static_cast<unsigned long long>(call_.opSeq), strerror(errno));
}

void CollTask::finish() {
  done_ = true;
  if (call_.op != RedOp::Avg) return;
  const ScheduleKey& k = sched_->key;
  bool owns = call_.coll == CollKind::AllReduce || call_.coll == CollKind::ReduceScatter ||
              (call_.coll == CollKind::Reduce && k.rank == call_.root);
  if (!owns) return;
  uint64_t n = outputCount(k);
  if (k.nranks > 1 && n > 0)
    ops_.avgFinish[static_cast<int>(call_.dtype)](call_.recvbuff, call_.recvbuff, n, k.nranks);
}

std::string CollTask::describeWait() const {
  std::string out;
  if (oneShot_ && !done_)
    return oneShotNext_ < 0 ? std::string("not yet posted to its shared-memory one-shot slot")
                            : "waiting for rank " + std::to_string(oneShotNext_) +
                                  "'s input in its shared-memory one-shot slot (one-shot call #" +
                                  std::to_string(call_.oneShotSeq) + ")";
  for (size_t c = 0; c < chans_.size(); ++c) {
    const ChannelState& cs = chans_[c];
    const auto& steps = sched_->channels[c].steps;
    if (cs.step >= steps.size()) continue;
    char buf[256];
    const Step& s = steps[cs.step];
    const char* what = cs.waitPeer < 0 ? "waiting on a dependency"
                       : cs.waitSend ? "waiting for a free slot to send to rank"
                                     : "waiting to receive from rank";
    snprintf(buf, sizeof buf, "%schannel %zu step %zu of %zu (%s, %llu of %llu elements done): %s",
             out.empty() ? "" : "; ", c, cs.step, steps.size(), stepKindName(s),
             static_cast<unsigned long long>(cs.done), static_cast<unsigned long long>(s.count), what);
    out += buf;
    if (cs.waitPeer >= 0) out += " " + std::to_string(cs.waitPeer);
    out += cs.step == 0 ? ", no step completed yet" : ", last completed step " + std::to_string(cs.step - 1);
  }
  // Every step done, but memory sent by reference is not read yet: the call
  // waits for the receiver (whose receive may never have been posted).
  if (out.empty() && !done_)
    for (SendConn* sc : directSends_) {
      if (sc->drained()) continue;
      const int peer = sc->peer();
      uint64_t bytes = 0;
      for (const PeerPart& p : call_.parts)
        if (p.send && p.peer == peer) bytes += p.count * dtypeSize(p.dtype);
      out += std::string(out.empty() ? "" : "; ") + "every step done; waiting for rank " + std::to_string(peer) +
             " to read what this rank sent it by reference";
      if (bytes) out += " (" + std::to_string(bytes) + " bytes)";
      out += ": its matching receive has not run";
    }
  return out;
}

std::vector<int> CollTask::waitingOn() const {
  std::vector<int> peers;
  if (oneShot_ && !done_ && oneShotNext_ >= 0) peers.push_back(oneShotNext_);
  for (size_t c = 0; c < chans_.size(); ++c)
    if (chans_[c].waitPeer >= 0) peers.push_back(chans_[c].waitPeer);
  if (peers.empty() && !done_)
    for (SendConn* sc : directSends_)
      if (!sc->drained()) peers.push_back(sc->peer());
  return peers;
}

}  // namespace hoccl
