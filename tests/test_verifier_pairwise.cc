// The pairwise schedules (all-to-all, all-to-all-v, a group's sends and
// receives) under the symbolic verifier: every shape verifies, in and out
// of place and with mixed placement, and planted mistakes are caught.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "algorithms/pairwise.h"
#include "algorithms/verifier.h"

namespace hoccl {
namespace {

ScheduleKey allToAllKey(int P, uint64_t count, bool inPlace = false) {
  ScheduleKey k;
  k.coll = CollKind::AllToAll;
  k.nranks = P;
  k.count = count;
  k.inPlace = inPlace;
  return k;
}

std::vector<Schedule> buildKeys(const std::vector<ScheduleKey>& keys) {
  std::vector<Schedule> all;
  for (const ScheduleKey& k : keys) {
    Schedule s = buildAllToAll(k);
    markZeroCopyEligible(&s);
    all.push_back(std::move(s));
  }
  return all;
}

// Every rank's schedule for k, rank r in place when inPlace[r] (empty:
// k.inPlace for all).
std::vector<Schedule> buildEach(const ScheduleKey& k, const std::vector<bool>& inPlace = {}) {
  std::vector<ScheduleKey> keys(k.nranks, k);
  for (int r = 0; r < k.nranks; ++r) {
    keys[r].rank = r;
    if (!inPlace.empty()) keys[r].inPlace = inPlace[r];
  }
  return buildKeys(keys);
}

TEST(PairwiseVerifies, AllToAllEveryShape) {
  for (int P = 1; P <= 12; ++P) {
    for (uint64_t count : {0, 1, 7, 1000}) {
      for (int placement = 0; placement < 3; ++placement) {
        std::vector<bool> inPlace(P);
        for (int r = 0; r < P; ++r) inPlace[r] = placement == 1 || (placement == 2 && r % 2);
        const VerifyResult res = verifySchedules(buildEach(allToAllKey(P, count), inPlace));
        EXPECT_TRUE(res.ok) << "P " << P << " count " << count << " placement " << placement << ": " << res.error;
      }
    }
  }
}

// The device's all-to-all: channels each with their part of every block,
// in messages of at most maxStepCount, verified with one message of slot
// room per connection (the executor gives it two), in and out of place.
TEST(PairwiseVerifies, ShiftedAllToAllEveryShape) {
  for (int P = 1; P <= 9; ++P)
    for (uint64_t count : {0, 1, 7, 1000})
      for (int channels : {1, 3})
        for (uint64_t most : {0, 3})
          for (int placement = 0; placement < 3; ++placement) {
            std::vector<Schedule> all;
            for (int r = 0; r < P; ++r) {
              ScheduleKey k = allToAllKey(P, count, placement == 1 || (placement == 2 && r % 2));
              k.rank = r;
              k.nchannels = channels;
              k.maxStepCount = most;
              all.push_back(buildAllToAllShifted(k));
              markZeroCopyEligible(&all.back());
              if (count > 0) {
                EXPECT_EQ(all.back().channels.size(), size_t(std::min<uint64_t>(channels, count)));
              }
              EXPECT_EQ(firstUnorderedConflict(all.back()), "") << "P " << P << " rank " << r;
            }
            const VerifyResult res = verifySchedules(all, 1);
            EXPECT_TRUE(res.ok) << "P " << P << " count " << count << " channels " << channels << " max " << most
                                << " placement " << placement << ": " << res.error;
          }
}

// Each rank sends before it receives; receiving first, every rank would
// wait for a peer that waits too.
TEST(PairwiseCaught, ShiftedRanksThatAllReceiveFirst) {
  std::vector<Schedule> all;
  for (int r = 0; r < 3; ++r) {
    ScheduleKey k = allToAllKey(3, 4);
    k.rank = r;
    all.push_back(buildAllToAllShifted(k));
    std::vector<Step>& steps = all.back().channels[0].steps;
    for (size_t i = 1; i + 1 < steps.size(); i += 2) std::swap(steps[i], steps[i + 1]);
  }
  const VerifyResult res = verifySchedules(all, 1);
  ASSERT_FALSE(res.ok);
  EXPECT_NE(res.error.find("deadlock"), std::string::npos) << res.error;
}

TEST(PairwiseVerifies, AllToAllAt256Ranks) {
  const VerifyResult res = verifySchedules(buildEach(allToAllKey(256, 3)));
  EXPECT_TRUE(res.ok) << res.error;
}

// Random layouts: counts per pair (zeros included) and blocks packed in a
// random order with gaps, each rank's key holding its own row and column.
std::vector<ScheduleKey> randomLayouts(int P, unsigned seed) {
  std::mt19937 rng(seed);
  std::vector<std::vector<uint64_t>> counts(P, std::vector<uint64_t>(P));
  for (auto& row : counts)
    for (uint64_t& c : row) c = rng() % 4 == 0 ? 0 : rng() % 50;
  std::vector<ScheduleKey> keys(P);
  for (int r = 0; r < P; ++r) {
    auto v = std::make_shared<std::vector<uint64_t>>(4 * P);
    for (int half = 0; half < 2; ++half) {
      std::vector<int> order(P);
      for (int j = 0; j < P; ++j) order[j] = j;
      std::shuffle(order.begin(), order.end(), rng);
      uint64_t at = rng() % 3;
      for (int j : order) {
        const uint64_t c = half ? counts[j][r] : counts[r][j];
        (*v)[2 * half * P + j] = c;
        (*v)[(2 * half + 1) * P + j] = at;
        at += c + rng() % 3;
      }
    }
    keys[r].coll = CollKind::AllToAllv;
    keys[r].nranks = P;
    keys[r].rank = r;
    keys[r].vlayout = v;
  }
  return keys;
}

TEST(PairwiseVerifies, AllToAllvRandomLayouts) {
  for (int P = 1; P <= 9; ++P) {
    for (unsigned seed = 0; seed < 20; ++seed) {
      const VerifyResult res = verifySchedules(buildKeys(randomLayouts(P, seed)));
      ASSERT_TRUE(res.ok) << "P " << P << " seed " << seed << ": " << res.error;
    }
  }
}

TEST(PairwiseCaught, LayoutsThatDisagree) {
  std::vector<ScheduleKey> keys = randomLayouts(4, 3);
  auto v = std::make_shared<std::vector<uint64_t>>(*keys[2].vlayout);
  (*v)[2 * 4 + 1] += 1;  // rank 2 expects one more element from rank 1 than it sends
  keys[2].vlayout = v;
  const VerifyResult res = verifySchedules(buildKeys(keys));
  ASSERT_FALSE(res.ok);
  EXPECT_NE(res.error.find("count mismatch"), std::string::npos) << res.error;
}

TEST(PairwiseCaught, ABlockLandingInTheWrongPlace) {
  std::vector<Schedule> all = buildEach(allToAllKey(4, 5));
  // Rank 1 stores what rank 3 sends it where rank 2's block belongs.
  for (Channel& ch : all[1].channels)
    for (Step& st : ch.steps)
      if (st.recvPeer == 3) st.dst.offset = 2 * 5;
  const VerifyResult res = verifySchedules(all);
  ASSERT_FALSE(res.ok);
  EXPECT_NE(res.error.find("rank 1 Output["), std::string::npos) << res.error;
}

// The verifier runs one interleaving; races between a rank's channels are
// firstUnorderedConflict's to find.
TEST(PairwiseVerifies, NoUnorderedConflictingAccess) {
  for (int P = 1; P <= 6; ++P)
    for (bool inPlace : {false, true})
      for (const Schedule& s : buildEach(allToAllKey(P, 3, inPlace)))
        EXPECT_EQ(firstUnorderedConflict(s), "") << "P " << P << " rank " << s.key.rank << " in place " << inPlace;
  for (const Schedule& s : buildKeys(randomLayouts(5, 1))) EXPECT_EQ(firstUnorderedConflict(s), "");
}

TEST(PairwiseCaught, InPlaceWithoutTheStagingCopy) {
  std::vector<Schedule> all = buildEach(allToAllKey(3, 4, true));
  // Drop the copy to scratch: a send would read a block that the receive
  // from the same peer, on another channel, may already have replaced.
  Schedule& s = all[1];
  for (Channel& ch : s.channels)
    for (Step& st : ch.steps) {
      if (st.src.buf == Buf::Scratch) st.src.buf = Buf::Input;
      st.depChannel = st.depStep = -1;
    }
  s.channels.erase(s.channels.begin());
  EXPECT_NE(firstUnorderedConflict(s), "");
}

TEST(PairwiseCaught, TwoChannelsSharingOneConnection) {
  std::vector<Schedule> all = buildEach(allToAllKey(3, 2));
  // A second channel of rank 0 sending to rank 1 on link 0 would
  // interleave with the first on the same connection.
  Channel extra;
  extra.link = 0;
  Step st;
  st.sendPeer = 1;
  st.src = Slice{Buf::Input, 0, 0};
  st.count = 1;
  extra.steps.push_back(st);
  all[0].channels.push_back(extra);
  const VerifyResult res = verifySchedules(all);
  ASSERT_FALSE(res.ok);
  EXPECT_NE(res.error.find("also sends to rank 1 on link 0"), std::string::npos) << res.error;
}

TEST(PointToPointSchedule, OneChannelPerPeerAndDirectionSelfSendsAsCopies) {
  ScheduleKey k;
  k.coll = CollKind::SendRecv;
  k.nranks = 3;
  k.rank = 1;
  std::vector<PointOp> ops;
  auto op = [&](int peer, bool send, uint64_t n, uint32_t part) {
    PointOp o;
    o.peer = peer;
    o.send = send;
    o.count = n;
    o.at = Slice{Buf::Part, 0, part};
    ops.push_back(o);
  };
  op(2, true, 10, 0);
  op(0, false, 20, 1);
  op(1, true, 30, 2);
  op(2, true, 40, 3);
  op(1, false, 30, 4);
  Schedule s = buildPointToPoint(k, ops, "pairwise");
  markZeroCopyEligible(&s);
  EXPECT_EQ(s.toString(),
            "pairwise SendRecv nranks 3 rank 1 count 0 inPlace 0 channels 3 scratch 0 steps 4\n"
            "rank 1 ch 0 step 0 copy from - to - src part2[0+30] dst part4[0+30] n 30\n"
            "rank 1 ch 1 link 0 step 0 recv from 0 to - src - dst part1[0+20] n 20\n"
            "rank 1 ch 2 link 0 step 0 send from - to 2 src part0[0+10] dst - n 10\n"
            "rank 1 ch 2 link 0 step 1 send from - to 2 src part3[0+40] dst - n 40\n");
  // Nothing writes the parts it sends from: they may go by reference.
  EXPECT_TRUE(s.channels[2].steps[0].zeroCopyEligible);
  EXPECT_TRUE(s.channels[2].steps[1].zeroCopyEligible);
}

}  // namespace
}  // namespace hoccl
