// The zero-copy contract. The executor sends a slice of a step marked
// `zeroCopyEligible` as a reference to the sender's memory (where the connection
// allows it and the slice is at least HOCCL_DIRECT_BYTES): the receiving
// step reads the value straight from there when it runs (mapped, or copied
// out of another process), and the sender goes on with its later steps
// without waiting; only the end of the call waits until every slot sent by
// reference is released. So a value sent by reference at step S and consumed by step R of another
// rank must not change between S and the end of R:
//   - S's value must live in the sender's buffers (sentValue: the src of a
//     step that receives and reduces nothing, sent before its copy to dst,
//     else its dst; otherwise it is built in the send slot);
//   - every step W of the sender that writes memory overlapping it must be
//     complete before S starts, or start only after R is complete.
// Orders are the ones the executor guarantees whatever the timing: the
// steps of a channel in sequence, a dependency (depChannel/depStep), and a
// message, which its receiving step has completely read when it completes.
// Waiting for a free slot is not counted (a connection may have more slots
// than the verifier models). A step's own message is not counted towards
// its start: the receiver starts on the first slice before the sender has
// finished. With those orders every check below is exact for the
// executor, so the verifier may model a reference by a copy made at S.
//
// markZeroCopyEligible marks only values nothing writes after S at all, so
// with it there is nothing to order. Anything else (a buggy or smarter
// marking) is checked against happens-before, computed in passes of 64
// tracked steps over the run's order.
#include <algorithm>
#include <climits>

#include "algorithms/verifier_detail.h"

namespace hoccl {
namespace verify {
namespace {

struct Span {
  int store;
  uint64_t begin, end;
};

struct Conflict {
  uint32_t send, write, consume;  // the step sending by reference, a write, the receiving step
  int rank, sendCh, writeCh;
  size_t sendStep, writeStep;
};

class ZeroCopyCheck {
 public:
  ZeroCopyCheck(const std::vector<Schedule>& s, const std::vector<std::array<View, 4>>& v, const Trace& t)
      : sch_(s), views_(v), t_(t) {
    for (int r = 0; r < static_cast<int>(s.size()); ++r)
      for (int c = 0; c < static_cast<int>(s[r].channels.size()); ++c)
        if (!s[r].channels[c].steps.empty()) starts_.push_back({t.first[r][c], r, c});
  }

  std::string run() {
    for (int r = 0; r < static_cast<int>(sch_.size()); ++r) {
      collect(r);
      if (!err_.empty()) return err_;
    }
    for (size_t at = 0; at < conflicts_.size() && err_.empty(); at += 32) {
      resolve(at, std::min(conflicts_.size(), at + 32));
    }
    return err_;
  }

 private:
  const Step& step(int r, int c, size_t i) const { return sch_[r].channels[c].steps[i]; }
  std::string where(int r, int c, size_t i) const {
    const Step& s = step(r, c, i);
    return cat("rank ", r, " ch ", c, " step ", i, " (", stepKindName(s), " n ", s.count, ")");
  }
  std::string whereId(uint32_t id) const {
    int r = 0, c = 0;
    locate(id, &r, &c);
    return where(r, c, id - t_.first[r][c]);
  }
  Span span(int r, const Slice& sl, uint64_t n) const {
    const View& v = views_[r][size_t(sl.buf)];
    return {v.store, v.base + sl.offset, v.base + sl.offset + n};
  }

  // Values rank r sends by reference, and the writes of r that are not trivially
  // ordered before them (earlier on the same channel).
  void collect(int r) {
    struct Write {
      Span sp;
      int c;
      size_t i;
    };
    std::vector<Write> writes;
    uint64_t longest = 0;
    const std::vector<Channel>& chs = sch_[r].channels;
    for (int c = 0; c < static_cast<int>(chs.size()); ++c)
      for (size_t i = 0; i < chs[c].steps.size(); ++i) {
        const Step& s = chs[c].steps[i];
        if (!s.dst.present() || s.count == 0) continue;
        writes.push_back({span(r, s.dst, s.count), c, i});
        longest = std::max(longest, s.count);
      }
    auto before = [](const Write& a, const Write& b) {
      return a.sp.store != b.sp.store ? a.sp.store < b.sp.store : a.sp.begin < b.sp.begin;
    };
    std::sort(writes.begin(), writes.end(), before);
    for (int c = 0; c < static_cast<int>(chs.size()); ++c)
      for (size_t i = 0; i < chs[c].steps.size(); ++i) {
        const Step& s = chs[c].steps[i];
        if (!s.zeroCopyEligible) continue;
        if (s.sendPeer < 0) {
          err_ = where(r, c, i) + ": marked zero-copy eligible but sends nothing";
          return;
        }
        const Slice* value = sentValue(s);
        if (!value) {
          err_ = where(r, c, i) + ": marked zero-copy eligible, but its value is built in the send slot, not "
                                  "in this rank's buffers, so it cannot be sent by reference";
          return;
        }
        if (s.count == 0) continue;
        const Span v = span(r, *value, s.count);
        const uint32_t send = t_.first[r][c] + static_cast<uint32_t>(i);
        // Writes overlapping v begin in (v.begin - longest, v.end).
        Write lo{{v.store, v.begin > longest ? v.begin - longest : 0, 0}, 0, 0};
        for (auto it = std::lower_bound(writes.begin(), writes.end(), lo, before);
             it != writes.end() && it->sp.store == v.store && it->sp.begin < v.end; ++it) {
          if (it->sp.end <= v.begin || (it->c == c && it->i < i)) continue;
          if (it->c == c && it->i == i) {
            // The step's own copy: harmless when it lands exactly on the
            // value or the value is that copy (dst).
            if (value == &s.dst || (it->sp.begin == v.begin && it->sp.store == v.store)) continue;
            err_ = where(r, c, i) +
                   ": marked zero-copy eligible, but its own copy to dst overwrites part of the src it sends";
            return;
          }
          conflicts_.push_back({send, t_.first[r][it->c] + static_cast<uint32_t>(it->i), t_.receiver[send], r, c,
                                it->c, i, it->i});
        }
      }
  }

