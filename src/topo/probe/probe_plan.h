// hoccl-topo probe: the measurement plan and what it concludes.
//
// Everything here is deterministic and free of I/O, so every node's leader
// runs the same Prober on the same reports and agrees on the next round
// without a controller; the tests drive it with a simulated network.
//
// The plan (docs/topology-file.md, "Calibrating a cluster"):
//  1. latency: every pair of nodes ping-pongs, n-1 rounds of disjoint pairs
//     (a round-robin tournament). Reported, not used for groups: a switch
//     hop costs less than the noise of TCP round trips on busy hosts.
//  2. pairs: every pair of nodes once, both ways at once, all the pairs of
//     a matching together (n-1 rounds). Pairs under one leaf always run at
//     their nodes' rate; pairs across leaves share the uplinks with the
//     round's other crossings. Groups: nodes joined by pairs that ran at
//     full rate, never joining two whose members ran slow together.
//  3. links: one flow alone (a node link's rate and token bucket), two
//     flows into one node (its queue, seen by a ping behind them), then
//     for each pair of groups (pairs of disjoint groups at once),
//     min(|G|,|H|) flows from G to H together, then back, then one flow
//     alone. Flows that share the leaves' uplinks get a fair share of them:
//     their sum is the uplink rate when it is below what the flows could
//     carry, and a flow that runs much faster than its round's others
//     cannot have crossed that uplink, so its node was misplaced.
//  With Options::sample, steps 1-3 run on a sample of the nodes (spread
//  evenly over their numbering), and then:
//  4. place: every other node x sends one flow to a member of a group G
//     while other groups' members load G's uplink with flows into G's
//     other members, enough of them to fill it (from step 3's rate). x
//     belongs to G when its flow ran at full rate and it, with the loaders,
//     carried more into G than G's uplink could: it cannot have crossed
//     it. A round tests every group at once, several nodes per group; a
//     node slow into a group tries the next one.
//  5. rest: the nodes that fit no group (a leaf with no sampled node) run
//     step 2 among themselves and form groups of their own, whose uplinks
//     are not measured (said in the notes).
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <vector>

namespace hoccl {
namespace probe {

struct Options {
  double flowSec = 0.6;        // length of every flow
  double windowLo = 0.35;      // the part of a flow that is measured,
  double windowHi = 0.9;       // as fractions of flowSec
  int pings = 64;              // round trips per pair in the latency rounds
  int maxFlows = 0;            // flows in one round at most (0: no limit)
  int repeats = 3;             // pair and loaded uplink rounds run this often: medians, majorities
  double minGapUs = 2.0;       // a switch boundary adds at least this RTT
  double gapOverSpread = 3.0;  // ... and this many times the spread inside groups
  double contended = 0.8;      // a flow below this share of its nodes' rate shared a link
  int sample = 0;              // steps 1-3 among this many nodes, the others placed (0 or >= nodes: all)
};

struct Flow {
  int src = -1, dst = -1;
  bool ping = false;  // src also ping-pongs dst while the flow runs (queue depth)
};
struct PingPair {
  int from = -1, to = -1;
};

struct Round {
  std::string what;
  std::vector<Flow> flows;       // each node sends at most one (a node may receive several)
  std::vector<PingPair> pings;   // latency rounds: disjoint pairs
  std::string kind;              // the planner's: ping, pairs, node, incast, loaded, solo
};

// What one node measured in a round.
struct Report {
  double rxGbps = 0;    // goodput of the flows it received, together, over the measured window
  double rxBurstKB = 0; // bytes it got ahead of that rate at the flow's start (a token bucket)
  double rttMinUs = 0, rttMedUs = 0, rttP90Us = 0;  // round trips it started
};

struct Group {
  std::vector<int> nodes;
  double linkGbps = 0;     // slowest node link measured in the group
  double uplinkGbps = 0;   // 0: not seen to be a bottleneck
  bool uplinkLowerBound = false;  // never the slower end of a measured pair
};

struct Result {
  std::vector<Group> groups;              // every node in exactly one
  std::vector<double> nodeGbps;           // per node
  std::vector<std::vector<double>> rttUs;  // lowest round trip per pair (0 on the diagonal)
  double intraRttUs = 0, interRttUs = 0;  // medians inside groups and between them
  double netBufferKB = 0, spineBufferKB = 0;  // queues: medians over the links measured (0: not seen)
  double netBurstKB = 0, spineBurstKB = 0;    // token buckets (0: none seen)
  bool grouped = false;        // groups come from the measurements (else: one, unknown)
  std::string confidence;      // "high", "medium", "none"
  std::vector<std::string> notes;  // what was seen and decided, for the user
  double lineFactor = 1;       // rates below are goodput x this (toLineRate)
  int rounds = 0;
  double seconds = 0;          // planned measuring time (flows and pings, no set-up)
  int sampled = 0;             // nodes of the pair rounds (all of them without Options::sample)
  int placed = 0;              // nodes placed into the sample's groups (step 4)
};

// Groups from the pair rounds (step 2): gbps[i][j] is the rate of the flow
// i -> j (0: not measured); sets groups, grouped, confidence and notes.
void groupByFlows(const std::vector<std::vector<double>>& gbps, const std::vector<double>& nodeGbps,
                  const Options& o, Result* r);

class Prober {
 public:
  Prober(int nodes, Options o);
  bool done() const { return stage_ == Stage::Done; }
  const Round& round() const { return queue_.front(); }  // valid while !done()
  // The reports of every node for round(); advances to the next round.
  void record(const std::vector<Report>& reports);
  const Result& result() const { return result_; }
  // Measuring time of a round, seconds (no connection set-up or sync).
  double roundSeconds(const Round& r, double pingUs) const;

