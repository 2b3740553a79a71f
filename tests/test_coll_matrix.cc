// One parametrised test of what every collective computes: algorithm x
// shape (ranks, emulated nodes, threads or processes, network) x count x
// data type x op x placement, each case one call checked element by element
// against the closed-form values of src/check/values.h.
//
// The algorithms are "auto" plus every row of the registry
// (allAlgorithms()), passed through hocclConfig_t.algorithm: a newly
// registered algorithm is tested here without editing this file. A
// collective the algorithm does not support runs the ring fallback, which
// the ring's own cases test, so it is not repeated under that algorithm.
// oneshot_shm (one node's shared slots only) runs on the one-node shapes
// and the first shape across nodes, where it falls back.
//
// Sampling (the whole cross product would be about 300,000 calls), per
// shape (see shapes()):
//  - Pairs, the single-node shapes of 1 to 8 ranks and two TCP shapes: an
//    all-pairs set over collective x type x op x placement (in, out, mixed:
//    ranks differ) x small count {0, 1, 1009 (prime), 8P+1 (not divisible
//    by P)}, so that any two values of any two of these meet in some case
//    (greedy, deterministic);
//  - Full, one node of 3 ranks: Pairs and the full cross product of
//    collective x type x op x {in-place, out-of-place} at 1009 and 8P+1;
//  - EachValue, 16 ranks on one node, the other TCP shapes and verbs: every
//    type, op, placement, count and collective at least once (a TCP call,
//    or one with more rank threads than cores, is much slower than a small
//    shared-memory one, so those shapes get few cases);
//  - the large count 200003 (prime): on one node of up to 4 ranks once per
//    type; on 16 ranks one all-reduce; elsewhere once per collective with
//    type, op and placement turning with the shape, so that across shapes
//    every type meets it;
//  - Few, ranks as processes (forked afresh for every case, where thread
//    ranks keep their communicators while consecutive cases share a shape):
//    one case per collective and one all-reduce of the large count.
// Cases of one algorithm and shape are consecutive so their ranks are
// reused. tests/CMakeLists.txt runs this binary in shards, not one ctest
// test per case.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <memory>
#include <ostream>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "algorithms/registry.h"
#include "src/check/values.h"
#include "tests/support/collectives.h"
#include "tests/support/harness.h"

using namespace testutil;

namespace {

// How much of collective x type x op x placement x count a shape runs.
enum class Sampling {
  Full,       // all pairs, and the full cross product at two counts
  Pairs,      // every pair of values of any two dimensions
  EachValue,  // every value of every dimension at least once
  Few,        // processes: one case per collective (each forks its ranks)
};

struct Shape {
  std::vector<int> nodes;  // ranks per node
  Sampling sampling = Sampling::Pairs;
  int leaves = 1;
  Mode mode = Mode::Threads;
  Net net = Net::Shm;

