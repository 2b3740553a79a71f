// hocclRedOpCreatePreMulSum / hocclRedOpDestroy: each rank's input times its
// own scalar, summed; checked against closed-form values (inputs and
// scalars are small integers, so every float type is exact), plus the
// errors a user can make with a user op.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "src/check/values.h"
#include "src/exec/dataops.h"
#include "tests/support/harness.h"

using namespace checkvals;
using namespace testutil;
using hoccl::DType;

namespace {

// Input element i of `rank`, and the rank's scalar.
int64_t inputValue(int rank, uint64_t i) { return static_cast<int64_t>(i % 7) + rank; }
int64_t scalarOf(int rank) { return rank + 1; }

// Writes the integer v as one element of type t.
void put(void* buf, hocclDataType_t t, uint64_t i, int64_t v) {
  auto* b = static_cast<unsigned char*>(buf);
  switch (t) {
    case hocclInt8: case hocclUint8: b[i] = static_cast<uint8_t>(v); break;
    case hocclInt32: case hocclUint32: { uint32_t x = static_cast<uint32_t>(v); memcpy(b + 4 * i, &x, 4); break; }
    case hocclInt64: case hocclUint64: { uint64_t x = static_cast<uint64_t>(v); memcpy(b + 8 * i, &x, 8); break; }
    case hocclFloat16: { uint16_t x = hoccl::floatToHalf(float(v)); memcpy(b + 2 * i, &x, 2); break; }
    case hocclBfloat16: { uint16_t x = hoccl::floatToBf16(float(v)); memcpy(b + 2 * i, &x, 2); break; }
    case hocclFloat32: { float x = float(v); memcpy(b + 4 * i, &x, 4); break; }
    case hocclFloat64: { double x = double(v); memcpy(b + 8 * i, &x, 8); break; }
    default: FAIL() << "type not used here";
  }
}

// The element as a 64-bit integer: integer types modulo 2^bits (so wrapped
// sums compare), floating types converted exactly.
int64_t get(const void* buf, hocclDataType_t t, uint64_t i) {
  auto* b = static_cast<const unsigned char*>(buf);
  switch (t) {
    case hocclInt8: case hocclUint8: return b[i];
    case hocclInt32: case hocclUint32: { uint32_t x; memcpy(&x, b + 4 * i, 4); return x; }
    case hocclInt64: case hocclUint64: { int64_t x; memcpy(&x, b + 8 * i, 8); return x; }
    case hocclFloat16: { uint16_t x; memcpy(&x, b + 2 * i, 2); return std::llround(hoccl::halfToFloat(x)); }
    case hocclBfloat16: { uint16_t x; memcpy(&x, b + 2 * i, 2); return std::llround(hoccl::bf16ToFloat(x)); }
    case hocclFloat32: { float x; memcpy(&x, b + 4 * i, 4); return std::llround(x); }
    case hocclFloat64: { double x; memcpy(&x, b + 8 * i, 8); return std::llround(x); }
    default: return 0;
  }
}

int64_t wrapTo(hocclDataType_t t, int64_t v) {
  switch (t) {
    case hocclInt8: case hocclUint8: return static_cast<uint8_t>(v);
    case hocclInt32: case hocclUint32: return static_cast<uint32_t>(v);
    default: return v;
  }
}

int64_t expected(hocclDataType_t t, int nranks, uint64_t i) {
  int64_t sum = 0;
  for (int r = 0; r < nranks; ++r) sum += inputValue(r, i) * scalarOf(r);
  return wrapTo(t, sum);
}

const hocclDataType_t kTypes[] = {hocclInt8,   hocclUint8,   hocclInt32,   hocclUint32, hocclInt64,
                                  hocclUint64, hocclFloat16, hocclFloat32, hocclFloat64, hocclBfloat16};

// All-reduce, reduce-scatter and reduce with a PreMulSum op, in and out of place.
void checkCalls(hocclComm_t comm, int rank, int n, hocclDataType_t t, uint64_t count, hocclScalarResidence_t res) {
  size_t es = typeSize(t);
  std::vector<char> scalar(8);
  put(scalar.data(), t, 0, scalarOf(rank));
  hocclRedOp_t op;
  ASSERT_EQ(hocclRedOpCreatePreMulSum(&op, scalar.data(), t, res, comm), hocclSuccess) << hocclGetLastError(comm);
  ASSERT_GE(static_cast<int>(op), static_cast<int>(hocclNumOps));
  for (bool inPlace : {false, true}) {
    std::string what = std::string(typeName(t)) + " count " + std::to_string(count) + (inPlace ? " in place" : "") +
                       " rank " + std::to_string(rank) + " of " + std::to_string(n);
    {
      std::vector<char> in(count * es + 1), out(count * es + 1);
      for (uint64_t i = 0; i < count; ++i) put(in.data(), t, i, inputValue(rank, i));
      void* recv = inPlace ? in.data() : out.data();
      ASSERT_EQ(hocclAllReduce(in.data(), recv, count, t, op, comm, nullptr), hocclSuccess) << hocclGetLastError(comm);
      for (uint64_t i = 0; i < count; ++i)
        ASSERT_EQ(wrapTo(t, get(recv, t, i)), expected(t, n, i)) << "AllReduce " << what << " element " << i;
      if (!inPlace) {  // the input is the caller's: scaling works on a copy
        for (uint64_t i = 0; i < count; ++i) ASSERT_EQ(get(in.data(), t, i), wrapTo(t, inputValue(rank, i)));
      }
    }
    {
      std::vector<char> in(count * n * es + 1), out(count * es + 1);
      for (uint64_t i = 0; i < count * n; ++i) put(in.data(), t, i, inputValue(rank, i));
      void* recv = inPlace ? in.data() + rank * count * es : out.data();
      ASSERT_EQ(hocclReduceScatter(in.data(), recv, count, t, op, comm, nullptr), hocclSuccess)
          << hocclGetLastError(comm);
      for (uint64_t i = 0; i < count; ++i)
        ASSERT_EQ(wrapTo(t, get(recv, t, i)), expected(t, n, rank * count + i))
            << "ReduceScatter " << what << " element " << i;
    }
    {
      int root = n - 1;
      std::vector<char> in(count * es + 1), out(count * es + 1);
      for (uint64_t i = 0; i < count; ++i) put(in.data(), t, i, inputValue(rank, i));
      void* recv = inPlace ? in.data() : out.data();
      ASSERT_EQ(hocclReduce(in.data(), recv, count, t, op, root, comm, nullptr), hocclSuccess)
          << hocclGetLastError(comm);
      for (uint64_t i = 0; rank == root && i < count; ++i)
        ASSERT_EQ(wrapTo(t, get(recv, t, i)), expected(t, n, i)) << "Reduce " << what << " element " << i;
    }
  }
  ASSERT_EQ(hocclRedOpDestroy(op, comm), hocclSuccess) << hocclGetLastError(comm);
}

TEST(PreMulSum, EveryTypeAndPlacementMatchesClosedForm) {
  for (int n : {1, 2, 3, 4}) {
    std::string err;
    ASSERT_TRUE(runThreads(n, [&](hocclComm_t comm, int rank) {
      for (hocclDataType_t t : kTypes)
        for (uint64_t count : {0ull, 1ull, 1013ull})
          checkCalls(comm, rank, n, t, count, count == 1 ? hocclScalarDevice : hocclScalarHostImmediate);
    }, &err)) << err;
  }
}

TEST(PreMulSum, LargeCallUsesSlicesAndScratch) {
  std::string err;
  ASSERT_TRUE(runThreads(3, [&](hocclComm_t comm, int rank) {
    checkCalls(comm, rank, 3, hocclFloat32, (1u << 20) + 3, hocclScalarHostImmediate);
  }, &err)) << err;
}

// hocclScalarDevice: the scalar is read when the call runs, so a change
// after hocclRedOpCreatePreMulSum (and, in a group, after the call was
// queued) is seen; hocclScalarHostImmediate copies it at creation.
TEST(PreMulSum, ResidenceSaysWhenTheScalarIsRead) {
  std::string err;
  ASSERT_TRUE(runThreads(2, [&](hocclComm_t comm, int rank) {
    double device = 100, immediate = 100;
    hocclRedOp_t late, early;
    ASSERT_EQ(hocclRedOpCreatePreMulSum(&late, &device, hocclFloat64, hocclScalarDevice, comm), hocclSuccess);
    ASSERT_EQ(hocclRedOpCreatePreMulSum(&early, &immediate, hocclFloat64, hocclScalarHostImmediate, comm),
              hocclSuccess);
    device = immediate = rank + 2;  // ranks 0 and 1: scalars 2 and 3 for `late`, 100 for `early`
    double in = 1, out = 0;
    ASSERT_EQ(hocclAllReduce(&in, &out, 1, hocclFloat64, late, comm, nullptr), hocclSuccess);
    EXPECT_EQ(out, 5.0);
    ASSERT_EQ(hocclAllReduce(&in, &out, 1, hocclFloat64, early, comm, nullptr), hocclSuccess);
    EXPECT_EQ(out, 200.0);
    ASSERT_EQ(hocclGroupStart(), hocclSuccess);
    ASSERT_EQ(hocclAllReduce(&in, &out, 1, hocclFloat64, late, comm, nullptr), hocclSuccess);
    device = 10;
    ASSERT_EQ(hocclGroupEnd(), hocclSuccess) << hocclGetLastError(comm);
    EXPECT_EQ(out, 20.0);
    EXPECT_EQ(hocclRedOpDestroy(late, comm), hocclSuccess);
    EXPECT_EQ(hocclRedOpDestroy(early, comm), hocclSuccess);
  }, &err)) << err;
}

TEST(PreMulSum, MisuseIsNamed) {
  std::string err;
  ASSERT_TRUE(runThreads(1, [&](hocclComm_t comm, int) {
    float s = 2, x = 1, y = 0;
    hocclRedOp_t op;
    EXPECT_EQ(hocclRedOpCreatePreMulSum(nullptr, &s, hocclFloat32, hocclScalarHostImmediate, comm),
              hocclInvalidArgument);
    EXPECT_NE(std::string(hocclGetLastError(comm)).find("op is NULL"), std::string::npos) << hocclGetLastError(comm);
    EXPECT_EQ(hocclRedOpCreatePreMulSum(&op, nullptr, hocclFloat32, hocclScalarHostImmediate, comm),
              hocclInvalidArgument);
    EXPECT_EQ(hocclRedOpCreatePreMulSum(&op, &s, static_cast<hocclDataType_t>(42), hocclScalarHostImmediate, comm),
              hocclInvalidArgument);
    EXPECT_EQ(hocclRedOpCreatePreMulSum(&op, &s, hocclFloat32, static_cast<hocclScalarResidence_t>(7), comm),
              hocclInvalidArgument);
    EXPECT_NE(std::string(hocclGetLastError(comm)).find("residence 7"), std::string::npos);
    EXPECT_EQ(hocclRedOpCreatePreMulSum(&op, &s, hocclFloat32, hocclScalarHostImmediate, nullptr),
              hocclInvalidArgument);

    ASSERT_EQ(hocclRedOpCreatePreMulSum(&op, &s, hocclFloat32, hocclScalarHostImmediate, comm), hocclSuccess);
    double d = 1, e = 0;
    EXPECT_EQ(hocclAllReduce(&d, &e, 1, hocclFloat64, op, comm, nullptr), hocclInvalidArgument);
    // Argument errors of a call are the thread's last error (the
    // communicator stays usable).
    EXPECT_NE(std::string(hocclGetLastError(nullptr)).find("created for datatype float but the call's datatype is double"),
              std::string::npos) << hocclGetLastError(nullptr);
    // A user op is no op for collectives that do not reduce: ignored, as NCCL does.
    EXPECT_EQ(hocclAllGather(&x, &y, 1, hocclFloat32, comm, nullptr), hocclSuccess);
    EXPECT_EQ(hocclRedOpDestroy(hocclSum, comm), hocclInvalidArgument);
    EXPECT_NE(std::string(hocclGetLastError(comm)).find("built-in"), std::string::npos);
    ASSERT_EQ(hocclRedOpDestroy(op, comm), hocclSuccess);
    EXPECT_EQ(hocclRedOpDestroy(op, comm), hocclInvalidArgument);
    EXPECT_NE(std::string(hocclGetLastError(comm)).find("destroyed already"), std::string::npos);
    EXPECT_EQ(hocclAllReduce(&x, &y, 1, hocclFloat32, op, comm, nullptr), hocclInvalidArgument);
    EXPECT_NE(std::string(hocclGetLastError(nullptr)).find("no live op made by hocclRedOpCreatePreMulSum"),
              std::string::npos) << hocclGetLastError(nullptr);
    EXPECT_EQ(hocclAllReduce(&x, &y, 1, hocclFloat32, static_cast<hocclRedOp_t>(-1), comm, nullptr),
              hocclInvalidArgument);
    // The slot of a destroyed op is reused, and works.
    hocclRedOp_t again;
    ASSERT_EQ(hocclRedOpCreatePreMulSum(&again, &s, hocclFloat32, hocclScalarHostImmediate, comm), hocclSuccess);
    EXPECT_EQ(again, op);
    ASSERT_EQ(hocclAllReduce(&x, &y, 1, hocclFloat32, again, comm, nullptr), hocclSuccess);
    EXPECT_EQ(y, 2.0f);
    EXPECT_EQ(hocclRedOpDestroy(again, comm), hocclSuccess);
  }, &err)) << err;
}

// One rank passing a PreMulSum op where the other passes sum is a
// mismatched call, reported on both, never a silently different result.
TEST(PreMulSum, MixedWithSumAcrossRanksIsAMismatch) {
  std::string err;
  ASSERT_TRUE(runThreads(2, [&](hocclComm_t comm, int rank) {
    float s = 1;
    hocclRedOp_t op = hocclSum;
    if (rank == 0) {
      ASSERT_EQ(hocclRedOpCreatePreMulSum(&op, &s, hocclFloat32, hocclScalarHostImmediate, comm), hocclSuccess);
    }
    std::vector<float> in(64, 1), out(64);
    hocclResult_t r = hocclAllReduce(in.data(), out.data(), in.size(), hocclFloat32, op, comm, nullptr);
    EXPECT_NE(r, hocclSuccess);
    EXPECT_NE(std::string(hocclGetLastError(comm)).find("premulsum"), std::string::npos) << hocclGetLastError(comm);
  }, &err)) << err;
}

// The local step alone, for the types whose rounding matters: the result
// equals the exact product rounded once to the type.
TEST(PreMulSum, ScaleRoundsOnceToTheType) {
  for (unsigned a = 0; a < 256; ++a) {
    for (unsigned b = 0; b < 256; b += 7) {
      uint8_t in = static_cast<uint8_t>(a), s = static_cast<uint8_t>(b), out = 0;
      hoccl::scaleElements(DType::Float8e4m3, &out, &in, 1, &s);
      uint8_t want = hoccl::floatToFp8e4m3(hoccl::fp8e4m3ToFloat(in) * hoccl::fp8e4m3ToFloat(s));
      if (std::isnan(hoccl::fp8e4m3ToFloat(want))) {
        EXPECT_TRUE(std::isnan(hoccl::fp8e4m3ToFloat(out)));
      } else {
        EXPECT_EQ(out, want) << a << " x " << b;
      }
    }
  }
  uint16_t h = hoccl::floatToHalf(3.0f), hs = hoccl::floatToHalf(1.0f / 3), ho = 0;
  hoccl::scaleElements(DType::Float16, &ho, &h, 1, &hs);
  EXPECT_EQ(ho, hoccl::floatToHalf(3.0f * hoccl::halfToFloat(hs)));
  int8_t i8 = 100, s8 = 3, o8 = 0;
  hoccl::scaleElements(DType::Int8, &o8, &i8, 1, &s8);
  EXPECT_EQ(o8, static_cast<int8_t>(44));  // 300 wraps to 44
}

}  // namespace
