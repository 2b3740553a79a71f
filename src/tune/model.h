// The cost model: how long a collective takes on a machine, per algorithm.
//
// A machine is ranks on nodes under leaf switches, with three classes of
// link (topo::LinkClass): shared memory inside a node, a node's network
// link(s) under its leaf, and each leaf's uplink to the spine. Each class has
// a latency per message and a bandwidth per direction. A link shared by
// several flows gives each its share: every step of a phase moves bytes over
// a set of concurrent edges, each edge loads the links on its path (the
// sender node's memory or NIC, the receiver's NIC, the leaves' uplinks), and
// the step lasts as long as the most loaded link needs, plus the latency of
// the slowest class it crosses.
//
// Algorithms are costed phase by phase from the same shapes their schedule
// builders emit (algorithms/): a ring phase over concurrent sub-rings, the
// leader phases of the hierarchical algorithm, HO-Ring's levels with their
// pipeline overlap, recursive doubling. The tuner (tuner.h) picks the
// cheapest; hoccl-sim prints the same numbers for clusters we do not have.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "algorithms/registry.h"
#include "algorithms/schedule.h"

#include "src/topo/topology.h"

namespace hoccl {
namespace tune {

struct LinkParams {
  double latencyUs = 0;   // per message, one way
  double gbps = 0;        // Gbit/s per direction; 0 = not a bottleneck
  // Bytes (in kB, 1000 B) a link that has been idle passes at once before
  // its rate applies: a token bucket's depth, as the tbf shapers of the
  // emulated cluster have (tests/cluster). Real switch ports have none: 0.
  double burstKB = 0;
  // Bytes (kB) the queue in front of the link holds: a switch port's
  // buffer, or the emulated cluster's tbf limit; 0 = unknown. A step that
  // puts more on the link at once than this overflows it (TCP loses
  // segments and may stall for a retransmission timeout), so the tuner
  // picks pipeline depths whose steps fit (Prediction::stepNodeInBytes,
  // stepUplinkBytes).
  double bufferKB = 0;
  double bytesPerUs() const { return gbps * 125.0; }  // 1 Gbit/s = 125 bytes/us
};

// What changes when the ranks' buffers are GPU memory and the call spans
// hosts (CUDA-NET design, §4): the device machine (deviceMachine) prices
// the same schedules with these in place of the host's copies. The
// defaults are assumptions for an H100 node, not measurements: NVLink 4
// (450 GB/s per direction), PCIe 5 x16 (about 50 GB/s), a proxy hand-over
// of a few microseconds at each end; a tune file's `set device_*` lines
// replace them.
struct DeviceLinks {
  LinkParams gpu{3.0, 3600.0};  // one GPU's links to its node's GPUs: a CTA's step latency, NVLink's rate
  double reduceGbps = 8000.0;   // one rank's reduction rate in HBM
  double memGbps = 24000.0;     // one GPU's HBM (each GPU has its own: per rank, not per node)
  // Per message crossing hosts, both proxies together: the kernel's
  // system-scope store and the proxy's poll at the sender, completion,
  // `tail` store and the kernel's poll at the receiver.
  double proxyUs = 8.0;
  // The GPU's PCIe link, which every byte to or from the network crosses
  // (the kernel writing host slots, or the NIC reading GPU memory).
  double pcieGbps = 400.0;
  // The copy path (HOCCL_NET_DEVICE_PATH=copy on any rank): per message,
  // both ends together, the copy engine's launches and the store-and-forward
  // of a slot through host frames at each end, which the host path's
  // in-place slots avoid.
  bool copyPath = false;
  double copyUs = 12.0;
  // The slot window of one connection (kDevSlots slots of deviceSlotBytes,
  // transport/device_conn_mem.h): at most this many bytes are in flight
  // between two ranks, so a connection moves at most windowKB per round
  // trip (2 x the net latency + proxyUs), a bound that binds on fast, far
  // links (Little's law: rate = window / round trip).
  double windowKB = 4096.0;
};

// Link parameters per class; defaults describe this project's test machines
// (memory copies at a few GB/s, TCP over 1 Gbit/s), calibrated from the
// topology where it knows link speeds, overridable from a tune file.
struct LinkModel {
  DeviceLinks device;            // for calls on device buffers across hosts (deviceMachine)
  LinkParams shm{3.0, 40.0};     // one rank's copy path inside a node
  double nodeMemGbps = 80.0;     // all copies of one node together (memory bandwidth)
  // Node memory a reduced byte takes, per copied byte: 1.5 where memory
  // bandwidth binds (a reduction reads two operands and writes one, a copy
  // reads one and writes one); 1 where nodeMemGbps stands for shared cores
  // rather than DRAM, as on the emulated cluster, whose ranks measured a
  // reduce-scatter as fast as an all-gather of the same size
  // (results/20261127-paro-5).
  double reduceMemRatio = 1.5;
  LinkParams net{40.0, 1.0};     // one network link of a node (each direction)
  LinkParams spine{60.0, 0.0};   // one leaf's uplink (each direction); 0: as fast as its nodes' links together
  double flowGbps = 0.0;         // most one connection (channel) carries; 0: no cap
  double reduceGbps = 40.0;      // local reduction rate of one rank (reads two, writes one)
  // The ranks of a node are threads of one process: a receiver reads the
  // sender's buffer, so no sender copies a message into a slot first. Ranks
  // in separate processes do, and where one rank sends several messages of
  // one reduction (oneshot) those copies are passes of their own
  // (algorithms/cost.h, CostPhase::staged). Set by the communicator from
  // its ranks' processes.
  bool shmByReference = false;
  // Ranks per core on the busiest machine: when ranks outnumber cores a
  // step also waits for the scheduler to run the peer, so every latency is
  // multiplied by this (>= 1). Measured on the emulated cluster (8 ranks,
  // 2 cores): a 64 KiB ring all-reduce step took ~210 us where 1 Gbit/s
  // and 40 us predict ~105.
  double oversubscription = 1.0;
  // CPU time (us) a rank spends per message it sends or receives, beyond
  // moving the bytes: system calls, wake-ups, the executor's bookkeeping;
  // a network message costs netMsgCpuUs more (the TCP stack, both ends).
  // It counts when ranks outnumber cores: the ranks of a node then share
  // ranks/oversubscription cores, and a step of many small messages is
  // bound by the CPU, not the links (one rank per core: the latencies
  // cover it). Fitted on the emulated cluster, 8 ranks on 2 cores
  // (docs/algorithms.md, "Small messages on shared cores").
  double msgCpuUs = 10.0;
  double netMsgCpuUs = 30.0;
  // msgCpuUs where every rank is on one node: no network progress threads
  // compete for the cores, and a waiting rank spins through a step of small
  // messages instead of sleeping, so a message costs a fraction of that.
  // Fitted on 3 and 4 ranks on 2 cores: with it the model orders oneshot,
  // doubling and the ring by size as they measured (results/20261126-oneshot-one-node).
  double localMsgCpuUs = 1.0;
  // The charge for one message on a machine of `nodes` nodes.
  double messageCpuUs(int nodes, bool acrossNodes) const {
    return (nodes == 1 ? localMsgCpuUs : msgCpuUs) + (acrossNodes ? netMsgCpuUs : 0);
  }
  double latency(const LinkParams& p) const { return p.latencyUs * (oversubscription > 1 ? oversubscription : 1); }
};


// Ranks on nodes under leaf switches. Nodes and leaves are numbered densely.
struct Machine {
  std::vector<int> nodeOf;     // per rank
  std::vector<int> leafOf;     // per node
  std::vector<int> nicsOf;     // per node: network links (rails); empty = 1 each
  LinkModel links;
  // What the machine's description left unknown (fromSystem): the node
  // links' rate is only the interfaces' nominal speed (no topology file or
  // probe gave one), and the leaves' uplinks have no rate at all. The tuner
  // then picks what is good over the range those could be (Tuner).
  bool netRateNominal = false;
  bool uplinkRateUnknown = false;

