// The probe's plan and its conclusions (probe_plan.h).
#include "src/topo/probe/probe_plan.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

namespace hoccl {
namespace probe {
double medianOf(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t h = v.size() / 2;
  return v.size() % 2 ? v[h] : (v[h - 1] + v[h]) / 2;
}

int tournamentRounds(int n) { return n < 2 ? 0 : (n % 2 ? n : n - 1); }

std::vector<std::pair<int, int>> tournamentRound(int n, int r) {
  std::vector<std::pair<int, int>> out;
  if (n < 2) return out;
  const int m = n % 2 ? n + 1 : n;  // with a bye when odd
  const int k = m - 1;
  r %= k;
  auto add = [&](int a, int b) {
    if (a < n && b < n) out.emplace_back(std::min(a, b), std::max(a, b));
  };
  add(m - 1, r);
  for (int i = 1; i < m / 2; ++i) add((r + i) % k, (r - i + k) % k);
  return out;
}

void groupByFlows(const std::vector<std::vector<double>>& gbps, const std::vector<double>& nodeGbps,
                  const Options& o, Result* r) {
  const int n = int(gbps.size());
  auto full = [&](int i, int j) {
    const double cap = std::min(nodeGbps[i], nodeGbps[j]);
    return gbps[i][j] >= o.contended * cap && gbps[j][i] >= o.contended * cap;
  };
  auto measured = [&](int i, int j) { return gbps[i][j] > 0 || gbps[j][i] > 0; };
  std::vector<std::vector<char>> same(n, std::vector<char>(n, 0)), diff = same;
  int ndiff = 0;
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j) {
      if (i == j || !measured(i, j)) continue;
      (full(i, j) ? same : diff)[i][j] = 1;
      ndiff += i < j && diff[i][j];
    }
  // Pairs that ran at full rate, those with most partners in common first:
  // a pair across leaves can run at full rate only when nothing else
  // crossed its uplinks, and its nodes' leaf mates then outvote it.
  struct Edge {
    int support, i, j;
  };
  std::vector<Edge> edges;
  for (int i = 0; i < n; ++i)
    for (int j = i + 1; j < n; ++j) {
      if (!same[i][j]) continue;
      int k = 0;
      for (int m = 0; m < n; ++m) k += same[i][m] && same[j][m];
      edges.push_back({k, i, j});
    }
  std::stable_sort(edges.begin(), edges.end(), [](const Edge& a, const Edge& b) { return a.support > b.support; });
  std::vector<int> comp(n);
  for (int i = 0; i < n; ++i) comp[i] = i;
  int rejected = 0;
  for (const Edge& e : edges) {
    const int a = comp[e.i], b = comp[e.j];
    if (a == b) continue;
    // The pairs between the two groups vote: most must have run at full
    // rate (one slow pair inside a leaf, a moment's noise, does not split it).
    int yes = 0, no = 0;
    for (int x = 0; x < n; ++x)
      for (int y = 0; y < n; ++y)
        if (comp[x] == a && comp[y] == b) yes += same[x][y], no += diff[x][y];
    if (yes <= no) {
      ++rejected;
      continue;
    }
    for (int& c : comp)
      if (c == b) c = a;
  }
  r->groups.clear();
  std::map<int, int> index;
  for (int i = 0; i < n; ++i) {
    auto it = index.find(comp[i]);
    if (it == index.end()) it = index.emplace(comp[i], int(r->groups.size())).first, r->groups.emplace_back();
    r->groups[it->second].nodes.push_back(i);
  }
  r->grouped = true;
  if (ndiff == 0) {
    r->confidence = "medium";
    r->notes.push_back("no pair of nodes ran below its rate beside the others: no shared link (one non-blocking "
                       "switch, as far as " + std::to_string(edges.size()) + " pairs show)");
  } else {
    r->confidence = rejected ? "medium" : "high";
    r->notes.push_back(std::to_string(ndiff) + " pair(s) of nodes ran below their rate beside the others: " +
                       std::to_string(r->groups.size()) + " groups behind shared links");
    if (rejected)
      r->notes.push_back(std::to_string(rejected) +
                         " pair(s) ran at full rate across groups (nothing else crossed their uplinks then)");
  }
}

Prober::Prober(int nodes, Options o) : n_(std::max(nodes, 1)), o_(o) {
  result_.rttUs.assign(n_, std::vector<double>(n_, 0));
  result_.nodeGbps.assign(n_, 0);
  members_ = sampleOf(n_, o_.sample);
  result_.sampled = int(members_.size());
  if (n_ < 2) {  // nothing between nodes to measure
    Group g;
    g.nodes = {0};
    result_.groups = {g};
    result_.confidence = "none";
    result_.notes.push_back("one node: there is no network between nodes to measure");
    stage_ = Stage::Done;
    return;
  }
  plan();
}

double Prober::roundSeconds(const Round& r, double pingUs) const {
  double s = r.flows.empty() ? 0 : o_.flowSec;
  if (!r.pings.empty()) s = std::max(s, o_.pings * pingUs * 1e-6);
  return s;
}

void Prober::plan() {
  const int k = int(members_.size());
  for (int t = 0; t < tournamentRounds(k); ++t) {
    Round r;
    r.what = "latency " + std::to_string(t + 1) + "/" + std::to_string(tournamentRounds(k));
    for (auto& p : tournamentRound(k, t)) r.pings.push_back({members_[p.first], members_[p.second]});
    enqueue(r, "ping");
  }
  planPairs(members_);
}

void Prober::enqueue(Round r, const char* kind) {
  r.kind = kind;
  queue_.push_back(std::move(r));
}

void Prober::planPairs(const std::vector<int>& nodes) {
  // Every pair once, both ways at once, all pairs of a matching together:
  // pairs inside a leaf always run at their nodes' rate, pairs across
  // leaves share the uplinks with the matching's other crossings.
  // Each pair runs `repeats` times, in separate passes: a host that is
  // busy for a moment slows one of them, and the median ignores it.
  // Every node: in order, as measured on the emulated cluster. A sample
  // (or step 5's nodes) is shuffled anew for each pass, the same way on
  // every leader: the tournament pairs indices near each other in most
  // rounds, so with a sample in leaf order a pair would meet in the same
  // lightly loaded round in every pass (seen in simulation: a node joined
  // another leaf's group). Shuffling every node's passes as well helped
  // some simulated shapes and hurt others; it is left as measured.
  const int reps = std::max(1, o_.repeats);
  const int n = int(nodes.size());
  const bool shuffle = n < n_;
  for (int pass = 0; pass < reps; ++pass) {
  std::vector<int> order = nodes;
  uint64_t x = 0x9E3779B97F4A7C15ull * uint64_t(pass + 1);
  for (int i = n - 1; shuffle && i > 0; --i) {  // Fisher-Yates with a fixed xorshift
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    std::swap(order[size_t(i)], order[size_t(x % uint64_t(i + 1))]);
  }
  for (int t = 0; t < tournamentRounds(n); ++t) {
    std::vector<Round> rounds(1);
    for (auto& p : tournamentRound(n, t)) {
      if (o_.maxFlows > 0 && int(rounds.back().flows.size()) + 2 > std::max(2, o_.maxFlows)) rounds.emplace_back();
      rounds.back().flows.push_back({order[p.first], order[p.second], false});
      rounds.back().flows.push_back({order[p.second], order[p.first], false});
    }
    for (size_t k = 0; k < rounds.size(); ++k) {
      rounds[k].what = "pairs " + std::to_string(t + 1) + "/" + std::to_string(tournamentRounds(n)) +
                       (rounds.size() > 1 ? "." + std::to_string(k + 1) : "") +
                       (reps > 1 ? " (pass " + std::to_string(pass + 1) + "/" + std::to_string(reps) + ")" : "");
      enqueue(rounds[k], "pairs");
    }
  }
  }
}

void Prober::planLinks() {
  // One flow alone inside a group, with a ping behind it: the node link's
  // rate, queue and token bucket.
  for (const Group& g : result_.groups)
    if (g.nodes.size() >= 2) {
      Round alone;
      alone.what = "node link alone";
      alone.flows.push_back({g.nodes[0], g.nodes[1], true});
      enqueue(alone, "node");
      break;
    }
  // Two flows into one node, one from a leaf mate: together they send
  // more than its link takes and fill the queue in front of it.
  for (const Group& g : result_.groups)
    if (g.nodes.size() >= 2 && n_ >= 3) {
      int other = g.nodes.size() >= 3 ? g.nodes[2] : -1;
      for (int v = 0; other < 0 && v < n_; ++v)
        if (v != g.nodes[0] && v != g.nodes[1]) other = v;
      Round incast;
      incast.what = "node link shared";
      incast.flows.push_back({g.nodes[0], g.nodes[1], true});
      incast.flows.push_back({other, g.nodes[1], false});
      enqueue(incast, "incast");
      break;
    }
  const int m = int(result_.groups.size());
  for (int t = 0; t < tournamentRounds(m); ++t) {
    Round fwd, bwd, solo;
    for (auto& p : tournamentRound(m, t)) {
      const Group& g = result_.groups[p.first];
      const Group& h = result_.groups[p.second];
      size_t k = std::min(g.nodes.size(), h.nodes.size());
      if (o_.maxFlows > 0) k = std::min(k, size_t(std::max(2, o_.maxFlows)));
      for (size_t i = 0; i < k; ++i) {
        fwd.flows.push_back({g.nodes[i], h.nodes[i], i == 0});
        bwd.flows.push_back({h.nodes[i], g.nodes[i], i == 0});
      }
      solo.flows.push_back({g.nodes[0], h.nodes[0], true});
    }
    const std::string at = " " + std::to_string(t + 1) + "/" + std::to_string(tournamentRounds(m));
    fwd.what = "uplinks loaded" + at;
    bwd.what = "uplinks loaded back" + at;
    solo.what = "uplinks one flow" + at;
    for (int pass = 0; pass < std::max(1, o_.repeats); ++pass)
      for (Round* r : {&fwd, &bwd}) enqueue(*r, "loaded");
    enqueue(solo, "solo");
  }
}

void Prober::record(const std::vector<Report>& rep) {
  if (done() || queue_.empty()) return;
  const Round r = std::move(queue_.front());
  const std::string& kind = r.kind;
  queue_.pop_front();
  ++result_.rounds;
  result_.seconds += roundSeconds(r, 50);
  for (const PingPair& p : r.pings)
    if (p.from < int(rep.size()) && p.to < int(rep.size()))
      result_.rttUs[p.from][p.to] = result_.rttUs[p.to][p.from] = rep[p.from].rttMinUs;
  std::vector<int> into(n_, 0);
  for (const Flow& f : r.flows)
    if (f.dst < n_) ++into[f.dst];
  for (const Flow& f : r.flows)
    if (f.dst < int(rep.size()) && f.src < int(rep.size())) {
      seen_.push_back({f, rep[f.dst].rxGbps, result_.rounds, kind, f.ping ? rep[f.src].rttP90Us : 0,
                       rep[f.dst].rxBurstKB});
      // Flows into one node are timed together: their sum is the receiver's.
      if (into[f.dst] == 1) result_.nodeGbps[f.src] = std::max(result_.nodeGbps[f.src], rep[f.dst].rxGbps);
      result_.nodeGbps[f.dst] = std::max(result_.nodeGbps[f.dst], rep[f.dst].rxGbps);
    }
  if (kind == "place") recordPlace(rep);
  // The next stage, until one has rounds to run.
  while (queue_.empty() && stage_ != Stage::Done) {
    if (stage_ == Stage::Pairs) {
      const Result g = groupAmong(members_);
      result_.groups = g.groups;
      result_.grouped = g.grouped;
      result_.confidence = g.confidence;
      result_.notes.insert(result_.notes.end(), g.notes.begin(), g.notes.end());
      stage_ = Stage::Links;
      planLinks();
    } else if (stage_ == Stage::Links && int(members_.size()) < n_) {
      stage_ = Stage::Place;
      startPlace();  // back to Stage::Pairs for every node when the sample cannot be trusted
    } else if (stage_ == Stage::Place) {
      planPlace();
      if (queue_.empty()) {
        startRest();
        stage_ = Stage::Rest;
      }
    } else {
      if (stage_ == Stage::Rest) groupRest();
      finish();
      stage_ = Stage::Done;
    }
  }
}

Result Prober::groupAmong(const std::vector<int>& nodes) const {
  const int k = int(nodes.size());
  std::vector<int> index(size_t(n_), -1);
  for (int i = 0; i < k; ++i) index[size_t(nodes[i])] = i;
  std::vector<std::vector<std::vector<double>>> each(k, std::vector<std::vector<double>>(k));
  for (const Seen& s : seen_)
    if (s.kind == "pairs" && index[s.f.src] >= 0 && index[s.f.dst] >= 0)
      each[index[s.f.src]][index[s.f.dst]].push_back(s.gbps);
  std::vector<std::vector<double>> gbps(k, std::vector<double>(k, 0));
  std::vector<double> rates(k);
  for (int i = 0; i < k; ++i) {
    rates[i] = result_.nodeGbps[nodes[i]];
    for (int j = 0; j < k; ++j) gbps[i][j] = medianOf(each[i][j]);
  }
  Result r;
  groupByFlows(gbps, rates, o_, &r);
  for (Group& g : r.groups)
    for (int& v : g.nodes) v = nodes[size_t(v)];
  return r;
}

std::vector<int> Prober::groupIndex(int ungrouped) const {
  std::vector<int> groupOf(size_t(n_), ungrouped);
  for (size_t g = 0; g < result_.groups.size(); ++g)
    for (int v : result_.groups[g].nodes) groupOf[size_t(v)] = int(g);
  return groupOf;
}

double Prober::slowestLink(const std::vector<int>& nodes) const {
  double link = 0;
  for (int v : nodes) link = link > 0 ? std::min(link, result_.nodeGbps[size_t(v)]) : result_.nodeGbps[size_t(v)];
  return link;
}

void Prober::finish() {
  Result& R = result_;
  const std::vector<int> groupOf = groupIndex(0);
  // A node's rate is the best any of its flows reached, in any round
  // (record() keeps it).
  auto cap = [&](const Flow& f) { return std::min(R.nodeGbps[f.src], R.nodeGbps[f.dst]); };
  // Node links: each group's slowest; queues and buckets from the flows
  // that ran alone on their links.
  std::vector<double> netBuf, netBurst, aloneBuf;
  int contendedNode = 0;
  for (const Seen& s : seen_)
    if (s.kind == "incast" && s.rttP90Us > 0)
      netBuf.push_back(std::max(0.0, s.rttP90Us - R.rttUs[s.f.src][s.f.dst]) * s.gbps * 0.125);
  for (const Seen& s : seen_) {
    if (s.kind != "node") continue;
    const bool full = s.gbps >= o_.contended * cap(s.f);
    if (!full && groupOf[s.f.src] == groupOf[s.f.dst]) ++contendedNode;
    if (!full || groupOf[s.f.src] != groupOf[s.f.dst]) continue;
    if (s.rttP90Us > 0) aloneBuf.push_back(std::max(0.0, s.rttP90Us - R.rttUs[s.f.src][s.f.dst]) * s.gbps * 0.125);
    netBurst.push_back(s.burstKB);
  }
  if (netBuf.empty()) netBuf = aloneBuf;  // no group of three: what one flow queued
  for (Group& g : R.groups) g.linkGbps = slowestLink(g.nodes);
  R.netBufferKB = medianOf(netBuf);
  R.netBurstKB = std::max(0.0, medianOf(netBurst));
  if (contendedNode > 0)
    R.notes.push_back("a flow alone inside a group ran below its nodes' best rate: busy hosts, or a leaf that "
                      "is not non-blocking");
  std::vector<double> intra, inter;
  for (int i = 0; i < n_; ++i)
    for (int j = i + 1; j < n_; ++j)
      if (R.rttUs[i][j] > 0) (groupOf[i] == groupOf[j] ? intra : inter).push_back(R.rttUs[i][j]);
  R.intraRttUs = medianOf(intra);
  R.interRttUs = medianOf(inter);
  std::vector<double> best, seenMax, spineBuf;
  bool misplaced = false;
  uplinkEstimates(groupOf, &best, &seenMax, &misplaced, &spineBuf);
  std::vector<double> spineBurst;
  for (const Seen& s : seen_)
    if (s.kind == "solo" && s.gbps < o_.contended * cap(s.f)) spineBurst.push_back(s.burstKB);
  for (size_t g = 0; g < R.groups.size(); ++g) {
    R.groups[g].uplinkGbps = best[g] > 0 ? best[g] : seenMax[g];
    R.groups[g].uplinkLowerBound = best[g] <= 0;
  }
  R.spineBufferKB = medianOf(spineBuf);
  R.spineBurstKB = std::max(0.0, medianOf(spineBurst));
  bool anyContended = false;
  for (double b : best) anyContended |= b > 0;
  if (R.groups.size() > 1 && !anyContended) {
    misplaced = true;
    R.notes.push_back("flows between the groups, together, never filled an uplink, yet pairs across them ran slow");
  }
  if (R.sampled < n_)
    R.notes.push_back("sampled " + std::to_string(R.sampled) + " of " + std::to_string(n_) + " nodes for the pair "
                      "and uplink rounds; placed " + std::to_string(R.placed) + " others into their groups in " +
                      std::to_string(placeRounds_) + " rounds");
  if (misplaced) {
    R.notes.push_back("the uplink rounds contradict the groups of the pair rounds: leaf groups left unknown");
    R.confidence = "none";
    R.grouped = false;
    Group all;  // one switch standing for the whole network
    for (int v = 0; v < n_; ++v) all.nodes.push_back(v);
    all.linkGbps = slowestLink(all.nodes);
    R.groups = {all};
  }
}

void Prober::uplinkEstimates(const std::vector<int>& groupOf, std::vector<double>* bestOut,
                             std::vector<double>* seenMaxOut, bool* misplaced, std::vector<double>* spineBuf) {
  Result& R = result_;
  auto cap = [&](const Flow& f) { return std::min(R.nodeGbps[f.src], R.nodeGbps[f.dst]); };
  // Uplinks: per group pair and direction, the flows' sum in each of its
  // rounds; contended when most of its rounds were.
  std::map<std::pair<int, int>, std::vector<const Seen*>> loaded;  // (round, pair) -> flows
  for (const Seen& s : seen_)
    if (s.kind == "loaded") loaded[{s.round, groupOf[s.f.src] * 4096 + groupOf[s.f.dst]}].push_back(&s);
  struct Pass {
    double sum = 0, capacity = 0;
    std::vector<const Seen*> flows;
  };
  std::map<int, std::vector<Pass>> passes;  // pair -> its rounds
  for (auto& kv : loaded) {
    Pass p;
    p.flows = kv.second;
    for (const Seen* s : kv.second) p.sum += s->gbps, p.capacity += cap(s->f);
    passes[kv.first.second].push_back(p);
  }
  std::vector<double>& best = *bestOut;
  std::vector<double>& seenMax = *seenMaxOut;
  best.assign(R.groups.size(), 0);
  seenMax.assign(R.groups.size(), 0);
  for (auto& kv : passes) {
    const int g = kv.first / 4096, h = kv.first % 4096;
    std::vector<double> sums;
    int contended = 0;
    std::map<std::pair<int, int>, int> fast;  // flow -> rounds it outran the others
    for (const Pass& p : kv.second) {
      seenMax[g] = std::max(seenMax[g], p.sum);
      seenMax[h] = std::max(seenMax[h], p.sum);
      if (p.sum >= o_.contended * p.capacity) continue;  // the uplinks carried all the flows could
      ++contended;
      sums.push_back(p.sum);
      std::vector<double> rates;
      for (const Seen* s : p.flows) rates.push_back(s->gbps);
      const double med = medianOf(rates);
      for (const Seen* s : p.flows) {
        if (s->rttP90Us > 0 && spineBuf) spineBuf->push_back(std::max(0.0, s->rttP90Us - R.rttUs[s->f.src][s->f.dst]) * p.sum * 0.125);
        if (rates.size() >= 2 && s->gbps > 1.6 * med && s->gbps >= o_.contended * cap(s->f)) ++fast[{s->f.src, s->f.dst}];
      }
    }
    const int rounds = int(kv.second.size());
    if (2 * contended <= rounds) continue;  // mostly not contended: a moment's noise
    best[g] = std::max(best[g], medianOf(sums));
    best[h] = std::max(best[h], medianOf(sums));
    for (auto& f : fast)
      if (misplaced && 2 * f.second > contended) {  // in most of its rounds, so not noise
        *misplaced = true;
        R.notes.push_back("a flow between groups, node " + std::to_string(f.first.first) + " to " +
                          std::to_string(f.first.second) + ", ran much faster than the others beside it: one of "
                          "them does not share the uplink the pair rounds put it behind");
      }
  }
}

}  // namespace probe
}  // namespace hoccl
