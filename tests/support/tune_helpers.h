// What the tuner suites share: the emulated shapes' links and the model's
// prediction of one call (test_tune.cc, test_tune_model.cc).
#pragma once

#include <cstdint>

#include "algorithms/cost.h"
#include "src/tune/model.h"

namespace hoccl {
namespace tune {
namespace tunetest {

constexpr uint64_t kMiB = uint64_t{1} << 20;

inline LinkModel gigabit(double uplinkGbps = 0) {
  LinkModel l;
  l.net.gbps = 1;
  l.spine.gbps = uplinkGbps;
  return l;
}

inline double us(const Machine& m, CollKind c, AlgoId a, uint64_t bytes) { return predict(m, c, a, bytes, 1).us; }

}  // namespace tunetest
}  // namespace tune
}  // namespace hoccl