  int ranks() const {
    int n = 0;
    for (int s : nodes) n += s;
    return n;
  }
  bool oneNode() const { return nodes.size() == 1; }
  std::string name() const {
    std::string s = "n";
    for (size_t i = 0; i < nodes.size(); ++i) s += (i ? "_" : "") + std::to_string(nodes[i]);
    if (leaves > 1) s += "_leaves" + std::to_string(leaves);
    if (net == Net::Socket) s += "_tcp";
    if (net == Net::Ib) s += "_ib";
    if (mode == Mode::Processes) s += "_proc";
    return s;
  }
};

const std::vector<Shape>& shapes() {
  using S = Sampling;
  static const std::vector<Shape> all = {
      // One node, shared memory.
      {{3}, S::Full},
      {{1}}, {{2}}, {{4}}, {{7}}, {{8}},
      {{16}, S::EachValue},
      // Emulated nodes over TCP: even, uneven, one rank per node, under two
      // leaf switches (a topology file), 16 ranks on 4 nodes.
      {{2, 2}, S::Pairs, 1, Mode::Threads, Net::Socket},
      {{3, 1, 2}, S::Pairs, 1, Mode::Threads, Net::Socket},
      {{1, 1}, S::EachValue, 1, Mode::Threads, Net::Socket},
      {{1, 1, 1}, S::EachValue, 1, Mode::Threads, Net::Socket},
      {{2, 2, 1}, S::EachValue, 1, Mode::Threads, Net::Socket},
      {{3, 2}, S::EachValue, 1, Mode::Threads, Net::Socket},
      {{2, 2, 2}, S::EachValue, 1, Mode::Threads, Net::Socket},
      {{2, 2, 2, 2}, S::EachValue, 1, Mode::Threads, Net::Socket},
      {{2, 2, 2, 2}, S::EachValue, 2, Mode::Threads, Net::Socket},
      {{1, 1, 1, 1}, S::EachValue, 2, Mode::Threads, Net::Socket},
      {{4, 4, 4, 4}, S::EachValue, 1, Mode::Threads, Net::Socket},
      // Ranks as processes.
      {{3}, S::Few, 1, Mode::Processes, Net::Shm},
      {{2, 2}, S::Few, 1, Mode::Processes, Net::Socket},
      // Verbs, skipped where no port is active.
      {{2, 2}, S::EachValue, 1, Mode::Threads, Net::Ib},
  };
  return all;
}

struct Case {
  std::string algorithm;
  Shape shape;
  Call call;

