// The verifier's checks of what buildExecutable adds to a builder's
// schedule: zero-count sync messages pair up like any other message, and a
// value marked `zeroCopyEligible` (sent by reference) is never overwritten before the
// receiving step has completed, whatever the timing.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "algorithms/executable.h"
#include "algorithms/registry.h"
#include "algorithms/verifier.h"
#include "tests/test_shapes.h"

namespace hoccl {
namespace {

using test_shapes::makeKey;
using test_shapes::makeStep;

Step sync(int32_t from, int32_t to) { return makeStep(from, to, false, {}, {}, 0); }

void expectError(const std::vector<Schedule>& all, const std::string& what) {
  const VerifyResult res = verifySchedules(all);
  EXPECT_FALSE(res.ok) << "expected an error containing: " << what;
  EXPECT_NE(res.error.find(what), std::string::npos) << res.error;
}

std::vector<Schedule> executables(const AlgoInfo& algo, ScheduleKey key, bool syncSteps) {
  std::vector<Schedule> all;
  for (int r = 0; r < key.nranks; ++r) {
    key.rank = r;
    all.push_back(buildExecutable(algo, key, syncSteps));
  }
  return all;
}

// --------------------------------------------------------- zero-count steps

TEST(ZeroCount, SyncStepsPairUp) {
  const AlgoInfo& ring = algorithmInfo(AlgoId::Ring);
  for (CollKind coll : {CollKind::AllReduce, CollKind::Broadcast, CollKind::Reduce}) {
    for (uint64_t count : {0, 5}) {
      const std::vector<Schedule> all = executables(ring, makeKey(coll, 3, count, false, 1, 1), true);
      const VerifyResult res = verifySchedules(all);
      EXPECT_TRUE(res.ok) << collName(coll) << " count " << count << ": " << res.error;
    }
  }
  // With count 0 every rank sends its successor an empty message: one
  // missing receive leaves a message behind.
  std::vector<Schedule> all = executables(ring, makeKey(CollKind::AllReduce, 3, 0), true);
  ASSERT_STREQ(stepKindName(all[0].channels[0].steps.back()), "sync");
  all[0].channels[0].steps.pop_back();
  expectError(all, "rank 2 ch 0 step 0 sends 0 elements to rank 0 that are never received");
  // A missing send leaves its receiver waiting.
  all = executables(ring, makeKey(CollKind::Broadcast, 3, 4), true);
  ASSERT_STREQ(stepKindName(all[2].channels[0].steps.back()), "sync");
  all[2].channels[0].steps.pop_back();
  const size_t wait = all[0].channels[0].steps.size() - 1;
  expectError(all, "deadlock: rank 0 ch 0 step " + std::to_string(wait) + " (sync n 0) waits for a message from rank 2");
}

TEST(ZeroCount, StepKinds) {
  EXPECT_STREQ(stepKindName(sync(1, -1)), "sync");
  EXPECT_STREQ(stepKindName(sync(-1, 1)), "sync");
  EXPECT_STREQ(stepKindName(sync(-1, -1)), "invalid");  // does nothing at all
  Step reduce = sync(1, -1);
  reduce.reduce = true;
  EXPECT_STREQ(stepKindName(reduce), "invalid");
}

// --------------------------------------------------------- zero-copy values

// Broadcast of 4 elements from rank 0 to rank 1, in place unless said.
// Rank 0 copies its input to its output and sends it (zero-copy: it sends
// its input by reference), then writes its output again, which in place is
// that input; `order` says what orders that write after rank 1's receive:
// 0 nothing, 1 an empty message from rank 1, 2 a dependency on the sending
// step only, 3 a dependency on the step that receives rank 1's message.
std::vector<Schedule> sendByRefThenWrite(int order, bool zeroCopy = true, bool inPlace = true) {
  std::vector<Schedule> all(2);
  for (int r = 0; r < 2; ++r) {
    all[r].key = makeKey(CollKind::Broadcast, 2, 4);
    all[r].key.rank = r;
    all[r].key.inPlace = inPlace;
    all[r].channels.resize(2);
  }
  std::vector<Step>& root = all[0].channels[0].steps;
  root.push_back(makeStep(-1, 1, false, {Buf::Input, 0}, {Buf::Output, 0}, 4));
  root.back().zeroCopyEligible = zeroCopy;
  all[1].channels[0].steps.push_back(makeStep(0, -1, false, {}, {Buf::Output, 0}, 4));
  Step rewrite = makeStep(-1, -1, false, {Buf::Input, 0}, {Buf::Output, 0}, 4);
  if (order == 1 || order == 3) {
    all[1].channels[0].steps.push_back(sync(-1, 0));
    root.push_back(sync(1, -1));
  }
  if (order == 0 || order == 1) {
    root.push_back(rewrite);
  } else {
    rewrite.depChannel = 0;
    rewrite.depStep = order == 2 ? 0 : 1;
    all[0].channels[1].steps.push_back(rewrite);
  }
  return all;
}

TEST(ZeroCopy, OverwriteBeforeTheReceiverConsumedIsCaught) {
  expectError(sendByRefThenWrite(0),
              "rank 0 ch 0 step 1 (copy n 4) may overwrite Input[0+4], which rank 0 ch 0 step 0 (copySend n 4) sends "
              "by reference (zero-copy) to rank 1, before rank 1 ch 0 step 0 (recv n 4) has consumed it");
  expectError(sendByRefThenWrite(2), "rank 0 ch 1 step 0 (copy n 4) may overwrite Input[0+4]");
  // Not sent by reference: the value is copied when sent.
  EXPECT_TRUE(verifySchedules(sendByRefThenWrite(0, false)).ok);
  // Out of place a copySend sends its input by reference, not the copy it
  // makes, so writing the output again does not touch that value.
  EXPECT_TRUE(verifySchedules(sendByRefThenWrite(0, true, false)).ok);
}

// A copySend sends src by reference before its own copy to dst, so that copy must not
// land on part of src; landing exactly on it (in-place all-gather's own
// block) is harmless.
TEST(ZeroCopy, OwnCopyOverPartOfTheSourceSentIsNotEligible) {
  Schedule s;
  s.key = makeKey(CollKind::AllGather, 2, 4);
  s.key.inPlace = true;  // rank 0's Input is Output[0, 4)
  s.channels.resize(1);
  s.channels[0].steps.push_back(makeStep(-1, 1, false, {Buf::Input, 0}, {Buf::Output, 2}, 4));
  markZeroCopyEligible(&s);
  EXPECT_FALSE(s.channels[0].steps[0].zeroCopyEligible);
  s.channels[0].steps[0].dst = {Buf::Output, 0};
  markZeroCopyEligible(&s);
  EXPECT_TRUE(s.channels[0].steps[0].zeroCopyEligible);
  s.key.inPlace = false;  // apart
  s.channels[0].steps[0].dst = {Buf::Output, 2};
  markZeroCopyEligible(&s);
  EXPECT_TRUE(s.channels[0].steps[0].zeroCopyEligible);
}

TEST(ZeroCopy, OverwriteAfterTheReceiverConsumedIsAccepted) {
  for (int order : {1, 3}) {
    const VerifyResult res = verifySchedules(sendByRefThenWrite(order));
    EXPECT_TRUE(res.ok) << order << ": " << res.error;
  }
}

TEST(ZeroCopy, ValueMustLiveInTheSendersBuffers) {
  const AlgoInfo& ring = algorithmInfo(AlgoId::Ring);
  std::vector<Schedule> all = executables(ring, makeKey(CollKind::AllReduce, 3, 9), false);
  Step& middle = all[1].channels[0].steps[1];
  ASSERT_STREQ(stepKindName(middle), "recvReduceSend");
  EXPECT_FALSE(middle.zeroCopyEligible);
  middle.zeroCopyEligible = true;
  expectError(all, "rank 1 ch 0 step 1 (recvReduceSend n 3): marked zero-copy eligible, but its value is built in "
                   "the send slot");
  all = executables(ring, makeKey(CollKind::AllReduce, 3, 9), false);
  Step& last = all[2].channels[0].steps.back();
  ASSERT_EQ(last.sendPeer, -1);
  last.zeroCopyEligible = true;
  expectError(all, "marked zero-copy eligible but sends nothing");
}

// Where markZeroCopyEligible marks a value, nothing writes it later: its
// marks pass the exact check, and so does marking nothing. Two nodes of three
// ranks, so that HO-Ring runs its three phases on three channels.
TEST(ZeroCopy, MarkedValuesOfEveryAlgorithmPass) {
  auto nodes = std::make_shared<Grouping>();
  nodes->groupOf = {0, 0, 0, 1, 1, 1};
  for (const AlgoInfo& algo : allAlgorithms()) {
    // No steps, so nothing to mark or verify (the slots: test_oneshot_shm.cc).
    if (algo.sharedSlotsOnly) continue;
    ScheduleKey k = makeKey(CollKind::AllReduce, 6, 61);
    k.nchannels = 2;
    k.groups = nodes;
    for (bool inPlace : {false, true}) {
      k.inPlace = inPlace;
      std::vector<Schedule> all = executables(algo, k, true);
      int marked = 0;
      for (const Schedule& s : all)
        for (const Channel& c : s.channels)
          for (const Step& st : c.steps) marked += st.zeroCopyEligible;
      EXPECT_GT(marked, 0) << algo.name;
      VerifyResult res = verifySchedules(all);
      EXPECT_TRUE(res.ok) << algo.name << ": " << res.error;
      for (Schedule& s : all)
        for (Channel& c : s.channels)
          for (Step& st : c.steps) st.zeroCopyEligible = false;
      res = verifySchedules(all);
      EXPECT_TRUE(res.ok) << algo.name << ": " << res.error;
    }
  }
}

}  // namespace
}  // namespace hoccl
