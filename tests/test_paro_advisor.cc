// The PaRO advisor (src/tune/paro_advisor.h): its memory and collectives per
// strategy against the strategy table of docs/paro.md (written out here on
// its own), and what its costing and recommendation must respect.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "src/tune/sim.h"
#include "src/tune/paro_advisor.h"

using namespace hoccl;
using namespace hoccl::tune;
using namespace hoccl::tune::paro;

namespace {

const Strategy& byName(const std::string& name) {
  for (const Strategy& s : strategies())
    if (name == s.name) return s;
  ADD_FAILURE() << "no strategy " << name;
  return strategies()[0];
}

LinkModel fastNodesSlowNetwork() {
  LinkModel l;
  l.shm = {2, 2400};
  l.nodeMemGbps = 20000;
  l.reduceGbps = 8000;
  l.net = {5, 100};
  return l;
}

}  // namespace

TEST(ParoAdvisor, StateBytesPerParameterFollowTheTable) {
  const int N = 4, m = 8;
  const double n = N * m;
  // bf16 parameters and gradients, fp32 master + Adam: bytes per parameter.
  const std::map<std::string, double> table = {
      {"DDP", 16},           {"ZeRO-1", 4 + 12 / n}, {"ZeRO-2", 2 + 14 / n},        {"ZeRO-3", 16 / n},
      {"MiCS", 16.0 / m},    {"NIG", 2 + 2.0 / m + 12 / n}, {"NII", 2 + 14.0 / m},  {"IIG", 4.0 / m + 12 / n},
      {"IGG", 2.0 / m + 14 / n}, {"ING", 2.0 / m + 2 + 12 / n},
  };
  ModelSize model;
  model.params = model.trainable = 1e6;
  ASSERT_EQ(strategies().size(), table.size());
  for (const auto& [name, perParam] : table)
    EXPECT_NEAR(stateBytes(byName(name), model, N, m).total(), perParam * 1e6, 1e-3) << name;
  // ING with few trainable parameters: 2Ψ/m + 2Ψ' + 12Ψ'/n.
  model.trainable = 1e4;
  EXPECT_NEAR(stateBytes(byName("ING"), model, N, m).total(), 2e6 / m + 2e4 + 12e4 / n, 1e-3);
}

TEST(ParoAdvisor, CollectivesFollowTheTable) {
  const int N = 4, m = 8;
  ModelSize model;
  model.params = model.trainable = 8e6;
  const double P = 8e6, R = P / m;
  using C = CollKind;
  // (phase, group, collective) -> (calls, elements per call)
  using Key = std::tuple<Phase, Group, C>;
  const std::map<std::string, std::map<Key, std::pair<int, double>>> table = {
      {"DDP", {{{Phase::Boundary, Group::World, C::AllReduce}, {1, P}}}},
      {"ZeRO-1", {{{Phase::Boundary, Group::World, C::ReduceScatter}, {1, P}},
                  {{Phase::Step, Group::World, C::AllGather}, {1, P}}}},
      {"ZeRO-2", {{{Phase::Micro, Group::World, C::ReduceScatter}, {1, P}},
                  {{Phase::Step, Group::World, C::AllGather}, {1, P}}}},
      {"ZeRO-3", {{{Phase::Micro, Group::World, C::AllGather}, {2, P}},
                  {{Phase::Micro, Group::World, C::ReduceScatter}, {1, P}}}},
      {"MiCS", {{{Phase::Micro, Group::Intra, C::AllGather}, {2, P}},
                {{Phase::Micro, Group::Intra, C::ReduceScatter}, {1, P}},
                {{Phase::Boundary, Group::Rail, C::AllReduce}, {1, R}}}},
      {"NIG", {{{Phase::Micro, Group::Intra, C::ReduceScatter}, {1, P}},
               {{Phase::Boundary, Group::Rail, C::ReduceScatter}, {1, R}},
               {{Phase::Step, Group::World, C::AllGather}, {1, P}}}},
      {"NII", {{{Phase::Micro, Group::Intra, C::ReduceScatter}, {1, P}},
               {{Phase::Boundary, Group::Rail, C::AllReduce}, {1, R}},
               {{Phase::Step, Group::Intra, C::AllGather}, {1, P}}}},
      {"IIG", {{{Phase::Micro, Group::Intra, C::AllGather}, {2, P}},
               {{Phase::Micro, Group::Intra, C::ReduceScatter}, {1, P}},
               {{Phase::Boundary, Group::Rail, C::ReduceScatter}, {1, R}},
               {{Phase::Step, Group::Rail, C::AllGather}, {1, R}}}},
      {"IGG", {{{Phase::Micro, Group::Intra, C::AllGather}, {2, P}},
               {{Phase::Micro, Group::World, C::ReduceScatter}, {1, P}},
               {{Phase::Step, Group::Rail, C::AllGather}, {1, R}}}},
      {"ING", {{{Phase::Micro, Group::Intra, C::AllGather}, {2, P}},
               {{Phase::Boundary, Group::World, C::ReduceScatter}, {1, P}},
               {{Phase::Step, Group::Rail, C::AllGather}, {1, R}}}},
  };
  for (const auto& [name, want] : table) {
    std::map<Key, std::pair<int, double>> got;
    for (const Call& c : strategyCalls(byName(name), model, N, m)) {
      EXPECT_FALSE(got.count({c.phase, c.group, c.coll})) << name << ": a row twice";
      got[{c.phase, c.group, c.coll}] = {c.calls, c.elems};
    }
    EXPECT_EQ(got, want) << name;
  }
}

