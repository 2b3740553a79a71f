// Signatures of stalled calls, compared across ranks (TaskOwner::crossCheckCall).
//
// Every message of a collective carries its signature, so ranks that
// disagree about a call are named as soon as one receives from another.
// Some disagreements change who sends: with roots 0 and 1, each rank of a
// reduce waits to receive from the other; a broadcast's non-roots wait for
// a root that runs a reduce; ranks whose calls differ in size may pick
// different algorithms and wait for each other's connections. Then nothing
// arrives and no header is compared. So a rank whose call stalls (in the
// progress loop, or waiting on the bootstrap while it sets up the call's
// connections) tells the ranks it waits for, once per call, which call it
// is in: a bootstrap notice over a short connection, as aborts travel.
// Each rank compares the notices it gets with its own call of that number,
// or a recent one, and fails with both calls named. A stall of a correct
// program costs one notice per peer waited on; a notice about a call the
// receiver has not reached waits until it gets there.
#include "src/comm/comm.h"

namespace {

// A notice's call, or false if its fields are out of range (a peer of
// another version, or garbage).
bool signatureFrom(const hoccl::CallNotice& n, hoccl::CallSignature* out) {
  if (n.coll > static_cast<uint8_t>(hoccl::CollKind::SendRecv) || n.dtype >= hoccl::kNumDTypes ||
      n.op > static_cast<uint8_t>(hoccl::RedOp::PreMulSum))
    return false;
  *out = {n.opSeq, n.count, n.root, static_cast<hoccl::CollKind>(n.coll), static_cast<hoccl::DType>(n.dtype),
          static_cast<hoccl::RedOp>(n.op)};
  return true;
}

}  // namespace

hoccl::Status hocclComm::crossCheckCall(const hoccl::CollCall& call, const std::vector<int>& waitingOn) {
  if (!boot || nranks < 2 || !settings.checkCalls) return hoccl::Status();
  return checkCallNotices(hoccl::signatureOf(call), call.coll != hoccl::CollKind::SendRecv, waitingOn,
                          boot->takeCallNotices());
}

void hocclComm::installCallCheck() {
  if (!boot || nranks < 2 || (!settings.checkCalls && !flight)) return;
  boot->setWaitHook([this](int peer, std::vector<hoccl::CallNotice> got) {
    if (settingUp && flight)
      flight->waiting(setupFlightId, "setting up its connections: waiting for rank " + std::to_string(peer), {peer});
    if (!settings.checkCalls) return hoccl::Status();
    if (!settingUp) {  // waiting in init or a split: keep what came for later
      for (const hoccl::CallNotice& n : got)
        if (earlyNotices.size() < 4 * kCallHistory) earlyNotices.push_back(n);
      return hoccl::Status();
    }
    return checkCallNotices(setupCall, true, {peer}, std::move(got));
  });
}

hoccl::Status hocclComm::checkCallNotices(const hoccl::CallSignature& current, bool collective,
                                         const std::vector<int>& waitingOn, std::vector<hoccl::CallNotice> got) {
  using namespace hoccl;
  // A point-to-point call carries the number of the collective before it:
  // it tells nobody, but still compares what others told.
  if (collective && current.opSeq > 0) {
    noticeSentFor.resize(nranks, 0);
    std::vector<bool> tell(nranks, false);
    bool any = false;
    for (int p : waitingOn) {
      if (p < 0 || p >= nranks || p == rank || noticeSentFor[p] == current.opSeq) continue;
      noticeSentFor[p] = current.opSeq;
      tell[p] = any = true;
    }
    if (any) {
      CallNotice n;
      n.rank = rank;
      n.root = current.root;
      n.opSeq = current.opSeq;
      n.count = current.count;
      n.coll = static_cast<uint8_t>(current.coll);
      n.dtype = static_cast<uint8_t>(current.dtype);
      n.op = static_cast<uint8_t>(current.op);
      boot->sendCallNotice(n, tell, 0.5);
    }
  }
  got.insert(got.begin(), earlyNotices.begin(), earlyNotices.end());
  earlyNotices.clear();
  const uint64_t reached = collective ? current.opSeq : opSeq;  // the last collective this rank has numbered
  for (const CallNotice& n : got) {
    if (n.opSeq > reached) {  // a call this rank has not reached yet
      if (earlyNotices.size() < 4 * kCallHistory) earlyNotices.push_back(n);
      continue;
    }
    const CallSignature& mine =
        collective && n.opSeq == current.opSeq ? current : callHistory[n.opSeq % kCallHistory];
    if (mine.opSeq != n.opSeq) continue;  // too old to compare
    CallSignature theirs;
    if (!signatureFrom(n, &theirs))
      return errorf(hocclInvalidUsage,
                    "rank %d: rank %d reported its call #%llu with fields out of range (collective %u, type %u, "
                    "op %u): a peer of another hoccl version?",
                    rank, n.rank, static_cast<unsigned long long>(n.opSeq), n.coll, n.dtype, n.op);
    if (!(theirs == mine)) return collectiveMismatch(rank, mine, n.rank, theirs, " (which it reported while waiting)");
  }
  return Status();
}
