// The schedules the executor runs verify: buildExecutable, the function
// hocclComm::prepare calls (the algorithm's schedule, the zero-count sync
// steps, the zero-copy marks), for every algorithm and collective it
// supports x channels {1, 2, 3, 4} x every pipeline depth the tuner can pick
// x placements mixed across ranks x step limits, with and without sync
// steps. The quick sweep (P <= 8) runs in ctest; HOCCL_VERIFY_SWEEP=full
// adds shapes up to P = 256 (docs/algorithms.md gives both sizes).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "algorithms/executable.h"
#include "algorithms/registry.h"
#include "algorithms/verifier.h"
#include "src/tune/tuner.h"
#include "tests/test_shapes.h"

namespace hoccl {
namespace {

bool fullSweep() {
  const char* v = std::getenv("HOCCL_VERIFY_SWEEP");
  return v && std::strcmp(v, "full") == 0;
}

using test_shapes::Shape;
using test_shapes::rect;
using test_shapes::sized;

std::vector<Shape> shapes(bool full) {
  std::vector<Shape> v = {rect(1, 1), rect(1, 3), rect(5, 1), rect(2, 2), rect(3, 2),
                          rect(2, 3), sized({3, 1, 2}, "3+1+2"), rect(4, 2, 2)};
  if (full) {
    std::vector<int> uneven(15, 16);
    uneven.push_back(10);
    for (const Shape& s : {rect(1, 16), rect(4, 4), rect(8, 4, 4), rect(3, 11), sized({8, 8, 8, 4}, "8+8+8+4"),
                           rect(8, 8, 2), rect(1, 64), rect(16, 16, 4), rect(2, 128), rect(256, 1, 2), rect(1, 256),
                           sized(uneven, "15x16+10")})
      v.push_back(s);
  }
  return v;
}

// Whether rank r's call is in place, for each placement pattern.
const char* const kPlacements[] = {"out", "in", "even-in", "last-in"};
std::vector<bool> placement(int pattern, int P) {
  std::vector<bool> v(P);
  for (int r = 0; r < P; ++r) v[r] = pattern == 1 || (pattern == 2 && r % 2 == 0) || (pattern == 3 && r == P - 1);
  return v;
}

std::vector<int> depths(const AlgoInfo& algo) {
  if (!algo.pipelined) return {0};
  std::vector<int> d = {0, 3};  // the builder's default, and an odd depth a tune rule may name
  for (int k : tune::kPipelineDepths) d.push_back(k);
  return d;
}

// What is swept for a shape of P ranks. Up to 8 ranks: everything. Up to
// 64: every channel count, depth and placement, with the step limit and
// the unsynced variant on one mixed placement. Beyond (full sweep only):
// one count, one mixed placement, channels 1 and 4 and depths 0, 4 and 32,
// since one HO-Ring reduce-scatter at 16x16 with 4 channels and depth 32
// alone takes the verifier tens of seconds.
struct Grid {
  std::vector<uint64_t> counts;
  std::vector<int> channels = {1, 2, 3, 4};
  std::vector<int> depths;
  std::vector<int> patterns = {0, 1, 2, 3};
  bool reduced = false;  // step limit and unsynced variant on placement 2 only
};

Grid grid(const AlgoInfo& algo, uint64_t P) {
  Grid g;
  g.depths = depths(algo);
  if (P <= 8) {
    // 2P+1 divides by neither P nor any even node size; 1 and 0 leave most
    // ranks without data, 0 leaves every rank with nothing to receive.
    g.counts = {0, 1, P + 1, 2 * P + 1, 1009};
  } else if (P <= 64) {
    g.counts = {0, 1, 2 * P + 1, 1009};
    g.reduced = true;
  } else {
    g.counts = {2 * P + 1};
    g.channels = {1, 4};
    g.depths.clear();
    for (int d : depths(algo))
      if (d == 0 || d == 4 || d == 32) g.depths.push_back(d);
    g.patterns = {2};
    g.reduced = true;
  }
  return g;
}

struct Tally {
  int verified = 0;
};

void sweepOne(const AlgoInfo& algo, CollKind coll, const Shape& shape, Tally* tally) {
  const int P = shape.nranks;
  const Grid g = grid(algo, P);
  const bool rooted = coll == CollKind::Broadcast || coll == CollKind::Reduce;
  std::vector<int> roots = {0};
  if (rooted && P > 1) roots = {0, P - 1};
  for (uint64_t count : g.counts)
    for (int nch : g.channels)
      for (int depth : g.depths)
        for (int pattern : g.patterns)
          for (uint64_t maxStep : {uint64_t(0), uint64_t(7)})
            for (int root : roots)
              for (bool sync : {true, false}) {
                if (g.reduced && (maxStep || !sync) && pattern != 2) continue;
                if (!sync && (maxStep || pattern == 3)) continue;
                if (P > 64 && (maxStep || !sync)) continue;
                ScheduleKey key = test_shapes::makeKey(coll, P, count, false, nch, root);
                key.pipelineChunks = depth;
                key.maxStepCount = maxStep;
                key.groups = shape.groups;
                const VerifyResult res = verifyExecutable(algo, key, sync, placement(pattern, P));
                ASSERT_TRUE(res.ok) << algo.name << " " << collName(coll) << " " << shape.name << " count " << count
                                    << " channels " << nch << " depth " << depth << " placement "
                                    << kPlacements[pattern] << " maxStep " << maxStep << " root " << root
                                    << " sync " << sync << ": " << res.error;
                ++tally->verified;
              }
}

class ExecutableVerifies : public ::testing::TestWithParam<std::tuple<int, CollKind>> {};

TEST_P(ExecutableVerifies, Sweep) {
  const auto [index, coll] = GetParam();
  const AlgoInfo& algo = allAlgorithms()[index];
  Tally tally;
  for (const Shape& shape : shapes(fullSweep())) {
    const int before = tally.verified;
    const auto start = std::chrono::steady_clock::now();
    sweepOne(algo, coll, shape, &tally);
    if (HasFatalFailure()) return;
    if (shape.nranks > 8)
      std::printf("  %s: %d in %.1f s\n", shape.name.c_str(), tally.verified - before,
                  std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  EXPECT_GT(tally.verified, 0);
  std::printf("%s %s: %d schedule sets verified\n", algo.name, collName(coll), tally.verified);
}

// Every (algorithm, collective) the algorithm runs; the tuner picks no other.
// oneshot_shm's schedule has no steps, so there is nothing to verify: it
// reads the one-shot slots instead, which tests/test_oneshot_shm.cc and
// the collective matrix (test_coll_matrix.cc) run on real communicators.
std::vector<std::tuple<int, CollKind>> algoColls() {
  std::vector<std::tuple<int, CollKind>> v;
  for (int a = 0; a < int(allAlgorithms().size()); ++a)
    for (CollKind c : {CollKind::AllReduce, CollKind::ReduceScatter, CollKind::AllGather, CollKind::Broadcast,
                       CollKind::Reduce})
      if (allAlgorithms()[a].supports(c) && !allAlgorithms()[a].sharedSlotsOnly) v.emplace_back(a, c);
  return v;
}

INSTANTIATE_TEST_SUITE_P(All, ExecutableVerifies, ::testing::ValuesIn(algoColls()), [](const auto& info) {
  return std::string(allAlgorithms()[std::get<0>(info.param)].name) + "_" + collName(std::get<1>(info.param));
});

// The sweep reaches what it claims to: sync steps and zero-copy marks are in
// the schedules it verifies, and depths change the HO-Ring schedule.
TEST(ExecutableSweep, CoversSyncStepsZeroCopyMarksAndDepths) {
  ScheduleKey key;
  key.coll = CollKind::Broadcast;
  key.nranks = 4;
  key.count = 1009;
  key.root = 0;
  key.groups = rect(2, 2).groups;
  const Schedule root = buildExecutable(algorithmInfo(AlgoId::Ring), key, true);
  const Step& last = root.channels[0].steps.back();
  EXPECT_STREQ(stepKindName(last), "sync");  // the root receives nothing else
  EXPECT_EQ(last.recvPeer, 3);
  bool marked = false;
  for (const Step& s : root.channels[0].steps) marked = marked || s.zeroCopyEligible;
  EXPECT_TRUE(marked) << root.toString();
  key.coll = CollKind::AllReduce;
  key.pipelineChunks = 2;
  const size_t two = buildExecutable(algorithmInfo(AlgoId::HoRing), key, true).stepCount();
  key.pipelineChunks = 32;
  EXPECT_GT(buildExecutable(algorithmInfo(AlgoId::HoRing), key, true).stepCount(), two);
}

}  // namespace
}  // namespace hoccl
