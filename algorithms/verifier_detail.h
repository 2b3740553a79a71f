// Internals of the symbolic verifier (verifier.cc), shared with the check
// of the zero-copy contract (verifier_zerocopy.cc). Not part of the API.
#pragma once

#include <algorithm>
#include <array>
#include <bit>
#include <cstdint>
#include <map>
#include <sstream>
#include <string>
#include <unordered_map>
#include <vector>

#include "algorithms/schedule.h"

namespace hoccl {
namespace verify {

inline constexpr uint32_t kUndef = UINT32_MAX;

template <class... A>
std::string cat(const A&... a) {
  std::ostringstream os;
  (os << ... << a);
  return os.str();
}

// len elements holding elements idx, idx+1, ... of set `set` (idx is 0 when
// the run is undefined).
struct Seg {
  uint64_t len;
  uint64_t idx;
  uint32_t set;
};
using Segs = std::vector<Seg>;

inline void append(Segs& out, Seg s) {
  if (s.len == 0) return;
  if (!out.empty()) {
    Seg& b = out.back();
    if (b.set == s.set && (s.set == kUndef || b.idx + b.len == s.idx)) {
      b.len += s.len;
      return;
    }
  }
  out.push_back(s);
}

class SetPool {
 public:
  explicit SetPool(int nranks) : n_(nranks), words_((nranks + 63) / 64), tmp_(words_) {
    for (int r = 0; r < n_; ++r) {
      std::fill(tmp_.begin(), tmp_.end(), 0);
      tmp_[r / 64] = uint64_t{1} << (r % 64);
      intern();  // singleton {r} gets id r
    }
    std::fill(tmp_.begin(), tmp_.end(), 0);
    for (int r = 0; r < n_; ++r) tmp_[r / 64] |= uint64_t{1} << (r % 64);
    full_ = intern();
  }
  uint32_t full() const { return full_; }
  bool has(uint32_t id, int r) const { return (bits(id)[r / 64] >> (r % 64)) & 1; }

  // Union of two disjoint sets; kUndef with *dup set to a shared rank otherwise.
  uint32_t unite(uint32_t a, uint32_t b, int* dup) {
    const uint64_t key = a < b ? (uint64_t{a} << 32 | b) : (uint64_t{b} << 32 | a);
    if (auto it = unions_.find(key); it != unions_.end()) return it->second;
    const uint64_t *A = bits(a), *B = bits(b);
    for (int w = 0; w < words_; ++w) {
      if (A[w] & B[w]) {
        *dup = w * 64 + std::countr_zero(A[w] & B[w]);
        return kUndef;
      }
      tmp_[w] = A[w] | B[w];
    }
    const uint32_t id = intern();
    unions_.emplace(key, id);
    return id;
  }

  std::string describe(uint32_t id) const {
    if (id == kUndef) return "undefined";
    if (id == full_) return "all ranks";
    std::ostringstream os;
    int shown = 0, total = 0;
    for (int r = 0; r < n_; ++r) {
      if (!has(id, r)) continue;
      ++total;
      if (shown < 8) os << (shown++ ? "," : "") << r;
    }
    return cat("ranks {", os.str(), total > shown ? cat(",... (", total, ")") : "", "}");
  }

  // First rank in `want` but not `got`, or in `got` but not `want`.
  std::string difference(uint32_t want, uint32_t got) const {
    for (int r = 0; r < n_; ++r) {
      if (has(want, r) && !has(got, r)) return cat("it misses the contribution of rank ", r);
      if (!has(want, r) && has(got, r)) return cat("it holds a contribution of rank ", r);
    }
    return "";
  }

 private:
  const uint64_t* bits(uint32_t id) const { return &bits_[size_t{id} * words_]; }
  uint32_t intern() {
    uint64_t h = 1469598103934665603ull;
    for (uint64_t w : tmp_) h = (h ^ w) * 1099511628211ull;
    std::vector<uint32_t>& bucket = byHash_[h];
    for (uint32_t id : bucket) {
      if (std::equal(tmp_.begin(), tmp_.end(), bits(id))) return id;
    }
    const auto id = static_cast<uint32_t>(bits_.size() / words_);
    bits_.insert(bits_.end(), tmp_.begin(), tmp_.end());
    bucket.push_back(id);
    return id;
  }