TEST(ParoAdvisor, OneRankGroupsMoveNothing) {
  ModelSize model;
  model.params = model.trainable = 1e6;
  for (const Call& c : strategyCalls(byName("IIG"), model, 1, 4)) EXPECT_NE(c.group, Group::Rail);
  for (const Call& c : strategyCalls(byName("MiCS"), model, 4, 1)) EXPECT_NE(c.group, Group::Intra);
  EXPECT_TRUE(strategyCalls(byName("ZeRO-3"), model, 1, 1).empty());
}

TEST(ParoAdvisor, RailsShareTheNodeLinks) {
  // Eight rails through four nodes carry eight times one rail's bytes over
  // each node's one link: at a bandwidth-bound size they take about 8x.
  const LinkModel links = fastNodesSlowNetwork();
  Advisor eight(Machine::rectangular(4, 8, 1, links), {}, "");
  Advisor one(Machine::rectangular(4, 1, 1, links), {}, "");
  const uint64_t bytes = 256ull << 20;
  for (CollKind c : {CollKind::AllGather, CollKind::ReduceScatter, CollKind::AllReduce}) {
    const double ratio = eight.callUs(Group::Rail, c, bytes) / one.callUs(Group::Rail, c, bytes);
    EXPECT_GT(ratio, 7.0) << collName(c);
    EXPECT_LT(ratio, 8.5) << collName(c);
  }
}

TEST(ParoAdvisor, ARailRunsWhatItsTunerPicks) {
  // With one rank per node the rail is the whole machine: a rail call costs
  // what the world call costs, whatever algorithm the tuner picks for it
  // (on two leaves with slow uplinks, HO-Ring rather than a plain ring).
  LinkModel links = fastNodesSlowNetwork();
  links.spine.gbps = links.net.gbps / 2;
  Advisor alone(Machine::rectangular(4, 1, 2, links), {}, "");
  for (CollKind c : {CollKind::AllGather, CollKind::ReduceScatter, CollKind::AllReduce})
    for (uint64_t bytes : {uint64_t(8) << 10, uint64_t(1) << 20, uint64_t(64) << 20})
      EXPECT_DOUBLE_EQ(alone.callUs(Group::Rail, c, bytes), alone.callUs(Group::World, c, bytes))
          << collName(c) << " " << bytes;
  // Two rails at once share each node link and uplink: each costs what one
  // rail costs on links of half the rate.
  LinkModel half = links;
  half.net.gbps /= 2;
  half.spine.gbps /= 2;
  half.nodeMemGbps /= 2;
  Advisor two(Machine::rectangular(4, 2, 2, links), {}, "");
  Advisor slow(Machine::rectangular(4, 1, 2, half), {}, "");
  const uint64_t bytes = 64ull << 20;
  for (CollKind c : {CollKind::AllGather, CollKind::ReduceScatter, CollKind::AllReduce}) {
    const double ratio = two.callUs(Group::Rail, c, bytes) / slow.callUs(Group::World, c, bytes);
    EXPECT_GT(ratio, 0.9) << collName(c);  // the choice may differ; the cost barely
    EXPECT_LT(ratio, 1.1) << collName(c);
  }
}