  // Happens-before for conflicts [from, to): each contributes two tracked
  // steps (the write, the consuming step), one bit each.
  void resolve(size_t from, size_t to) {
    std::vector<std::pair<uint32_t, int>> bits;  // tracked id, bit
    for (size_t k = from; k < to; ++k) {
      const int b = static_cast<int>(2 * (k - from));
      bits.push_back({conflicts_[k].write, b});
      if (conflicts_[k].consume != Trace::kNone) bits.push_back({conflicts_[k].consume, b + 1});
    }
    std::sort(bits.begin(), bits.end());
    masks_.assign(t_.sender.size(), 0);
    for (uint32_t id : t_.order) {
      uint64_t m = startMask(id);
      if (t_.sender[id] != Trace::kNone) m |= masks_[t_.sender[id]];
      for (auto it = std::lower_bound(bits.begin(), bits.end(), std::make_pair(id, -1));
           it != bits.end() && it->first == id; ++it)
        m |= uint64_t{1} << it->second;
      masks_[id] = m;
    }
    for (size_t k = from; k < to; ++k) {
      const Conflict& x = conflicts_[k];
      const uint64_t b = uint64_t{1} << (2 * (k - from));
      if (startMask(x.send) & b) continue;            // written before the value was sent
      if (startMask(x.write) & (b << 1)) continue;    // written after the receiver consumed it
      const Step& s = step(x.rank, x.sendCh, x.sendStep);
      const Slice& v = *sentValue(s);
      err_ = cat(where(x.rank, x.writeCh, x.writeStep), " may overwrite ", bufName(v.buf), "[", v.offset, "+",
                 s.count, "], which ", where(x.rank, x.sendCh, x.sendStep), " sends by reference (zero-copy) to rank ",
                 s.sendPeer, ", before ",
                 x.consume == Trace::kNone ? std::string("anyone") : whereId(x.consume),
                 " has consumed it: nothing orders the write after that step or before the sending one");
      return;
    }
  }

  // What is known complete when step `id` starts: its channel's previous
  // step and its dependency (not its own message).
  uint64_t startMask(uint32_t id) const {
    int r = 0, c = 0;
    locate(id, &r, &c);
    const size_t i = id - t_.first[r][c];
    uint64_t m = i > 0 ? masks_[id - 1] : 0;
    const Step& s = step(r, c, i);
    if (s.depChannel >= 0) m |= masks_[t_.first[r][s.depChannel] + s.depStep];
    return m;
  }
  void locate(uint32_t id, int* r, int* c) const {
    auto it = std::upper_bound(starts_.begin(), starts_.end(), Start{id, INT32_MAX, INT32_MAX});
    *r = std::prev(it)->r;
    *c = std::prev(it)->c;
  }

  const std::vector<Schedule>& sch_;
  const std::vector<std::array<View, 4>>& views_;
  const Trace& t_;
  std::vector<Conflict> conflicts_;
  std::vector<uint64_t> masks_;
  struct Start {
    uint32_t id;
    int r, c;
    bool operator<(const Start& o) const { return id != o.id ? id < o.id : r != o.r ? r < o.r : c < o.c; }
  };
  std::vector<Start> starts_;  // first id of every channel that has steps, rising
  std::string err_;
};

}  // namespace

std::string checkZeroCopy(const std::vector<Schedule>& sch, const std::vector<std::array<View, 4>>& views,
                          const Trace& trace) {
  return ZeroCopyCheck(sch, views, trace).run();
}

}  // namespace verify
}  // namespace hoccl
