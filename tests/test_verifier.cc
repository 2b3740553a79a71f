// The symbolic verifier: every ring schedule verifies for many shapes, and
// broken schedules are caught with an error that says what went wrong.
#include <gtest/gtest.h>

#include <string>
#include <tuple>
#include <vector>

#include "algorithms/registry.h"
#include "algorithms/verifier.h"
#include "tests/test_shapes.h"

namespace hoccl {
namespace {

using test_shapes::makeKey;
using test_shapes::makeStep;

std::vector<Schedule> buildAll(const ScheduleKey& key) {
  std::vector<Schedule> all;
  for (int r = 0; r < key.nranks; ++r) {
    ScheduleKey k = key;
    k.rank = r;
    all.push_back(buildRing(k));
  }
  return all;
}

// Expects the verifier to reject `all` with an error containing `what`.
void expectError(const std::vector<Schedule>& all, const std::string& what, int slots = 2) {
  const VerifyResult res = verifySchedules(all, slots);
  EXPECT_FALSE(res.ok) << "expected an error containing: " << what;
  EXPECT_NE(res.error.find(what), std::string::npos) << res.error;
}

// ---------------------------------------------------------------- sweeps

class RingVerifies : public ::testing::TestWithParam<std::tuple<CollKind, int>> {};

TEST_P(RingVerifies, AllShapes) {
  const auto [coll, P] = GetParam();
  std::vector<uint64_t> counts = {0, 1, 2, uint64_t(P) - 1, uint64_t(P), uint64_t(P) + 1, 1009,
                                  uint64_t(3 * P + 2)};
  if (P <= 8) counts.push_back(100003);
  std::vector<int> roots = {0};
  if (coll == CollKind::Broadcast || coll == CollKind::Reduce) roots = {0, P - 1, P / 2};
  for (uint64_t count : counts) {
    for (bool inPlace : {false, true}) {
      for (int nch : {1, 2, 3}) {
        for (int root : roots) {
          // maxStep 7: many pipeline rounds, as the executor's slot limit makes.
          for (uint64_t maxStep : {0, 7}) {
            ScheduleKey key = makeKey(coll, P, count, inPlace, nch, root);
            key.maxStepCount = maxStep;
            const VerifyResult res = verifyBuilder(buildRing, key);
            ASSERT_TRUE(res.ok) << collName(coll) << " P " << P << " count " << count << " inPlace "
                                << inPlace << " nch " << nch << " root " << root << " maxStep "
                                << maxStep << ": " << res.error;
          }
        }
      }
    }
  }
}

std::vector<int> sweepRanks() {
  std::vector<int> ranks;
  for (int p = 1; p <= 16; ++p) ranks.push_back(p);
  for (int p : {17, 31, 32, 33, 63, 64}) ranks.push_back(p);
  return ranks;
}

INSTANTIATE_TEST_SUITE_P(Ring, RingVerifies,
                         ::testing::Combine(::testing::Values(CollKind::AllReduce, CollKind::ReduceScatter,
                                                              CollKind::AllGather, CollKind::Broadcast,
                                                              CollKind::Reduce),
                                            ::testing::ValuesIn(sweepRanks())),
                         [](const auto& info) {
                           return std::string(collName(std::get<0>(info.param))) + "_P" +
                                  std::to_string(std::get<1>(info.param));
                         });

TEST(RingVerifiesLarge, TwoHundredFiftySixRanks) {
  for (int c = 0; c < 5; ++c) {
    const ScheduleKey key = makeKey(static_cast<CollKind>(c), 256, 300, c % 2 == 0, 1, 255);
    const VerifyResult res = verifyBuilder(buildRing, key);
    EXPECT_TRUE(res.ok) << collName(key.coll) << ": " << res.error;
  }
}

// ------------------------------------------------------- buffering model

TEST(VerifierSlots, RingNeedsTwoMessagesPerEdge) {
  const ScheduleKey key = makeKey(CollKind::AllReduce, 3, 30);
  EXPECT_TRUE(verifyBuilder(buildRing, key).ok);                 // default: 2
  EXPECT_TRUE(verifyBuilder(buildRing, key, 0).ok);              // unbounded
  const VerifyResult one = verifyBuilder(buildRing, key, 1);     // every rank holds a full edge
  EXPECT_FALSE(one.ok);
  EXPECT_NE(one.error.find("deadlock"), std::string::npos) << one.error;
  EXPECT_NE(one.error.find("waits for room to send to rank"), std::string::npos) << one.error;
  // A chain never fills an edge twice.
  EXPECT_TRUE(verifyBuilder(buildRing, makeKey(CollKind::Broadcast, 5, 30), 1).ok);
}

// ------------------------------------------------------- broken schedules

TEST(VerifierCatches, DroppedStep) {
  // Without rank 1's step 2 its later steps pair with the wrong messages.
  std::vector<Schedule> all = buildAll(makeKey(CollKind::AllReduce, 4, 40));
  auto& steps = all[1].channels[0].steps;
  steps.erase(steps.begin() + 2);
  expectError(all, "rank 1 ch 0 step 2 (recvReduceCopySend n 10): combines element 30 with element 20");
  // Without the middle of a chain the end of it waits forever.
  all = buildAll(makeKey(CollKind::Broadcast, 3, 8));
  all[1].channels[0].steps.clear();
  expectError(all, "deadlock: rank 2 ch 0 step 0 (recv n 8) waits for a message from rank 1");
}

TEST(VerifierCatches, DroppedFinalReceive) {
  std::vector<Schedule> all = buildAll(makeKey(CollKind::AllReduce, 4, 40));
  all[3].channels[0].steps.pop_back();
  expectError(all, "rank 2 ch 0 step 5 sends 10 elements to rank 3 that are never received");
}

TEST(VerifierCatches, MissingContribution) {
  std::vector<Schedule> all = buildAll(makeKey(CollKind::AllReduce, 4, 40));
  Step& s = all[2].channels[0].steps[3];  // recvReduceCopySend -> recvCopySend
  ASSERT_STREQ(stepKindName(s), "recvReduceCopySend");
  s.reduce = false;
  s.src = Slice{};
  expectError(all, "misses the contribution of rank 2");
}

TEST(VerifierCatches, DoubleCountedContribution) {
  // Reduce to root 0 over 3 ranks; rank 2 sends its partial sum twice and the
  // root reduces the second copy into what already holds it.
  std::vector<Schedule> all = buildAll(makeKey(CollKind::Reduce, 3, 12));
  Step again = all[2].channels[0].steps[0];
  ASSERT_STREQ(stepKindName(again), "recvReduceSend");
  all[1].channels[0].steps.push_back(all[1].channels[0].steps[0]);  // rank 1 sends twice
  all[2].channels[0].steps.push_back(again);
  Step twice = all[0].channels[0].steps[0];
  twice.src = Slice{Buf::Output, 0};
  all[0].channels[0].steps.push_back(twice);
  expectError(all, "counted twice");
}

TEST(VerifierCatches, WrongCount) {
  std::vector<Schedule> all = buildAll(makeKey(CollKind::AllReduce, 4, 40));
  all[0].channels[0].steps[0].count -= 1;
  expectError(all, "rank 1 ch 0 step 1 (recvReduceSend n 10): count mismatch: receives 10 elements from "
                   "rank 0 whose step 0 sent 9");
}

TEST(VerifierCatches, ReadOfUninitialisedOutput) {
  std::vector<Schedule> all = buildAll(makeKey(CollKind::AllReduce, 4, 40));
  all[1].channels[0].steps[0].src.buf = Buf::Output;
  expectError(all, "rank 1 ch 0 step 0 (send n 10): reads Output[10] before anything wrote it");
}

TEST(VerifierCatches, UndefinedBroadcastInput) {
  // Non-root ranks' input is not part of a broadcast: reading it is a bug.
  std::vector<Schedule> all = buildAll(makeKey(CollKind::Broadcast, 3, 5, false, 1, 1));
  Step& last = all[0].channels[0].steps[0];
  ASSERT_STREQ(stepKindName(last), "recv");
  last.reduce = true;
  last.src = Slice{Buf::Input, 0};
  expectError(all, "reads Input[0] before anything wrote it");
}

TEST(VerifierCatches, SwappedPeers) {
  std::vector<Schedule> all = buildAll(makeKey(CollKind::AllReduce, 4, 40));
  for (Step& s : all[1].channels[0].steps) std::swap(s.recvPeer, s.sendPeer);
  const VerifyResult res = verifySchedules(all);
  EXPECT_FALSE(res.ok);  // the swapped first and last steps become invalid kinds
  std::vector<Schedule> ring = buildAll(makeKey(CollKind::AllReduce, 4, 40));
  for (Step& s : ring[1].channels[0].steps) {
    if (s.recvPeer >= 0 && s.sendPeer >= 0) std::swap(s.recvPeer, s.sendPeer);
  }
  expectError(ring, "deadlock");
}

TEST(VerifierCatches, MessageNeverReceived) {
  std::vector<Schedule> all = buildAll(makeKey(CollKind::AllGather, 3, 4));
  all[0].channels[0].steps.push_back(makeStep(-1, 2, false, Slice{Buf::Input, 0}, Slice{}, 4));
  expectError(all, "rank 0 ch 0 step 3 sends 4 elements to rank 2 that are never received");
}

TEST(VerifierCatches, WrongElementCombined) {
  std::vector<Schedule> all = buildAll(makeKey(CollKind::AllReduce, 4, 40));
  all[2].channels[0].steps[1].src.offset += 1;
  expectError(all, "combines element");
}

TEST(VerifierCatches, WrongBlockGathered) {
  std::vector<Schedule> all = buildAll(makeKey(CollKind::AllGather, 3, 4));
  all[1].channels[0].steps.back().dst.offset = 0;  // overwrites rank 0's block with rank 2's
  expectError(all, "rank 1 Output[0] should hold element 0 of ranks {0}, but it misses the contribution");
}

TEST(VerifierCatches, StaticMistakes) {
  const std::vector<Schedule> good = buildAll(makeKey(CollKind::AllReduce, 4, 40));
  std::vector<Schedule> all = good;
  all[0].channels[0].steps[1].recvPeer = 0;
  expectError(all, "rank 0 ch 0 step 1 (recvReduceSend n 10): peer 0 is invalid");
  all = good;
  all[0].channels[0].steps[1].sendPeer = 4;
  expectError(all, "peer 4 is invalid");
  all = good;
  all[3].channels[0].steps[2].src.offset = 35;
  expectError(all, "Input[35+10] is outside the buffer of 40 elements");
  all = good;
  all[3].channels[0].steps[4].dst = Slice{Buf::Scratch, 0};
  expectError(all, "Scratch[0+10] is outside the buffer of 0 elements");
  all = good;
  all[2].channels[0].steps[0].count = 0;  // a zero-count message is legal, but not where 10 are expected
  expectError(all, "rank 3 ch 0 step 1 (recvReduceSend n 10): count mismatch: receives 10 elements from rank 2 "
                   "whose step 0 sent 0");
  all = good;
  all[2].channels[0].steps[0].reduce = true;
  expectError(all, "invalid step kind");
  all = good;
  all[2].key.count = 41;
  expectError(all, "rank 2 has a different key");
  all = good;
  all.pop_back();
  expectError(all, "key.nranks is 4 but there are 3 schedules");
  all = good;
  all[1].channels[0].steps[0].depChannel = 1;
  all[1].channels[0].steps[0].depStep = 0;
  expectError(all, "depends on a step that does not exist");
}

TEST(VerifierCatches, WritesToInputOutOfPlace) {
  std::vector<Schedule> all = buildAll(makeKey(CollKind::AllReduce, 3, 9));
  all[0].channels[0].steps.back().dst.buf = Buf::Input;
  expectError(all, "writes the input buffer where it is not the output");
  // In place, reduce-scatter may write Input only where Output aliases it.
  all = buildAll(makeKey(CollKind::ReduceScatter, 3, 3, true));
  Step& last = all[1].channels[0].steps.back();
  ASSERT_STREQ(stepKindName(last), "recvReduce");
  EXPECT_EQ(last.src.offset, 3u);
  last.dst = Slice{Buf::Input, 3};  // Output == Input + 1*3: allowed and correct
  EXPECT_TRUE(verifySchedules(all).ok) << verifySchedules(all).error;
  last.dst = Slice{Buf::Input, 0};
  expectError(all, "writes the input buffer where it is not the output");
}

// ---------------------------------------------------- dependencies

// Broadcast from rank 1 to rank 0, which receives on channel 0 into scratch
// and copies scratch to its output on channel 1.
std::vector<Schedule> scratchBroadcast(bool withDep) {
  std::vector<Schedule> all = buildAll(makeKey(CollKind::Broadcast, 2, 6, false, 2, 1));
  for (Schedule& s : all) s.channels.assign(2, Channel{});
  all[1].channels[0].steps.push_back(makeStep(-1, 0, false, {Buf::Input, 0}, {Buf::Output, 0}, 6));
  all[0].scratchCount = 6;
  all[0].channels[0].steps.push_back(makeStep(1, -1, false, {}, {Buf::Scratch, 0}, 6));
  Step copy = makeStep(-1, -1, false, {Buf::Scratch, 0}, {Buf::Output, 0}, 6);
  if (withDep) copy.depChannel = 0, copy.depStep = 0;
  all[0].channels[1].steps.push_back(copy);
  return all;
}

TEST(VerifierDependencies, AreHonoured) {
  const VerifyResult res = verifySchedules(scratchBroadcast(true));
  EXPECT_TRUE(res.ok) << res.error;
  expectError(scratchBroadcast(false), "rank 0 ch 1 step 0 (copy n 6): reads Scratch[0] before anything wrote it");
}

TEST(VerifierDependencies, CycleIsADeadlock) {
  std::vector<Schedule> all = scratchBroadcast(true);
  Step& recv = all[0].channels[0].steps[0];
  recv.depChannel = 1;
  recv.depStep = 0;
  expectError(all, "rank 0 ch 0 step 0 (recv n 6) waits for ch 1 step 0");
}

TEST(VerifierCatches, EmptyInputs) {
  EXPECT_FALSE(verifySchedules({}).ok);
  EXPECT_FALSE(verifyBuilder(buildRing, makeKey(CollKind::AllReduce, 0, 4)).ok);
  EXPECT_TRUE(verifyBuilder(buildRing, makeKey(CollKind::AllReduce, 1, 0)).ok);
}

}  // namespace
}  // namespace hoccl