TEST(ParoAdvisor, AccumulationFavoursNodeLocalGradients) {
  // With 8 micro-steps per step and a slow network, NIG reduces inside the
  // node each micro-step and crosses the network once: it must beat ZeRO-2,
  // which crosses it every micro-step, and ZeRO-3, which also gathers.
  Advisor adv(Machine::rectangular(4, 8, 1, fastNodesSlowNetwork()), {}, "");
  ModelSize model;
  model.params = model.trainable = 1e9;
  model.accum = 8;
  std::map<std::string, double> ms;
  for (const Costed& c : adv.evaluate(model, 0)) ms[c.strategy.name] = c.totalUs() / 1e3;
  EXPECT_LT(ms["NIG"] * 2, ms["ZeRO-2"]);
  EXPECT_LT(ms["ZeRO-2"], ms["ZeRO-3"]);
  EXPECT_LT(ms["IIG"], ms["ZeRO-3"]);
  // With one micro-step, the same bytes cross the network either way:
  // ZeRO-1 (RS + AG over all ranks) costs about what DDP's all-reduce does.
  model.accum = 1;
  for (const Costed& c : adv.evaluate(model, 0)) ms[c.strategy.name] = c.totalUs() / 1e3;
  EXPECT_NEAR(ms["ZeRO-1"] / ms["DDP"], 1.0, 0.25);
}

// Each strategy's costed calls (hoccl-paro --json "calls") are its table's
// rows, per step, and add up to its phases' times.
TEST(ParoAdvisor, CostedCallsAddUpToThePhases) {
  Advisor adv(Machine::rectangular(4, 2, 2, fastNodesSlowNetwork()), {}, "");
  ModelSize model;
  model.params = model.trainable = 1e8;
  model.accum = 4;
  model.units = 8;
  for (const Costed& c : adv.evaluate(model, 0)) {
    const std::vector<Call> table = strategyCalls(c.strategy, model, 4, 2);
    ASSERT_EQ(c.calls.size(), table.size()) << c.strategy.name;
    double micro = 0, boundary = 0, step = 0;
    for (size_t i = 0; i < table.size(); ++i) {
      const CallCost& k = c.calls[i];
      EXPECT_EQ(k.call.group, table[i].group) << c.strategy.name;
      EXPECT_EQ(k.perStep, table[i].calls * 8 * (table[i].phase == Phase::Micro ? 4 : 1)) << c.strategy.name;
      EXPECT_DOUBLE_EQ(k.elems, table[i].elems / 8) << c.strategy.name;
      EXPECT_GT(k.us, 0) << c.strategy.name;
      (k.call.phase == Phase::Micro ? micro : k.call.phase == Phase::Boundary ? boundary : step) += k.us * k.perStep;
    }
    EXPECT_NEAR(micro, c.microUs, 1e-6 * c.microUs + 1e-9) << c.strategy.name;
    EXPECT_NEAR(boundary, c.boundaryUs, 1e-6 * c.boundaryUs + 1e-9) << c.strategy.name;
    EXPECT_NEAR(step, c.stepUs, 1e-6 * c.stepUs + 1e-9) << c.strategy.name;
  }
}

// A reduced byte's node memory (reduce_mem_ratio) prices intra-node
// reduce-scatters, not all-gathers: with node memory the bottleneck, the
// ratio scales the one and leaves the other.
TEST(ParoAdvisor, ReduceMemRatioPricesReductionsOnly) {
  LinkModel l = fastNodesSlowNetwork();
  l.nodeMemGbps = 5;
  auto intra = [&](double ratio, CollKind coll) {
    l.reduceMemRatio = ratio;
    Advisor adv(Machine::rectangular(2, 4, 1, l), {}, "");
    return adv.callUs(Group::Intra, coll, 64 << 20);
  };
  EXPECT_DOUBLE_EQ(intra(1, CollKind::AllGather), intra(1.5, CollKind::AllGather));
  EXPECT_NEAR(intra(1.5, CollKind::ReduceScatter) / intra(1, CollKind::ReduceScatter), 1.5, 0.1);
  EXPECT_NEAR(intra(1, CollKind::ReduceScatter) / intra(1, CollKind::AllGather), 1.0, 0.1);
}

TEST(ParoAdvisor, RecommendsTheFastestThatFits) {
  Advisor adv(Machine::rectangular(4, 8, 1, fastNodesSlowNetwork()), {}, "");
  ModelSize model;
  model.params = model.trainable = 1e9;
  model.accum = 8;
  std::vector<Costed> rows = adv.evaluate(model, 0);
  const int free = recommend(rows);
  ASSERT_GE(free, 0);
  for (const Costed& c : rows) EXPECT_LE(rows[free].totalUs(), c.totalUs()) << c.strategy.name;
  // Room for ZeRO-3's state (16/32 B per parameter: 0.5 GB) and not for the
  // next smallest (IIG: 4/8 + 12/32 = 0.875 GB).
  rows = adv.evaluate(model, 0.6e9);
  const int tight = recommend(rows);
  ASSERT_GE(tight, 0);
  EXPECT_STREQ(rows[tight].strategy.name, "ZeRO-3");
  for (const Costed& c : rows) EXPECT_EQ(c.fits, std::string(c.strategy.name) == "ZeRO-3") << c.strategy.name;
  EXPECT_EQ(recommend(adv.evaluate(model, 0.1e9)), -1);
}

