// The device plan (src/exec/cuda/plan.h): every schedule the executor runs
// flattens into a plan image that reads back to the same schedule, and the
// schedules read back verify; damaged images are refused with a message,
// never read out of bounds.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "algorithms/executable.h"
#include "algorithms/pairwise.h"
#include "algorithms/registry.h"
#include "algorithms/verifier.h"
#include "src/exec/cuda/plan.h"
#include "tests/test_shapes.h"

namespace hoccl {
namespace {

using cuda::DevPlan;
using test_shapes::Shape;
using test_shapes::rect;
using test_shapes::sized;

std::string sliceText(const Slice& s) {
  return std::to_string(int(s.buf)) + ":" + std::to_string(s.offset) + ":" + std::to_string(s.part);
}

// Field-by-field equality of what a plan carries; "" when equal.
std::string difference(const Schedule& a, const Schedule& b) {
  if (a.key.coll != b.key.coll || a.key.nranks != b.key.nranks || a.key.rank != b.key.rank ||
      a.key.count != b.key.count || a.key.root != b.key.root || a.key.inPlace != b.key.inPlace ||
      a.key.maxStepCount != b.key.maxStepCount || a.key.pipelineChunks != b.key.pipelineChunks ||
      a.scratchCount != b.scratchCount)
    return "key or scratch differs";
  if (a.channels.size() != b.channels.size()) return "channel count differs";
  for (size_t c = 0; c < a.channels.size(); ++c) {
    const Channel &x = a.channels[c], &y = b.channels[c];
    if (x.link != y.link || x.steps.size() != y.steps.size()) return "channel " + std::to_string(c) + " differs";
    for (size_t i = 0; i < x.steps.size(); ++i) {
      const Step &s = x.steps[i], &t = y.steps[i];
      if (s.recvPeer != t.recvPeer || s.sendPeer != t.sendPeer || s.reduce != t.reduce ||
          s.zeroCopyEligible != t.zeroCopyEligible || sliceText(s.src) != sliceText(t.src) ||
          sliceText(s.dst) != sliceText(t.dst) || s.count != t.count || s.depChannel != t.depChannel ||
          s.depStep != t.depStep)
        return "channel " + std::to_string(c) + " step " + std::to_string(i) + " differs";
    }
  }
  return "";
}

// Flattens, writes the image, reads it back and rebuilds the schedule.
Schedule roundTrip(const Schedule& s, std::vector<uint8_t>* imageOut = nullptr) {
  DevPlan plan, back;
  Status st = cuda::flattenSchedule(s, &plan);
  EXPECT_TRUE(st.ok()) << st.message();
  const std::vector<uint8_t> image = plan.image();
  st = cuda::readPlanImage(image.data(), image.size(), &back);
  EXPECT_TRUE(st.ok()) << st.message();
  if (imageOut) *imageOut = image;
  Schedule r = cuda::unflattenPlan(back);
  // Host-side key fields the plan does not carry (the steps encode them).
  r.key.groups = s.key.groups;
  r.key.vlayout = s.key.vlayout;
  r.key.nchannels = s.key.nchannels;
  r.algorithm = s.algorithm;
  return r;
}

// Round-trips every rank's schedule; with `verify`, runs the verifier on
// what came back.
void checkSet(const std::vector<Schedule>& ranks, const std::string& what, int* checked, bool verify = true) {
  std::vector<Schedule> back;
  for (const Schedule& s : ranks) {
    back.push_back(roundTrip(s));
    const std::string diff = difference(s, back.back());
    ASSERT_EQ(diff, "") << what << " rank " << s.key.rank;
  }
  if (verify) {
    const VerifyResult v = verifySchedules(back);
    ASSERT_TRUE(v.ok) << what << ": " << v.error;
  }
  ++*checked;
}

TEST(CudaPlan, EveryBuilderRoundTripsAndVerifies) {
  const std::vector<Shape> shapes = {rect(1, 1), rect(1, 3), rect(2, 2), rect(3, 2), sized({3, 1, 2}, "3+1+2"),
                                     rect(4, 2, 2)};
  int checked = 0;
  for (const AlgoInfo& algo : allAlgorithms())
    for (CollKind coll : {CollKind::AllReduce, CollKind::ReduceScatter, CollKind::AllGather, CollKind::Broadcast,
                          CollKind::Reduce}) {
      // No steps to plan or verify; the device never runs it (test_tune.cc).
      if (!algo.supports(coll) || algo.sharedSlotsOnly) continue;
      for (const Shape& shape : shapes)
        for (uint64_t count : {uint64_t(0), uint64_t(1), uint64_t(2 * shape.nranks + 1), uint64_t(1009)})
          for (int nch : {1, 3})
            for (bool inPlace : {false, true})
              for (uint64_t maxStep : {uint64_t(0), uint64_t(7)}) {
                std::vector<Schedule> ranks;
                for (int r = 0; r < shape.nranks; ++r) {
                  ScheduleKey key = test_shapes::makeKey(coll, shape.nranks, count, inPlace, nch,
                                                         coll == CollKind::Broadcast ? shape.nranks - 1 : 0);
                  key.rank = r;
                  key.groups = shape.groups;
                  key.maxStepCount = maxStep;
                  if (algo.pipelined) key.pipelineChunks = 3;
                  ranks.push_back(buildExecutable(algo, key, true));
                }
                checkSet(ranks, std::string(algo.name) + " " + collName(coll) + " " + shape.name + " count " +
                                    std::to_string(count) + " ch " + std::to_string(nch) +
                                    (inPlace ? " in place" : "") + " maxStep " + std::to_string(maxStep),
                         &checked);
                if (HasFatalFailure()) return;
              }
    }
  EXPECT_GT(checked, 500);
  std::printf("%d schedule sets round-tripped and verified\n", checked);
}

TEST(CudaPlan, PointToPointAndAllToAllRoundTripAndVerify) {
  int checked = 0;
  for (int P : {1, 2, 3, 5})
    for (bool inPlace : {false, true}) {
      std::vector<Schedule> ranks;
      for (int r = 0; r < P; ++r) {
        ScheduleKey key = test_shapes::makeKey(CollKind::AllToAll, P, 7, inPlace);
        key.rank = r;
        ranks.push_back(buildAllToAll(key));
        markZeroCopyEligible(&ranks.back());
      }
      checkSet(ranks, "all-to-all P=" + std::to_string(P), &checked);
    }
  // All-to-all-v: rank r sends (r + 2q) % 3 elements to q.
  const int P = 4;
  std::vector<Schedule> ranks;
  for (int r = 0; r < P; ++r) {
    auto layout = std::make_shared<std::vector<uint64_t>>(4 * P);
    uint64_t soff = 0, roff = 0;
    for (int q = 0; q < P; ++q) {
      (*layout)[q] = (r + 2 * q) % 3;
      (*layout)[P + q] = soff;
      soff += (*layout)[q];
      (*layout)[2 * P + q] = (q + 2 * r) % 3;
      (*layout)[3 * P + q] = roff;
      roff += (*layout)[2 * P + q];
    }
    ScheduleKey key = test_shapes::makeKey(CollKind::AllToAllv, P, 0);
    key.rank = r;
    key.vlayout = layout;
    ranks.push_back(buildAllToAll(key));
  }
  checkSet(ranks, "all-to-all-v", &checked);
  // A group of sends and receives in a ring, each rank also sending to itself.
  ranks.clear();
  for (int r = 0; r < 3; ++r) {
    ScheduleKey key = test_shapes::makeKey(CollKind::SendRecv, 3, 0);
    key.rank = r;
    std::vector<PointOp> ops = {{(r + 1) % 3, true, 5, {Buf::Part, 0, 0}},
                                {(r + 2) % 3, false, 5, {Buf::Part, 0, 1}},
                                {r, true, 2, {Buf::Part, 0, 2}},
                                {r, false, 2, {Buf::Part, 0, 3}}};
    ranks.push_back(buildPointToPoint(key, ops, "sendrecv"));
  }
  // (The verifier checks groups of sends and receives in the p2p tests,
  // against the posted operations; here the round trip is the point.)
  checkSet(ranks, "send/recv group", &checked, false);
  EXPECT_EQ(checked, 10);
}

// A valid image of a 3-channel HO-Ring all-reduce, rank 1 of 2 x 2.
std::vector<uint8_t> sampleImage() {
  ScheduleKey key = test_shapes::makeKey(CollKind::AllReduce, 4, 1009, false, 3);
  key.rank = 1;
  key.groups = rect(2, 2).groups;
  std::vector<uint8_t> image;
  roundTrip(buildExecutable(algorithmInfo(AlgoId::HoRing), key, true), &image);
  return image;
}

TEST(CudaPlan, DamagedImagesAreRefusedNamingWhy) {
  const std::vector<uint8_t> good = sampleImage();
  DevPlan p;
  auto refuse = [&](std::vector<uint8_t> img, const char* word) {
    const Status st = cuda::readPlanImage(img.data(), img.size(), &p);
    EXPECT_FALSE(st.ok()) << word;
    EXPECT_NE(st.message().find(word), std::string::npos) << st.message();
  };
  refuse(std::vector<uint8_t>(good.begin(), good.begin() + 10), "no header");
  refuse(std::vector<uint8_t>(good.begin(), good.end() - 16), "bytes, its header describes");
  std::vector<uint8_t> img = good;
  img[0] ^= 1;
  refuse(img, "bad magic");
  img = good;
  img[4] = 9;
  refuse(img, "plan version 9");
  // The first step of channel 0 depends on a step that does not exist.
  img = good;
  cuda::DevPlanHeader h;
  std::memcpy(&h, img.data(), sizeof h);
  const cuda::DevPlanLayout l = cuda::planLayout(h.nchannels, h.nconns, h.nsteps);
  cuda::DevStep st;
  std::memcpy(&st, img.data() + l.steps, sizeof st);
  st.depChannel = 1;
  st.depStep = 1 << 30;
  std::memcpy(img.data() + l.steps, &st, sizeof st);
  refuse(img, "which does not exist");
  img = good;
  st.depChannel = st.depStep = -1;
  st.recvConn = 99;
  std::memcpy(img.data() + l.steps, &st, sizeof st);
  refuse(img, "connection outside");
}

TEST(CudaPlan, RandomDamageIsReadSafely) {
  // Flipped bytes anywhere: the reader either refuses or returns a plan
  // whose every index is in range (unflattenPlan then reads only inside it).
  const std::vector<uint8_t> good = sampleImage();
  std::mt19937 rng(7);
  int refused = 0;
  for (int i = 0; i < 3000; ++i) {
    std::vector<uint8_t> img = good;
    for (int k = 0; k < 1 + i % 4; ++k) img[rng() % img.size()] ^= uint8_t(1u << (rng() % 8));
    DevPlan p;
    if (!cuda::readPlanImage(img.data(), img.size(), &p).ok()) {
      ++refused;
      continue;
    }
    const Schedule s = cuda::unflattenPlan(p);
    EXPECT_EQ(s.channels.size(), p.channels.size());
  }
  EXPECT_GT(refused, 0);
}

}  // namespace
}  // namespace hoccl
