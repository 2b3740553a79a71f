// Symbolic execution of the schedules of all ranks. A value is (set of ranks
// whose contributions it sums, element index); input element i of rank r is
// ({r}, i). Buffers hold runs of values whose index rises by one per element,
// so a step costs O(runs touched), not O(count): P = 256 with large counts
// stays cheap. Sets are interned, and unions of two sets memoised.
#include "algorithms/verifier.h"

#include <deque>
#include <map>
#include <optional>
#include <tuple>

#include "algorithms/executable.h"
#include "algorithms/verifier_detail.h"

namespace hoccl {
namespace {

using namespace verify;

struct Msg {
  uint64_t count;
  size_t step;  // sender's step index
  int ch;       // sender's channel
  uint32_t id;  // sender's step id (Trace)
  Segs vals;
};

enum class Progress { Ran, Blocked, Failed };

class Verifier {
 public:
  Verifier(const std::vector<Schedule>& s, int slots) : sch_(s), slots_(slots) {}

  VerifyResult run() {
    VerifyResult res;
    if (!checkKeys() || !checkSteps()) {
      res.ok = false;
      res.error = err_;
      return res;
    }
    pool_.emplace(key_.nranks);
    setupBuffers();
    res.ok = execute() && checkFinal() && checkZeroCopyMarks();
    res.error = err_;
    return res;
  }

 private:
  bool fail(const std::string& msg) {
    if (err_.empty()) err_ = msg;
    return false;
  }
  std::string where(int r, int c, size_t i) const {
    const Step& s = sch_[r].channels[c].steps[i];
    return cat("rank ", r, " ch ", c, " step ", i, " (", stepKindName(s), " n ", s.count, ")");
  }
  // The queue of messages from `from` to `to` on link l.
  uint64_t edge(int from, int to, int l) const {
    return (uint64_t(from) * key_.nranks + to) * maxCh_ + l;
  }
  int link(int r, int c) const { return linkOf(sch_[r].channels, c); }
  uint64_t bufSize(int r, Buf b) const {
    if (b == Buf::Input) return inputCount(sch_[r].key);
    if (b == Buf::Output) return outputCount(sch_[r].key);
    return sch_[r].scratchCount;
  }

  bool checkKeys();
  bool checkSteps();
  void setupBuffers();
  bool execute();
  Progress tryStep(int r, int c);
  bool readSlice(int r, int c, size_t i, Slice s, uint64_t n, Segs& out);
  bool writeSlice(int r, int c, size_t i, Slice s, const Segs& v);
  bool combine(int r, int c, size_t i, const Segs& a, const Segs& b, Segs& out);
  std::string blockedReason(int r, int c);
  bool checkFinal();
  bool checkZeroCopyMarks() {
    const std::string e = checkZeroCopy(sch_, views_, trace_);
    return e.empty() || fail(e);
  }
  // Output of rank r is blocks of blockLen elements; expect(j) gives the set
  // and first element index block j must hold.
  struct Expect {
    uint32_t set;
    uint64_t idx;
  };
  template <class F>
  bool checkOutput(int r, uint64_t blockLen, F expect);
  // Rank r's Output[offset, offset+len) holds rank `from`'s input from idx.
  bool checkRange(int r, uint64_t offset, uint64_t len, uint32_t from, uint64_t idx);
  bool checkAllToAllv(int r);

