#include "tests/support/collectives.h"

#include <gtest/gtest.h>

#include <vector>

#include "src/check/values.h"

using namespace checkvals;

namespace testutil {

const char* collName(Coll c) {
  switch (c) {
    case Coll::AllReduce: return "AllReduce";
    case Coll::ReduceScatter: return "ReduceScatter";
    case Coll::AllGather: return "AllGather";
    case Coll::Broadcast: return "Broadcast";
    case Coll::Reduce: return "Reduce";
  }
  return "?";
}

const char* placementName(Placement p) {
  switch (p) {
    case Placement::OutOfPlace: return "out-of-place";
    case Placement::InPlace: return "in-place";
    case Placement::Mixed: return "mixed";
  }
  return "?";
}

bool reduces(Coll c) { return c == Coll::AllReduce || c == Coll::ReduceScatter || c == Coll::Reduce; }

bool inPlaceOn(Placement p, int rank) {
  return p == Placement::InPlace || (p == Placement::Mixed && rank % 2 == 0);
}

int rootOf(const Call& c, int nranks) {
  return static_cast<int>((c.coll == Coll::Broadcast ? c.count + 1 : c.count) % static_cast<uint64_t>(nranks));
}

std::string describe(const Call& c) {
  std::string s = std::string(collName(c.coll)) + " " + typeName(c.type);
  if (reduces(c.coll)) s += std::string(" ") + opName(c.op);
  return s + " count " + std::to_string(c.count) + " " + placementName(c.placement);
}

void runAndCheck(hocclComm_t comm, int rank, int n, const Call& c) {
  const size_t es = typeSize(c.type);
  const uint64_t count = c.count;
  const bool inPlace = inPlaceOn(c.placement, rank);
  const std::string where = describe(c) + " rank " + std::to_string(rank) + " of " + std::to_string(n);
  std::string err;
  // One spare byte: a zero count still has a buffer to point at.
  switch (c.coll) {
    case Coll::AllReduce: {
      std::vector<char> in(count * es + 1), out(count * es + 1);
      fillReduceInput(in.data(), c.type, c.op, rank, 0, count);
      void* recv = inPlace ? in.data() : out.data();
      ASSERT_EQ(hocclAllReduce(in.data(), recv, count, c.type, c.op, comm, nullptr), hocclSuccess)
          << where << ": " << hocclGetLastError(comm);
      EXPECT_EQ(countReduceErrors(recv, c.type, c.op, n, 0, count, &err), 0u) << where << ": " << err;
      break;
    }
    case Coll::ReduceScatter: {
      std::vector<char> in(count * n * es + 1), out(count * es + 1);
      fillReduceInput(in.data(), c.type, c.op, rank, 0, count * n);
      void* recv = inPlace ? in.data() + rank * count * es : out.data();
      ASSERT_EQ(hocclReduceScatter(in.data(), recv, count, c.type, c.op, comm, nullptr), hocclSuccess)
          << where << ": " << hocclGetLastError(comm);
      EXPECT_EQ(countReduceErrors(recv, c.type, c.op, n, rank * count, count, &err), 0u) << where << ": " << err;
      break;
    }
    case Coll::Reduce: {
      const int root = rootOf(c, n);
      std::vector<char> in(count * es + 1), out(count * es + 1);
      fillReduceInput(in.data(), c.type, c.op, rank, 0, count);
      void* recv = inPlace ? in.data() : out.data();
      ASSERT_EQ(hocclReduce(in.data(), recv, count, c.type, c.op, root, comm, nullptr), hocclSuccess)
          << where << ": " << hocclGetLastError(comm);
      if (rank == root) {
        EXPECT_EQ(countReduceErrors(recv, c.type, c.op, n, 0, count, &err), 0u) << where << " (root): " << err;
      }
      break;
    }
    case Coll::AllGather: {
      std::vector<char> out(count * n * es + 1), in(count * es + 1);
      char* send = inPlace ? out.data() + rank * count * es : in.data();
      for (uint64_t i = 0; i < count; ++i) store(send, c.type, i, gatherValue(c.type, rank, i));
      ASSERT_EQ(hocclAllGather(send, out.data(), count, c.type, comm, nullptr), hocclSuccess)
          << where << ": " << hocclGetLastError(comm);
      uint64_t wrong = 0, first = 0;
      for (int r = 0; r < n; ++r)
        for (uint64_t i = 0; i < count; ++i)
          if (load(out.data(), c.type, r * count + i) != gatherValue(c.type, r, i) && !wrong++) first = r * count + i;
      EXPECT_EQ(wrong, 0u) << where << ": first wrong element " << first;
      break;
    }
    case Coll::Broadcast: {
      const int root = rootOf(c, n);
      std::vector<char> in(count * es + 1), out(count * es + 1);
      for (uint64_t i = 0; i < count; ++i) store(in.data(), c.type, i, gatherValue(c.type, rank, i));
      void* recv = inPlace ? in.data() : out.data();
      ASSERT_EQ(hocclBroadcast(in.data(), recv, count, c.type, root, comm, nullptr), hocclSuccess)
          << where << ": " << hocclGetLastError(comm);
      uint64_t wrong = 0, first = 0;
      for (uint64_t i = 0; i < count; ++i)
        if (load(recv, c.type, i) != gatherValue(c.type, root, i) && !wrong++) first = i;
      EXPECT_EQ(wrong, 0u) << where << " (root " << root << "): first wrong element " << first;
      break;
    }
  }
}

}  // namespace testutil