  // The sampled nodes (Options::sample), in order.
  static std::vector<int> sampleOf(int nodes, int sample);

 private:
  enum class Stage { Pairs, Links, Place, Rest, Done };
  void plan();
  void finish();
  void planPairs(const std::vector<int>& nodes);
  void planLinks();
  // Each node's group index (`ungrouped` for a node in none).
  std::vector<int> groupIndex(int ungrouped) const;
  // The slowest node link measured among `nodes` (a group's link rate).
  double slowestLink(const std::vector<int>& nodes) const;
  // Groups from the medians of the pair rounds among `nodes`.
  Result groupAmong(const std::vector<int>& nodes) const;
  // Per group: the uplink rate its loaded rounds showed (0: never
  // contended) and the most they carried (uplinkEstimates).
  void uplinkEstimates(const std::vector<int>& groupOf, std::vector<double>* best, std::vector<double>* seenMax,
                       bool* misplaced, std::vector<double>* spineBuf);
  void startPlace();
  void planPlace();
  void recordPlace(const std::vector<Report>& rep);
  void startRest();
  void groupRest();

  int n_;
  Options o_;
  Stage stage_ = Stage::Pairs;
  std::vector<int> members_;  // the nodes of steps 1-3
  // Step 4: nodes not placed yet, groups each has run slow into, each
  // group's loader count, and the tests of the round in the queue.
  std::vector<int> unplaced_;
  std::vector<std::vector<unsigned char>> tried_;  // [node][group]: 16 per slow result + 1 per mute one
  std::vector<int> attempts_;  // per node: tests so far (the fewest go first)
  std::vector<int> loaders_;
  std::vector<double> uplink_;  // per group, from step 3
  struct Test {
    int group;
    std::vector<int> loaderDst;   // where loader flows went
    std::vector<char> outside;     // their sources are known to be outside the group
    std::vector<std::pair<int, int>> tests;  // (node, target)
  };
  std::vector<Test> placing_;
  std::vector<int> inconclusive_;  // per group: rounds in a row that could not tell
  std::vector<char> untestable_;   // per group: its uplink cannot be filled from outside
  std::vector<int> rest_;          // step 5's nodes
  int placeRounds_ = 0;
  bool secondChance_ = false;
  size_t step_ = 0;
  void enqueue(Round r, const char* kind);
  std::deque<Round> queue_;  // rounds planned for the current stage; front() runs next
  Result result_;
  // Flows seen: per round, its flows with their rates.
  struct Seen {
    Flow f;
    double gbps;
    int round;
    std::string kind;  // "node", "loaded", "solo"
    double rttP90Us;
    double burstKB;
  };
  std::vector<Seen> seen_;
};

// The median (0 for none).
double medianOf(std::vector<double> v);

// Round-robin tournament: round r of the n-1 (n even; odd n: one node sits
// out each round) as pairs of indices into 0..n-1.
std::vector<std::pair<int, int>> tournamentRound(int n, int r);
int tournamentRounds(int n);

// TCP goodput to the rate on the wire, as topology files give link speeds:
// Ethernet frames of `mtu` bytes carry mtu-52 bytes of TCP payload (IPv4
// and TCP headers with timestamps) in mtu+14 bytes (Ethernet header); tbf
// and switch ports count the same (queues and buckets too, in frame bytes).
// mtu <= 52: left as measured.
void toLineRate(Result* r, int mtu);

// The files hoccl reads: a topology file (JSON, docs/topology-file.md) and
// a tune file (docs/algorithms.md). hosts[i] is node i's HOCCL_HOSTID.
std::string topologyJson(const Result& r, const std::vector<std::string>& hosts);
std::string tuneConf(const Result& r);
// A report for people: the groups, the rates, the confidence and the notes.
std::string summary(const Result& r, const std::vector<std::string>& hosts);

}  // namespace probe
}  // namespace hoccl
