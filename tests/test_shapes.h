// What the schedule tests build schedules from, written once: rank
// groupings (N nodes of G ranks, nodes of given sizes, or an explicit
// rank -> node / node -> switch map), keys and hand-made steps. Shared by
// the builder, golden and verifier tests so all describe them alike.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>
#include "algorithms/schedule.h"

namespace hoccl::test_shapes {

struct Shape {
  std::string name;
  int nranks;
  std::shared_ptr<const Grouping> groups;
};

// N groups of G consecutive ranks; group g under switch g * switches / N.
inline Shape rect(int N, int G, int switches = 1) {
  auto g = std::make_shared<Grouping>();
  for (int r = 0; r < N * G; ++r) g->groupOf.push_back(r / G);
  if (switches > 1) {
    for (int q = 0; q < N; ++q) g->superOf.push_back(q * switches / N);
  }
  return Shape{std::to_string(N) + "x" + std::to_string(G) + (switches > 1 ? "_sw" + std::to_string(switches) : ""),
               N * G, g};
}

// Consecutive groups of the given sizes.
inline Shape sized(const std::vector<int>& sizes, const std::string& name) {
  auto g = std::make_shared<Grouping>();
  for (size_t q = 0; q < sizes.size(); ++q) g->groupOf.insert(g->groupOf.end(), sizes[q], int(q));
  return Shape{name, int(g->groupOf.size()), g};
}

inline Shape custom(std::vector<int> groupOf, std::vector<int> superOf, const std::string& name) {
  auto g = std::make_shared<Grouping>();
  g->groupOf = std::move(groupOf);
  g->superOf = std::move(superOf);
  return Shape{name, int(g->groupOf.size()), g};
}

// A key for rank 0 of `nranks`; tests set the other fields (rank,
// maxStepCount, pipelineChunks, groups) by name where they need them.
inline ScheduleKey makeKey(CollKind coll, int nranks, uint64_t count, bool inPlace = false, int nchannels = 1,
                           int root = 0) {
  ScheduleKey k;
  k.coll = coll;
  k.nranks = nranks;
  k.count = count;
  k.inPlace = inPlace;
  k.nchannels = nchannels;
  k.root = root;
  return k;
}

// One step written by hand, for the step-kind names and the schedules the
// verifier must reject.
inline Step makeStep(int32_t from, int32_t to, bool reduce, Slice src, Slice dst, uint64_t count) {
  return Step{.recvPeer = from, .sendPeer = to, .reduce = reduce, .src = src, .dst = dst, .count = count};
}

}  // namespace hoccl::test_shapes
