// Ranks as threads: every collective x data type x op x count x in-place,
// checked against closed-form expected values.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "tests/test_util.h"

using namespace testutil;

namespace {

const hocclDataType_t kTypes[] = {hocclInt8,  hocclUint8,  hocclInt32,   hocclUint32,  hocclInt64,
                                  hocclUint64, hocclFloat16, hocclFloat32, hocclFloat64, hocclBfloat16,
                                  hocclFloat8e4m3, hocclFloat8e5m2};
const hocclRedOp_t kOps[] = {hocclSum, hocclProd, hocclMax, hocclMin, hocclAvg};

std::string where(const char* coll, hocclDataType_t t, hocclRedOp_t op, uint64_t count, bool inPlace, int rank) {
  return std::string(coll) + " " + typeName(t) + " " + opName(op) + " count " + std::to_string(count) +
         (inPlace ? " in-place" : " out-of-place") + " rank " + std::to_string(rank);
}

// All-reduce, reduce-scatter and reduce of one (type, op, count, placement).
void checkReductions(hocclComm_t comm, int rank, int n, hocclDataType_t t, hocclRedOp_t op, uint64_t count,
                     bool inPlace) {
  size_t es = typeSize(t);
  std::string err;
  {  // all-reduce
    std::vector<char> in(count * es + 1), out(count * es + 1);
    fillReduceInput(in.data(), t, op, rank, 0, count);
    void* recv = inPlace ? in.data() : out.data();
    ASSERT_EQ(hocclAllReduce(in.data(), recv, count, t, op, comm, nullptr), hocclSuccess)
        << where("AllReduce", t, op, count, inPlace, rank) << ": " << hocclGetLastError(comm);
    EXPECT_EQ(countReduceErrors(recv, t, op, n, 0, count, &err), 0u)
        << where("AllReduce", t, op, count, inPlace, rank) << ": " << err;
  }
  {  // reduce-scatter: count per rank
    std::vector<char> in(count * n * es + 1), out(count * es + 1);
    fillReduceInput(in.data(), t, op, rank, 0, count * n);
    void* recv = inPlace ? in.data() + rank * count * es : out.data();
    ASSERT_EQ(hocclReduceScatter(in.data(), recv, count, t, op, comm, nullptr), hocclSuccess)
        << where("ReduceScatter", t, op, count, inPlace, rank) << ": " << hocclGetLastError(comm);
    EXPECT_EQ(countReduceErrors(recv, t, op, n, rank * count, count, &err), 0u)
        << where("ReduceScatter", t, op, count, inPlace, rank) << ": " << err;
  }
  {  // reduce to a root that moves with the count
    int root = static_cast<int>(count % n);
    std::vector<char> in(count * es + 1), out(count * es + 1);
    fillReduceInput(in.data(), t, op, rank, 0, count);
    void* recv = inPlace ? in.data() : out.data();
    ASSERT_EQ(hocclReduce(in.data(), recv, count, t, op, root, comm, nullptr), hocclSuccess)
        << where("Reduce", t, op, count, inPlace, rank) << ": " << hocclGetLastError(comm);
    if (rank == root) {
      EXPECT_EQ(countReduceErrors(recv, t, op, n, 0, count, &err), 0u)
          << where("Reduce", t, op, count, inPlace, rank) << ": " << err;
    }
  }
}

void checkGathers(hocclComm_t comm, int rank, int n, hocclDataType_t t, uint64_t count, bool inPlace) {
  size_t es = typeSize(t);
  {  // all-gather: count per rank
    std::vector<char> out(count * n * es + 1), in(count * es + 1);
    char* send = inPlace ? out.data() + rank * count * es : in.data();
    for (uint64_t i = 0; i < count; ++i) store(send, t, i, gatherValue(t, rank, i));
    ASSERT_EQ(hocclAllGather(send, out.data(), count, t, comm, nullptr), hocclSuccess)
        << where("AllGather", t, hocclSum, count, inPlace, rank) << ": " << hocclGetLastError(comm);
    uint64_t wrong = 0;
    for (int r = 0; r < n; ++r)
      for (uint64_t i = 0; i < count; ++i) wrong += load(out.data(), t, r * count + i) != gatherValue(t, r, i);
    EXPECT_EQ(wrong, 0u) << where("AllGather", t, hocclSum, count, inPlace, rank);
  }
  {  // broadcast
    int root = static_cast<int>((count + 1) % n);
    std::vector<char> in(count * es + 1), out(count * es + 1);
    for (uint64_t i = 0; i < count; ++i) store(in.data(), t, i, gatherValue(t, rank, i));
    void* recv = inPlace ? in.data() : out.data();
    ASSERT_EQ(hocclBroadcast(in.data(), recv, count, t, root, comm, nullptr), hocclSuccess)
        << where("Broadcast", t, hocclSum, count, inPlace, rank) << ": " << hocclGetLastError(comm);
    uint64_t wrong = 0;
    for (uint64_t i = 0; i < count; ++i) wrong += load(recv, t, i) != gatherValue(t, root, i);
    EXPECT_EQ(wrong, 0u) << where("Broadcast", t, hocclSum, count, inPlace, rank);
  }
}

class Collectives : public ::testing::TestWithParam<int> {};

TEST_P(Collectives, EveryTypeOpCountAndPlacement) {
  int n = GetParam();
  const uint64_t counts[] = {0, 1, 1009, static_cast<uint64_t>(8 * n + 3)};
  std::string err;
  ASSERT_TRUE(runThreads(n, [&](hocclComm_t comm, int rank) {
    for (uint64_t count : counts)
      for (bool inPlace : {false, true})
        for (hocclDataType_t t : kTypes) {
          for (hocclRedOp_t op : kOps) checkReductions(comm, rank, n, t, op, count, inPlace);
          checkGathers(comm, rank, n, t, count, inPlace);
        }
  }, &err)) << err;
}

TEST_P(Collectives, LargeCountsEveryType) {
  int n = GetParam();
  const uint64_t count = 100003;  // prime: no chunk divides evenly
  std::string err;
  ASSERT_TRUE(runThreads(n, [&](hocclComm_t comm, int rank) {
    for (hocclDataType_t t : kTypes) {
      checkReductions(comm, rank, n, t, hocclSum, count, rank % 2 == 0  /* ranks may differ in placement */);
      checkReductions(comm, rank, n, t, hocclAvg, count, true);
      checkGathers(comm, rank, n, t, count, false);
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
