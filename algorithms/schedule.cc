#include "algorithms/schedule.h"

#include <algorithm>
#include <map>
#include <sstream>

namespace hoccl {

const char* stepKindName(const Step& s) {
  const bool recv = s.recvPeer >= 0;
  const bool send = s.sendPeer >= 0;
  const bool src = s.src.present();
  const bool dst = s.dst.present();
  // A zero-count message that names no buffers only carries its header
  // (the call's signature): addSyncSteps adds them.
  if (s.count == 0 && !src && !dst && !s.reduce && (recv || send)) return "sync";
  if (recv) {
    if (s.reduce) {
      // The received value is combined with src, so src is required.
      if (!src) return "invalid";
      if (dst && send) return "recvReduceCopySend";
      if (dst) return "recvReduce";
      if (send) return "recvReduceSend";
      return "invalid";
    }
    // A plain receive ignores src; naming one is a builder mistake.
    if (src || !dst) return "invalid";
    return send ? "recvCopySend" : "recv";
  }
  if (!src) return "invalid";
  if (s.reduce) {
    // dst is both the second operand and where the value goes.
    if (!dst) return "invalid";
    return send ? "localReduceSend" : "localReduce";
  }
  if (dst && send) return "copySend";
  if (dst) return "copy";
  if (send) return "send";
  return "invalid";
}

size_t Schedule::stepCount() const {
  size_t n = 0;
  for (const Channel& c : channels) n += c.steps.size();
  return n;
}

namespace {

const char* bufName(Buf b) {
  switch (b) {
    case Buf::None: return "-";
    case Buf::Input: return "in";
    case Buf::Output: return "out";
    case Buf::Scratch: return "scr";
    case Buf::Part: return "part";
  }
  return "?";
}

void putSlice(std::ostringstream& os, const Slice& s, uint64_t count) {
  if (!s.present()) {
    os << '-';
    return;
  }
  os << bufName(s.buf);
  if (s.buf == Buf::Part) os << s.part;
  os << '[' << s.offset << '+' << count << ']';
}

void putPeer(std::ostringstream& os, int32_t peer) {
  if (peer < 0) {
    os << '-';
  } else {
    os << peer;
  }
}

}  // namespace

std::string Schedule::toString() const {
  std::ostringstream os;
  os << (algorithm && *algorithm ? algorithm : "?") << ' ' << collName(key.coll) << " nranks "
     << key.nranks << " rank " << key.rank << " count " << key.count;
  if (key.coll == CollKind::Broadcast || key.coll == CollKind::Reduce) os << " root " << key.root;
  os << " inPlace " << (key.inPlace ? 1 : 0) << " channels " << channels.size() << " scratch "
     << scratchCount << " steps " << stepCount() << '\n';
  for (size_t c = 0; c < channels.size(); ++c) {
    const std::vector<Step>& steps = channels[c].steps;
    for (size_t i = 0; i < steps.size(); ++i) {
      const Step& s = steps[i];
      os << "rank " << key.rank << " ch " << c;
      if (channels[c].link >= 0) os << " link " << channels[c].link;
      os << " step " << i << ' ' << stepKindName(s)
         << " from ";
      putPeer(os, s.recvPeer);
      os << " to ";
      putPeer(os, s.sendPeer);
      os << " src ";
      putSlice(os, s.src, s.count);
      os << " dst ";
      putSlice(os, s.dst, s.count);
      os << " n " << s.count;
      if (s.depChannel >= 0) os << " after ch " << s.depChannel << " step " << s.depStep;
      os << '\n';
    }
  }
  return os.str();
}

namespace {

// AllToAllv: the end of the furthest block of one half of the layout
// (0: sends, 2: receives).
uint64_t layoutExtent(const ScheduleKey& k, int half) {
  if (!k.vlayout || k.vlayout->size() != 4 * static_cast<size_t>(k.nranks)) return 0;
  const std::vector<uint64_t>& v = *k.vlayout;
  const size_t P = static_cast<size_t>(k.nranks);
  uint64_t end = 0;
  for (size_t p = 0; p < P; ++p)
    if (v[half * P + p]) end = std::max(end, v[(half + 1) * P + p] + v[half * P + p]);
  return end;
}

// Elements in a key's input buffer, or its output buffer.
uint64_t bufferCount(const ScheduleKey& k, bool output) {
  const uint64_t all = static_cast<uint64_t>(k.nranks) * k.count;
  switch (k.coll) {
    case CollKind::ReduceScatter: return output ? k.count : all;
    case CollKind::AllGather: return output ? all : k.count;
    case CollKind::AllToAll: return all;
    case CollKind::AllToAllv: return layoutExtent(k, output ? 2 : 0);
    case CollKind::SendRecv: return 0;
    default: return k.count;
  }
}

}  // namespace

uint64_t inputCount(const ScheduleKey& k) { return bufferCount(k, false); }
uint64_t outputCount(const ScheduleKey& k) { return bufferCount(k, true); }

uint64_t inPlaceOffset(const ScheduleKey& k) {
  if (k.coll == CollKind::ReduceScatter || k.coll == CollKind::AllGather) {
    return static_cast<uint64_t>(k.rank) * k.count;
  }
  return 0;
}

uint64_t partStart(uint64_t count, uint64_t parts, uint64_t i) {
  if (parts == 0) return 0;
  if (i >= parts) return count;
  return i * (count / parts) + std::min(i, count % parts);
}

}  // namespace hoccl

