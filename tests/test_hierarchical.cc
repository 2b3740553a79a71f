// Hierarchical and HO-Ring schedules: every rank's schedule verifies
// symbolically for many groupings (even, uneven, one group, groups of one,
// several switches, P up to 256), the phases overlap and degenerate as
// designed, and a 2-node x 4-rank HO-Ring all-reduce prints in a screenful.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "algorithms/phases.h"
#include "algorithms/registry.h"
#include "algorithms/verifier.h"
#include "src/exec/executor.h"
#include "tests/test_shapes.h"

namespace hoccl {
namespace {

using Builder = Schedule (*)(const ScheduleKey&);

using test_shapes::Shape;
using test_shapes::rect;
using test_shapes::sized;
using test_shapes::custom;

std::vector<Shape> smallShapes() {
  std::vector<Shape> v = {rect(1, 1), rect(1, 6), rect(6, 1), rect(2, 2), rect(2, 4), rect(3, 3),
                          rect(4, 2), rect(3, 5), rect(4, 8, 2), rect(8, 4, 4),
                          rect(4, 1, 2), rect(6, 3, 2), rect(9, 2, 3)};
  v.push_back(custom({0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5}, {0, 1, 0, 1, 0, 1}, "6x2_interleaved_switches"));
  v.push_back(custom({0, 0, 1, 1, 2, 2}, {0, 0, 1}, "3x2_uneven_switches"));
  v.push_back(sized({3, 1, 2}, "uneven_3_1_2"));
  v.push_back(sized({8, 8, 8, 4}, "uneven_8_8_8_4"));
  v.push_back(sized({2, 5}, "uneven_2_5"));
  v.push_back(sized({1, 4, 1}, "uneven_1_4_1"));
  v.push_back(custom({0, 1, 2, 3, 0, 1, 2, 3, 0, 1}, {}, "round_robin_10_over_4"));
  v.push_back(custom({2, 0, 2, 0, 2}, {}, "empty_group_index"));
  v.push_back(Shape{"null_grouping", 5, nullptr});
  return v;
}

std::vector<Shape> largeShapes() {
  std::vector<int> uneven(15, 16);
  uneven.push_back(10);
  return {rect(16, 16, 4), rect(32, 8, 4), rect(8, 32), rect(64, 4, 8), rect(2, 128), rect(256, 1, 2),
          rect(1, 256), sized(uneven, "uneven_15x16_plus_10")};
}

ScheduleKey makeKey(CollKind coll, const Shape& shape, uint64_t count, bool inPlace = false, int nch = 1,
                    uint64_t maxStep = 0) {
  ScheduleKey k = test_shapes::makeKey(coll, shape.nranks, count, inPlace, nch);
  k.maxStepCount = maxStep;
  k.groups = shape.groups;
  return k;
}

std::vector<Schedule> buildAll(Builder build, ScheduleKey key) {
  std::vector<Schedule> all;
  for (int r = 0; r < key.nranks; ++r) {
    key.rank = r;
    all.push_back(build(key));
  }
  return all;
}

template <int K>
Schedule pipelined(const ScheduleKey& k) {
  return buildHoRingPipelined(k, K);
}

const CollKind kColls[] = {CollKind::AllReduce, CollKind::ReduceScatter, CollKind::AllGather};

struct Case {
  uint64_t count;
  bool inPlace;
  int nch;
  uint64_t maxStep;
};

// Small shapes: every combination. Large shapes: a selection that still
// covers each count, both placements, two channels and small messages;
// reduce-scatter and all-gather with small messages at P = 256 and counts
// of a few hundred take the verifier 5-15 s each, for the ring too, so
// there they get counts of a few rounds only.
std::vector<Case> cases(CollKind coll, uint64_t P, bool large) {
  std::vector<Case> v;
  if (!large) {
    // 2P+1 divides by neither P nor any even group size.
    for (uint64_t count : {uint64_t(0), uint64_t(1), P - 1, P, uint64_t(1009), 2 * P + 1, uint64_t(100003)})
      for (bool inPlace : {false, true})
        for (int nch : {1, 2})
          for (uint64_t maxStep : {0, 7}) {
            // ~10^5 steps per rank: only where the ring test does the same.
            if (maxStep && count == 100003 && (P > 8 || coll != CollKind::AllReduce)) continue;
            v.push_back({count, inPlace, nch, maxStep});
          }
    return v;
  }
  const bool ar = coll == CollKind::AllReduce;
  return {{0, true, 1, 0},        {1, false, 1, 7},          {P - 1, true, 2, 0},
          {P, false, 1, ar ? 7u : 0u}, {1009, true, 1, ar ? 7u : 0u}, {2 * P + 1, false, 2, 0},
          {15, true, 1, 7},       {100003, false, 1, 0}};
}

void sweep(Builder build, const char* algo, CollKind coll, const Shape& shape, bool large) {
  for (const Case& c : cases(coll, shape.nranks, large)) {
    const ScheduleKey key = makeKey(coll, shape, c.count, c.inPlace, c.nch, c.maxStep);
    const VerifyResult res = verifyBuilder(build, key);
    ASSERT_TRUE(res.ok) << algo << " " << collName(coll) << " " << shape.name << " count " << c.count << " inPlace "
                        << c.inPlace << " nch " << c.nch << " maxStep " << c.maxStep << ": " << res.error;
  }
}

// --------------------------------------------------------------- sweeps

class Verifies : public ::testing::TestWithParam<std::tuple<int, CollKind, int>> {};

TEST_P(Verifies, SmallShapes) {
  const auto [algo, coll, shape] = GetParam();
  sweep(algo == 0 ? buildHierarchical : buildHoRing, algo == 0 ? "hierarchical" : "horing", coll,
        smallShapes()[shape], false);
}

INSTANTIATE_TEST_SUITE_P(All, Verifies,
                         ::testing::Combine(::testing::Values(0, 1), ::testing::ValuesIn(kColls),
                                            ::testing::Range(0, int(smallShapes().size()))),
                         [](const auto& info) {
                           return std::string(std::get<0>(info.param) == 0 ? "hier_" : "horing_") +
                                  collName(std::get<1>(info.param)) + "_" +
                                  smallShapes()[std::get<2>(info.param)].name;
                         });

class VerifiesLarge : public ::testing::TestWithParam<std::tuple<int, int>> {};

TEST_P(VerifiesLarge, UpTo256Ranks) {
  const auto [algo, shape] = GetParam();
  for (CollKind coll : kColls) {
    sweep(algo == 0 ? buildHierarchical : buildHoRing, algo == 0 ? "hierarchical" : "horing", coll,
          largeShapes()[shape], true);
  }
}

INSTANTIATE_TEST_SUITE_P(All, VerifiesLarge,
                         ::testing::Combine(::testing::Values(0, 1), ::testing::Range(0, int(largeShapes().size()))),
                         [](const auto& info) {
                           return std::string(std::get<0>(info.param) == 0 ? "hier_" : "horing_") +
                                  largeShapes()[std::get<1>(info.param)].name;
                         });

// Explicit pipeline depths, more chunks than elements included.
TEST(HoRingPipeline, ChunkCountsVerify) {
  const Builder builders[] = {pipelined<2>, pipelined<3>, pipelined<5>, pipelined<32>};
  for (const Shape& shape : {rect(2, 4), rect(3, 3), rect(4, 8, 2), sized({3, 1, 2}, "u"), sized({8, 8, 8, 4}, "u")}) {
    for (CollKind coll : kColls) {
      for (Builder build : builders) {
        for (uint64_t count : {uint64_t(1), uint64_t(4), uint64_t(shape.nranks) + 1, uint64_t(1009)}) {
          for (bool inPlace : {false, true}) {
            for (uint64_t maxStep : {0, 3}) {
              const VerifyResult res = verifyBuilder(build, makeKey(coll, shape, count, inPlace, 2, maxStep));
              ASSERT_TRUE(res.ok) << collName(coll) << " " << shape.name << " count " << count << ": " << res.error;
            }
          }
        }
      }
    }
  }
}

// Chunk k of the rail phase waits for chunk k of the intra phase, not for the
// whole intra phase: the rail's first step depends on an early intra step.
TEST(HoRingPipeline, RailsStartAfterTheirChunk) {
  const Shape shape = rect(2, 4);
  ScheduleKey key = makeKey(CollKind::AllReduce, shape, 4000);
  const Schedule s = buildHoRingPipelined(key, 4);
  ASSERT_EQ(s.channels.size(), 3u);
  const std::vector<Step>& intra = s.channels[0].steps;
  const std::vector<Step>& rail = s.channels[1].steps;
  const std::vector<Step>& gather = s.channels[2].steps;
  ASSERT_EQ(intra.size(), 16u);  // 4 chunks x 4 steps
  EXPECT_EQ(rail[0].depChannel, 0);
  EXPECT_EQ(rail[0].depStep, 3);  // end of chunk 0's reduce-scatter
  EXPECT_EQ(rail[3].depStep, 7);  // chunk 1
  EXPECT_EQ(gather[0].depChannel, 1);
  EXPECT_EQ(gather[0].depStep, 2);  // end of chunk 0's rail all-reduce
  for (const Step& st : intra) EXPECT_EQ(st.depChannel, -1);
}

TEST(Channels, NoUnorderedConflictingAccess) {
  const Builder builders[] = {buildHierarchical, buildHoRing, pipelined<3>};
  for (const Shape& shape : smallShapes()) {
    for (CollKind coll : kColls) {
      for (Builder build : builders) {
        for (uint64_t count : {uint64_t(shape.nranks) + 1, uint64_t(4 * shape.nranks) + 3}) {
          for (bool inPlace : {false, true}) {
            const uint64_t maxStep = count > uint64_t(shape.nranks) + 1 ? 3 : 0;
            for (const Schedule& s : buildAll(build, makeKey(coll, shape, count, inPlace, 2, maxStep))) {
              ASSERT_EQ(firstUnorderedConflict(s), "") << collName(coll) << " " << shape.name << " rank " << s.key.rank << " count "
                                          << count << " inPlace " << inPlace;
            }
          }
        }
      }
    }
  }
}

TEST(Channels, DroppedDependencyIsARace) {
  ScheduleKey key = makeKey(CollKind::AllReduce, rect(2, 4), 64, true);
  key.rank = 1;
  Schedule s = buildHoRingPipelined(key, 2);
  ASSERT_EQ(firstUnorderedConflict(s), "");
  s.channels[2].steps[0].depChannel = -1;  // the all-gather no longer waits for the rail
  EXPECT_NE(firstUnorderedConflict(s), "");
}

// -------------------------------------------------------- degenerate shapes

void expectSameShapeAsRing(const ScheduleKey& key) {
  for (int r = 0; r < key.nranks; ++r) {
    ScheduleKey k = key;
    k.rank = r;
    const Schedule ring = buildRing(k), ho = buildHoRing(k);
    EXPECT_STREQ(ho.algorithm, "horing");
    ASSERT_EQ(ho.channels.size(), ring.channels.size()) << collName(key.coll);
    for (size_t c = 0; c < ring.channels.size(); ++c) {
      ASSERT_EQ(ho.channels[c].steps.size(), ring.channels[c].steps.size()) << collName(key.coll) << " rank " << r;
      for (size_t i = 0; i < ring.channels[c].steps.size(); ++i) {
        EXPECT_STREQ(stepKindName(ho.channels[c].steps[i]), stepKindName(ring.channels[c].steps[i]));
        EXPECT_EQ(ho.channels[c].steps[i].sendPeer, ring.channels[c].steps[i].sendPeer);
      }
    }
  }
}

TEST(HoRingDegenerate, OneGroupOrGroupsOfOneIsAPlainRing) {
  for (CollKind coll : kColls) {
    expectSameShapeAsRing(makeKey(coll, rect(1, 6), 60));
    expectSameShapeAsRing(makeKey(coll, rect(5, 1), 50, true));
    expectSameShapeAsRing(makeKey(coll, Shape{"null", 4, nullptr}, 40));
  }
}

TEST(Labels, UnevenRunsHoRingInvalidFallsBack) {
  for (const Shape& shape : {sized({8, 8, 8, 4}, "u"), sized({1, 4, 1}, "u")}) {
    for (CollKind coll : kColls) {
      EXPECT_STREQ(buildHoRing(makeKey(coll, shape, 100)).algorithm, "horing");
      EXPECT_STREQ(buildHierarchical(makeKey(coll, shape, 100)).algorithm, "hierarchical");
    }
  }
  Shape bad = custom({0, 1, 0}, {}, "short");
  bad.nranks = 4;  // groupOf covers 3 of 4 ranks
  for (Builder build : {buildHierarchical, buildHoRing}) {
    ScheduleKey key = makeKey(CollKind::AllReduce, bad, 10);
    EXPECT_STREQ(build(key).algorithm, "ring (fallback: invalid grouping)");
    EXPECT_TRUE(verifyBuilder(build, key).ok);
    key = makeKey(CollKind::Broadcast, rect(2, 2), 10);
    EXPECT_NE(std::string(build(key).algorithm).find("fallback"), std::string::npos);
    EXPECT_TRUE(verifyBuilder(build, key).ok);
  }
  const ScheduleKey key = makeKey(CollKind::AllReduce, custom({0, 0, 1, 1}, {0}, "x"), 10);  // superOf too short
  EXPECT_STREQ(buildHoRing(key).algorithm, "ring (fallback: invalid grouping)");
}

// ---------------------------------------------------------------- topology

TEST(HoRingTopology, SwitchLevelRingsStayUnderTheirSwitch) {
  // Groups 0, 2, 4 under switch 0 and 1, 3, 5 under switch 1. Rail 0's
  // servers are 0 4 8 | 2 6 10: the switch-level ring under switch 0 is
  // 0 -> 4 -> 8 -> 0 (channel 1), and the ring across switches pairs the
  // servers with the same index: 0 <-> 2, 4 <-> 6, 8 <-> 10 (channel 2).
  const Shape shape = custom({0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5}, {0, 1, 0, 1, 0, 1}, "sw");
  ScheduleKey key = makeKey(CollKind::AllReduce, shape, 1200);
  const int expectSw[] = {4, -1, 6, -1, 8, -1, 10, -1, 0, -1, 2, -1};
  const int expectTop[] = {2, -1, 0, -1, 6, -1, 4, -1, 10, -1, 8, -1};
  for (int r = 0; r < shape.nranks; r += 2) {
    key.rank = r;
    const Schedule s = buildHoRing(key);
    ASSERT_EQ(s.channels.size(), 5u);
    EXPECT_EQ(s.channels[1].steps.front().sendPeer, expectSw[r]) << "rank " << r;
    EXPECT_EQ(s.channels[2].steps.front().sendPeer, expectTop[r]) << "rank " << r;
  }
}

// Elements that leave switch 0, summed over its ranks.
uint64_t leavingSwitch0(const std::vector<Schedule>& all, const Grouping& g) {
  uint64_t n = 0;
  for (const Schedule& s : all) {
    const int me = s.key.rank;
    if (g.superOf[size_t(g.groupOf[size_t(me)])] != 0) continue;
    for (const Channel& c : s.channels)
      for (const Step& st : c.steps)
        if (st.sendPeer >= 0 && g.superOf[size_t(g.groupOf[size_t(st.sendPeer)])] != 0) n += st.count;
  }
  return n;
}

// docs/algorithms.md: with the switch level only 1/(ranks under a switch) of the
// data crosses the uplinks per rank; a switch sends 2(W-1)/W*M in all, where
// node-level HO-Ring sends 2(N-1)/N*M (rails cross once each way per lap).
TEST(HoRingTopology, SwitchLevelCutsUplinkBytes) {
  for (const Shape& shape : {rect(4, 2, 2), rect(8, 4, 2), rect(16, 4, 4), rect(6, 2, 2)}) {
    const Grouping& g = *shape.groups;
    const uint64_t W = uint64_t(*std::max_element(g.superOf.begin(), g.superOf.end()) + 1);
    const uint64_t M = uint64_t(shape.nranks) * 4 * 3 * 5 * 7;
    const uint64_t ho = leavingSwitch0(buildAll(buildHoRing, makeKey(CollKind::AllReduce, shape, M)), g);
    EXPECT_EQ(ho, 2 * (W - 1) * M / W) << shape.name;
    const uint64_t ring = leavingSwitch0(buildAll(buildRing, makeKey(CollKind::AllReduce, shape, M)), g);
    const uint64_t P = uint64_t(shape.nranks);
    EXPECT_EQ(ring, 2 * (P - 1) * M / P) << shape.name;
    std::printf("%s: elements leaving switch 0: ring %llu, horing %llu (%.2fx fewer)\n", shape.name.c_str(),
                static_cast<unsigned long long>(ring), static_cast<unsigned long long>(ho), double(ring) / double(ho));
  }
}

TEST(HoRingTopology, UnevenSwitchesRunNodeLevelOnly) {
  int W = 0, n = 0;
  const char* why = nullptr;
  Hierarchy h;
  ScheduleKey key = makeKey(CollKind::AllReduce, custom({0, 0, 1, 1, 2, 2}, {0, 0, 1}, "u"), 60);
  ASSERT_EQ(makeHierarchy(key, &h), nullptr);
  EXPECT_FALSE(switchLevel(h, &W, &n, &why));
  EXPECT_STREQ(why, "switches have unequal node counts");
  key = makeKey(CollKind::AllReduce, custom({0, 0, 1, 2, 2, 3, 3}, {0, 0, 1, 1}, "u"), 60);
  ASSERT_EQ(makeHierarchy(key, &h), nullptr);
  EXPECT_FALSE(switchLevel(h, &W, &n, &why));
  EXPECT_STREQ(why, "nodes have unequal rank counts");
  key = makeKey(CollKind::AllReduce, rect(8, 2, 2), 60);
  ASSERT_EQ(makeHierarchy(key, &h), nullptr);
  EXPECT_TRUE(switchLevel(h, &W, &n, &why));
  EXPECT_EQ(W, 2);
  EXPECT_EQ(n, 4);
}

// --------------------------------------------------------------- printing

int lineCount(const std::string& s) { return int(std::count(s.begin(), s.end(), '\n')); }

TEST(Print, TwoNodesByFourRanksFitsAScreen) {
  ScheduleKey key = makeKey(CollKind::AllReduce, rect(2, 4), 64);
  key.rank = 0;
  const std::string small = buildHoRing(key).toString();
  std::printf("%s", small.c_str());
  EXPECT_LE(lineCount(small), 24);
  const std::string piped = buildHoRingPipelined(key, 2).toString();
  std::printf("%s", piped.c_str());
  EXPECT_LE(lineCount(piped), 40);
  key.rank = 5;
  std::printf("%s", buildHierarchical(key).toString().c_str());
}

// ------------------------------------------------------- cost, by counting

struct Stats {
  size_t steps = 0, messages = 0;
  uint64_t sent = 0, sentAcross = 0;  // elements; across: to another group
};

Stats statsOf(const Schedule& s) {
  Stats st;
  for (const Channel& c : s.channels) {
    for (const Step& step : c.steps) {
      ++st.steps;
      if (step.sendPeer < 0) continue;
      ++st.messages;
      st.sent += step.count;
      if (s.key.groups->groupOf[step.sendPeer] != s.key.groups->groupOf[s.key.rank]) st.sentAcross += step.count;
    }
  }
  return st;
}

TEST(Cost, StepsMessagesAndBytesLeavingAGroup) {
  const uint64_t M = uint64_t{1} << 20;
  for (const Shape& shape : {rect(2, 4), rect(4, 8)}) {
    const int P = shape.nranks, N = shape.groups->ngroups();
    for (uint64_t count : {uint64_t(P * 4), M}) {
      std::printf("%s all-reduce count %llu: max over ranks (steps, messages, elements sent), elements leaving group 0\n",
                  shape.name.c_str(), static_cast<unsigned long long>(count));
      uint64_t leaving[3] = {};
      const Builder builders[] = {buildRing, buildHierarchical, buildHoRing};
      const char* names[] = {"ring", "hierarchical", "horing"};
      for (int a = 0; a < 3; ++a) {
        Stats worst;
        for (const Schedule& s : buildAll(builders[a], makeKey(CollKind::AllReduce, shape, count))) {
          const Stats st = statsOf(s);
          worst.steps = std::max(worst.steps, st.steps);
          worst.messages = std::max(worst.messages, st.messages);
          worst.sent = std::max(worst.sent, st.sent);
          if (shape.groups->groupOf[s.key.rank] == 0) leaving[a] += st.sentAcross;
        }
        std::printf("  %-13s steps %4zu  messages %4zu  sent %8llu  leaving group 0 %8llu\n", names[a], worst.steps,
                    worst.messages, static_cast<unsigned long long>(worst.sent),
                    static_cast<unsigned long long>(leaving[a]));
      }
      // docs/algorithms.md: ring 2(P-1)/P*M, hierarchical and horing 2(N-1)/N*M.
      EXPECT_EQ(leaving[0], 2 * (P - 1) * count / P);
      EXPECT_EQ(leaving[1], 2 * (N - 1) * count / N);
      EXPECT_EQ(leaving[2], 2 * (N - 1) * count / N);
    }
  }
}

TEST(Scratch, OnlyWhereNeeded) {
  const Shape shape = rect(4, 8);
  ScheduleKey key = makeKey(CollKind::ReduceScatter, shape, 100);
  key.rank = 9;
  EXPECT_EQ(buildHoRing(key).scratchCount, 300u);  // (N-1) blocks
  EXPECT_EQ(buildHierarchical(key).scratchCount, 0u);
  key.rank = 8;
  EXPECT_EQ(buildHierarchical(key).scratchCount, 3200u);  // the leader holds P blocks
  for (CollKind coll : {CollKind::AllReduce, CollKind::AllGather}) {
    key.coll = coll;
    EXPECT_EQ(buildHoRing(key).scratchCount, 0u);
    EXPECT_EQ(buildHierarchical(key).scratchCount, 0u);
  }
}

// Scratch is leased from the communicator's pool: the next call gets the
// same pages (no fresh allocation and page faults per call), two tasks at
// once get different buffers, and idle buffers too small for a request are
// dropped rather than piling up.
TEST(Scratch, PoolHandsTheSamePagesToTheNextCall) {
  ScratchPool pool;
  char* first = nullptr;
  {
    ScratchPool::Lease a = ScratchPool::take(&pool, 1 << 20);
    ASSERT_NE(a.data(), nullptr);
    first = a.data();
    first[(1 << 20) - 1] = 7;  // the whole size is usable
    EXPECT_EQ(pool.idleBytes(), 0u);
  }
  EXPECT_EQ(pool.idleBytes(), size_t(1) << 20);
  {
    ScratchPool::Lease again = ScratchPool::take(&pool, 1 << 19);  // smaller fits the idle one
    EXPECT_EQ(again.data(), first);
    ScratchPool::Lease other = ScratchPool::take(&pool, 1 << 19);  // held at once: its own
    EXPECT_NE(other.data(), first);
    ASSERT_NE(other.data(), nullptr);
  }
  EXPECT_EQ(pool.idleBytes(), (size_t(1) << 20) + (size_t(1) << 19));
  {
    ScratchPool::Lease big = ScratchPool::take(&pool, 4 << 20);  // nothing fits: the small ones go
    EXPECT_EQ(pool.idleBytes(), 0u);
    ScratchPool::Lease moved = std::move(big);  // a moved lease returns its buffer once
    EXPECT_NE(moved.data(), nullptr);
  }
  EXPECT_EQ(pool.idleBytes(), size_t(4) << 20);
  ScratchPool::Lease own = ScratchPool::take(nullptr, 4096);  // no pool: a buffer of its own
  EXPECT_NE(own.data(), nullptr);
  EXPECT_EQ(pool.idleBytes(), size_t(4) << 20);
}

// More scratch than the machine has is a null lease (the task turns it into
// hocclSystemError naming the call), not an exception through the C API.
TEST(Scratch, AnImpossibleSizeIsANullLeaseNotAThrow) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "AddressSanitizer aborts on the size by default (allocator_may_return_null)";
#endif
  ScratchPool pool;
  ScratchPool::Lease none = ScratchPool::take(&pool, size_t(1) << 62);
  EXPECT_EQ(none.data(), nullptr);
  EXPECT_EQ(pool.idleBytes(), 0u);
}

}  // namespace
}  // namespace hoccl

