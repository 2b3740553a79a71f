#include "algorithms/registry.h"

#include <cctype>

namespace hoccl {
namespace {

bool ringSupports(CollKind) { return true; }

bool groupedSupports(CollKind c) {
  return c == CollKind::AllReduce || c == CollKind::ReduceScatter || c == CollKind::AllGather;
}

bool allReduceOnly(CollKind c) { return c == CollKind::AllReduce; }

bool equalsIgnoringCase(const char* a, const char* b) {
  for (; *a && *b; ++a, ++b) {
    if (std::tolower(static_cast<unsigned char>(*a)) != std::tolower(static_cast<unsigned char>(*b))) {
      return false;
    }
  }
  return *a == *b;
}

}  // namespace

const std::vector<AlgoInfo>& allAlgorithms() {
  static const std::vector<AlgoInfo> algos = {
      {AlgoId::Ring, "ring",
       "one ring through all ranks per channel (a pipelined chain for broadcast and reduce)",
       ringSupports, buildRing},
      {AlgoId::Hierarchical, "hierarchical",
       "reduce to a leader per group, ring all-reduce among leaders, broadcast in the group (phases in sequence)",
       groupedSupports, buildHierarchical},
      {AlgoId::HoRing, "horing",
       "HO-Ring: intra-group reduce-scatter, one rail ring per local index, intra-group all-gather, pipelined",
       groupedSupports, buildHoRing},
      {AlgoId::Doubling, "doubling",
       "recursive doubling all-reduce: log2(P) exchanges of the whole buffer, for small messages",
       allReduceOnly, buildDoubling},
  };
  return algos;
}

const AlgoInfo* findAlgorithm(const char* name) {
  if (name == nullptr) return nullptr;
  for (const AlgoInfo& a : allAlgorithms()) {
    if (equalsIgnoringCase(a.name, name)) return &a;
  }
  return nullptr;
}

const AlgoInfo& algorithmInfo(AlgoId id) {
  const std::vector<AlgoInfo>& algos = allAlgorithms();
  for (const AlgoInfo& a : algos) {
    if (a.id == id) return a;
  }
  // Every AlgoId is registered above; an unknown value can only come from a
  // cast, and the ring is the safe answer for it.
  return algos.front();
}

}  // namespace hoccl