  Options options() const {
    Options o;
    o.ranks = shape.ranks();
    if (!shape.oneNode()) o.nodeSizes = shape.nodes;
    o.leaves = shape.leaves;
    o.algorithm = algorithm;
    o.net = shape.net;
    o.mode = shape.mode;
    o.timeoutSec = 60;  // a hang fails the case instead of the whole run
    o.nodePrefix = "matrix-node";
    return o;
  }
};

void PrintTo(const Case& c, std::ostream* os) { *os << describe(c.call) << ", " << c.options().describe(); }

std::string caseName(const Case& c) {
  std::string s = c.algorithm + "_" + c.shape.name() + "_c" + std::to_string(c.call.count) + "_" +
                  collName(c.call.coll) + "_" + checkvals::typeName(c.call.type);
  if (reduces(c.call.coll)) s += std::string("_") + checkvals::opName(c.call.op);
  s += std::string("_") + placementName(c.call.placement);
  for (char& ch : s)
    if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return s;
}

// Rows that together hold every pair of values of any two dimensions
// (sizes[d] values in dimension d): greedy, each row starting from a pair
// not yet covered and filling the other dimensions with the value that
// covers the most new pairs.
std::vector<std::vector<int>> allPairs(const std::vector<int>& sizes) {
  const int dims = static_cast<int>(sizes.size());
  // uncovered[a][b][va * sizes[b] + vb], for a < b
  std::vector<std::vector<std::vector<char>>> uncovered(dims, std::vector<std::vector<char>>(dims));
  size_t left = 0;
  for (int a = 0; a < dims; ++a)
    for (int b = a + 1; b < dims; ++b) {
      uncovered[a][b].assign(sizes[a] * sizes[b], 1);
      left += uncovered[a][b].size();
    }
  auto isNew = [&](int a, int va, int b, int vb) {
    if (a > b) std::swap(a, b), std::swap(va, vb);
    return uncovered[a][b][va * sizes[b] + vb] != 0;
  };
  std::vector<std::vector<int>> rows;
  while (left > 0) {
    std::vector<int> row(dims, -1);
    bool started = false;
    for (int a = 0; a < dims && !started; ++a)
      for (int b = a + 1; b < dims && !started; ++b)
        for (size_t i = 0; i < uncovered[a][b].size() && !started; ++i)
          if (uncovered[a][b][i]) {
            row[a] = static_cast<int>(i) / sizes[b];
            row[b] = static_cast<int>(i) % sizes[b];
            started = true;
          }
    for (int d = 0; d < dims; ++d) {
      if (row[d] >= 0) continue;
      int best = 0, bestGain = -1;
      for (int k = 0; k < sizes[d]; ++k) {
        int v = static_cast<int>((k + rows.size()) % sizes[d]);  // ties turn with the row
        int gain = 0;
        for (int e = 0; e < dims; ++e)
          if (e != d && row[e] >= 0) gain += isNew(d, v, e, row[e]);
        if (gain > bestGain) best = v, bestGain = gain;
      }
      row[d] = best;
    }
    for (int a = 0; a < dims; ++a)
      for (int b = a + 1; b < dims; ++b) {
        char& u = uncovered[a][b][row[a] * sizes[b] + row[b]];
        left -= u;
        u = 0;
      }
    rows.push_back(row);
  }
  return rows;
}

const hocclRedOp_t kOps[] = {hocclSum, hocclProd, hocclMax, hocclMin, hocclAvg};
const Placement kPlacements[] = {Placement::OutOfPlace, Placement::InPlace, Placement::Mixed};
constexpr uint64_t kLargeCount = 200003;

hocclDataType_t typeAt(int i) { return static_cast<hocclDataType_t>(i % hocclNumTypes); }

std::vector<Call> callsFor(const std::vector<Coll>& colls, const Shape& shape, int shapeIndex) {
  const int n = shape.ranks();
  const std::vector<uint64_t> small = {0, 1, 1009, 8ull * n + 1};
  std::vector<Coll> reducing, gathering;
  for (Coll c : colls) (reduces(c) ? reducing : gathering).push_back(c);
  std::vector<Call> calls;
  std::set<std::tuple<int, int, int, int, uint64_t>> seen;
  auto add = [&](Coll coll, hocclDataType_t t, hocclRedOp_t op, Placement p, uint64_t count) {
    if (!reduces(coll)) op = hocclSum;
    if (seen.insert({static_cast<int>(coll), t, op, static_cast<int>(p), count}).second)
      calls.push_back({coll, t, op, count, p});
  };
  // Row i of "every value once": type i, and the other dimensions turning.
  auto eachValue = [&](const std::vector<Coll>& of, bool withOp) {
    for (int i = 0; i < hocclNumTypes; ++i)
      add(of[i % of.size()], typeAt(i), withOp ? kOps[i % 5] : hocclSum, kPlacements[i % 3], small[i % 4]);
  };
  switch (shape.sampling) {
    case Sampling::Full:
      for (uint64_t count : {small[2], small[3]})
        for (Coll coll : colls)
          for (int t = 0; t < hocclNumTypes; ++t)
            for (hocclRedOp_t op : kOps) {
              if (!reduces(coll) && op != hocclSum) continue;
              for (Placement p : {Placement::OutOfPlace, Placement::InPlace}) add(coll, typeAt(t), op, p, count);
            }
      [[fallthrough]];
    case Sampling::Pairs:
      if (!reducing.empty())
        for (const auto& r : allPairs({static_cast<int>(reducing.size()), hocclNumTypes, 5, 3, 4}))
          add(reducing[r[0]], typeAt(r[1]), kOps[r[2]], kPlacements[r[3]], small[r[4]]);
      if (!gathering.empty())
        for (const auto& r : allPairs({static_cast<int>(gathering.size()), hocclNumTypes, 3, 4}))
          add(gathering[r[0]], typeAt(r[1]), hocclSum, kPlacements[r[2]], small[r[3]]);
      break;
    case Sampling::EachValue:
      if (!reducing.empty()) eachValue(reducing, true);
      if (!gathering.empty()) eachValue(gathering, false);
      break;
    case Sampling::Few:
      for (size_t j = 0; j < colls.size(); ++j)
        add(colls[j], typeAt(3 * static_cast<int>(j) + shapeIndex), kOps[j % 5], kPlacements[j % 3], small[j % 4]);
      add(Coll::AllReduce, typeAt(shapeIndex), hocclSum, Placement::Mixed, kLargeCount);
      return calls;
  }
  // The large count: on one node of up to 4 ranks once per type; on 16
  // ranks (more threads than cores: slow) one all-reduce; elsewhere once
  // per collective, type, op and placement turning with the shape.
  if (shape.nodes.size() == 1 && n <= 4) {
    for (int i = 0; i < hocclNumTypes; ++i)
      add(colls[i % colls.size()], typeAt(i), kOps[i % 5], kPlacements[i % 3], kLargeCount);
  } else if (n > 8) {
    add(Coll::AllReduce, typeAt(5 * shapeIndex), kOps[shapeIndex % 5], Placement::Mixed, kLargeCount);
  } else {
    for (size_t j = 0; j < colls.size(); ++j) {
      int k = shapeIndex + static_cast<int>(j);
      add(colls[j], typeAt(5 * k), kOps[k % 5], kPlacements[k % 3], kLargeCount);
    }
  }
  return calls;
}

size_t firstAcrossNodes() {
  for (size_t s = 0; s < shapes().size(); ++s)
    if (!shapes()[s].oneNode()) return s;
  return shapes().size();
}

std::vector<Case> allCases() {
  std::vector<std::string> algorithms = {"auto"};
  for (const hoccl::AlgoInfo& a : hoccl::allAlgorithms()) algorithms.push_back(a.name);
  std::vector<Case> cases;
  for (size_t s = 0; s < shapes().size(); ++s)
    for (const std::string& algo : algorithms) {
      const hoccl::AlgoInfo* info = hoccl::findAlgorithm(algo.c_str());
      // oneshot_shm runs only over one node's slots: elsewhere a forced
      // oneshot_shm takes auto's choice, which auto's cases test; one shape
      // across nodes shows that fallback (counts over 512 B show the other).
      if (info && info->sharedSlotsOnly && !shapes()[s].oneNode() && s != firstAcrossNodes()) continue;
      std::vector<Coll> colls;
      for (Coll c : {Coll::AllReduce, Coll::ReduceScatter, Coll::AllGather, Coll::Broadcast, Coll::Reduce})
        if (!info || info->supports(static_cast<hoccl::CollKind>(c))) colls.push_back(c);
      for (const Call& call : callsFor(colls, shapes()[s], static_cast<int>(s)))
        cases.push_back({algo, shapes()[s], call});
    }
  return cases;
}

class CollMatrix : public ::testing::TestWithParam<Case> {
 public:
  static void TearDownTestSuite() { world_.reset(); }

