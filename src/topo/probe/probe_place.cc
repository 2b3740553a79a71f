// The probe's sampled plan (probe_plan.h, steps 4 and 5): the nodes left
// out of the sample are placed into the sample's groups by loading each
// group's uplink from outside while they send into it.
#include <algorithm>
#include <cmath>

#include "src/topo/probe/probe_plan.h"

namespace hoccl {
namespace probe {
namespace {

// A node stops trying a group after a majority of Options::repeats slow
// results there (so one busy moment does not exclude it): it is then
// known to be outside the group. It also stops after twice as many
// results that told nothing. tried_ counts 16 per slow result, 1 per mute.
int majority(const Options& o) { return std::max(1, o.repeats) / 2 + 1; }
bool outsideOf(const Options& o, unsigned tried) { return int(tried / 16) >= majority(o); }
bool givenUp(const Options& o, unsigned tried) { return outsideOf(o, tried) || int(tried % 16) >= 2 * majority(o); }
// Rounds in a row that cannot tell before a group counts as untestable.
constexpr int kMaxInconclusive = 3;

}  // namespace

std::vector<int> Prober::sampleOf(int nodes, int sample) {
  std::vector<int> out;
  if (sample <= 0 || sample >= nodes) {
    for (int i = 0; i < nodes; ++i) out.push_back(i);
    return out;
  }
  sample = std::max(sample, 2);
  for (int i = 0; i < sample; ++i) out.push_back(int(int64_t(i) * nodes / sample));  // spread evenly
  return out;
}

// Each group's uplink rate from step 3 decides how many loader flows fill
// it: enough that an outside node's flow could not also run at full rate.
// A group of the sample too small for that (or whose uplink never filled)
// is dissolved: its nodes are placed like the others.
void Prober::startPlace() {
  const size_t m = result_.groups.size();
  const std::vector<int> groupOf = groupIndex(-1);
  std::vector<double> best, seenMax;
  uplinkEstimates(groupOf, &best, &seenMax, nullptr, nullptr);
  // The sample's pair rounds tell leaves apart only where they put clearly
  // more across each uplink than it carries: a member's partner is in
  // another group (m-1)/m of the time, so its members must number 1.5 x
  // uplink / link x m/(m-1). A sample that shares no link at all is too
  // small to tell one switch from an uplink it never filled. Either way it
  // is not trusted: every node runs the pair rounds (the full plan).
  std::string why = m == 1 ? "its pair rounds showed no shared link" : "";
  for (size_t g = 0; g < m && why.empty(); ++g) {
    const Group& G = result_.groups[g];
    const double link = slowestLink(G.nodes), need = best[g] > 0 && link > 0 ? 1.5 * best[g] / link * m / (m - 1.0) : 1e9;
    if (double(G.nodes.size()) < need)
      why = "a group of " + std::to_string(G.nodes.size()) + " sampled node(s) did not clearly fill its uplink (" +
            (best[g] > 0 ? "about " + std::to_string(int(std::ceil(need))) + " needed" : "never filled") + ")";
  }
  if (!why.empty()) {
    result_.notes.push_back("the sample of " + std::to_string(members_.size()) + " nodes is too small to trust: " +
                            why + "; every node ran the pair rounds instead");
    members_ = sampleOf(n_, 0);
    result_.sampled = n_;
    result_.groups.clear();
    planPairs(members_);
    stage_ = Stage::Pairs;
    return;
  }
  for (int v = 0; v < n_; ++v)
    if (groupOf[size_t(v)] < 0) unplaced_.push_back(v);
  tried_.assign(size_t(n_), std::vector<unsigned char>());
  attempts_.assign(size_t(n_), 0);
  std::vector<Group> keep;
  for (size_t g = 0; g < m; ++g) {
    const Group& G = result_.groups[g];
    const double link = slowestLink(G.nodes);
    const int k = best[g] > 0 && link > 0 ? int(std::ceil(1.25 * best[g] / link)) : 0;
    if (k >= 1 && int(G.nodes.size()) >= k + 1) {
      keep.push_back(G);
      uplink_.push_back(best[g]);
      loaders_.push_back(k);
      continue;
    }
    unplaced_.insert(unplaced_.end(), G.nodes.begin(), G.nodes.end());
    result_.notes.push_back("a group of " + std::to_string(G.nodes.size()) + " sampled node(s) " +
                            (k < 1 ? "whose uplink never filled" : "too few to fill its uplink (" +
                                                                       std::to_string(k) + " loaders and a target)") +
                            ": its nodes were placed like the unsampled ones");
  }
  std::sort(unplaced_.begin(), unplaced_.end());
  result_.groups = keep;
  inconclusive_.assign(keep.size(), 0);
  untestable_.assign(keep.size(), 0);
}

// One round: per testable group, its loaders (members of the other groups,
// one per group in turn, into the group's first members) and tests (nodes
// that have not run slow into it yet, into its other members).
void Prober::planPlace() {
  placing_.clear();
  if (unplaced_.empty()) return;
  // Every (node, group) gives up after a bounded number of results, so
  // this ends; the guard only caps a pathological network.
  if (placeRounds_ > 8 * majority(o_) * int(result_.groups.size() + unplaced_.size())) return;
  const int m = int(result_.groups.size());
  std::vector<char> out(size_t(n_), 0), in(size_t(n_), 0);
  Round r;
  std::vector<int> byAttempts = unplaced_;  // the least tried first
  std::stable_sort(byAttempts.begin(), byAttempts.end(),
                   [&](int a, int b) { return attempts_[size_t(a)] < attempts_[size_t(b)]; });
  for (int gi = 0; gi < m; ++gi) {
    const int g = (gi + placeRounds_) % m;  // who gets first pick of the loaders turns
    const std::vector<int>& M = result_.groups[size_t(g)].nodes;
    const int k = loaders_[size_t(g)];
    if (untestable_[size_t(g)]) continue;  // startPlace kept groups of k + 1 nodes or more; they only grow
    Test t{g, {}, {}, {}};
    auto tried = [&](int x) { return tried_[size_t(x)].empty() ? 0u : unsigned(tried_[size_t(x)][size_t(g)]); };
    for (int x : byAttempts) {
      if (int(t.tests.size()) >= int(M.size()) - k) break;
      if (!out[size_t(x)] && !givenUp(o_, tried(x))) t.tests.push_back({x, -1});
    }
    if (t.tests.empty()) continue;
    // Loaders: other groups' members, one per group in turn; then unplaced
    // nodes that ran slow into this group (both known to be outside it);
    // then any unplaced node, whose flow is not counted (it may be inside).
    std::vector<int> src;
    std::vector<char> known;
    for (size_t depth = 0; int(src.size()) < k; ++depth) {
      bool any = false;
      for (int h = 1; h < m && int(src.size()) < k; ++h) {
        const std::vector<int>& H = result_.groups[size_t((g + h) % m)].nodes;
        if (depth >= H.size()) continue;
        any = true;
        if (!out[size_t(H[depth])]) src.push_back(H[depth]), known.push_back(1);
      }
      if (!any) break;
    }
    for (int pass = 0; pass < 2 && int(src.size()) < k; ++pass)
      for (int x : unplaced_) {
        if (int(src.size()) >= k) break;
        const bool isTest = std::any_of(t.tests.begin(), t.tests.end(), [&](const auto& p) { return p.first == x; });
        const bool outside = outsideOf(o_, tried(x));
        if (!out[size_t(x)] && !isTest && (pass == 1 || outside) && std::find(src.begin(), src.end(), x) == src.end())
          src.push_back(x), known.push_back(outside);
      }
    std::vector<int> dst;  // the group's members not receiving yet
    for (int v : M)
      if (!in[size_t(v)]) dst.push_back(v);
    if (int(src.size()) < k || int(dst.size()) < k + 1) continue;
    if (o_.maxFlows > 0 && int(r.flows.size()) + k + 1 > std::max(2, o_.maxFlows)) break;
    t.tests.resize(std::min(t.tests.size(), dst.size() - size_t(k)));
    for (int i = 0; i < k; ++i) {
      r.flows.push_back({src[size_t(i)], dst[size_t(i)], false});
      t.loaderDst.push_back(dst[size_t(i)]);
      t.outside.push_back(known[size_t(i)]);
      out[size_t(src[size_t(i)])] = in[size_t(dst[size_t(i)])] = 1;
    }
    for (size_t j = 0; j < t.tests.size(); ++j) {
      const int x = t.tests[j].first, target = dst[size_t(k) + j];
      ++attempts_[size_t(x)];
      t.tests[j].second = target;
      r.flows.push_back({x, target, false});
      out[size_t(x)] = in[size_t(target)] = 1;
    }
    placing_.push_back(t);
  }
  if (placing_.empty()) {
    // Nodes that gave up on every group get one second chance (a busy
    // moment may have cost a node its own group) before step 5.
    if (!secondChance_ && !unplaced_.empty()) {
      secondChance_ = true;
      for (int x : unplaced_) tried_[size_t(x)].clear();
      planPlace();
    }
    return;
  }
  ++placeRounds_;
  r.what = "place " + std::to_string(placeRounds_) + " (" + std::to_string(unplaced_.size()) + " nodes left)";
  enqueue(r, "place");
}

// A test flow at full rate that, with the flows known to cross into the
// group (loaders from outside, slow tests), carried more into it than its
// uplink can: it did not cross the uplink, so its node is under the
// group's leaf. A slow one crossed a shared link: a vote against.
// Fast with room left on the uplink tells nothing.
void Prober::recordPlace(const std::vector<Report>& rep) {
  auto rx = [&](int v) { return v < int(rep.size()) ? rep[size_t(v)].rxGbps : 0.0; };
  std::vector<int> placedNow;
  for (const Test& t : placing_) {
    const size_t g = size_t(t.group);
    const double link = slowestLink(result_.groups[g].nodes);
    double load = 0;
    // What surely crossed the uplink: loaders from outside, and tests that
    // ran slow (a node under the group's leaf reaches it without the uplink).
    for (size_t i = 0; i < t.loaderDst.size(); ++i)
      if (t.outside[i]) load += rx(t.loaderDst[i]);
    for (const auto& test : t.tests)
      if (rx(test.second) < o_.contended * link) load += rx(test.second);
    bool told = false;
    for (const auto& [x, target] : t.tests) {
      const double rate = rx(target);
      const bool fast = rate >= o_.contended * link;
      if (fast && rate + load > 1.1 * uplink_[g]) {
        result_.groups[g].nodes.push_back(x);
        placedNow.push_back(x);
        told = true;
        continue;
      }
      if (fast && load <= 0) continue;  // no loader surely crossed: no chance to tell, no vote
      std::vector<unsigned char>& tr = tried_[size_t(x)];
      if (tr.empty()) tr.assign(result_.groups.size(), 0);
      if (fast && tr[g] % 16 < 15) tr[g] = static_cast<unsigned char>(tr[g] + 1);
      if (!fast && tr[g] / 16 < 15) tr[g] = static_cast<unsigned char>(tr[g] + 16);
      told |= !fast;
    }
    inconclusive_[g] = told ? 0 : inconclusive_[g] + 1;
    if (inconclusive_[g] >= kMaxInconclusive) {
      untestable_[g] = 1;
      result_.notes.push_back("group " + std::to_string(g) + "'s uplink was never filled by flows from outside: no "
                              "node was placed into it by test");
    }
  }
  result_.placed += int(placedNow.size());
  std::sort(placedNow.begin(), placedNow.end());
  unplaced_.erase(std::remove_if(unplaced_.begin(), unplaced_.end(),
                                 [&](int v) { return std::binary_search(placedNow.begin(), placedNow.end(), v); }),
                  unplaced_.end());
  placing_.clear();
}

// Nodes that fit no group: pair rounds among them and the members of the
// groups that could not be tested (their leaves may be the same).
void Prober::startRest() {
  rest_ = unplaced_;
  if (rest_.empty()) return;
  std::vector<Group> keep;
  for (size_t g = 0; g < result_.groups.size(); ++g) {
    if (!untestable_[g]) keep.push_back(result_.groups[g]);
    else rest_.insert(rest_.end(), result_.groups[g].nodes.begin(), result_.groups[g].nodes.end());
  }
  result_.groups = keep;
  std::sort(rest_.begin(), rest_.end());
  if (rest_.size() >= 2) planPairs(rest_);
}

void Prober::groupRest() {
  if (rest_.empty()) return;
  std::vector<Group> groups;
  if (rest_.size() == 1) {
    Group g;
    g.nodes = rest_;
    groups.push_back(g);
  } else {
    groups = groupAmong(rest_).groups;
  }
  for (Group& g : groups) result_.groups.push_back(g);
  if (result_.confidence == "high") result_.confidence = "medium";
  result_.notes.push_back(std::to_string(unplaced_.size()) + " node(s) fit none of the sample's groups that could be "
                          "tested (a leaf without enough sampled nodes?): with those groups' nodes, " +
                          std::to_string(rest_.size()) + " nodes ran pair rounds among themselves and form " +
                          std::to_string(groups.size()) + " group(s); their uplinks are measured only where "
                          "sampled nodes among them ran the uplink rounds");
}

}  // namespace probe
}  // namespace hoccl
