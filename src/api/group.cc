// hocclGroupStart/End: calls made in between are queued and run together,
// so one thread can drive several communicators (or ranks) at once.
#include <memory>
#include <vector>

#include "src/api/api_internal.h"
#include "base/tls.h"

using namespace hoccl;

namespace hoccl {
namespace {
// Deeper nesting is a missing hocclGroupEnd, not a design: refused before
// the count could wrap (2^31 starts made it negative).
constexpr int kMaxGroupDepth = 1 << 16;
HOCCL_THREAD_LOCAL int groupDepth = 0;
struct Queues {
  std::vector<CommCall> pending;
  std::vector<CommCall> pendingPeers;  // one SendRecv call per communicator
  Status refused;  // the first call of the group that was refused
  std::vector<hocclComm*> inits;  // hocclCommInitRank calls of the group, running
};
// A thread_local with a constructor is reached through a wrapper that
// calls __tls_get_addr on every access; a plain pointer is not. The owner
// (touched once per thread) frees the queues when the thread exits.
HOCCL_THREAD_LOCAL Queues* queues = nullptr;
thread_local std::unique_ptr<Queues> queuesOwner;
Queues& q() {
  if (!queues) {
    queuesOwner = std::make_unique<Queues>();
    queues = queuesOwner.get();
  }
  return *queues;
}
}  // namespace

bool groupActive() { return groupDepth > 0; }

void groupEnqueue(CommCall&& call) { q().pending.push_back(std::move(call)); }

hocclResult_t refuseCall(hocclComm* comm, const Status& st) {
  if (groupActive() && q().refused.ok()) q().refused = st;
  return report(comm, st);
}

CommCall& groupSlot() { return q().pending.emplace_back(); }
void groupDropSlot() { q().pending.pop_back(); }

void groupEnqueueInit(hocclComm* comm) { q().inits.push_back(comm); }

void groupEnqueuePeer(hocclComm* comm, const PeerPart& part) {
  for (CommCall& c : q().pendingPeers) {
    if (c.comm == comm && c.commSerial == comm->serial) {
      c.call.parts.push_back(part);
      return;
    }
  }
  q().pendingPeers.push_back(peerCall(comm, part));
}

}  // namespace hoccl

extern "C" {

hocclResult_t hocclGroupStart(void) {
  if (groupDepth >= kMaxGroupDepth)
    return refuseCall(nullptr, errorf(hocclInvalidUsage, "hocclGroupStart: groups nest at most %d deep on a thread "
                                      "(is a hocclGroupEnd missing?)", kMaxGroupDepth));
  ++groupDepth;
  return hocclSuccess;
}

hocclResult_t hocclGroupEnd(void) {
  if (groupDepth == 0)
    return report(nullptr, errorf(hocclInvalidUsage, "hocclGroupEnd without a matching hocclGroupStart"));
  if (--groupDepth > 0) return hocclSuccess;
  // The queue keeps its capacity from one group to the next: a group of one
  // call per iteration (a benchmark, a training step) allocates nothing here.
  Queues& queued = q();
  // The group's inits first: every one has its thread, so they meet at
  // the rendezvous whatever their order; the first error is the group's.
  if (!queued.inits.empty()) {
    std::vector<hocclComm*> inits;
    inits.swap(queued.inits);
    Status initSt;
    for (hocclComm* c : inits) {
      Status st = finishGroupedInit(c);
      if (initSt.ok() && !st.ok()) initSt = st;
    }
    if (!initSt.ok()) {
      queued.pending.clear();
      queued.pendingPeers.clear();
      queued.refused = Status();
      return report(nullptr, Status(initSt.code(), "hocclGroupEnd: " + initSt.message()));
    }
  }
  std::vector<CommCall>& calls = queued.pending;
  for (CommCall& c : queued.pendingPeers) calls.push_back(std::move(c));
  queued.pendingPeers.clear();
  struct Clear {
    std::vector<CommCall>& v;
    ~Clear() { v.clear(); }
  } clearAfter{calls};
  // As NCCL: a group in which a call was refused runs none of its calls,
  // and its hocclGroupEnd returns that call's error. Running the others
  // would leave the peers of the refused call waiting for it.
  if (!queued.refused.ok()) {
    Status refused = std::move(queued.refused);
    queued.refused = Status();
    return report(nullptr, Status(refused.code(), "hocclGroupEnd: none of the group's calls ran, because a call "
                                                  "inside the group failed: " + refused.message()));
  }
  if (calls.empty()) return hocclSuccess;
  // Every communicator is entered (checked live and held against a destroy
  // on another thread) before anything reads it. One destroyed since its
  // call was queued is refused, also when a new one took its address.
  CommUse first;
  std::vector<CommUse> more(calls.size() > 1 ? calls.size() - 1 : 0);
  for (size_t i = 0; i < calls.size(); ++i) {
    Status st = enterComm(calls[i].comm, i == 0 ? &first : &more[i - 1], "hocclGroupEnd");
    if (st.ok() && calls[i].comm->serial != calls[i].commSerial)
      st = errorf(hocclInvalidUsage, "hocclGroupEnd: comm %p was destroyed after a call of this group was queued on "
                  "it (the address now holds another communicator)", static_cast<void*>(calls[i].comm));
    if (!st.ok()) return report(nullptr, Status(st.code(), st.message() + "; nothing in the group ran"));
  }
  for (const CommCall& c : calls) {
    Status st = c.call.coll == CollKind::SendRecv ? checkSelfPairs(c.call, c.comm->rank) : Status();
    if (!st.ok()) return report(c.comm, st);
  }
  Status st = runCalls(calls.data(), calls.size());
  return report(st.ok() ? nullptr : calls[0].comm, st);
}

}  // extern "C"
