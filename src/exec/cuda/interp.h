// The device-plan interpreter: runs one channel of one rank's plan
// (dev_plan.h) step by step, with the semantics of algorithms/schedule.h's
// Step, as the host executor (src/exec/executor.cc) runs a Schedule:
//   v = recv ? (reduce ? recv (op) src : recv) : (reduce ? src (op) dst : src)
//   if dst: dst = v;   if send: send v
// cut into messages of at most `sliceElems` elements (a zero-count step is
// one empty message: a sync step). A step with a dependency starts once
// the other channel's "steps done" counter says that step has completed.
// For avg, the steps sum, and once all the rank's channels are done each
// divides its share of the output by the number of ranks (finishAvg).
//
// The same code runs as a CUDA kernel (one CTA per channel, kernels.cu)
// and on the host (interp_host.h: ranks and channels as threads), through a
// lane policy L that provides
//   lane(), lanes()       this thread's index among the channel's threads
//   sync()                a barrier of those threads (__syncthreads)
//   shared()              4 words every lane of the channel sees
//   load(p) / store(p, v) 64-bit acquire load / release store (GPU or system
//                         scope: kArgOneGpu)
//   loadRelaxed(p)        64-bit relaxed load (a counter this thread owns)
//   load32(p), cas32(p, expected, v)   on the control words
//   nowNs(), relax()      a clock and a pause between polls
//   kPollShift            how often a wait looks up from its counter: every
//                         2^kPollShift polls (kDevPollShift on a GPU, where
//                         a poll is a 64 ns sleep; fewer on host threads,
//                         where each poll yields the core)
//   fetchAdd(p, v)        acquire-release add, returning the old value;
//   storeRelaxed(p, v)    both on the launch's own counters (this GPU)
// Lane 0 (the leader) does every wait and every counter update; all lanes
// move the data, each taking elements lane, lane + lanes, ...
//
// Connections. Each (sender, receiver, link) has a DevConnMem: kDevSlots
// slots of slotBytes, `tail` (messages posted, written by the sender; it
// lives with the receiver) and `head` (messages released, written by the
// receiver). Message k sits in slot k % kDevSlots. Its header carries the
// call's hash, its bytes and k, which the receiver checks: a mismatch is
// recorded in the shared DevControl and the run stops.
//
// Waits are bounded: every 2^L::kPollShift polls the leader reads the
// abort word and the error code (another channel failed: stop too) and the
// clock; a wait longer than timeoutNs records a timeout naming rank,
// channel, step and peer. Nothing waits forever.
#pragma once

#include <cstdint>

#include "src/exec/cuda/dev_plan.h"
#include "src/exec/cuda/interp_ops.h"
#include "src/exec/cuda/interp_vec.h"
#include "transport/device_conn_mem.h"

