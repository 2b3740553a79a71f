// Schedule data type, naming, printing and the shape of ring schedules.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "algorithms/executable.h"
#include "algorithms/registry.h"
#include "algorithms/schedule.h"
#include "tests/test_shapes.h"

namespace hoccl {
namespace {

using test_shapes::makeStep;

// The shared key, as rank `rank` sees it.
ScheduleKey rankKey(CollKind coll, int nranks, int rank, uint64_t count, bool inPlace = false, int nchannels = 1,
                    int root = 0) {
  ScheduleKey k = test_shapes::makeKey(coll, nranks, count, inPlace, nchannels, root);
  k.rank = rank;
  return k;
}

std::vector<std::string> kinds(const Channel& ch) {
  std::vector<std::string> out;
  for (const Step& s : ch.steps) out.push_back(stepKindName(s));
  return out;
}

TEST(PartStart, CoversAndBalances) {
  for (uint64_t count = 0; count <= 70; ++count) {
    for (uint64_t parts = 1; parts <= 13; ++parts) {
      EXPECT_EQ(partStart(count, parts, 0), 0u);
      EXPECT_EQ(partStart(count, parts, parts), count);
      uint64_t sum = 0;
      for (uint64_t i = 0; i < parts; ++i) {
        const uint64_t size = partSize(count, parts, i);
        EXPECT_EQ(size, count / parts + (i < count % parts ? 1 : 0)) << count << "/" << parts << " #" << i;
        EXPECT_EQ(partStart(count, parts, i), sum);
        sum += size;
      }
      EXPECT_EQ(sum, count);
    }
  }
  EXPECT_EQ(partStart(10, 3, 1), 4u);  // pieces 4, 3, 3
  EXPECT_EQ(partStart(10, 3, 2), 7u);
  EXPECT_EQ(partStart(2, 5, 4), 2u);  // more pieces than elements: trailing ones empty
  EXPECT_EQ(partSize(2, 5, 3), 0u);
  const uint64_t big = uint64_t{1} << 40;
  EXPECT_EQ(partStart(big + 3, 4, 3), 3 * (big / 4) + 3);
}

TEST(ScheduleNames, CollectivesAndStepKinds) {
  EXPECT_STREQ(collName(CollKind::AllReduce), "AllReduce");
  EXPECT_STREQ(collName(CollKind::ReduceScatter), "ReduceScatter");
  EXPECT_STREQ(collName(CollKind::AllGather), "AllGather");
  EXPECT_STREQ(collName(CollKind::Broadcast), "Broadcast");
  EXPECT_STREQ(collName(CollKind::Reduce), "Reduce");

  const Slice in{Buf::Input, 0}, out{Buf::Output, 0}, none{};
  auto step = [](int32_t from, int32_t to, bool reduce, Slice src, Slice dst) {
    return std::string(stepKindName(makeStep(from, to, reduce, src, dst, 1)));
  };
  EXPECT_EQ(step(-1, 1, false, in, none), "send");
  EXPECT_EQ(step(1, -1, false, none, out), "recv");
  EXPECT_EQ(step(1, -1, true, in, out), "recvReduce");
  EXPECT_EQ(step(1, 2, true, in, none), "recvReduceSend");
  EXPECT_EQ(step(1, 2, true, in, out), "recvReduceCopySend");
  EXPECT_EQ(step(1, 2, false, none, out), "recvCopySend");
  EXPECT_EQ(step(-1, -1, false, in, out), "copy");
  EXPECT_EQ(step(-1, 2, false, in, out), "copySend");
  EXPECT_EQ(step(-1, -1, true, in, out), "localReduce");
  EXPECT_EQ(step(-1, 2, true, in, out), "localReduceSend");
  // Nonsense: nothing to do, a local reduce with nowhere to go or without src,
  // a received value that goes nowhere, a plain receive that names a src.
  EXPECT_EQ(step(-1, -1, false, none, none), "invalid");
  EXPECT_EQ(step(-1, -1, false, in, none), "invalid");
  EXPECT_EQ(step(-1, 2, true, in, none), "invalid");
  EXPECT_EQ(step(-1, -1, true, none, out), "invalid");
  EXPECT_EQ(step(1, 2, true, none, none), "invalid");
  EXPECT_EQ(step(1, -1, true, in, none), "invalid");
  EXPECT_EQ(step(1, -1, false, none, none), "invalid");
  EXPECT_EQ(step(1, -1, false, in, out), "invalid");
  EXPECT_EQ(step(-1, -1, false, none, out), "invalid");
}

TEST(ScheduleCounts, InputOutputAndInPlaceOffsets) {
  EXPECT_EQ(inputCount(rankKey(CollKind::AllReduce, 4, 1, 10)), 10u);
  EXPECT_EQ(outputCount(rankKey(CollKind::AllReduce, 4, 1, 10)), 10u);
  EXPECT_EQ(inputCount(rankKey(CollKind::ReduceScatter, 4, 1, 10)), 40u);
  EXPECT_EQ(outputCount(rankKey(CollKind::ReduceScatter, 4, 1, 10)), 10u);
  EXPECT_EQ(inputCount(rankKey(CollKind::AllGather, 4, 1, 10)), 10u);
  EXPECT_EQ(outputCount(rankKey(CollKind::AllGather, 4, 1, 10)), 40u);
  EXPECT_EQ(inputCount(rankKey(CollKind::Broadcast, 4, 1, 10)), 10u);
  EXPECT_EQ(outputCount(rankKey(CollKind::Reduce, 4, 1, 10)), 10u);
  EXPECT_EQ(inPlaceOffset(rankKey(CollKind::ReduceScatter, 4, 3, 10)), 30u);
  EXPECT_EQ(inPlaceOffset(rankKey(CollKind::AllGather, 4, 2, 10)), 20u);
  EXPECT_EQ(inPlaceOffset(rankKey(CollKind::AllReduce, 4, 2, 10)), 0u);
  EXPECT_EQ(inPlaceOffset(rankKey(CollKind::Broadcast, 4, 2, 10)), 0u);
}

TEST(ScheduleToString, ListsEveryStep) {
  const Schedule s = buildRing(rankKey(CollKind::AllReduce, 3, 0, 7));
  const std::string text = s.toString();
  EXPECT_EQ(s.stepCount(), 5u);
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 6);
  EXPECT_NE(text.find("ring AllReduce nranks 3 rank 0 count 7 inPlace 0"), std::string::npos) << text;
  EXPECT_NE(text.find("rank 0 ch 0 step 0 send from - to 1 src in[0+3] dst - n 3\n"), std::string::npos)
      << text;
  EXPECT_NE(text.find("rank 0 ch 0 step 1 recvReduceSend from 2 to 1 src in[5+2] dst - n 2\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("step 2 recvReduceCopySend from 2 to 1 src in[3+2] dst out[3+2] n 2\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("step 3 recvCopySend from 2 to 1 src - dst out[0+3] n 3\n"), std::string::npos);
  EXPECT_NE(text.find("step 4 recv from 2 to - src - dst out[5+2] n 2\n"), std::string::npos);

  Schedule dep;
  dep.channels.resize(2);
  Step s0;
  s0.src = {Buf::Scratch, 4};
  s0.dst = {Buf::Output, 0};
  s0.count = 2;
  s0.depChannel = 0;
  s0.depStep = 3;
  dep.channels[1].steps.push_back(s0);
  EXPECT_NE(dep.toString().find("ch 1 step 0 copy from - to - src scr[4+2] dst out[0+2] n 2 after ch 0 step 3"),
            std::string::npos)
      << dep.toString();
}

TEST(RingAllReduce, StepsInNcclOrder) {
  const int P = 4;
  for (int r = 0; r < P; ++r) {
    const Schedule s = buildRing(rankKey(CollKind::AllReduce, P, r, 400));
    ASSERT_EQ(s.channels.size(), 1u);
    // 2(P-1) messages each way; the first step only sends and the last only
    // receives, so 2P-1 steps.
    const std::vector<std::string> want = {"send",         "recvReduceSend", "recvReduceSend",
                                           "recvReduceCopySend", "recvCopySend", "recvCopySend", "recv"};
    EXPECT_EQ(kinds(s.channels[0]), want);
    uint64_t sent = 0, received = 0;
    for (const Step& st : s.channels[0].steps) {
      EXPECT_EQ(st.count, 100u);
      if (st.sendPeer >= 0) {
        sent += st.count;
        EXPECT_EQ(st.sendPeer, (r + 1) % P);
      }
      if (st.recvPeer >= 0) {
        received += st.count;
        EXPECT_EQ(st.recvPeer, (r + P - 1) % P);
      }
    }
    EXPECT_EQ(sent, 2u * (P - 1) * 100);
    EXPECT_EQ(received, sent);
    // The first step sends this rank's own chunk; the reduced chunk it
    // stores first is chunk r+1.
    EXPECT_EQ(s.channels[0].steps[0].src.offset, 100u * r);
    EXPECT_EQ(s.channels[0].steps[3].dst.offset, 100u * ((r + 1) % P));
  }
}

TEST(RingAllReduce, SingleRankAndEmptyChunks) {
  const Schedule one = buildRing(rankKey(CollKind::AllReduce, 1, 0, 9));
  ASSERT_EQ(one.stepCount(), 1u);
  EXPECT_STREQ(stepKindName(one.channels[0].steps[0]), "copy");
  EXPECT_EQ(buildRing(rankKey(CollKind::AllReduce, 1, 0, 9, true)).stepCount(), 0u);
  EXPECT_EQ(buildRing(rankKey(CollKind::AllReduce, 4, 2, 0)).stepCount(), 0u);
  // count 2 over 4 ranks: chunks 1,1,0,0; zero-element steps are omitted.
  for (int r = 0; r < 4; ++r) {
    const Schedule s = buildRing(rankKey(CollKind::AllReduce, 4, r, 2));
    EXPECT_LT(s.stepCount(), 7u);
    for (const Step& st : s.channels[0].steps) EXPECT_GT(st.count, 0u);
  }
}

TEST(RingChannels, SplitTheDataAndSkipEmptyParts) {
  const Schedule s = buildRing(rankKey(CollKind::AllReduce, 2, 0, 10, false, 3));
  ASSERT_EQ(s.channels.size(), 3u);
  uint64_t perChannel[3] = {};
  for (int c = 0; c < 3; ++c) {
    for (const Step& st : s.channels[c].steps) {
      if (st.sendPeer >= 0) perChannel[c] += st.count;
      const uint64_t lo = partStart(10, 3, c), hi = partStart(10, 3, c + 1);
      for (const Slice& sl : {st.src, st.dst}) {
        if (!sl.present()) continue;
        EXPECT_GE(sl.offset, lo);
        EXPECT_LE(sl.offset + st.count, hi);
      }
    }
  }
  // Parts of 4, 3, 3 elements; with 2 ranks each rank sends 2(P-1)/P = 1x its part.
  EXPECT_EQ(perChannel[0], 4u);
  EXPECT_EQ(perChannel[1], 3u);
  EXPECT_EQ(perChannel[2], 3u);
  const Schedule wide = buildRing(rankKey(CollKind::Broadcast, 3, 1, 2, false, 5));
  ASSERT_EQ(wide.channels.size(), 5u);
  EXPECT_EQ(wide.channels[1].steps.size(), 1u);
  EXPECT_TRUE(wide.channels[2].steps.empty());
  EXPECT_TRUE(wide.channels[4].steps.empty());
}

TEST(RingChains, BroadcastAndReduce) {
  const int P = 5, root = 2;
  for (bool inPlace : {false, true}) {
    for (int r = 0; r < P; ++r) {
      const Schedule b = buildRing(rankKey(CollKind::Broadcast, P, r, 8, inPlace, 1, root));
      ASSERT_EQ(b.stepCount(), 1u);
      const std::string kb = stepKindName(b.channels[0].steps[0]);
      if (r == root) EXPECT_EQ(kb, inPlace ? "send" : "copySend");
      else if (r == (root + P - 1) % P) EXPECT_EQ(kb, "recv");
      else EXPECT_EQ(kb, "recvCopySend");

      const Schedule d = buildRing(rankKey(CollKind::Reduce, P, r, 8, inPlace, 1, root));
      ASSERT_EQ(d.stepCount(), 1u);
      const std::string kd = stepKindName(d.channels[0].steps[0]);
      if (r == root) EXPECT_EQ(kd, "recvReduce");
      else if (r == (root + 1) % P) EXPECT_EQ(kd, "send");
      else EXPECT_EQ(kd, "recvReduceSend");
    }
  }
}

TEST(RingGather, ReduceScatterAndAllGatherShapes) {
  const int P = 4;
  const Schedule rs = buildRing(rankKey(CollKind::ReduceScatter, P, 1, 6));
  const std::vector<std::string> rsWant = {"send", "recvReduceSend", "recvReduceSend", "recvReduce"};
  EXPECT_EQ(kinds(rs.channels[0]), rsWant);
  EXPECT_EQ(rs.channels[0].steps.back().src.offset, 6u);  // reduces block 1 last
  const Schedule ag = buildRing(rankKey(CollKind::AllGather, P, 1, 6));
  const std::vector<std::string> agWant = {"copySend", "recvCopySend", "recvCopySend", "recv"};
  EXPECT_EQ(kinds(ag.channels[0]), agWant);
  EXPECT_EQ(ag.channels[0].steps[0].dst.offset, 6u);
  const Schedule agIn = buildRing(rankKey(CollKind::AllGather, P, 1, 6, true));
  EXPECT_STREQ(stepKindName(agIn.channels[0].steps[0]), "send");
}

TEST(Registry, RingIsRegistered) {
  ASSERT_FALSE(allAlgorithms().empty());
  const AlgoInfo* ring = findAlgorithm("RiNg");
  ASSERT_NE(ring, nullptr);
  EXPECT_STREQ(ring->name, "ring");
  EXPECT_EQ(ring->id, AlgoId::Ring);
  EXPECT_EQ(ring->build, &buildRing);
  EXPECT_GT(std::string(ring->description).size(), 10u);
  for (int c = 0; c < 5; ++c) EXPECT_TRUE(ring->supports(static_cast<CollKind>(c)));
  EXPECT_EQ(&algorithmInfo(AlgoId::Ring), ring);
  EXPECT_EQ(findAlgorithm("rin"), nullptr);
  EXPECT_EQ(findAlgorithm("rings"), nullptr);
  EXPECT_EQ(findAlgorithm(""), nullptr);
  EXPECT_EQ(findAlgorithm(nullptr), nullptr);
}

// One-shot over shared memory is a row like the others: forced by name (or
// by its former name, "board"), for the five collectives, with a schedule
// that has no steps for the executor to run over the slots instead.
TEST(Registry, OneShotShmIsARowWithAStepLessSchedule) {
  const AlgoInfo* shm = findAlgorithm("oneshot_shm");
  ASSERT_NE(shm, nullptr);
  EXPECT_EQ(shm->id, AlgoId::OneShotShm);
  EXPECT_EQ(&algorithmInfo(AlgoId::OneShotShm), shm);
  EXPECT_EQ(findAlgorithm("Board"), shm);
  EXPECT_TRUE(shm->sharedSlotsOnly);
  EXPECT_EQ(shm->maxBytesPerRank, 512u);
  EXPECT_EQ(algorithmNames().find("board"), std::string::npos) << "former names are not listed";
  for (CollKind c : {CollKind::AllReduce, CollKind::ReduceScatter, CollKind::AllGather, CollKind::Broadcast,
                     CollKind::Reduce}) {
    ASSERT_TRUE(shm->supports(c)) << collName(c);
    const ScheduleKey key = rankKey(c, 4, 2, 16);
    for (bool sync : {false, true}) {
      const Schedule s = buildExecutable(*shm, key, sync);
      EXPECT_TRUE(s.oneShotShm) << collName(c);
      EXPECT_STREQ(s.algorithm, "oneshot_shm");
      EXPECT_EQ(s.stepCount(), 0u) << collName(c) << " sync " << sync;
      EXPECT_EQ(s.key.rank, 2);
    }
  }
  EXPECT_FALSE(shm->supports(CollKind::AllToAll));
  const Schedule ring = shm->build(rankKey(CollKind::AllToAll, 3, 0, 4));
  EXPECT_FALSE(ring.oneShotShm);
  EXPECT_NE(std::string(ring.algorithm).find("ring (fallback: oneshot_shm"), std::string::npos) << ring.algorithm;
  EXPECT_EQ(oneShotShmBytesPerRank(CollKind::AllGather, 4, 2048), 512u);
  EXPECT_EQ(oneShotShmBytesPerRank(CollKind::ReduceScatter, 4, 2048), 2048u);
  EXPECT_EQ(oneShotShmBytesPerRank(CollKind::AllToAll, 4, 2048), 0u);
}

}  // namespace
}  // namespace hoccl