 protected:
  // The communicators of the previous case, if it had the same options.
  static World& worldFor(const Options& o) {
    std::string key = o.describe() + " " + std::to_string(o.leaves);
    if (!world_ || worldKey_ != key) {
      world_.reset();
      world_ = std::make_unique<World>(o);
      worldKey_ = key;
    }
    return *world_;
  }
  static std::unique_ptr<World> world_;
  static std::string worldKey_;
};

std::unique_ptr<World> CollMatrix::world_;
std::string CollMatrix::worldKey_;

TEST_P(CollMatrix, MatchesClosedForm) {
  const Case& c = GetParam();
  if (c.shape.net == Net::Ib && !ibUnavailable().empty()) GTEST_SKIP() << ibUnavailable();
  const Options o = c.options();
  const int n = o.ranks;
  Body body = [&](hocclComm_t comm, int rank) { runAndCheck(comm, rank, n, c.call); };
  std::string err;
  if (o.mode == Mode::Processes) {
    world_.reset();  // no rank threads alive while forking
    ASSERT_TRUE(spawn(o, body, &err)) << err;
    return;
  }
  World& world = worldFor(o);
  ASSERT_TRUE(world.initError().empty()) << world.initError();
  ASSERT_TRUE(world.run(body, &err)) << err;
  // A failed call can leave the ranks out of step: start the next case afresh.
  if (HasFailure()) world_.reset();
}

INSTANTIATE_TEST_SUITE_P(All, CollMatrix, ::testing::ValuesIn(allCases()),
                         [](const auto& info) { return caseName(info.param); });

}  // namespace