  int nranks() const { return static_cast<int>(nodeOf.size()); }
  int nnodes() const { return static_cast<int>(leafOf.size()); }
  int nleaves() const;
  int nics(int node) const { return nicsOf.empty() ? 1 : nicsOf[node]; }
  topo::LinkClass linkClass(int a, int b) const;
  // The grouping the hierarchical builders read (node of each rank, leaf of
  // each node).
  Grouping grouping() const;

  // `nodes` nodes of `ranksPerNode` ranks, ranks numbered node by node,
  // node i under leaf i*leaves/nodes.
  static Machine rectangular(int nodes, int ranksPerNode, int leaves, const LinkModel& links);
  // A communicator's system; link speeds known to the topology (NIC speed,
  // switch link and uplink rates) replace the defaults in `base`.
  static Machine fromSystem(const topo::System& sys, const LinkModel& base);
};

// A set of rings that run at the same time: every ring moves `bytes` per
// step, for `steps` steps, over `channels` channels (each carrying 1/channels
// of the bytes on its own connection). Returns microseconds.
struct RingSet {
  std::vector<std::vector<int>> rings;  // member ranks in ring order
  double bytes = 0;                     // per step per ring
  int steps = 0;
  bool reduce = false;                  // steps combine what they receive
};
double ringSetUs(const Machine& m, const RingSet& set, int channels);

// The machine a call on device buffers across hosts runs on: inside a node
// the GPUs' links (DeviceLinks::gpu) instead of shared memory, reductions
// and copies at HBM rates, one rank per GPU (no shared cores); between
// nodes the same network, each message also paying the proxies
// (DeviceLinks::proxyUs, and copyUs on the copy path) and its rate capped
// by the GPU's PCIe link and by the slot window over the round trip.
Machine deviceMachine(const Machine& m);

// A set of point-to-point messages sent at the same time (one step of a
// star, a tree or a recursive-doubling exchange). Returns microseconds.
struct Transfer {
  int from = 0, to = 0;
};
double exchangeUs(const Machine& m, const std::vector<Transfer>& msgs, double bytes, bool reduce, int channels);

// Predicted time of one call in microseconds; `bytes` is the NCCL "size" of
// the call (all-reduce: the buffer; reduce-scatter: recvcount*P*elem;
// all-gather: sendcount*P*elem), as nccl-tests' "size" column.
// pipelineChunks applies to horing (0: the builder's default policy).
struct Prediction {
  double us = 0;
  const char* shape = "";  // what was costed, e.g. "horing 3 levels"
  double netUs = 0;        // of which the busiest network link's bandwidth time
  // The most bytes one step (one pipeline chunk's step) puts on one
  // forwarded link at once: into a node, and through a leaf's uplink.
  double stepNodeInBytes = 0, stepUplinkBytes = 0;
  // `us` before the token buckets' credit: the same, or more where a
  // bucket's burst saves time. The credit rests on a measured bucket depth
  // (a probe's is good to 10-20%), so near-ties are broken on this.
  double usWithoutBursts = 0;
};
Prediction predict(const Machine& m, CollKind coll, AlgoId algo, uint64_t bytes, int nchannels,
                   int pipelineChunks = 0);

// nccl-tests' bus bandwidth factor for a collective over P ranks.
double busBwFactor(CollKind coll, int nranks);

}  // namespace tune
}  // namespace hoccl