namespace hoccl {
namespace {

// ------------------------------------------------------ recursive doubling

TEST(Doubling, VerifiesForEveryRankCount) {
  for (CollKind coll : {CollKind::AllReduce, CollKind::AllGather, CollKind::ReduceScatter}) {
    for (int P : {1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 13, 16, 17, 31, 33, 64, 100}) {
      for (uint64_t count : {uint64_t(0), uint64_t(1), uint64_t(7), uint64_t(1000)}) {
        for (bool inPlace : {false, true}) {
          for (uint64_t maxStep : {0, 3}) {
            ScheduleKey key = test_shapes::makeKey(coll, P, count, inPlace);
            key.maxStepCount = maxStep;
            const VerifyResult res = verifyBuilder(buildDoubling, key);
            ASSERT_TRUE(res.ok) << collName(coll) << " P " << P << " count " << count << " inPlace " << inPlace
                                << " maxStep " << maxStep << ": " << res.error;
            EXPECT_STREQ(buildDoubling(key).algorithm, "doubling");
          }
        }
      }
    }
  }
}

// All-gather and reduce-scatter: log2(P) exchanges of one message each way
// (two more, to and from the remainder ranks, where P is not a power of
// two), where the ring
// takes P-1 steps.
TEST(Doubling, AllGatherAndReduceScatterExchangeLogarithmically) {
  for (CollKind coll : {CollKind::AllGather, CollKind::ReduceScatter}) {
    for (int P : {8, 12, 64}) {
      ScheduleKey key;
      key.coll = coll;
      key.nranks = P;
      key.count = 16;
      size_t worst = 0;
      for (int r = 0; r < P; ++r) {
        key.rank = r;
        const Schedule sched = buildDoubling(key);
        size_t transfers = 0;
        for (const Step& st : sched.channels[0].steps) transfers += st.sendPeer >= 0 || st.recvPeer >= 0;
        worst = std::max(worst, transfers);
      }
      int lg = 0;
      while ((2 << lg) <= P) ++lg;
      const bool pow2 = (P & (P - 1)) == 0;
      EXPECT_EQ(worst, size_t(2 * lg + (pow2 ? 0 : 2))) << collName(coll) << " P " << P;
    }
  }
}

// log2(P) exchanges (plus two, to and from the remainder ranks, where P
// is not a power of two) against the ring's 2(P-1) steps.
TEST(Doubling, StepsAreLogarithmic) {
  for (int P : {8, 12, 64}) {
    ScheduleKey key;
    key.coll = CollKind::AllReduce;
    key.nranks = P;
    key.count = 16;
    size_t worst = 0;
    for (int r = 0; r < P; ++r) {
      key.rank = r;
      worst = std::max(worst, buildDoubling(key).stepCount());
    }
    int lg = 0;
    while ((2 << lg) <= P) ++lg;
    const bool pow2 = (P & (P - 1)) == 0;
    EXPECT_EQ(worst, size_t(2 * lg + (pow2 ? 0 : 2))) << "P " << P;
  }
}

TEST(Doubling, RootedCollectivesFallBackToTheRing) {
  ScheduleKey key;
  key.coll = CollKind::Broadcast;
  key.nranks = 4;
  key.count = 10;
  EXPECT_STREQ(buildDoubling(key).algorithm,
               "ring (fallback: doubling is for all-reduce, all-gather and reduce-scatter)");
  EXPECT_TRUE(verifyBuilder(buildDoubling, key).ok);
}

// ------------------------------------------------ leaders' doubling

TEST(LeaderDoubling, VerifiesOnEveryShape) {
  std::vector<Shape> shapes = smallShapes();
  for (const Shape& s : largeShapes()) shapes.push_back(s);
  for (const Shape& shape : shapes) {
    for (uint64_t count : {uint64_t(0), uint64_t(1), uint64_t(7), uint64_t(1009)}) {
      for (bool inPlace : {false, true}) {
        for (uint64_t maxStep : {0, 3}) {
          if (shape.nranks > 64 && maxStep && count > 7) continue;  // keeps the verifier under a few seconds
          const ScheduleKey key = makeKey(CollKind::AllReduce, shape, count, inPlace, 1, maxStep);
          const VerifyResult res = verifyBuilder(buildLeaderDoubling, key);
          ASSERT_TRUE(res.ok) << shape.name << " count " << count << " inPlace " << inPlace << " maxStep "
                              << maxStep << ": " << res.error;
        }
      }
    }
  }
}

// Across groups the leaders exchange log2(N) times (+2 when N is not a
// power of two), where hierarchical's ring takes 2(N-1) steps; inside a
// group it is the same chain reduce and broadcast.
TEST(LeaderDoubling, LeadersExchangeLogarithmically) {
  for (int N : {2, 4, 8, 6, 16}) {
    const Shape shape = rect(N, 4);
    const ScheduleKey key = makeKey(CollKind::AllReduce, shape, 64);
    auto across = [&](Builder b) {
      size_t most = 0;
      for (const Schedule& s : buildAll(b, key)) {
        size_t n = 0;
        for (const Channel& ch : s.channels)
          for (const Step& st : ch.steps)
            n += st.sendPeer >= 0 && shape.groups->groupOf[st.sendPeer] != shape.groups->groupOf[s.key.rank];
        most = std::max(most, n);
      }
      return most;
    };
    int lg = 0;
    while ((2 << lg) <= N) ++lg;
    const bool pow2 = (N & (N - 1)) == 0;
    EXPECT_EQ(across(buildLeaderDoubling), size_t(lg + (pow2 ? 0 : 1))) << "N " << N;
    EXPECT_EQ(across(buildHierarchical), size_t(2 * (N - 1))) << "N " << N;
  }
}

TEST(LeaderDoubling, FallsBackWhereItCannotRun) {
  ScheduleKey key = makeKey(CollKind::ReduceScatter, rect(2, 2), 10);
  EXPECT_STREQ(buildLeaderDoubling(key).algorithm, "ring (fallback: leaderdoubling is all-reduce only)");
  EXPECT_TRUE(verifyBuilder(buildLeaderDoubling, key).ok);
  // No grouping: one group, a chain reduce and broadcast.
  key = makeKey(CollKind::AllReduce, Shape{"null_grouping", 5, nullptr}, 10);
  EXPECT_TRUE(verifyBuilder(buildLeaderDoubling, key).ok);
}

}  // namespace
}  // namespace hoccl
