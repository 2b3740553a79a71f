// Pins Schedule::toString() byte for byte for a set of schedules of every
// builder (ring, hierarchical, HO-Ring, recursive doubling, one-shot): refactoring a
// builder must not change a single step. The expected texts live in
// tests/data/schedules/<builder>.txt, one "== <case>" header per case
// followed by the schedules of every rank of that case.
//
// When a change to a builder is meant to change its schedules, regenerate
// the files and review the diff:
//   HOCCL_UPDATE_GOLDEN=1 build/tests/test_schedule_golden
// (the test then writes the files instead of comparing, and fails so that a
// regeneration is never mistaken for a pass).
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "algorithms/phases.h"
#include "algorithms/registry.h"
#include "tests/test_shapes.h"

namespace hoccl {
namespace {

using test_shapes::Shape;
using test_shapes::rect;
using test_shapes::sized;

using Builder = Schedule (*)(const ScheduleKey&);

struct Case {
  std::string name;
  Builder build;
  ScheduleKey key;  // rank is set per rank
};

const char* shortColl(CollKind c) {
  switch (c) {
    case CollKind::AllReduce: return "ar";
    case CollKind::ReduceScatter: return "rs";
    case CollKind::AllGather: return "ag";
    case CollKind::Broadcast: return "bc";
    case CollKind::Reduce: return "red";
    default: return "?";  // the point-to-point kinds have no builder here
  }
}

ScheduleKey key(CollKind coll, int P, uint64_t count, int nch, bool inPlace = false, uint64_t maxStep = 0) {
  ScheduleKey k = test_shapes::makeKey(coll, P, count, inPlace, nch);
  k.maxStepCount = maxStep;
  return k;
}

std::string name(const ScheduleKey& k, const std::string& shape) {
  std::ostringstream os;
  os << shortColl(k.coll) << " " << shape << " count " << k.count << " ch " << k.nchannels;
  if (k.coll == CollKind::Broadcast || k.coll == CollKind::Reduce) os << " root " << k.root;
  if (k.inPlace) os << " inplace";
  if (k.maxStepCount) os << " maxstep " << k.maxStepCount;
  if (k.pipelineChunks) os << " chunks " << k.pipelineChunks;
  return os.str();
}

const CollKind kGrouped[] = {CollKind::AllReduce, CollKind::ReduceScatter, CollKind::AllGather};

std::vector<Case> ringCases() {
  std::vector<Case> v;
  auto add = [&](ScheduleKey k) { v.push_back({name(k, "P" + std::to_string(k.nranks)), buildRing, k}); };
  for (CollKind c : kGrouped)
    for (int P : {3, 4, 8})
      for (int nch : {1, 2, 4}) add(key(c, P, c == CollKind::AllReduce ? uint64_t(2 * P + 3) : 5, nch));
  for (CollKind c : kGrouped) {
    for (int P : {1, 4}) add(key(c, P, 11, 2, true));
    add(key(c, 1, 11, 2));
    for (int P : {3, 4}) {
      add(key(c, P, 23, 1, false, 2));
      add(key(c, P, 23, 2, true, 3));
    }
    add(key(c, 4, 0, 1));
  }
  for (CollKind c : {CollKind::Broadcast, CollKind::Reduce})
    for (int P : {1, 3, 4})
      for (int root : {0, 2}) {
        if (root >= P) continue;
        for (bool inPlace : {false, true}) {
          ScheduleKey k = key(c, P, 9, 2, inPlace);
          k.root = root;
          add(k);
        }
      }
  return v;
}

std::vector<Shape> groupedShapes() { return {rect(2, 4), rect(3, 2), sized({3, 1, 2}, "3+1+2"), rect(4, 2, 2)}; }

std::vector<Case> groupedCases(Builder build) {
  std::vector<Case> v;
  for (const Shape& s : groupedShapes()) {
    auto add = [&](ScheduleKey k) {
      k.groups = s.groups;
      v.push_back({name(k, s.name), build, k});
    };
    for (CollKind c : kGrouped) {
      for (int nch : {1, 2}) add(key(c, s.nranks, 13, nch));
      add(key(c, s.nranks, 13, 1, true));
      add(key(c, s.nranks, 9, 1, false, 4));
    }
  }
  // The fallbacks: rooted collectives and a grouping that misses ranks.
  ScheduleKey bc = key(CollKind::Broadcast, 4, 6, 1);
  bc.groups = rect(2, 2).groups;
  bc.root = 1;
  v.push_back({name(bc, "2x2"), build, bc});
  ScheduleKey bad = key(CollKind::AllReduce, 5, 6, 1);
  bad.groups = rect(2, 2).groups;
  v.push_back({name(bad, "2x2-of-5"), build, bad});
  return v;
}

std::vector<Case> horingCases() {
  std::vector<Case> v = groupedCases(buildHoRing);
  for (const Shape& s : {rect(2, 4), rect(4, 2, 2)})
    for (CollKind c : kGrouped) {
      ScheduleKey k = key(c, s.nranks, 12, 1);
      k.groups = s.groups;
      k.pipelineChunks = 3;
      v.push_back({name(k, s.name), buildHoRing, k});
    }
  return v;
}

std::vector<Case> doublingCases() {
  std::vector<Case> v;
  auto add = [&](ScheduleKey k) { v.push_back({name(k, "P" + std::to_string(k.nranks)), buildDoubling, k}); };
  for (int P : {1, 3, 4, 5, 8}) {
    add(key(CollKind::AllReduce, P, 10, 1));
    add(key(CollKind::AllReduce, P, 10, 1, true, 4));
  }
  add(key(CollKind::ReduceScatter, 3, 4, 1));
  return v;
}

std::vector<Case> oneShotCases() {
  std::vector<Case> v;
  auto add = [&](ScheduleKey k) { v.push_back({name(k, "P" + std::to_string(k.nranks)), buildOneShot, k}); };
  for (CollKind c : kGrouped) {
    for (int P : {1, 3, 4}) {
      add(key(c, P, 6, 1));
      add(key(c, P, 6, 1, true));
    }
    add(key(c, 3, 6, 1, true, 4));
  }
  return v;
}

std::string render(const Case& c) {
  std::string out = "== " + c.name + "\n";
  ScheduleKey k = c.key;
  for (int r = 0; r < k.nranks; ++r) {
    k.rank = r;
    out += c.build(k).toString();
  }
  return out;
}

std::string dataPath(const std::string& file) { return std::string(HOCCL_TEST_DATA_DIR) + "/schedules/" + file; }

// Splits a golden file into its cases, keyed by name.
std::map<std::string, std::string> readCases(const std::string& path, std::vector<std::string>* order) {
  std::ifstream in(path);
  std::map<std::string, std::string> cases;
  std::string line, current;
  while (std::getline(in, line)) {
    if (line.rfind("== ", 0) == 0) {
      current = line.substr(3);
      order->push_back(current);
      cases[current] = line + "\n";
    } else if (!current.empty()) {
      cases[current] += line + "\n";
    }
  }
  return cases;
}

void check(const std::string& file, const std::vector<Case>& cases) {
  if (const char* u = std::getenv("HOCCL_UPDATE_GOLDEN"); u && *u && std::string(u) != "0") {
    std::ofstream out(dataPath(file));
    for (const Case& c : cases) out << render(c);
    ASSERT_TRUE(out.good()) << "cannot write " << dataPath(file);
    FAIL() << "wrote " << dataPath(file) << " (HOCCL_UPDATE_GOLDEN is set): review the diff and run again without it";
  }
  std::vector<std::string> order;
  const std::map<std::string, std::string> golden = readCases(dataPath(file), &order);
  ASSERT_FALSE(golden.empty()) << "no cases in " << dataPath(file);
  std::vector<std::string> built;
  for (const Case& c : cases) {
    built.push_back(c.name);
    const auto it = golden.find(c.name);
    if (it == golden.end()) {
      ADD_FAILURE() << file << ": no golden text for case \"" << c.name << "\"";
      continue;
    }
    EXPECT_EQ(render(c), it->second) << file << ", case \"" << c.name << "\"";
  }
  // Every committed case is still built, in the same order.
  EXPECT_EQ(built, order) << file;
}

TEST(ScheduleGolden, Ring) { check("ring.txt", ringCases()); }
TEST(ScheduleGolden, Hierarchical) { check("hierarchical.txt", groupedCases(buildHierarchical)); }
TEST(ScheduleGolden, HoRing) { check("horing.txt", horingCases()); }
TEST(ScheduleGolden, Doubling) { check("doubling.txt", doublingCases()); }
TEST(ScheduleGolden, OneShot) { check("oneshot.txt", oneShotCases()); }

}  // namespace
}  // namespace hoccl
