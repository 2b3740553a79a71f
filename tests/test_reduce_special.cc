// NaN, infinities, signed zeros and subnormals through max, min and sum
// all-reduce, reduce and reduce-scatter of half, bf16, float and double, on
// ranks as threads: every rank ends with the same bits, and with NCCL's
// (fmaxf/fminf and __hmax/__hmin: a NaN gives the other operand, +0 > -0;
// any NaN result is the canonical one, as the GPU produces it), whichever
// rank holds the special value, whatever the algorithm: one-shot over
// shared memory (oneshot_shm, the default for calls of up to
// HOCCL_BOARD_BYTES), and the ring,
// recursive doubling and one-shot forced through hocclConfig_t.algorithm,
// at a count that fits oneshot_shm and a large one.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <ios>
#include <memory>
#include <string>
#include <vector>

#include "tests/support/harness.h"

using namespace testutil;

namespace {

// A floating type by its bits.
struct Format {
  hocclDataType_t type;
  const char* name;
  size_t size;
  uint64_t two, inf, sign, payloadMask;
  uint64_t canonicalNan() const { return sign - 1; }  // all ones but the sign
};
const Format kFormats[] = {
    {hocclFloat16, "half", 2, 0x4000, 0x7c00, 0x8000, 0x3ff},
    {hocclBfloat16, "bfloat16", 2, 0x4000, 0x7f80, 0x8000, 0x7f},
    {hocclFloat32, "float", 4, 0x40000000, 0x7f800000, 0x80000000, 0x7fffff},
    {hocclFloat64, "double", 8, 0x4000000000000000, 0x7ff0000000000000, uint64_t{1} << 63, 0xfffffffffffff},
};

// Element g of every rank's input is one case: kind g % kKinds, the value
// of interest on rank (g / kKinds) % P, the holder.
enum Kind {
  NanOnHolder,    // NaN on the holder, 2 elsewhere
  NegZeroOnHolder,  // -0 on the holder, +0 elsewhere
  PosZeroOnHolder,  // +0 on the holder, -0 elsewhere
  InfOnHolder,    // +inf on the holder, 2 elsewhere
  NegInfOnHolder, // -inf on the holder, 2 elsewhere
  NanEverywhere,  // a NaN on every rank, payload and sign differing by rank
  SubnormalOnHolder,  // the smallest subnormal on the holder, its negative elsewhere
  ValueOnHolder,  // 2 on the holder, NaN elsewhere
  NegZeroEverywhere,
  kKinds
};

// A NaN whose payload and sign depend on the rank and the element
// (signalling or quiet, never the canonical one).
uint64_t nanOf(const Format& f, int rank, uint64_t g) {
  const uint64_t payload = (rank * 5 + g * 3) % (f.payloadMask - 1) + 1;
  return ((rank + g) % 2 ? f.sign : 0) | f.inf | payload;
}

uint64_t inputBits(const Format& f, int P, int rank, uint64_t g) {
  const bool holder = rank == static_cast<int>((g / kKinds) % P);
  switch (static_cast<Kind>(g % kKinds)) {
    case NanOnHolder: return holder ? nanOf(f, rank, g) : f.two;
    case NegZeroOnHolder: return holder ? f.sign : 0;
    case PosZeroOnHolder: return holder ? 0 : f.sign;
    case InfOnHolder: return holder ? f.inf : f.two;
    case NegInfOnHolder: return holder ? f.sign | f.inf : f.two;
    case NanEverywhere: return nanOf(f, rank, g);
    case SubnormalOnHolder: return holder ? 1 : f.sign | 1;
    case ValueOnHolder: return holder ? f.two : nanOf(f, rank, g);
    case NegZeroEverywhere: return f.sign;
    case kKinds: break;
  }
  return 0;
}

// NCCL's result for element g: independent of who holds what, so the same
// on every rank and for every algorithm.
uint64_t wantBits(const Format& f, hocclRedOp_t op, int P, uint64_t g) {
  const uint64_t nan = f.canonicalNan(), two = f.two, inf = f.inf, neg = f.sign;
  const int k = static_cast<int>(g % kKinds);
  //                          NaN@h  -0@h  +0@h  inf@h  -inf@h       NaNs  sub@h     2@h  -0
  const uint64_t max[kKinds] = {two, 0,    0,    inf,   two,         nan,  1,        two, neg};
  const uint64_t min[kKinds] = {two, neg,  neg,  two,   neg | inf,   nan,  neg | 1,  two, neg};
  // Sum: the subnormals add exactly to (2 - P) of the smallest.
  const uint64_t subs = P == 2 ? 0 : neg | static_cast<uint64_t>(P - 2);
  const uint64_t sum[kKinds] = {nan, 0,    0,    inf,   neg | inf,   nan,  subs,     nan, neg};
  return op == hocclMax ? max[k] : op == hocclMin ? min[k] : sum[k];
}

enum class Coll { AllReduce, Reduce, ReduceScatter };
const char* collName(Coll c) {
  return c == Coll::AllReduce ? "AllReduce" : c == Coll::Reduce ? "Reduce" : "ReduceScatter";
}
const char* opName(hocclRedOp_t op) { return op == hocclMax ? "max" : op == hocclMin ? "min" : "sum"; }

// Runs one call on this rank and checks its output bit for bit. `count` is
// NCCL's (per rank for reduce-scatter).
void runAndCheck(hocclComm_t comm, int rank, int P, const Format& f, Coll coll, hocclRedOp_t op, uint64_t count) {
  const uint64_t inCount = coll == Coll::ReduceScatter ? count * P : count;
  std::vector<unsigned char> in(inCount * f.size + 1), out(count * f.size + 1);
  for (uint64_t g = 0; g < inCount; ++g) {
    const uint64_t b = inputBits(f, P, rank, g);
    std::memcpy(&in[g * f.size], &b, f.size);  // little-endian: the low bytes
  }
  const bool inPlace = rank % 2 == 0;  // ranks differ in placement
  const uint64_t first = coll == Coll::ReduceScatter ? rank * count : 0;
  unsigned char* recv = inPlace ? in.data() + first * f.size : out.data();
  const int root = P - 1;
  const std::string where = std::string(collName(coll)) + " " + f.name + " " + opName(op) + " count " +
                            std::to_string(count) + " rank " + std::to_string(rank) + " of " + std::to_string(P);
  hocclResult_t rc = coll == Coll::AllReduce ? hocclAllReduce(in.data(), recv, count, f.type, op, comm, nullptr)
                     : coll == Coll::Reduce  ? hocclReduce(in.data(), recv, count, f.type, op, root, comm, nullptr)
                                             : hocclReduceScatter(in.data(), recv, count, f.type, op, comm, nullptr);
  ASSERT_EQ(rc, hocclSuccess) << where << ": " << hocclGetLastError(comm);
  if (coll == Coll::Reduce && rank != root) return;
  uint64_t wrong = 0;
  for (uint64_t i = 0; i < count; ++i) {
    const uint64_t g = first + i, want = wantBits(f, op, P, g);
    uint64_t got = 0;
    std::memcpy(&got, &recv[i * f.size], f.size);
    if (got != want && ++wrong <= 3)
      ADD_FAILURE() << where << ": element " << g << " (kind " << g % kKinds << ", held by rank "
                    << (g / kKinds) % P << ") is 0x" << std::hex << got << ", want 0x" << want;
  }
  EXPECT_EQ(wrong, 0u) << where;
}

struct Param {
  int ranks;
  std::string algorithm;  // empty: the default choice, oneshot_shm for small calls
};

class ReduceSpecialValues : public ::testing::TestWithParam<Param> {};

TEST_P(ReduceSpecialValues, EveryRankGetsNcclsBits) {
  const Param& p = GetParam();
  Options o;
  o.ranks = p.ranks;
  o.algorithm = p.algorithm;
  o.timeoutSec = 60;
  World world(o);
  ASSERT_TRUE(world.initError().empty()) << world.initError();
  for (const Format& f : kFormats)
    for (Coll coll : {Coll::AllReduce, Coll::Reduce, Coll::ReduceScatter})
      for (hocclRedOp_t op : {hocclMax, hocclMin, hocclSum}) {
        // Small: every kind x holder, within oneshot_shm's 512 bytes of input
        // per rank; large: many slices and ring steps.
        const uint64_t inputs = 512 / f.size < 64 ? 512 / f.size : 64;
        const uint64_t small = coll == Coll::ReduceScatter ? inputs / p.ranks : inputs;
        for (uint64_t count : {small, uint64_t{100003}}) {
          std::string err;
          ASSERT_TRUE(world.run([&](hocclComm_t comm, int rank) { runAndCheck(comm, rank, p.ranks, f, coll, op, count); },
                                &err))
              << err;
          if (HasFailure()) return;  // the ranks may be out of step
        }
      }
}

INSTANTIATE_TEST_SUITE_P(All, ReduceSpecialValues,
                         ::testing::Values(Param{2, ""}, Param{3, ""}, Param{4, ""}, Param{2, "ring"},
                                           Param{3, "ring"}, Param{2, "doubling"}, Param{3, "doubling"},
                                           Param{4, "doubling"}, Param{3, "oneshot"}, Param{4, "oneshot"}),
                         [](const auto& info) {
                           return "P" + std::to_string(info.param.ranks) + "_" +
                                  (info.param.algorithm.empty() ? "default" : info.param.algorithm);
                         });

}  // namespace