namespace hoccl {

MemSpan memorySpan(const ScheduleKey& k, const Slice& sl, uint64_t count) {
  uint64_t off = sl.offset;
  if (sl.buf == Buf::Scratch) return {2, off, off + count};
  if (sl.buf == Buf::Part) return {3 + int64_t{sl.part}, off, off + count};
  if (!k.inPlace) return {sl.buf == Buf::Output ? 0 : 1, off, off + count};
  // In place both buffers are one memory: all-gather's Input is Output
  // shifted by rank*count, reduce-scatter's Output is Input shifted by it.
  uint64_t shift = inPlaceOffset(k);
  if (k.coll == CollKind::AllGather && sl.buf == Buf::Input) off += shift;
  if (k.coll == CollKind::ReduceScatter && sl.buf == Buf::Output) off += shift;
  return {0, off, off + count};
}

int Grouping::ngroups() const {
  int n = 0;
  for (int g : groupOf) n = std::max(n, g + 1);
  return n;
}

namespace {

// A union of spans, per memory space, as disjoint merged intervals.
class SpanSet {
 public:
  void add(MemSpan s) {
    if (s.begin >= s.end) return;
    auto& m = m_[s.space];
    auto it = m.upper_bound(s.begin);
    if (it != m.begin() && std::prev(it)->second >= s.begin) --it;
    while (it != m.end() && it->first <= s.end) {
      s.begin = std::min(s.begin, it->first);
      s.end = std::max(s.end, it->second);
      it = m.erase(it);
    }
    m.emplace(s.begin, s.end);
  }
  bool overlaps(const MemSpan& s) const {
    auto found = m_.find(s.space);
    if (found == m_.end()) return false;
    const auto& m = found->second;
    auto it = m.upper_bound(s.begin);
    if (it != m.begin() && std::prev(it)->second > s.begin) return true;
    return it != m.end() && it->first < s.end;
  }

 private:
  std::map<int64_t, std::map<uint64_t, uint64_t>> m_;
};

// A step sending its src by reference whose own copy to dst lands on part
// of src (not exactly on it) changes that value while the receiver may
// read it.
bool ownCopyClobbers(const ScheduleKey& k, const Step& st) {
  if (sentValue(st) != &st.src || !st.dst.present()) return false;
  const MemSpan a = memorySpan(k, st.src, st.count), b = memorySpan(k, st.dst, st.count);
  return a.space == b.space && a.begin < b.end && b.begin < a.end && a.begin != b.begin;
}

}  // namespace

// O(steps log steps): schedules of HO-Ring at P = 256 have tens of
// thousands of steps per rank, and prepare() marks them on a call's path.
void markZeroCopyEligible(Schedule* s) {
  const ScheduleKey& k = s->key;
  const size_t nch = s->channels.size();
  std::vector<SpanSet> written(nch);  // everything each channel writes
  for (size_t c = 0; c < nch; ++c)
    for (const Step& st : s->channels[c].steps)
      if (st.dst.present() && st.count) written[c].add(memorySpan(k, st.dst, st.count));
  for (size_t c = 0; c < nch; ++c) {
    SpanSet later;  // what this channel writes after the step at hand
    std::vector<Step>& steps = s->channels[c].steps;
    for (size_t j = steps.size(); j-- > 0;) {
      Step& st = steps[j];
      st.zeroCopyEligible = false;
      const Slice* where = sentValue(st);
      if (st.sendPeer >= 0 && st.count && where) {
        const MemSpan v = memorySpan(k, *where, st.count);
        bool clobbered = later.overlaps(v) || ownCopyClobbers(k, st);
        for (size_t d = 0; d < nch && !clobbered; ++d) clobbered = d != c && written[d].overlaps(v);
        st.zeroCopyEligible = !clobbered;
      }
      if (st.dst.present() && st.count) later.add(memorySpan(k, st.dst, st.count));
    }
  }
}

}  // namespace hoccl
