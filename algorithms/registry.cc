#include "algorithms/registry.h"

#include <cctype>

namespace hoccl {
namespace {

bool ringSupports(CollKind) { return true; }

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
