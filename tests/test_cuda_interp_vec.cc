// The interpreter's 16-byte data loops (src/exec/cuda/interp_vec.h and
// interp.h's reduceData / copyData / avg division) on plain arrays: every
// start offset of every pointer (0 to 15 bytes, in elements), counts from
// 0 to past three vectors, 1 to 3 lanes; each result element for element
// as the one-at-a-time formula gives it, and no byte outside the range
// written. test_cuda_interp.cc runs the same loops through whole plans.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "src/exec/cuda/interp.h"

namespace hoccl::cuda {
namespace {

// The lane part of interp.h's lane policy: the data loops need no barrier,
// so the lanes of one "CTA" can run one after another.
struct SeqLanes {
  uint32_t i = 0, n = 1;
  uint32_t lane() const { return i; }
  uint32_t lanes() const { return n; }
};

// "head vecs" of a split, for comparing in one line.
std::string str(const VecSplit& s) { return std::to_string(s.head) + " " + std::to_string(s.vecs); }

TEST(CudaInterpVec, SplitIsHeadToTheCommonBoundaryThenWholeVectors) {
  alignas(16) static unsigned char mem[128];
  // All at the same offset: the head reaches the next boundary.
  EXPECT_EQ(str(vecSplit<float>(100, mem + 4, mem + 36, mem + 68)), "3 24");
  EXPECT_EQ(str(vecSplit<int8_t>(100, mem + 1, mem + 17)), "15 5");
  // Aligned: no head; a count under one vector after the head: no vector.
  EXPECT_EQ(str(vecSplit<double>(7, mem, mem + 32)), "0 3");
  EXPECT_EQ(str(vecSplit<int8_t>(9, mem + 3, mem + 19)), "9 0");
  // Offsets that differ: one element at a time throughout.
  EXPECT_EQ(str(vecSplit<float>(100, mem, mem + 4)), "100 0");
  // Null pointers do not count.
  EXPECT_EQ(str(vecSplit<uint16_t>(100, mem + 2, nullptr, mem + 34, nullptr)), "7 11");
}

template <class T>
T elementFrom(std::mt19937_64& rng) {
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
    return T(std::uniform_real_distribution<double>(-4, 4)(rng));
  } else if constexpr (std::is_same_v<T, Half>) {
    return Half{floatToHalfBits(float(std::uniform_real_distribution<double>(-4, 4)(rng)))};
  } else {
    T x;
    const uint64_t v = rng();
    std::memcpy(&x, &v, sizeof x);
    return x;
  }
}

// Memory for `n` elements at `byteOff` past a 16-byte boundary, with
// guard bytes around them that no loop may write.
template <class T>
struct Span {
  alignas(16) unsigned char mem[16 + 48 * 8 + 32];
  size_t off;
  Span(size_t byteOff, std::mt19937_64& rng) : off(16 + byteOff) {
    for (unsigned char& b : mem) b = static_cast<unsigned char>(rng());
  }
  T* p() { return reinterpret_cast<T*>(mem + off); }
  T at(size_t j) const {
    T x;
    std::memcpy(&x, mem + off + j * sizeof(T), sizeof x);
    return x;
  }
};

// The first byte at which a and b differ, or -1.
template <class T>
long firstDiff(const Span<T>& a, const Span<T>& b) {
  for (size_t i = 0; i < sizeof a.mem; ++i)
    if (a.mem[i] != b.mem[i]) return long(i);
  return -1;
}

// reduceData and copyData for every offset of s and d, the slot-side
// pointers r and w (aligned in a run; here also not) at a few, against the
// element formula: every element lands and no other byte changes.
template <class T, class Op>
void checkLoops(const char* name) {
  using B = typename BitsOf<int(sizeof(T))>::type;
  constexpr size_t e = sizeof(T);
  std::mt19937_64 rng(sizeof(T) * 7 + uint64_t(Op::kKind));
  int vectorRuns = 0;
  for (size_t ro : {size_t(0), e, 16 - e})
    for (size_t so = 0; so < 16; so += e)
      for (size_t dofs = 0; dofs < 16; dofs += e)
        for (uint64_t n : {0, 1, 2, 15, 16, 17, 31, 33, 47, 48})
          for (uint32_t lanes : {1u, 3u}) {
            SCOPED_TRACE(std::string(name) + " r+" + std::to_string(ro) + " s+" + std::to_string(so) + " d+" +
                         std::to_string(dofs) + " n=" + std::to_string(n) + " lanes=" + std::to_string(lanes));
            Span<T> r(ro, rng), s(so, rng), d(dofs, rng), w(ro, rng), wantD = d, wantW = w;
            for (uint64_t j = 0; j < n; ++j) {
              const T v = Op::apply(r.at(j), s.at(j));
              std::memcpy(wantD.mem + wantD.off + j * e, &v, e);
              std::memcpy(wantW.mem + wantW.off + j * e, &v, e);
            }
            if (vecSplit<T>(n, r.p(), s.p(), d.p(), w.p()).vecs) ++vectorRuns;
            for (uint32_t i = 0; i < lanes; ++i) {
              SeqLanes l{i, lanes};
              interp_detail::reduceData<T, Op>(l, n, r.p(), s.p(), d.p(), w.p());
            }
            ASSERT_EQ(firstDiff(d, wantD), -1) << "reduce: first wrong byte (the range starts at " << d.off << ")";
            ASSERT_EQ(firstDiff(w, wantW), -1) << "reduce into the slot: first wrong byte (from " << w.off << ")";
            // A copy of s into two buffers at d's offset (a local copy; with
            // s at another offset, one element at a time).
            Span<T> c(dofs, rng), x(dofs, rng), wantC = c, wantX = x;
            std::memcpy(wantC.mem + wantC.off, s.mem + s.off, n * e);
            std::memcpy(wantX.mem + wantX.off, s.mem + s.off, n * e);
            if (vecSplit<B>(n, s.p(), c.p(), x.p()).vecs) ++vectorRuns;
            for (uint32_t i = 0; i < lanes; ++i) {
              SeqLanes l{i, lanes};
              interp_detail::copyData<B>(l, n, reinterpret_cast<const B*>(s.p()), reinterpret_cast<B*>(c.p()),
                                         reinterpret_cast<B*>(x.p()));
            }
            ASSERT_EQ(firstDiff(c, wantC), -1) << "copy: first wrong byte (the range starts at " << c.off << ")";
            ASSERT_EQ(firstDiff(x, wantX), -1) << "copy: first wrong byte (the range starts at " << x.off << ")";
          }
  EXPECT_GT(vectorRuns, 0) << name << ": no case took the vector path";
}

TEST(CudaInterpVec, ReduceAndCopyMatchTheElementFormulaAtEveryOffset) {
  checkLoops<int8_t, Op<OpKind::Sum, int8_t>>("int8 sum");
  checkLoops<uint8_t, Op<OpKind::Max, uint8_t>>("uint8 max");
  checkLoops<Half, Op<OpKind::Sum, Half>>("half sum");
  checkLoops<Bf16, Op<OpKind::Prod, Bf16>>("bf16 prod");
  checkLoops<float, Op<OpKind::Min, float>>("float min");
  checkLoops<int32_t, Op<OpKind::Prod, int32_t>>("int32 prod");
  checkLoops<double, Op<OpKind::Sum, double>>("double sum");
  checkLoops<uint64_t, Op<OpKind::Sum, uint64_t>>("uint64 sum");
}

}  // namespace
}  // namespace hoccl::cuda
