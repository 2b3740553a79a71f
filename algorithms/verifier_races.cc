// Races between the channels of one rank. The verifier runs one
// interleaving of the channels; this checks every interleaving: two steps
// of different channels of a rank that touch overlapping memory (one of
// them writing) must be ordered by channel order and dependencies.
// Messages do not order a rank's own channels here (conservative).
#include <algorithm>

#include "algorithms/verifier.h"

namespace hoccl {

std::string firstUnorderedConflict(const Schedule& s) {
  const size_t nch = s.channels.size();
  // seen[c][i][d]: how many steps of channel d are known done before step
  // i of channel c starts (a vector clock, computed on demand).
  std::vector<std::vector<std::vector<int>>> seen(nch);
  std::vector<std::vector<char>> state(nch);
  for (size_t c = 0; c < nch; ++c) seen[c].resize(s.channels[c].steps.size()), state[c].resize(seen[c].size());
  auto clock = [&](auto& self, size_t c, size_t i) -> const std::vector<int>& {
    std::vector<int>& v = seen[c][i];
    if (state[c][i]) return v;
    state[c][i] = 1;
    v.assign(nch, 0);
    auto merge = [&](size_t d, size_t j) {  // step j of channel d is done
      const std::vector<int>& w = self(self, d, j);
      for (size_t x = 0; x < nch; ++x) v[x] = std::max(v[x], w[x]);
      v[d] = std::max(v[d], int(j) + 1);
    };
    if (i > 0) merge(c, i - 1);
    const Step& st = s.channels[c].steps[i];
    if (st.depChannel >= 0) merge(st.depChannel, st.depStep);
    return v;
  };
  struct Use {
    size_t c, i;
    MemSpan a;
    bool write;
  };
  std::vector<Use> uses;
  for (size_t c = 0; c < nch; ++c) {
    for (size_t i = 0; i < s.channels[c].steps.size(); ++i) {
      const Step& st = s.channels[c].steps[i];
      if (st.count == 0) continue;
      if (st.src.present() && (st.recvPeer < 0 || st.reduce))
        uses.push_back({c, i, memorySpan(s.key, st.src, st.count), false});
      if (st.dst.present()) uses.push_back({c, i, memorySpan(s.key, st.dst, st.count), true});
    }
  }
  for (const Use& x : uses) {
    for (const Use& y : uses) {
      if (x.c >= y.c || !(x.write || y.write) || x.a.space != y.a.space) continue;
      if (x.a.end <= y.a.begin || y.a.end <= x.a.begin) continue;
      if (clock(clock, y.c, y.i)[x.c] > int(x.i) || clock(clock, x.c, x.i)[y.c] > int(y.i)) continue;
      return "ch " + std::to_string(x.c) + " step " + std::to_string(x.i) + " and ch " + std::to_string(y.c) +
             " step " + std::to_string(y.i) + " touch the same memory unordered";
    }
  }
  return "";
}

}  // namespace hoccl
