// Monotonic time and deadlines: every wait in hoccl is bounded by one.
#pragma once

#include <time.h>

#include <algorithm>
#include <cstdint>

namespace hoccl {

inline double nowSec() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

class Deadline {
 public:
  static Deadline in(double seconds) { return Deadline(nowSec() + seconds); }
  bool expired() const { return nowSec() >= at_; }
  // Milliseconds left, clamped to [0, capMs].
  int remainingMs(int capMs = 1 << 30) const {
    double ms = (at_ - nowSec()) * 1000.0;
    if (ms <= 0) return 0;
    return static_cast<int>(std::min<double>(ms + 1, capMs));
  }
  double at() const { return at_; }

 private:
  explicit Deadline(double at) : at_(at) {}
  double at_;
};

}  // namespace hoccl