  int n_, words_;
  uint32_t full_ = kUndef;
  std::vector<uint64_t> tmp_, bits_;
  std::unordered_map<uint64_t, std::vector<uint32_t>> byHash_;
  std::unordered_map<uint64_t, uint32_t> unions_;
};

// One memory area as an ordered map of runs covering [0, size).
class RunBuffer {
 public:
  void reset(uint64_t size) {
    runs_.clear();
    size_ = size;
    if (size) runs_[0] = Seg{size, 0, kUndef};
  }
  void read(uint64_t off, uint64_t n, Segs& out) const {
    if (n == 0) return;
    auto it = std::prev(runs_.upper_bound(off));
    for (uint64_t pos = off, end = off + n; pos < end; ++it) {
      const uint64_t start = it->first;
      const Seg& r = it->second;
      const uint64_t take = std::min(start + r.len, end) - pos;
      append(out, Seg{take, r.set == kUndef ? 0 : r.idx + (pos - start), r.set});
      pos += take;
    }
  }
  void write(uint64_t off, const Segs& v) {
    uint64_t n = 0;
    for (const Seg& s : v) n += s.len;
    if (n == 0) return;
    splitAt(off);
    splitAt(off + n);
    runs_.erase(runs_.lower_bound(off), runs_.lower_bound(off + n));
    uint64_t pos = off;
    for (const Seg& s : v) {
      runs_.emplace(pos, s);
      pos += s.len;
    }
    mergeAt(off + n);
    mergeAt(off);
  }

 private:
  void splitAt(uint64_t pos) {
    if (pos == 0 || pos >= size_) return;
    auto it = std::prev(runs_.upper_bound(pos));
    if (it->first == pos) return;
    Seg& r = it->second;
    const uint64_t k = pos - it->first;
    const Seg tail{r.len - k, r.set == kUndef ? 0 : r.idx + k, r.set};
    r.len = k;
    runs_.emplace_hint(std::next(it), pos, tail);
  }
  void mergeAt(uint64_t pos) {
    auto it = runs_.find(pos);
    if (it == runs_.end() || it == runs_.begin()) return;
    Seg& a = std::prev(it)->second;
    const Seg& b = it->second;
    if (a.set == b.set && (b.set == kUndef || a.idx + a.len == b.idx)) {
      a.len += b.len;
      runs_.erase(it);
    }
  }

  uint64_t size_ = 0;
  std::map<uint64_t, Seg> runs_;
};

inline const char* bufName(Buf b) {
  switch (b) {
    case Buf::Input: return "Input";
    case Buf::Output: return "Output";
    case Buf::Scratch: return "Scratch";
    default: return "None";
  }
}

// Where a named buffer lives: store 0 = input memory, 1 = output, 2 = scratch.
struct View {
  int store = 0;
  uint64_t base = 0, size = 0;
};

// How one verified run went, step by step. Steps are numbered rank by
// rank, channel by channel: id = first[r][c] + step index.
struct Trace {
  static constexpr uint32_t kNone = UINT32_MAX;
  std::vector<std::vector<uint32_t>> first;
  std::vector<uint32_t> order;     // ids in the order they ran: respects happens-before
  std::vector<uint32_t> sender;    // per id: the step whose message it received, or kNone
  std::vector<uint32_t> receiver;  // per id: the step that received its message, or kNone
};

// Checks every step marked `zeroCopyEligible` against the contract the executor
// relies on (see verifier_zerocopy.cc); returns the first violation, or "".
// views[r][buf] says where rank r's buffer `buf` lives.
std::string checkZeroCopy(const std::vector<Schedule>& sch, const std::vector<std::array<View, 4>>& views,
                          const Trace& trace);

}  // namespace verify
}  // namespace hoccl