// The optimizer update: each strategy is charged for its share of the
// state (DDP all of it, ZeRO-1 1/(n m), MiCS and NII 1/m), and where the
// update is dear a strategy that shards the state over every rank wins
// over those whose communication alone is the least here (DDP and NII tie
// on a fast network with one micro-step; NII holds less).
TEST(ParoAdvisor, TheOptimizerUpdateIsChargedForTheStateShare) {
  LinkModel fast;
  fast.net = LinkParams{5.0, 400.0};
  Advisor adv(Machine::rectangular(2, 4, 1, fast), {}, "");
  ModelSize model;
  model.params = model.trainable = 1e8;
  std::map<std::string, Costed> by;
  for (const Costed& c : adv.evaluate(model, 0)) by[c.strategy.name] = c;
  EXPECT_EQ(by["DDP"].optimizerUs, 0.0) << "not costed by default";
  const std::vector<Costed> free = adv.evaluate(model, 0);
  const Costed freeBest = free[size_t(recommend(free))];
  EXPECT_NE(freeBest.strategy.os, Level::G) << freeBest.strategy.name << ": the case is meant to flip the pick";
  model.optimizerNs = 2.0;
  const std::vector<Costed> rows = adv.evaluate(model, 0);
  for (const Costed& c : rows) by[c.strategy.name] = c;
  EXPECT_DOUBLE_EQ(by["DDP"].optimizerUs, 2.0 * 1e8 / 1e3);
  EXPECT_DOUBLE_EQ(by["ZeRO-1"].optimizerUs, 2.0 * 1e8 / 8 / 1e3);
  EXPECT_DOUBLE_EQ(by["MiCS"].optimizerUs, 2.0 * 1e8 / 4 / 1e3);
  EXPECT_DOUBLE_EQ(by["NII"].optimizerUs, 2.0 * 1e8 / 4 / 1e3);
  EXPECT_DOUBLE_EQ(by["DDP"].totalUs(), by["DDP"].commUs() + by["DDP"].optimizerUs);
  const Costed& best = rows[size_t(recommend(rows))];
  EXPECT_EQ(best.strategy.os, Level::G) << best.strategy.name << " (without the optimizer: "
                                        << freeBest.strategy.name << ")";
}

TEST(ParoAdvisor, NodesOfDifferentSizesAreRefusedSayingSo) {
  Machine m = Machine::rectangular(2, 4, 1, LinkModel());
  m.nodeOf.pop_back();  // node 1 has 3 ranks
  Advisor adv(m, {}, "");
  std::string why;
  EXPECT_FALSE(adv.rectangular(&why));
  EXPECT_NE(why.find("same number of ranks"), std::string::npos) << why;
}

