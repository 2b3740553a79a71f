// The cost model against the schedule simulator, the model at scale and on
// busy machines, and the tuner where a topology file gives no link rates
// (split from test_tune.cc, which holds the tuner's choices and tune files).
#include <gtest/gtest.h>

#include <string>

#include "src/topo/topology.h"
#include "src/tune/sim.h"
#include "src/tune/tuner.h"
#include "tests/support/tune_helpers.h"

namespace hoccl {
namespace tune {
namespace {

using namespace tunetest;

// The closed form the tuner uses and the schedule simulator must tell the
// same story where both apply: within 15% for large messages, for every
// registered algorithm (so a new algorithm's cost plan is checked against
// its schedule).
TEST(Sim, AgreesWithTheModelOnTheIssueShapes) {
  const Machine shapes[] = {Machine::rectangular(2, 4, 1, gigabit()), Machine::rectangular(4, 2, 2, gigabit(0.5))};
  for (const Machine& m : shapes) {
    for (CollKind c : {CollKind::AllReduce, CollKind::ReduceScatter, CollKind::AllGather}) {
      for (const AlgoInfo& info : allAlgorithms()) {
        // oneshot_shm's schedule has no steps to simulate (and 64 MiB is
        // far past its slots).
        if (!info.supports(c) || info.sharedSlotsOnly) continue;
        const AlgoId a = info.id;
        const SimResult s = simulate(m, c, a, 64 * kMiB, 1, 0);
        ASSERT_TRUE(s.ok) << s.error;
        const double model = predict(m, c, a, 64 * kMiB, 1).us;
        EXPECT_NEAR(s.us / model, 1.0, 0.15)
            << collName(c) << " " << algorithmInfo(a).name << " on " << m.nnodes() << " nodes: sim " << s.us
            << " us, model " << model << " us";
      }
    }
  }
}

// Token-bucket links (the emulated cluster's tbf shapers) refill while idle
// and pass their burst at once: a call whose links idle part of the time
// (hierarchical's phases inside the node) gains up to the burst's time at
// the link rate; one that keeps them busy (the ring) almost nothing; large
// calls are unchanged. The model and the simulator agree on it.
TEST(Sim, TokenBucketLinksHelpCallsThatLeaveLinksIdle) {
  Machine plain = Machine::rectangular(2, 4, 1, gigabit());
  Machine shaped = plain;
  shaped.links.net.burstKB = 250;  // 2 ms at 1 Gbit/s
  const double headUs = 2000;
  for (CollKind c : {CollKind::AllReduce, CollKind::AllGather}) {
    for (AlgoId a : {AlgoId::Ring, AlgoId::Hierarchical}) {
      SCOPED_TRACE(std::string(collName(c)) + " " + algorithmInfo(a).name);
      const SimResult s0 = simulate(plain, c, a, kMiB, 1, 0), s1 = simulate(shaped, c, a, kMiB, 1, 0);
      ASSERT_TRUE(s0.ok && s1.ok);
      EXPECT_LE(s1.us, s0.us);
      EXPECT_GE(s1.us, s0.us - 2 * headUs);  // each direction's bucket once, refilled once at most
      const double m0 = predict(plain, c, a, kMiB, 1).us, m1 = predict(shaped, c, a, kMiB, 1).us;
      EXPECT_LE(m1, m0);
      EXPECT_GE(m1, m0 - headUs);
      const SimResult b0 = simulate(plain, c, a, 256 * kMiB, 1, 0), b1 = simulate(shaped, c, a, 256 * kMiB, 1, 0);
      EXPECT_NEAR(b1.us / b0.us, 1.0, 0.05);
    }
  }
  // Hierarchical all-gather idles the node links during its phase inside
  // the node, so its bucket refills; the ring's links never idle long.
  const double ringGain = simulate(plain, CollKind::AllGather, AlgoId::Ring, kMiB, 1, 0).us -
                          simulate(shaped, CollKind::AllGather, AlgoId::Ring, kMiB, 1, 0).us;
  const double hierGain = simulate(plain, CollKind::AllGather, AlgoId::Hierarchical, kMiB, 1, 0).us -
                          simulate(shaped, CollKind::AllGather, AlgoId::Hierarchical, kMiB, 1, 0).us;
  EXPECT_GT(hierGain, ringGain);
  EXPECT_GT(hierGain, 0.2 * headUs);
}

// Benchmarks time loops of calls, and a bucket refills during the idle
// tail of one call (hierarchical all-gather: the leaders' broadcast inside
// the node after the last network step) for the next. The simulator runs
// calls until that settles: a loop of 1 MiB hierarchical all-gathers is
// then as fast as the node link moves the leader's half (never faster);
// without a bucket the tail costs its full time on every call.
TEST(Sim, ALoopOfCallsGetsTheIdleTailBackFromTheBucket) {
  Machine plain = Machine::rectangular(2, 4, 1, gigabit());
  Machine shaped = plain;
  shaped.links.net.burstKB = 250;
  const double wireUs = kMiB / 2 / plain.links.net.bytesPerUs();  // the leader sends half the output
  const SimResult s = simulate(shaped, CollKind::AllGather, AlgoId::Hierarchical, kMiB, 1, 0);
  const SimResult s0 = simulate(plain, CollKind::AllGather, AlgoId::Hierarchical, kMiB, 1, 0);
  ASSERT_TRUE(s.ok && s0.ok);
  EXPECT_GE(s.us, wireUs * 0.999);
  EXPECT_LE(s.us, wireUs * 1.05);
  EXPECT_GT(s0.us, wireUs * 1.05);
}

TEST(Sim, EverySchedulesFinishesOnUnevenShapes) {
  Machine m = Machine::rectangular(3, 4, 1, gigabit());
  m.nodeOf = {0, 0, 0, 0, 1, 1, 2, 2, 2, 2, 2};  // 4 + 2 + 5 ranks
  for (CollKind c : {CollKind::AllReduce, CollKind::ReduceScatter, CollKind::AllGather}) {
    for (const AlgoInfo& a : allAlgorithms()) {
      if (a.sharedSlotsOnly) continue;  // no steps to simulate
      const SimResult s = simulate(m, c, a.id, 3 * kMiB + 44, 2, 0);
      EXPECT_TRUE(s.ok) << collName(c) << " " << a.name << ": " << s.error;
      EXPECT_GT(s.us, 0);
    }
  }
}

// The model answers for 16,384 ranks (2,048 nodes of 8 under 64 leaves,
// 4:1 oversubscribed) and keeps the switch level's advantage.
TEST(Model, ProjectsToSixteenThousandRanks) {
  LinkModel l;
  l.net.gbps = 400;
  l.spine.gbps = 400 * 32 / 4.0;
  const Machine m = Machine::rectangular(2048, 8, 64, l);
  EXPECT_EQ(m.nranks(), 16384);
  // A flat ring pays 2 x 16,383 latencies, HO-Ring a few hundred: the
  // latency advantage rules at 16 MiB; at 256 MiB (node memory the
  // bottleneck for both) HO-Ring still wins.
  for (uint64_t b : {16 * kMiB, 256 * kMiB}) {
    const double ring = predict(m, CollKind::AllReduce, AlgoId::Ring, b, 1).us;
    const double ho = predict(m, CollKind::AllReduce, AlgoId::HoRing, b, 1).us;
    EXPECT_GT(ring / ho, b == 16 * kMiB ? 2.0 : 1.05) << b;
  }
}

// A ring's step waits for its predecessor's, so a phase's latency is the
// slowest window of `steps` consecutive edges, each edge's once per lap:
// 2 nodes x 4 ranks have 2 network edges and 6 shared-memory ones per lap.
TEST(Model, RingLatencyFollowsTheRingsEdges) {
  LinkModel l = gigabit();
  l.shm.latencyUs = 3;
  l.net.latencyUs = 40;
  const Machine m = Machine::rectangular(2, 4, 1, l);
  const RingSet lap{{ranksInOrder(8)}, 0, 8, false};
  EXPECT_NEAR(ringSetUs(m, lap, 1), 2 * 40 + 6 * 3, 1e-6);
  const RingSet two{{ranksInOrder(8)}, 0, 16, false};
  EXPECT_NEAR(ringSetUs(m, two, 1), 2 * (2 * 40 + 6 * 3), 1e-6);
  // Fewer steps than edges: the window with the network edge in it.
  const RingSet three{{ranksInOrder(8)}, 0, 3, false};
  EXPECT_NEAR(ringSetUs(m, three, 1), 40 + 2 * 3, 1e-6);
  // One node: shared memory only.
  const Machine one = Machine::rectangular(1, 8, 1, l);
  EXPECT_NEAR(ringSetUs(one, lap, 1), 8 * 3, 1e-6);
}

// When ranks outnumber cores, every message costs CPU on the node's shared
// cores (msgCpuUs, netMsgCpuUs): a deep pipeline of small chunks pays it
// per chunk, so at 64 KiB HO-Ring's deepest pipeline costs more than one
// chunk; with a core per rank the same settings change nothing.
TEST(Model, MessagesCostCpuWhenRanksOutnumberCores) {
  LinkModel l = gigabit(0.5);
  l.oversubscription = 4;
  l.msgCpuUs = 10;
  l.netMsgCpuUs = 30;
  const Machine shared = Machine::rectangular(4, 2, 2, l);
  for (CollKind c : {CollKind::AllReduce, CollKind::ReduceScatter, CollKind::AllGather}) {
    const double k1 = predict(shared, c, AlgoId::HoRing, 64 * 1024, 1, 1).us;
    const double k32 = predict(shared, c, AlgoId::HoRing, 64 * 1024, 1, 32).us;
    EXPECT_GT(k32, 2 * k1) << collName(c);
    const SimResult s1 = simulate(shared, c, AlgoId::HoRing, 64 * 1024, 1, 1);
    const SimResult s32 = simulate(shared, c, AlgoId::HoRing, 64 * 1024, 1, 32);
    ASSERT_TRUE(s1.ok && s32.ok);
    EXPECT_GT(s32.us, 2 * s1.us) << collName(c);
  }
  // Doubling the CPU per message makes a small oversubscribed call slower
  // in both engines...
  Machine dear = shared;
  dear.links.msgCpuUs = 20;
  dear.links.netMsgCpuUs = 60;
  EXPECT_GT(us(dear, CollKind::AllReduce, AlgoId::Ring, 64 * 1024),
            us(shared, CollKind::AllReduce, AlgoId::Ring, 64 * 1024) * 1.2);
  EXPECT_GT(simulate(dear, CollKind::AllReduce, AlgoId::Ring, 64 * 1024, 1, 0).us,
            simulate(shared, CollKind::AllReduce, AlgoId::Ring, 64 * 1024, 1, 0).us * 1.2);
  // ...and nothing with a core per rank.
  Machine own = shared, ownDear = dear;
  own.links.oversubscription = ownDear.links.oversubscription = 1;
  EXPECT_DOUBLE_EQ(us(own, CollKind::AllReduce, AlgoId::Ring, 64 * 1024),
                   us(ownDear, CollKind::AllReduce, AlgoId::Ring, 64 * 1024));
  EXPECT_DOUBLE_EQ(simulate(own, CollKind::AllReduce, AlgoId::HoRing, 64 * 1024, 1, 4).us,
                   simulate(ownDear, CollKind::AllReduce, AlgoId::HoRing, 64 * 1024, 1, 4).us);
}

// On one node the charge is localMsgCpuUs, not msgCpuUs (fitted on the
// emulated cluster, where network threads share the cores): there it
// changes one-node predictions in both engines and leaves two-node ones
// alone, and with it the tuner picks oneshot for a tiny all-reduce of 4
// ranks on 2 cores, as measured (0.8-0.9x doubling's time).
TEST(Model, OneNodeMessagesCostTheLocalCharge) {
  LinkModel l = gigabit();
  l.oversubscription = 2;
  const Machine one = Machine::rectangular(1, 4, 1, l), two = Machine::rectangular(2, 2, 1, l);
  Machine oneDear = one, twoDear = two;
  oneDear.links.localMsgCpuUs = twoDear.links.localMsgCpuUs = 8;
  EXPECT_GT(us(oneDear, CollKind::AllReduce, AlgoId::OneShot, 8), us(one, CollKind::AllReduce, AlgoId::OneShot, 8) + 5);
  EXPECT_GT(simulate(oneDear, CollKind::AllReduce, AlgoId::Ring, 8, 1, 0).us,
            simulate(one, CollKind::AllReduce, AlgoId::Ring, 8, 1, 0).us + 5);
  EXPECT_DOUBLE_EQ(us(twoDear, CollKind::AllReduce, AlgoId::Ring, 4096), us(two, CollKind::AllReduce, AlgoId::Ring, 4096));
  EXPECT_DOUBLE_EQ(simulate(twoDear, CollKind::AllReduce, AlgoId::Ring, 4096, 1, 0).us,
                   simulate(two, CollKind::AllReduce, AlgoId::Ring, 4096, 1, 0).us);
  Tuner t(one, {}, "", nullptr, 0);
  EXPECT_EQ(t.choose(CollKind::AllReduce, 8).algo, AlgoId::OneShot);
  EXPECT_EQ(t.choose(CollKind::AllGather, 64).algo, AlgoId::OneShot);
  // At msgCpuUs, the charge fitted across nodes, doubling's fewer messages win.
  Machine asCluster = one;
  asCluster.links.localMsgCpuUs = asCluster.links.msgCpuUs;
  EXPECT_EQ(Tuner(asCluster, {}, "", nullptr, 0).choose(CollKind::AllReduce, 8).algo, AlgoId::Doubling);
}

// Ranks in separate processes copy what oneshot sends into slots, passes
// of their own before they reduce what arrives; a ring sends one message a
// step, and its later steps forward what they have just reduced. Measured
// on 3-8 processes on 2 cores (reduce_scatter_perf --algo ring,oneshot):
// oneshot took 1.0-1.7x the ring's time at 64 KiB-1 MiB, and as threads of
// one process, whose messages go by reference, 0.6-1.0x.
TEST(Model, SeparateProcessesStageWhatTheySend) {
  for (int P : {4, 8}) {
    LinkModel l;
    l.oversubscription = P / 2.0;
    const Machine procs = Machine::rectangular(1, P, 1, l);
    Machine threads = procs;
    threads.links.shmByReference = true;
    for (uint64_t b : {256 * kMiB / 1024, kMiB}) {
      const double ring = us(procs, CollKind::ReduceScatter, AlgoId::Ring, b);
      const double one = us(procs, CollKind::ReduceScatter, AlgoId::OneShot, b);
      EXPECT_GT(one, 1.2 * ring) << P << " ranks, " << b;
      EXPECT_EQ(Tuner(procs, {}, "", nullptr, 0).choose(CollKind::ReduceScatter, b).algo, AlgoId::Ring);
      // Nothing staged: the ring costs the same, oneshot less.
      EXPECT_DOUBLE_EQ(us(threads, CollKind::ReduceScatter, AlgoId::Ring, b), ring);
      EXPECT_LT(us(threads, CollKind::ReduceScatter, AlgoId::OneShot, b), one) << P << " ranks, " << b;
    }
  }
  // An all-gather stages nothing (buffers sent by reference, HOCCL_CMA), nor does a
  // 2-rank oneshot (one message a rank): the same either way.
  LinkModel l;
  l.oversubscription = 2;
  const Machine procs = Machine::rectangular(1, 4, 1, l);
  Machine threads = procs;
  threads.links.shmByReference = true;
  EXPECT_DOUBLE_EQ(us(procs, CollKind::AllGather, AlgoId::OneShot, kMiB),
                   us(threads, CollKind::AllGather, AlgoId::OneShot, kMiB));
  Machine two = Machine::rectangular(1, 2, 1, l), twoThreads = two;
  twoThreads.links.shmByReference = true;
  EXPECT_DOUBLE_EQ(us(two, CollKind::ReduceScatter, AlgoId::OneShot, kMiB),
                   us(twoThreads, CollKind::ReduceScatter, AlgoId::OneShot, kMiB));
}

// ----------------------------------------- unknown rates (a Slurm file)

// The emulated cluster as a communicator on it sees it with only a Slurm
// topology.conf (leaves and spine, no rates): each node's eth0 reports
// 10 Gbit/s (the 1 Gbit/s is a shaper behind it), and the ranks share 2
// cores (oversubscription = ranks / 2), in separate processes.
Machine slurmCluster(int nodes, int ranksPerNode, const std::string& conf) {
  topo::TopoOverrides o;
  EXPECT_TRUE(topo::parseSlurmTopology(conf, "topology.conf", &o).ok());
  topo::System sys;
  for (int i = 0; i < nodes; ++i) {
    topo::NodeInfo n;
    n.hostId = "n" + std::to_string(i);
    topo::NicInfo eth;
    eth.name = "eth0";
    eth.kind = "ethernet";
    eth.speedGbps = 10;
    n.nics.push_back(eth);
    sys.nodes.push_back(n);
    for (int l = 0; l < ranksPerNode; ++l) sys.ranks.push_back({i, l, 0});
  }
  EXPECT_TRUE(topo::applyOverrides(o, &sys).ok());
  Machine m = Machine::fromSystem(sys, LinkModel{});
  m.links.oversubscription = nodes * ranksPerNode / 2.0;
  return m;
}

// The pinned choice at 64 MiB on both shapes: HO-Ring, one channel,
// pipeline depth 32.
void expectHoRingInSmallSteps(const Choice& c) {
  EXPECT_EQ(c.algo, AlgoId::HoRing);
  EXPECT_EQ(c.nchannels, 1);
  EXPECT_EQ(c.pipelineChunks, 32);
}

// The two shapes of docs/algorithms.md, told only by a Slurm file: the
// tuner knows neither the node links' rate nor the uplinks', and must not
// pick what is best only at the interfaces' nominal 10 Gbit/s (there:
// hierarchical, and HO-Ring in one pipeline step of megabytes, 1.5x
// slower on the 4:1 shape than HO-Ring in small steps). These choices are
// pinned: a model change that moves them must say why (perf/guard.sh).
TEST(TunerUnknownRates, SlurmFileOnTheFourToOneShape) {
  const Machine m = slurmCluster(4, 2, "SwitchName=leaf0 Nodes=n[0-1]\nSwitchName=leaf1 Nodes=n[2-3]\n"
                                       "SwitchName=spine Switches=leaf0,leaf1\n");
  ASSERT_EQ(m.nleaves(), 2);
  EXPECT_TRUE(m.netRateNominal);
  EXPECT_TRUE(m.uplinkRateUnknown);
  const Tuner t(m, {}, "", nullptr, 0);
  EXPECT_EQ(t.scenarios().size(), 6u);
  expectHoRingInSmallSteps(t.choose(CollKind::AllReduce, 64 * kMiB));
  // Forced (HOCCL_ALGO=horing), the depth is the same.
  const Choice h = Tuner(m, {}, "", findAlgorithm("horing"), 0).choose(CollKind::AllReduce, 64 * kMiB);
  EXPECT_EQ(h.pipelineChunks, 32);
  // Tiny calls still go to the leaders' doubling.
  EXPECT_EQ(t.choose(CollKind::AllReduce, 8).algo, AlgoId::LeaderDoubling);
  // At the nominal rate alone (what the tuner costed before) it was
  // hierarchical: the scenarios are what moved it.
  const Tuner nominal(Machine::rectangular(4, 2, 2, m.links), {}, "", nullptr, 0);
  EXPECT_EQ(nominal.scenarios().size(), 1u);
  EXPECT_EQ(nominal.choose(CollKind::AllReduce, 64 * kMiB).algo, AlgoId::Hierarchical);
}

TEST(TunerUnknownRates, SlurmFileOnTwoNodesUnderOneSwitch) {
  const Machine m = slurmCluster(2, 2, "SwitchName=leaf0 Nodes=n[0-1]\n");
  EXPECT_TRUE(m.netRateNominal);
  EXPECT_FALSE(m.uplinkRateUnknown);
  const Tuner t(m, {}, "", nullptr, 0);
  EXPECT_EQ(t.scenarios().size(), 2u);
  expectHoRingInSmallSteps(t.choose(CollKind::AllReduce, 64 * kMiB));
  EXPECT_EQ(t.choose(CollKind::AllReduce, 8).algo, AlgoId::LeaderDoubling);
}

}  // namespace
}  // namespace tune
}  // namespace hoccl
