// hoccl-topo probe: a simulated network, for the planner's tests and for
// `hoccl-topo probe --plan` (what a plan would cost and find).
#pragma once

#include <cstdint>
#include <vector>

#include "src/topo/probe/probe_plan.h"

namespace hoccl {
namespace probe {

// A tree of leaf switches for tests and planning: node i's leaf, node and
// uplink rates (Gbit/s), round trips (us) inside a leaf and across the
// spine. Computes what a round would measure: flows share links max-min
// fairly, pings see their path's round trip plus noise.
struct SimNet {
  std::vector<int> leafOf;
  std::vector<double> nodeGbps;
  std::vector<double> uplinkGbps;  // per leaf; 0 = not a bottleneck
  double rttLeafUs = 30, rttSpineUs = 38, noiseUs = 1.0;
  std::vector<std::vector<double>> rttUs;  // per pair, instead of the two above
  double goodput = 0.956;  // TCP over 1500-byte frames
  double netBufferKB = 875, spineBufferKB = 440;  // queues in front of the links
  double netBurstKB = 250, spineBurstKB = 131;    // token buckets
  double glitch = 0;  // chance that a flow runs at 40% (a busy host), per flow and round
  uint64_t seed = 1;
  std::vector<Report> run(const Round& r);
};

}  // namespace probe
}  // namespace hoccl