namespace hoccl::cuda {

inline constexpr uint32_t kDevPollShift = 10;

// Outcomes (DevControl::code, and what runChannel returns).
enum DevCode : uint32_t {
  kDevOk = 0,
  kDevAborted = 1,      // the abort word was set
  kDevMismatch = 2,     // a message header disagrees (call, bytes or sequence)
  kDevTimeout = 3,      // a wait passed timeoutNs
  kDevUnsupported = 4,  // a step this interpreter cannot run (Buf::Part)
  kDevStopped = 5,      // another channel failed first (returned, never recorded)
  kDevClosed = 6,       // the connection's other end went away (DevConnMem::closed)
};

// What the failing channel was doing (DevControl::what).
enum DevWhat : uint32_t {
  kWhatRecv = 0,   // waiting to receive from `peer`
  kWhatSend = 1,   // waiting for a free slot to send to `peer`
  kWhatDep = 2,    // waiting for channel `peer`'s step `expected` (a dependency)
  kWhatCall = 3,   // header's call hash: expected vs got
  kWhatBytes = 4,  // header's bytes
  kWhatSeq = 5,    // header's sequence number
  kWhatPart = 6,   // a point-to-point buffer
  kWhatStart = 7,  // the launch began after its communicator was aborted
};

// Shared by every channel of every rank of one run. The host sets `abort`;
// the first failure claims `code` (compare-and-swap) and fills the rest,
// which are valid once the run has ended.
struct DevControl {
  uint32_t abort;
  uint32_t code;
  int32_t rank, channel, step, peer;
  uint32_t what;
  uint32_t reserved;
  uint64_t expected, got;
};

struct InterpArgs {
  const uint8_t* image;       // the rank's plan image (checked by readPlanImage)
  char* input;                // Buf::Input, Output, Scratch bases
  char* output;
  char* scratch;
  DevConnMem* const* conns;   // per plan connection (DevChannel::firstConn + index)
  uint64_t* stepsDone;        // per channel of this rank: steps completed
  DevControl* control;
  uint64_t call;              // the call's hash, written and checked in headers
  uint64_t sliceElems;        // elements per message, at most one slot
  uint64_t timeoutNs;         // longest wait; 0: until aborted
  uint32_t flags;             // kArg* bits
};

// InterpArgs::flags. kArgOneGpu: every peer of the launch runs on this GPU
// and every connection lies in its memory, so the counters that hand slots
// over need only GPU scope (a system-scope release costs microseconds per
// message on an H100); without it they are system-scope.
constexpr uint32_t kArgOneGpu = 1;

namespace interp_detail {

template <class L>
HOCCL_HD inline void fail(L& l, const InterpArgs& a, uint32_t code, uint32_t c, uint32_t step, int32_t peer,
                          uint32_t what, uint64_t expected, uint64_t got) {
  DevControl* k = a.control;
  if (!l.cas32(&k->code, 0, code)) return;  // someone failed first
  k->rank = reinterpret_cast<const DevPlanHeader*>(a.image)->rank;
  k->channel = int32_t(c);
  k->step = int32_t(step);
  k->peer = peer;
  k->what = what;
  k->expected = expected;
  k->got = got;
}

// Leader only: waits until *ctr >= want. Returns kDevOk, or why it stopped
// (recorded unless another channel failed first).
// `closed`: the connection's closed word (DevConnMem::closed), or null.
template <class L>
HOCCL_HD inline uint32_t waitFor(L& l, const InterpArgs& a, const uint64_t* ctr, uint64_t want, uint32_t c,
                                 uint32_t step, int32_t peer, uint32_t what, const uint32_t* closed = nullptr) {
  uint64_t start = 0;
  uint32_t polls = 0;
  uint64_t seen;
  while ((seen = l.load(ctr)) < want) {
    if ((++polls & ((1u << L::kPollShift) - 1)) == 0) {
      // Closed after its last counter update: one more look settles it.
      if (closed && l.load32(closed) && (seen = l.load(ctr)) < want) {
        fail(l, a, kDevClosed, c, step, peer, what, want, seen);
        return kDevClosed;
      }
      if (l.load32(&a.control->abort)) {
        fail(l, a, kDevAborted, c, step, peer, what, want, seen);
        return kDevAborted;
      }
      if (l.load32(&a.control->code)) return kDevStopped;
      const uint64_t now = l.nowNs();
      if (start == 0) {
        start = now;
      } else if (a.timeoutNs && now - start > a.timeoutNs) {
        fail(l, a, kDevTimeout, c, step, peer, what, want, seen);
        return kDevTimeout;
      }
    }
    l.relax();
  }
  return kDevOk;
}

template <class T>
HOCCL_HD inline T* at(const InterpArgs& a, uint8_t buf, uint64_t off) {
  char* base = buf == 1 ? a.input : buf == 2 ? a.output : buf == 3 ? a.scratch : nullptr;
  return base ? reinterpret_cast<T*>(base) + off : nullptr;
}

// v = r (op) s into d and w (either may be null), 16 bytes at a time
// where the pointers allow (interp_vec.h).
template <class T, class Op, class L>
HOCCL_HD inline void reduceData(L& l, uint64_t n, const T* r, const T* s, T* d, T* w) {
  const VecSplit sp = vecSplit<T>(n, r, s, d, w);
  constexpr uint32_t kBatch = kReduceBatch<T>;
#if defined(__CUDA_ARCH__)
  Pack16<T> x[kBatch], y[kBatch];  // (zeroing them made ptxas spill f16 on sm_100)
#else
  Pack16<T> x[kBatch] = {}, y[kBatch] = {};  // g++ cannot see that store(j, k) follows load(j, k)
#endif
  forEachSplitBatched<T, kBatch>(
      l, n, sp,
      [&](uint64_t j) {
        const T v = Op::apply(r[j], s[j]);
        if (d) d[j] = v;
        if (w) w[j] = v;
      },
      [&](uint64_t j, uint32_t b) {
        x[b] = load16(r + j);
        y[b] = load16(s + j);
      },
      [&](uint64_t j, uint32_t b) {
        Pack16<T> v;
        HOCCL_UNROLL
        for (uint32_t k = 0; k < Pack16<T>::kElems; ++k) v.e[k] = Op::apply(x[b].e[k], y[b].e[k]);
        if (d) store16(d + j, v);
        if (w) store16(w + j, v);
      });
}

// from into to and out (either may be null; from null: nothing).
template <class B, class L>
HOCCL_HD inline void copyData(L& l, uint64_t n, const B* from, B* to, B* out) {
  if (!from || (!to && !out)) return;
  const VecSplit sp = vecSplit<B>(n, from, to, out);
#if defined(__CUDA_ARCH__)
  Pack16<B> x[kVecBatch];
#else
  Pack16<B> x[kVecBatch] = {};
#endif
  forEachSplitBatched<B, kVecBatch>(
      l, n, sp,
      [&](uint64_t j) {
        const B v = from[j];
        if (to) to[j] = v;
        if (out) out[j] = v;
      },
      [&](uint64_t j, uint32_t b) { x[b] = load16(from + j); },
      [&](uint64_t j, uint32_t b) {
        if (to) store16(to + j, x[b]);
        if (out) store16(out + j, x[b]);
      });
}

// Avg's end: once every channel of the rank has completed its steps (the
// output is reduced), channel c divides its share of the output, in place,
// as DataOps' avgFinish does. Which ranks divide: CollTask::finish's rule.
template <class T, class Op, class L>
HOCCL_HD inline uint32_t finishAvg(const InterpArgs& a, uint32_t c, L& l) {
  const DevPlanHeader* h = reinterpret_cast<const DevPlanHeader*>(a.image);
  const bool owns = h->coll == kCollAllReduce || h->coll == kCollReduceScatter ||
                    (h->coll == kCollReduce && h->rank == h->root);
  if (!owns || h->nranks <= 1 || h->count == 0) return kDevOk;
  uint64_t* shared = l.shared();
  if (l.lane() == 0) {
    const DevPlanLayout lay = planLayout(h->nchannels, h->nconns, h->nsteps);
    const DevChannel* chans = reinterpret_cast<const DevChannel*>(a.image + lay.channels);
    uint32_t code = kDevOk;
    for (uint32_t o = 0; o < h->nchannels && code == kDevOk; ++o)
      if (o != c) code = waitFor(l, a, a.stepsDone + o, chans[o].nsteps, c, chans[c].nsteps, int32_t(o), kWhatDep);
    shared[0] = code;
  }
  l.sync();
  const uint32_t code = uint32_t(shared[0]);
  if (code != kDevOk) return code;
  // Channel c's share of the count elements: part c of nch, as partStart cuts.
  const uint64_t nch = h->nchannels, per = h->count / nch, extra = h->count % nch;
  const uint64_t lo = c * per + (c < extra ? c : extra), hi = lo + per + (c < extra ? 1 : 0);
  T* out = reinterpret_cast<T*>(a.output) + lo;
  const uint64_t n = hi - lo;
  const uint32_t nranks = uint32_t(h->nranks);
  forEachSplit<T>(
      l, n, vecSplit<T>(n, out), [&](uint64_t j) { out[j] = Op::avgDivide(out[j], nranks); },
      [&](uint64_t j) {
        Pack16<T> v = load16(out + j);
        HOCCL_UNROLL
        for (uint32_t k = 0; k < Pack16<T>::kElems; ++k) v.e[k] = Op::avgDivide(v.e[k], nranks);
        store16(out + j, v);
      });
  return kDevOk;
}

}  // namespace interp_detail

// Runs channel `c` of the plan in `a` to its end. Every lane of the channel
// calls it; all return the same code (kDevOk when every step completed).
template <class T, class Op, class L>
HOCCL_HD inline uint32_t runChannel(const InterpArgs& a, uint32_t c, L& l) {
  using B = typename BitsOf<int(sizeof(T))>::type;
  using namespace interp_detail;
  const DevPlanHeader* h = reinterpret_cast<const DevPlanHeader*>(a.image);
  const DevPlanLayout lay = planLayout(h->nchannels, h->nconns, h->nsteps);
  const DevChannel ch = reinterpret_cast<const DevChannel*>(a.image + lay.channels)[c];
  const DevConn* conns = reinterpret_cast<const DevConn*>(a.image + lay.conns) + ch.firstConn;
  const DevStep* steps = reinterpret_cast<const DevStep*>(a.image + lay.steps) + ch.firstStep;
  DevConnMem* const* mem = a.conns + ch.firstConn;
  uint64_t* shared = l.shared();
  const bool leader = l.lane() == 0;
  // A launch queued behind one that failed or was aborted moves nothing:
  // its first messages, sent before any wait would look at the abort word,
  // would reach peers still inside the failed call as a call mismatch.
  if (leader) {
    uint32_t code = kDevOk;
    if (l.load32(&a.control->abort)) {
      fail(l, a, kDevAborted, c, 0, -1, kWhatStart, 0, 0);
      code = kDevAborted;
    } else if (l.load32(&a.control->code)) {
      code = kDevStopped;
    }
    shared[3] = code;  // a word the steps below do not use
  }
  l.sync();
  if (shared[3] != kDevOk) return uint32_t(shared[3]);
  for (uint32_t i = 0; i < ch.nsteps; ++i) {
    const DevStep st = steps[i];
    DevConnMem* rm = st.recvConn >= 0 ? mem[st.recvConn] : nullptr;
    DevConnMem* wm = st.sendConn >= 0 ? mem[st.sendConn] : nullptr;
    const int32_t rpeer = rm ? conns[st.recvConn].peer : -1, wpeer = wm ? conns[st.sendConn].peer : -1;
    uint64_t off = 0;
    do {
      const uint64_t n = st.count - off < a.sliceElems ? st.count - off : a.sliceElems;
      const uint32_t bytes = uint32_t(n * sizeof(T));
      if (leader) {
        uint32_t code = kDevOk;
        if (st.srcBuf == 4 || st.dstBuf == 4) {
          fail(l, a, kDevUnsupported, c, i, -1, kWhatPart, 0, 0);
          code = kDevUnsupported;
        }
        if (code == kDevOk && off == 0 && st.depChannel >= 0)
          code = waitFor(l, a, a.stepsDone + st.depChannel, uint64_t(st.depStep) + 1, c, i, st.depChannel,
                         kWhatDep);
        uint64_t rpos = 0, wpos = 0;
        if (code == kDevOk && rm) {
          rpos = l.loadRelaxed(&rm->head);
          code = waitFor(l, a, &rm->tail, rpos + 1, c, i, rpeer, kWhatRecv, &rm->closed);
          if (code == kDevOk) {
            const DevSlotHeader hd = rm->header[rpos % kDevSlots];
            uint32_t what = hd.call != a.call ? kWhatCall : hd.bytes != bytes ? kWhatBytes
                            : hd.seq != uint32_t(rpos) ? kWhatSeq : kWhatRecv;
            if (what != kWhatRecv) {
              const uint64_t want = what == kWhatCall ? a.call : what == kWhatBytes ? bytes : uint32_t(rpos);
              const uint64_t got = what == kWhatCall ? hd.call : what == kWhatBytes ? hd.bytes : hd.seq;
              fail(l, a, kDevMismatch, c, i, rpeer, what, want, got);
              code = kDevMismatch;
            }
          }
        }
        if (code == kDevOk && wm) {
          wpos = l.loadRelaxed(&wm->tail);
          if (wpos + 1 > kDevSlots)
            code = waitFor(l, a, &wm->head, wpos + 1 - kDevSlots, c, i, wpeer, kWhatSend, &wm->closed);
        }
        shared[0] = code;
        shared[1] = rpos;
        shared[2] = wpos;
      }
      l.sync();
      const uint32_t code = uint32_t(shared[0]);
      if (code != kDevOk) return code;
      const T* r = rm ? reinterpret_cast<const T*>(rm->slots() + (shared[1] % kDevSlots) * rm->slotBytes) : nullptr;
      T* w = wm ? reinterpret_cast<T*>(wm->slots() + (shared[2] % kDevSlots) * wm->slotBytes) : nullptr;
      const T* s = at<T>(a, st.srcBuf, st.srcOff + off);
      T* d = at<T>(a, st.dstBuf, st.dstOff + off);
      if (st.flags & kStepReduce) {
        // received (op) src, or for a local reduce src (op) dst; one call
        // site (a second one made ptxas spill f16 on sm_100).
        reduceData<T, Op>(l, n, r ? r : s, r ? s : d, d, w);
      } else {
        // A copy: bits, never values. Storing src onto itself is skipped.
        copyData<B>(l, n, reinterpret_cast<const B*>(r ? r : s), reinterpret_cast<B*>(d == s && !r ? nullptr : d),
                    reinterpret_cast<B*>(w));
      }
      l.sync();
      if (leader) {
        if (wm) {
          DevSlotHeader& hd = wm->header[shared[2] % kDevSlots];
          hd.call = a.call;
          hd.bytes = bytes;
          hd.seq = uint32_t(shared[2]);
          l.store(&wm->tail, shared[2] + 1);
        }
        if (rm) l.store(&rm->head, shared[1] + 1);
      }
      off += n;
    } while (off < st.count);
    if (leader) l.store(a.stepsDone + c, uint64_t(i) + 1);
  }
  if constexpr (Op::kKind == OpKind::Avg) {
    const uint32_t code = finishAvg<T, Op>(a, c, l);
    if (code != kDevOk) return code;
  }
  // The last channel of the launch to end zeroes the steps-done counters
  // for the plan's next launch (which the stream orders after this one),
  // so no memset precedes each launch. Being last, it knows every other
  // channel has ended all its waits on them. A launch that fails leaves
  // them as they are: its communicator is unusable.
  if (leader && l.fetchAdd(a.stepsDone + h->nchannels, 1) == h->nchannels - 1)
    for (uint32_t o = 0; o <= h->nchannels; ++o) l.storeRelaxed(a.stepsDone + o, 0);
  return kDevOk;
}

}  // namespace hoccl::cuda
