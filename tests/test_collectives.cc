// Ranks as threads, one node: large counts of every type for every rank
// count, a 20M-element all-reduce, split and group. Every collective x
// algorithm x shape x count x type x op x placement at the smaller counts
// is test_coll_matrix.cc.
#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "tests/support/collectives.h"
#include "tests/support/harness.h"

using namespace testutil;

namespace {

class Collectives : public ::testing::TestWithParam<int> {};

TEST_P(Collectives, LargeCountsEveryType) {
  int n = GetParam();
  const uint64_t count = 100003;  // prime: no chunk divides evenly
  std::string err;
  ASSERT_TRUE(runThreads(n, [&](hocclComm_t comm, int rank) {
    for (int i = 0; i < hocclNumTypes; ++i) {
      auto t = static_cast<hocclDataType_t>(i);
      for (Coll coll : {Coll::AllReduce, Coll::ReduceScatter, Coll::Reduce}) {
        runAndCheck(comm, rank, n, {coll, t, hocclSum, count, Placement::Mixed});  // ranks differ in placement
        runAndCheck(comm, rank, n, {coll, t, hocclAvg, count, Placement::InPlace});
      }
      for (Coll coll : {Coll::AllGather, Coll::Broadcast})
        runAndCheck(comm, rank, n, {coll, t, hocclSum, count, Placement::OutOfPlace});
    }
  }, &err)) << err;
}

INSTANTIATE_TEST_SUITE_P(Ranks, Collectives, ::testing::Values(1, 2, 3, 4, 7, 8),
                         [](const auto& info) { return "P" + std::to_string(info.param); });

// Tens of millions of elements, several slices per chunk, every ring step
// pipelined: the shape of a real gradient all-reduce.
TEST(CollectivesLarge, AllReduce20MFloatsFourRanks) {
  const int n = 4;
  const uint64_t count = 20000003;
  std::string err;
  ASSERT_TRUE(runThreads(n, [&](hocclComm_t comm, int rank) {
    std::vector<float> buf(count);
    for (uint64_t i = 0; i < count; ++i) buf[i] = static_cast<float>((rank + i) % 3);
    ASSERT_EQ(hocclAllReduce(buf.data(), buf.data(), count, hocclFloat32, hocclSum, comm, nullptr), hocclSuccess)
        << hocclGetLastError(comm);
    uint64_t wrong = 0;
    for (uint64_t i = 0; i < count; ++i) {
      float want = 0;
      for (int r = 0; r < n; ++r) want += static_cast<float>((r + i) % 3);
      wrong += buf[i] != want;
    }
    EXPECT_EQ(wrong, 0u);
  }, &err)) << err;
}

TEST(CommSplit, EvenOddHalvesReduceIndependently) {
  const int n = 6;
  std::string err;
  ASSERT_TRUE(runThreads(n, [&](hocclComm_t comm, int rank) {
    hocclComm_t sub = nullptr;
    // Reverse order inside each half through the key.
    ASSERT_EQ(hocclCommSplit(comm, rank % 2, -rank, &sub, nullptr), hocclSuccess) << hocclGetLastError(comm);
    int subRank = -1, subCount = -1;
    ASSERT_EQ(hocclCommUserRank(sub, &subRank), hocclSuccess);
    ASSERT_EQ(hocclCommCount(sub, &subCount), hocclSuccess);
    EXPECT_EQ(subCount, 3);
    EXPECT_EQ(subRank, 2 - rank / 2);
    int64_t v = rank, sum = -1;
    ASSERT_EQ(hocclAllReduce(&v, &sum, 1, hocclInt64, hocclSum, sub, nullptr), hocclSuccess) << hocclGetLastError(sub);
    EXPECT_EQ(sum, rank % 2 == 0 ? 0 + 2 + 4 : 1 + 3 + 5);
    hocclComm_t none = reinterpret_cast<hocclComm_t>(1);
    ASSERT_EQ(hocclCommSplit(comm, rank == 0 ? HOCCL_SPLIT_NOCOLOR : 7, 0, &none, nullptr), hocclSuccess);
    EXPECT_EQ(none == nullptr, rank == 0);
    if (none) {
      int c = 0;
      hocclCommCount(none, &c);
      EXPECT_EQ(c, n - 1);
      hocclCommDestroy(none);
    }
    // The parent still works after the splits.
    ASSERT_EQ(hocclAllReduce(&v, &sum, 1, hocclInt64, hocclSum, comm, nullptr), hocclSuccess);
    EXPECT_EQ(sum, 15);
    hocclCommDestroy(sub);
  }, &err)) << err;
}

// One thread drives all ranks through hocclGroupStart/End.
TEST(Group, OneThreadDrivesFourRanks) {
  const int n = 4;
  hocclUniqueId id;
  ASSERT_EQ(hocclGetUniqueId(&id), hocclSuccess);
  std::vector<hocclComm_t> comms(n);
  std::vector<std::thread> init;
  for (int r = 0; r < n; ++r) init.emplace_back([&, r] { hocclCommInitRank(&comms[r], n, id, r); });
  for (auto& t : init) t.join();
  for (auto c : comms) ASSERT_NE(c, nullptr);
  std::vector<std::vector<int32_t>> bufs(n, std::vector<int32_t>(1000));
  for (int r = 0; r < n; ++r)
    for (int i = 0; i < 1000; ++i) bufs[r][i] = r * i;
  ASSERT_EQ(hocclGroupStart(), hocclSuccess);
  for (int r = 0; r < n; ++r)
    ASSERT_EQ(hocclAllReduce(bufs[r].data(), bufs[r].data(), 1000, hocclInt32, hocclSum, comms[r], nullptr),
              hocclSuccess);
  ASSERT_EQ(hocclGroupEnd(), hocclSuccess) << hocclGetLastError(nullptr);
  for (int r = 0; r < n; ++r)
    for (int i = 0; i < 1000; ++i) ASSERT_EQ(bufs[r][i], 6 * i);
  for (auto c : comms) hocclCommDestroy(c);
}

}  // namespace
