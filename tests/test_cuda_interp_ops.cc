// The interpreter's element ops (src/exec/cuda/interp_ops.h, the code the
// GPU kernels run) on every pair of special values of half, bf16, float and
// double: op(a, b) and op(b, a) give the same bits, and the bits of the
// host's DataOps kernels (which test_dataops.cc checks against NCCL's
// values on every ISA); avg's division likewise.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <ios>

#include "src/exec/cuda/interp_ops.h"
#include "src/exec/dataops.h"
#include "tests/support/float_specials.h"

namespace hoccl::cuda {
namespace {

// One element of T given as its bits (the low sizeof(T) bytes, little-endian).
template <class T>
T fromBits(uint64_t b) {
  T t;
  std::memcpy(&t, &b, sizeof t);
  return t;
}
template <class T>
uint64_t toBits(T t) {
  uint64_t b = 0;
  std::memcpy(&b, &t, sizeof t);
  return b;
}

template <OpKind K, class T>
void checkOp(DType dt, RedOp op, int e, int m) {
  const ReduceFn host = dataOps().reduce[int(dt)][int(op)];
  int bad = 0;
  for (uint64_t x : testutil::floatSpecialBits(e, m))
    for (uint64_t y : testutil::floatSpecialBits(e, m)) {
      const uint64_t ab = toBits(Op<K, T>::apply(fromBits<T>(x), fromBits<T>(y)));
      const uint64_t ba = toBits(Op<K, T>::apply(fromBits<T>(y), fromBits<T>(x)));
      uint64_t want = 0;
      host(&want, &x, &y, 1);
      if ((ab != want || ba != want) && ++bad <= 4)
        ADD_FAILURE() << dtypeName(dt) << " " << redOpName(op) << std::hex << ": a=0x" << x << " b=0x" << y
                      << " host 0x" << want << ", interpreter 0x" << ab << " (a op b), 0x" << ba << " (b op a)";
    }
  EXPECT_EQ(bad, 0) << dtypeName(dt) << " " << redOpName(op);
}

template <class T>
void checkType(DType dt, int e, int m) {
  checkOp<OpKind::Sum, T>(dt, RedOp::Sum, e, m);
  checkOp<OpKind::Prod, T>(dt, RedOp::Prod, e, m);
  checkOp<OpKind::Max, T>(dt, RedOp::Max, e, m);
  checkOp<OpKind::Min, T>(dt, RedOp::Min, e, m);
  for (int nranks : {1, 3}) {
    const AvgFinishFn host = dataOps().avgFinish[int(dt)];
    for (uint64_t x : testutil::floatSpecialBits(e, m)) {
      uint64_t want = 0;
      host(&want, &x, 1, nranks);
      EXPECT_EQ(toBits(Op<OpKind::Avg, T>::avgDivide(fromBits<T>(x), uint32_t(nranks))), want)
          << dtypeName(dt) << " avg of 0x" << std::hex << x << " over " << std::dec << nranks << " ranks";
    }
  }
}

TEST(CudaInterpOps, SpecialValuesCommuteAndMatchTheHost) {
  checkType<Half>(DType::Float16, 5, 10);
  checkType<Bf16>(DType::Bfloat16, 8, 7);
  checkType<float>(DType::Float32, 8, 23);
  checkType<double>(DType::Float64, 11, 52);
}

}  // namespace
}  // namespace hoccl::cuda
