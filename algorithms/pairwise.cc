// Point-to-point schedules: all-to-all, all-to-all-v and a group's sends
// and receives. Each peer gets a channel per direction, all on link 0, so
// the messages to one peer never wait behind those to another and the
// order in which a caller posted its operations cannot deadlock: with P
// ranks a rank progresses up to 2(P-1) independent streams.
#include "algorithms/pairwise.h"

#include <algorithm>
#include <map>

namespace hoccl {

Schedule buildPointToPoint(const ScheduleKey& key, const std::vector<PointOp>& ops, const char* name) {
  Schedule s;
  s.key = key;
  s.algorithm = name;
  // Channels in a fixed order: the self copies, then per peer its sends
  // and its receives.
  std::map<std::pair<int, int>, std::vector<Step>> perPeer;  // (peer, 0 send / 1 recv)
  std::vector<const PointOp*> selfSends, selfRecvs;
  for (const PointOp& op : ops) {
    if (op.peer == key.rank) {
      (op.send ? selfSends : selfRecvs).push_back(&op);
      continue;
    }
    // An empty block of all-to-all-v names no buffer (its displacement
    // may lie past the end): a sync step, which still carries the call's
    // signature. A group's parts keep theirs, whose headers say which part.
    const bool named = op.count || op.at.buf == Buf::Part;
    Step st;
    st.count = op.count;
    if (op.send) {
      st.sendPeer = op.peer;
      if (named) st.src = op.at;
    } else {
      st.recvPeer = op.peer;
      if (named) st.dst = op.at;
    }
    perPeer[{op.peer, op.send ? 0 : 1}].push_back(st);
  }
  // A send to oneself is the copy into the receive posted for it (the
  // k-th send pairs with the k-th receive; callers check the counts).
  Channel self;
  for (size_t i = 0; i < selfSends.size() && i < selfRecvs.size(); ++i) {
    if (selfSends[i]->count == 0) continue;
    Step st;
    st.count = selfSends[i]->count;
    st.src = selfSends[i]->at;
    st.dst = selfRecvs[i]->at;
    self.steps.push_back(st);
  }
  if (!self.steps.empty()) s.channels.push_back(std::move(self));
  for (auto& [peerDir, steps] : perPeer) {
    Channel ch;
    ch.link = 0;
    ch.steps = std::move(steps);
    s.channels.push_back(std::move(ch));
  }
  return s;
}

Schedule buildAllToAll(const ScheduleKey& key) {
  const int P = key.nranks, r = key.rank;
  std::vector<PointOp> ops;
  auto add = [&](int peer, bool send, uint64_t count, Buf buf, uint64_t offset) {
    PointOp op;
    op.peer = peer;
    op.send = send;
    op.count = count;
    op.at.buf = buf;
    op.at.offset = offset;
    ops.push_back(op);
  };
  const bool v = key.coll == CollKind::AllToAllv;
  const std::vector<uint64_t>* layout = v ? key.vlayout.get() : nullptr;
  if (v && (!layout || layout->size() != 4 * static_cast<size_t>(P))) {
    Schedule empty;
    empty.key = key;
    empty.algorithm = "pairwise (no layout)";
    return empty;
  }
  auto sendCount = [&](int p) { return v ? (*layout)[p] : key.count; };
  auto sendAt = [&](int p) { return v ? (*layout)[P + p] : uint64_t(p) * key.count; };
  auto recvCount = [&](int p) { return v ? (*layout)[2 * P + p] : key.count; };
  auto recvAt = [&](int p) { return v ? (*layout)[3 * P + p] : uint64_t(p) * key.count; };
  // Rank r sends to r+1, r+2, ... and receives from r-1, r-2, ...: the
  // channels run concurrently, but where a transport serves them in turn
  // this order spreads the load over the peers.
  for (int k = 0; k < P; ++k) {
    const int to = (r + k) % P, from = (r + P - k) % P;
    if (k == 0) {
      // The own block: in place it already sits where it belongs.
      if (!key.inPlace || v) {
        add(r, true, sendCount(r), Buf::Input, sendAt(r));
        add(r, false, recvCount(r), Buf::Output, recvAt(r));
      }
      continue;
    }
    add(to, true, sendCount(to), Buf::Input, sendAt(to));
    add(from, false, recvCount(from), Buf::Output, recvAt(from));
  }
  if (key.inPlace && !v && !ops.empty()) {
    // In place, a rank's blocks for the others are overwritten by what
    // they send it: they are copied to scratch first (channel 0), and
    // every other channel starts after that copy.
    const uint64_t total = uint64_t(P) * key.count;
    for (PointOp& op : ops)
      if (op.send) op.at.buf = Buf::Scratch;
    Schedule s = buildPointToPoint(key, ops, "pairwise");
    s.scratchCount = total;
    Step copy;
    copy.src = Slice{Buf::Input, 0, 0};
    copy.dst = Slice{Buf::Scratch, 0, 0};
    copy.count = total;
    Channel stage;
    stage.steps.push_back(copy);
    for (Channel& ch : s.channels) {
      ch.steps.front().depChannel = 0;
      ch.steps.front().depStep = 0;
    }
    s.channels.insert(s.channels.begin(), std::move(stage));
    return s;
  }
  return buildPointToPoint(key, ops, "pairwise");
}

Schedule buildAllToAllShifted(const ScheduleKey& key) {
  const int P = key.nranks, r = key.rank;
  const uint64_t n = key.count;
  const int C = static_cast<int>(std::max<uint64_t>(1, std::min<uint64_t>(uint64_t(std::max(key.nchannels, 1)),
                                                                          std::max<uint64_t>(n, 1))));
  Schedule s;
  s.key = key;
  s.key.nchannels = C;
  s.algorithm = "shifted";
  if (n == 0 || P < 1) return s;
  const Buf from = key.inPlace ? Buf::Scratch : Buf::Input;
  if (key.inPlace) s.scratchCount = uint64_t(P) * n;
  const uint64_t most = key.maxStepCount > 0 ? key.maxStepCount : n;
  s.channels.resize(size_t(C));
  for (int c = 0; c < C; ++c) {
    std::vector<Step>& steps = s.channels[size_t(c)].steps;
    const uint64_t lo = partStart(n, uint64_t(C), uint64_t(c)), len = partSize(n, uint64_t(C), uint64_t(c));
    if (key.inPlace) {  // this channel's part of every block, before any of them is overwritten
      for (int p = 0; p < P; ++p) {
        Step copy;
        copy.src = Slice{Buf::Input, uint64_t(p) * n + lo, 0};
        copy.dst = Slice{Buf::Scratch, uint64_t(p) * n + lo, 0};
        copy.count = len;
        steps.push_back(copy);
      }
    } else {  // the own block
      Step copy;
      copy.src = Slice{Buf::Input, uint64_t(r) * n + lo, 0};
      copy.dst = Slice{Buf::Output, uint64_t(r) * n + lo, 0};
      copy.count = len;
      steps.push_back(copy);
    }
    for (int k = 1; k < P; ++k) {
      const int to = (r + k) % P, peer = (r + P - k) % P;
      for (uint64_t at = 0; at < len; at += most) {
        const uint64_t m = std::min(most, len - at);
        Step send;
        send.sendPeer = to;
        send.src = Slice{from, uint64_t(to) * n + lo + at, 0};
        send.count = m;
        steps.push_back(send);
        Step recv;
        recv.recvPeer = peer;
        recv.dst = Slice{Buf::Output, uint64_t(peer) * n + lo + at, 0};
        recv.count = m;
        steps.push_back(recv);
      }
    }
  }
  return s;
}

}  // namespace hoccl