// --intra-allgather: the copy rates are scaled together until the
// advisor's own intra-node costing predicts the measured all-gather; a
// slower measurement gives lower rates, and a time the model cannot reach
// at any rate is said, not silently clamped.
TEST(ParoAdvisor, IntraRatesAreFittedToAMeasuredAllGather) {
  const Machine m = Machine::rectangular(4, 2, 2, LinkModel());
  const uint64_t bytes = 2461760;
  const double asGiven = Advisor(m, {}, "").callUs(Group::Intra, CollKind::AllGather, bytes) / 1e3;
  IntraFit slow, fast;
  std::string why;
  ASSERT_TRUE(fitIntraRates(m, {}, "", bytes, 3 * asGiven, &slow, &why)) << why;
  ASSERT_TRUE(fitIntraRates(m, {}, "", bytes, 1.5 * asGiven, &fast, &why)) << why;
  for (const IntraFit* f : {&slow, &fast}) {
    EXPECT_TRUE(f->warning.empty()) << f->warning;
    EXPECT_NEAR(f->shmGbps / f->nodeMemGbps, m.links.shm.gbps / m.links.nodeMemGbps, 1e-9);
    // The fitted machine's advisor predicts what was measured.
    Machine fitted = m;
    fitted.links.shm.gbps = f->shmGbps;
    fitted.links.nodeMemGbps = f->nodeMemGbps;
    EXPECT_NEAR(Advisor(fitted, {}, "").callUs(Group::Intra, CollKind::AllGather, bytes) / 1e3, f->predictedMs,
                1e-6);
  }
  EXPECT_NEAR(slow.predictedMs / (3 * asGiven), 1.0, 0.01);
  EXPECT_NEAR(fast.predictedMs / (1.5 * asGiven), 1.0, 0.01);
  EXPECT_LT(slow.scale, fast.scale);
  EXPECT_LT(fast.scale, 1.0);

  IntraFit bound;
  ASSERT_TRUE(fitIntraRates(m, {}, "", bytes, 1e-4, &bound, &why));
  EXPECT_NE(bound.warning.find("faster than the model predicts at any copy rate"), std::string::npos)
      << bound.warning;
  EXPECT_DOUBLE_EQ(bound.scale, kIntraFitMaxScale);
  ASSERT_TRUE(fitIntraRates(m, {}, "", bytes, 1e9, &bound, &why));
  EXPECT_NE(bound.warning.find("slower than the model predicts"), std::string::npos) << bound.warning;
  EXPECT_DOUBLE_EQ(bound.scale, kIntraFitMinScale);

  EXPECT_FALSE(fitIntraRates(Machine::rectangular(4, 1, 2, LinkModel()), {}, "", bytes, 5, &bound, &why));
  EXPECT_NE(why.find("more than one rank"), std::string::npos) << why;
  EXPECT_FALSE(fitIntraRates(m, {}, "", bytes, 0, &bound, &why));
}

// --engine: the schedule engine costs a call as the simulator does (the
// tuner's algorithm, channels and pipeline depth on the group's machine),
// auto takes it for groups of up to kScheduleMaxRanks ranks, and the fitted
// intra scale moves the intra group's calls only.
TEST(ParoAdvisor, TheScheduleEngineCostsCallsAsTheSimulatorDoes) {
  // The emulated 4:1 shape (docs/algorithms.md, shape (b)): results/scripts/emulated-tune.sh's
  // buckets and queues, 8 ranks on 2 cores.
  LinkModel l;
  l.net = {40.0, 1.0, 250.0, 875.0};
  l.spine = {60.0, 0.5, 131.072, 443.572};
  l.oversubscription = 4;
  l.reduceMemRatio = 1;
  const Machine m = Machine::rectangular(4, 2, 2, l);
  const uint64_t bytes = 2461760;
  Advisor sched(m, {}, "", Engine::Schedule), model(m, {}, "", Engine::Model), aut(m, {}, "", Engine::Auto);
  Tuner tuner(m, {}, "", nullptr, 0);
  for (CollKind coll : {CollKind::AllReduce, CollKind::AllGather, CollKind::ReduceScatter}) {
    const Choice c = tuner.choose(coll, bytes);
    const SimResult r = simulate(m, coll, c.algo, bytes, c.nchannels, c.pipelineChunks);
    ASSERT_TRUE(r.ok) << r.error;
    EXPECT_DOUBLE_EQ(sched.callUs(Group::World, coll, bytes), r.us);
    EXPECT_DOUBLE_EQ(aut.callUs(Group::World, coll, bytes), r.us);
    EXPECT_DOUBLE_EQ(model.callUs(Group::World, coll, bytes),
                     predict(m, coll, c.algo, bytes, c.nchannels, c.pipelineChunks).us);
  }
  // HO-Ring's all-reduce on this 4:1 shape: the closed form prices more
  // pipeline fill than the schedule has (results/20261128-paro-advisor-engine).
  EXPECT_LT(sched.callUs(Group::World, CollKind::AllReduce, bytes),
            model.callUs(Group::World, CollKind::AllReduce, bytes));

  Advisor slowNodes(m, {}, "", Engine::Schedule, 0.25);
  EXPECT_GT(slowNodes.callUs(Group::Intra, CollKind::AllGather, bytes),
            sched.callUs(Group::Intra, CollKind::AllGather, bytes));
  EXPECT_DOUBLE_EQ(slowNodes.callUs(Group::World, CollKind::AllGather, bytes),
                   sched.callUs(Group::World, CollKind::AllGather, bytes));
  EXPECT_DOUBLE_EQ(slowNodes.callUs(Group::Rail, CollKind::AllReduce, bytes),
                   sched.callUs(Group::Rail, CollKind::AllReduce, bytes));

  Engine e = Engine::Model;
  EXPECT_TRUE(parseEngine("schedule", &e));
  EXPECT_EQ(e, Engine::Schedule);
  EXPECT_FALSE(parseEngine("sim", &e));
}