  const std::vector<Schedule>& sch_;
  const int slots_;
  ScheduleKey key_;
  int maxCh_ = 0;
  std::string err_;
  std::optional<SetPool> pool_;
  std::vector<std::array<RunBuffer, 3>> stores_;
  std::vector<std::array<View, 4>> views_;  // indexed by Buf
  std::vector<std::vector<size_t>> pc_;     // next step per rank and channel
  std::unordered_map<uint64_t, std::deque<Msg>> queues_;
  std::deque<std::pair<int, int>> work_;
  std::vector<char> queued_;
  Trace trace_;
};

bool Verifier::checkKeys() {
  if (sch_.empty()) return fail("no schedules");
  key_ = sch_[0].key;
  const int P = key_.nranks;
  if (P < 1 || static_cast<size_t>(P) != sch_.size()) {
    return fail(cat("key.nranks is ", P, " but there are ", sch_.size(), " schedules"));
  }
  const bool rooted = key_.coll == CollKind::Broadcast || key_.coll == CollKind::Reduce;
  if (rooted && (key_.root < 0 || key_.root >= P)) return fail("root out of range");
  for (int r = 0; r < P; ++r) {
    const ScheduleKey& k = sch_[r].key;
    if (k.rank != r) return fail(cat("schedule ", r, " has key.rank ", k.rank));
    // Placement may differ: each rank's call is in place or not on its own.
    if (k.coll != key_.coll || k.nranks != P || k.count != key_.count || (rooted && k.root != key_.root)) {
      return fail(cat("rank ", r, " has a different key from rank 0"));
    }
    if (k.coll == CollKind::SendRecv) return fail("SendRecv schedules name the caller's buffers: not verifiable");
    if (k.coll == CollKind::AllToAllv && (!k.vlayout || k.vlayout->size() != 4 * size_t(P)))
      return fail(cat("rank ", r, " has no all-to-all-v layout of 4 x ", P, " counts"));
    maxCh_ = std::max(maxCh_, static_cast<int>(sch_[r].channels.size()));
  }
  return true;
}

bool Verifier::checkSteps() {
  const int P = key_.nranks;
  for (int r = 0; r < P; ++r) {
    const std::vector<Channel>& chs = sch_[r].channels;
    // One ordered stream per connection: a second channel sending to the
    // same peer on the same link would interleave with the first.
    std::map<std::tuple<int, int, bool>, int> owner;  // (peer, link, send) -> channel
    for (int c = 0; c < static_cast<int>(chs.size()); ++c) {
      if (chs[c].link >= maxCh_) return fail(cat("rank ", r, " ch ", c, ": link ", chs[c].link, " is out of range"));
      for (size_t i = 0; i < chs[c].steps.size(); ++i) {
        const Step& st = chs[c].steps[i];
        for (bool send : {true, false}) {
          const int peer = send ? st.sendPeer : st.recvPeer;
          if (peer < 0) continue;
          auto [it, fresh] = owner.emplace(std::make_tuple(peer, link(r, c), send), c);
          if (!fresh && it->second != c)
            return fail(cat(where(r, c, i), ": ch ", it->second, " also ", send ? "sends to" : "receives from",
                            " rank ", peer, " on link ", link(r, c)));
        }
        const Step& s = chs[c].steps[i];
        if (std::string(stepKindName(s)) == "invalid") return fail(where(r, c, i) + ": invalid step kind");
        for (int32_t peer : {s.recvPeer, s.sendPeer}) {
          if (peer >= P || peer == r) return fail(cat(where(r, c, i), ": peer ", peer, " is invalid"));
        }
        for (const Slice& sl : {s.src, s.dst}) {
          if (!sl.present()) continue;
          if (sl.buf > Buf::Scratch) return fail(where(r, c, i) + ": unknown buffer");
          const uint64_t size = bufSize(r, sl.buf);
          if (sl.offset > size || s.count > size - sl.offset) {
            return fail(cat(where(r, c, i), ": ", bufName(sl.buf), "[", sl.offset, "+", s.count,
                            "] is outside the buffer of ", size, " elements"));
          }
        }
        if (s.depChannel >= 0 &&
            (s.depChannel >= static_cast<int>(chs.size()) || s.depStep < 0 ||
             static_cast<size_t>(s.depStep) >= chs[s.depChannel].steps.size())) {
          return fail(where(r, c, i) + ": depends on a step that does not exist");
        }
      }
    }
  }
  return true;
}

void Verifier::setupBuffers() {
  const int P = key_.nranks;
  stores_.resize(P);
  views_.resize(P);
  for (int r = 0; r < P; ++r) {
    const ScheduleKey& k = sch_[r].key;
    const uint64_t in = inputCount(k), out = outputCount(k);
    const bool inputDefined = !(k.coll == CollKind::Broadcast && r != k.root);
    const Segs inputVals{Seg{in, 0, inputDefined ? static_cast<uint32_t>(r) : kUndef}};
    auto& st = stores_[r];
    auto& v = views_[r];
    st[2].reset(sch_[r].scratchCount);
    v[size_t(Buf::Scratch)] = View{2, 0, sch_[r].scratchCount};
    if (!k.inPlace) {
      st[0].reset(in);
      st[0].write(0, inputVals);
      st[1].reset(out);
      v[size_t(Buf::Input)] = View{0, 0, in};
      v[size_t(Buf::Output)] = View{1, 0, out};
    } else if (k.coll == CollKind::ReduceScatter) {
      st[0].reset(in);
      st[0].write(0, inputVals);
      v[size_t(Buf::Input)] = View{0, 0, in};
      v[size_t(Buf::Output)] = View{0, inPlaceOffset(k), out};
    } else {
      // All-gather: Input is a piece of Output; the others share one buffer.
      const uint64_t inBase = k.coll == CollKind::AllGather ? inPlaceOffset(k) : 0;
      st[1].reset(out);
      st[1].write(inBase, inputVals);
      v[size_t(Buf::Input)] = View{1, inBase, in};
      v[size_t(Buf::Output)] = View{1, 0, out};
    }
  }
}

bool Verifier::readSlice(int r, int c, size_t i, Slice s, uint64_t n, Segs& out) {
  if (n == 0) return true;  // a zero-count step reads nothing
  const View& v = views_[r][size_t(s.buf)];
  stores_[r][v.store].read(v.base + s.offset, n, out);
  uint64_t pos = s.offset;
  for (const Seg& g : out) {
    if (g.set == kUndef) {
      return fail(cat(where(r, c, i), ": reads ", bufName(s.buf), "[", pos, "] before anything wrote it"));
    }
    pos += g.len;
  }
  return true;
}

bool Verifier::writeSlice(int r, int c, size_t i, Slice s, const Segs& vals) {
  if (sch_[r].channels[c].steps[i].count == 0) return true;  // touches nothing
  const View& v = views_[r][size_t(s.buf)];
  if (s.buf == Buf::Input) {
    const View& o = views_[r][size_t(Buf::Output)];
    const uint64_t n = sch_[r].channels[c].steps[i].count;
    const bool aliased = sch_[r].key.inPlace && o.store == v.store && v.base + s.offset >= o.base &&
                         v.base + s.offset + n <= o.base + o.size;
    if (!aliased) return fail(where(r, c, i) + ": writes the input buffer where it is not the output");
  }
  stores_[r][v.store].write(v.base + s.offset, vals);
  return true;
}

bool Verifier::combine(int r, int c, size_t i, const Segs& a, const Segs& b, Segs& out) {
  size_t ia = 0, ib = 0;
  uint64_t ua = 0, ub = 0, pos = 0;  // elements used of a[ia], b[ib]
  while (ia < a.size() && ib < b.size()) {
    const Seg &x = a[ia], &y = b[ib];
    const uint64_t take = std::min(x.len - ua, y.len - ub);
    const uint64_t xi = x.idx + ua, yi = y.idx + ub;
    if (xi != yi) {
      return fail(cat(where(r, c, i), ": combines element ", xi, " with element ", yi, " at position ", pos));
    }
    int dup = -1;
    const uint32_t set = pool_->unite(x.set, y.set, &dup);
    if (set == kUndef) {
      return fail(cat(where(r, c, i), ": contribution of rank ", dup, " counted twice (element ", xi, ")"));
    }
    append(out, Seg{take, xi, set});
    pos += take;
    if ((ua += take) == x.len) ++ia, ua = 0;
    if ((ub += take) == y.len) ++ib, ub = 0;
  }
  return true;
}

Progress Verifier::tryStep(int r, int c) {
  const std::vector<Step>& steps = sch_[r].channels[c].steps;
  const size_t i = pc_[r][c];
  if (i >= steps.size()) return Progress::Blocked;
  const Step& s = steps[i];
  if (s.depChannel >= 0 && pc_[r][s.depChannel] <= static_cast<size_t>(s.depStep)) return Progress::Blocked;
  std::deque<Msg>* in = nullptr;
  if (s.recvPeer >= 0) {
    in = &queues_[edge(s.recvPeer, r, link(r, c))];
    if (in->empty()) return Progress::Blocked;
    if (in->front().count != s.count) {
      fail(cat(where(r, c, i), ": count mismatch: receives ", s.count, " elements from rank ", s.recvPeer,
               " whose step ", in->front().step, " sent ", in->front().count));
      return Progress::Failed;
    }
  }
  std::deque<Msg>* out = s.sendPeer >= 0 ? &queues_[edge(r, s.sendPeer, link(r, c))] : nullptr;
  if (out && slots_ > 0 && out->size() >= static_cast<size_t>(slots_)) return Progress::Blocked;

  Segs local, vals;
  if ((!in || s.reduce) && !readSlice(r, c, i, s.src, s.count, local)) return Progress::Failed;
  if (in && s.reduce) {
    if (!combine(r, c, i, in->front().vals, local, vals)) return Progress::Failed;
  } else if (s.reduce) {  // a local reduce: src (op) dst
    Segs other;
    if (!readSlice(r, c, i, s.dst, s.count, other)) return Progress::Failed;
    if (!combine(r, c, i, local, other, vals)) return Progress::Failed;
  } else {
    vals = in ? std::move(in->front().vals) : std::move(local);
  }
  const uint32_t id = trace_.first[r][c] + static_cast<uint32_t>(i);
  if (in) {
    trace_.sender[id] = in->front().id;
    trace_.receiver[in->front().id] = id;
    in->pop_front();
  }
  if (s.dst.present() && !writeSlice(r, c, i, s.dst, vals)) return Progress::Failed;
  if (out) out->push_back(Msg{s.count, i, c, id, std::move(vals)});
  trace_.order.push_back(id);
  ++pc_[r][c];

  auto wake = [&](int rank, int ch) {
    char& q = queued_[size_t(rank) * maxCh_ + ch];
    if (!q) q = 1, work_.emplace_back(rank, ch);
  };
  // The peers' channels on this link (the one talking to this rank).
  const int l = link(r, c);
  for (int peer : {s.recvPeer, s.sendPeer}) {
    if (peer < 0) continue;
    const auto& pch = sch_[peer].channels;
    for (int d = 0; d < static_cast<int>(pch.size()); ++d)
      if (linkOf(pch, d) == l) wake(peer, d);
  }
  for (int d = 0; d < static_cast<int>(sch_[r].channels.size()); ++d) {
    if (d != c) wake(r, d);
  }
  return Progress::Ran;
}

std::string Verifier::blockedReason(int r, int c) {
  const size_t i = pc_[r][c];
  const Step& s = sch_[r].channels[c].steps[i];
  std::string why = where(r, c, i);
  if (s.depChannel >= 0 && pc_[r][s.depChannel] <= static_cast<size_t>(s.depStep)) {
    return cat(why, " waits for ch ", s.depChannel, " step ", s.depStep);
  }
  if (s.recvPeer >= 0 && queues_[edge(s.recvPeer, r, link(r, c))].empty()) {
    return cat(why, " waits for a message from rank ", s.recvPeer);
  }
  return cat(why, " waits for room to send to rank ", s.sendPeer, " (", queues_[edge(r, s.sendPeer, link(r, c))].size(),
             " queued)");
}

bool Verifier::execute() {
  const int P = key_.nranks;
  pc_.assign(P, {});
  queued_.assign(size_t(P) * maxCh_, 1);
  uint32_t nsteps = 0;
  trace_.first.assign(P, {});
  for (int r = 0; r < P; ++r) {
    for (const Channel& ch : sch_[r].channels) {
      trace_.first[r].push_back(nsteps);
      nsteps += static_cast<uint32_t>(ch.steps.size());
    }
  }
  trace_.order.reserve(nsteps);
  trace_.sender.assign(nsteps, Trace::kNone);
  trace_.receiver.assign(nsteps, Trace::kNone);
  for (int r = 0; r < P; ++r) {
    pc_[r].assign(sch_[r].channels.size(), 0);
    for (int c = 0; c < static_cast<int>(sch_[r].channels.size()); ++c) work_.emplace_back(r, c);
  }
  while (!work_.empty()) {
    const auto [r, c] = work_.front();
    work_.pop_front();
    queued_[size_t(r) * maxCh_ + c] = 0;
    for (Progress p; (p = tryStep(r, c)) != Progress::Blocked;) {
      if (p == Progress::Failed) return false;
    }
  }
  std::string stuck;
  int nstuck = 0;
  for (int r = 0; r < P; ++r) {
    for (int c = 0; c < static_cast<int>(pc_[r].size()); ++c) {
      if (pc_[r][c] >= sch_[r].channels[c].steps.size()) continue;
      if (nstuck++ < 6) stuck += (stuck.empty() ? "" : "; ") + blockedReason(r, c);
    }
  }
  if (nstuck) {
    return fail(cat("deadlock: ", stuck, nstuck > 6 ? cat("; and ", nstuck - 6, " more") : ""));
  }
  for (auto& [e, q] : queues_) {
    if (q.empty()) continue;
    const uint64_t to = (e / maxCh_) % P, from = e / maxCh_ / P;
    return fail(cat("rank ", from, " ch ", q.front().ch, " step ", q.front().step, " sends ", q.front().count,
                    " elements to rank ", to, " that are never received"));
  }
  return true;
}

template <class F>
bool Verifier::checkOutput(int r, uint64_t blockLen, F expect) {
  const View& v = views_[r][size_t(Buf::Output)];
  Segs got;
  stores_[r][v.store].read(v.base, v.size, got);
  uint64_t pos = 0;
  for (const Seg& g : got) {
    for (uint64_t used = 0; used < g.len;) {
      const uint64_t block = pos / blockLen, inBlock = pos % blockLen;
      const uint64_t take = std::min(g.len - used, blockLen - inBlock);
      const Expect want = expect(block);
      const uint64_t gotIdx = g.idx + used, wantIdx = want.idx + inBlock;
      if (g.set != want.set || (g.set != kUndef && gotIdx != wantIdx)) {
        std::string detail = g.set == kUndef ? "it was never written"
                             : g.set != want.set ? pool_->difference(want.set, g.set)
                                                 : cat("it holds element ", gotIdx);
        return fail(cat("rank ", r, " Output[", pos, "] should hold element ", wantIdx, " of ",
                        pool_->describe(want.set), ", but ", detail));
      }
      used += take;
      pos += take;
    }
  }
  return true;
}

bool Verifier::checkRange(int r, uint64_t offset, uint64_t len, uint32_t from, uint64_t idx) {
  const View& v = views_[r][size_t(Buf::Output)];
  Segs got;
  stores_[r][v.store].read(v.base + offset, len, got);
  uint64_t pos = offset, want = idx;
  for (const Seg& g : got) {
    if (g.set != from || g.idx != want) {
      std::string detail = g.set == kUndef ? "it was never written"
                           : g.set != from ? pool_->difference(from, g.set)
                                           : cat("it holds element ", g.idx);
      return fail(cat("rank ", r, " Output[", pos, "] should hold element ", want, " of ", pool_->describe(from),
                      ", but ", detail));
    }
    pos += g.len;
    want += g.len;
  }
  return true;
}

// Rank r's block from rank j sits at its rdispls[j] and holds rank j's
// input from j's sdispls[r], recvcounts[j] elements (which must equal j's
// sendcounts[r]: the message counts were checked as they were received).
bool Verifier::checkAllToAllv(int r) {
  const size_t P = static_cast<size_t>(key_.nranks);
  const std::vector<uint64_t>& mine = *sch_[r].key.vlayout;
  for (size_t j = 0; j < P; ++j) {
    const std::vector<uint64_t>& theirs = *sch_[j].key.vlayout;
    if (mine[2 * P + j] != theirs[r])
      return fail(cat("rank ", r, " expects ", mine[2 * P + j], " elements from rank ", j, " which sends it ",
                      theirs[r]));
    if (!checkRange(r, mine[3 * P + j], mine[2 * P + j], static_cast<uint32_t>(j), theirs[P + r])) return false;
  }
  return true;
}

bool Verifier::checkFinal() {
  const int P = key_.nranks;
  const uint64_t n = key_.count;
  const uint32_t all = pool_->full();
  for (int r = 0; r < P; ++r) {
    bool ok = true;
    switch (key_.coll) {
      case CollKind::AllReduce:
        ok = checkOutput(r, n, [&](uint64_t) { return Expect{all, 0}; });
        break;
      case CollKind::ReduceScatter:
        ok = checkOutput(r, n, [&](uint64_t) { return Expect{all, uint64_t(r) * n}; });
        break;
      case CollKind::AllGather:
        ok = checkOutput(r, n, [&](uint64_t j) { return Expect{static_cast<uint32_t>(j), 0}; });
        break;
      case CollKind::Broadcast:
        ok = checkOutput(r, n, [&](uint64_t) { return Expect{static_cast<uint32_t>(key_.root), 0}; });
        break;
      case CollKind::Reduce:
        if (r == key_.root) ok = checkOutput(r, n, [&](uint64_t) { return Expect{all, 0}; });
        break;
      case CollKind::AllToAll:
        ok = checkOutput(r, n, [&](uint64_t j) { return Expect{static_cast<uint32_t>(j), uint64_t(r) * n}; });
        break;
      case CollKind::AllToAllv: ok = checkAllToAllv(r); break;
      case CollKind::SendRecv: ok = fail("SendRecv is not verifiable"); break;
    }
    if (!ok) return false;
  }
  return true;
}

}  // namespace

VerifyResult verifySchedules(const std::vector<Schedule>& schedules, int slotsPerEdge) {
  return Verifier(schedules, slotsPerEdge).run();
}

VerifyResult verifyBuilder(Schedule (*build)(const ScheduleKey&), ScheduleKey key, int slotsPerEdge) {
  if (key.nranks < 1) return VerifyResult{false, "nranks must be at least 1"};
  std::vector<Schedule> all;
  all.reserve(key.nranks);
  for (int r = 0; r < key.nranks; ++r) {
    key.rank = r;
    all.push_back(build(key));
  }
  return verifySchedules(all, slotsPerEdge);
}

VerifyResult verifyExecutable(const AlgoInfo& algo, ScheduleKey key, bool syncSteps, const std::vector<bool>& inPlace,
                              int slotsPerEdge) {
  if (key.nranks < 1) return VerifyResult{false, "nranks must be at least 1"};
  if (!inPlace.empty() && inPlace.size() != static_cast<size_t>(key.nranks))
    return VerifyResult{false, "inPlace must name every rank"};
  const bool same = key.inPlace;
  std::vector<Schedule> all;
  all.reserve(key.nranks);
  for (int r = 0; r < key.nranks; ++r) {
    key.rank = r;
    key.inPlace = inPlace.empty() ? same : bool(inPlace[r]);
    all.push_back(buildExecutable(algo, key, syncSteps));
  }
  return verifySchedules(all, slotsPerEdge);
}

}  // namespace hoccl
