// NCCL's algorithms and protocols costed with hoccl's cost model
// (src/tune/model.h primitives: concurrent rings, concurrent messages, each
// over shared links).
//
//   ring       NCCL's rings: node after node, each node's GPUs in a chain.
//   tree       all-reduce over NCCL's double binary tree across nodes (two
//              trees, each carrying half the data, one mirrored) and a chain
//              inside each node; reduce up and broadcast down, pipelined.
//   PAT        all-gather / reduce-scatter (NCCL offers it at one rank per
//              node): log2(P) steps, step k exchanging 2^k blocks with the
//              rank 2^k away, so the far steps cross the spine all at once.
//   protocols  LL (8 bytes of data per 16 on the wire), LL128 (120 per 128)
//              and Simple (all of it), each with its own per-hop latency.
//
// NCCL's own table already knows the GPUs, NVLink and NCCL's kernels; what
// it does not know is the switch hierarchy: it sees every node behind its
// NIC at full speed. So the tuner scales NCCL's estimate by
//     model(real fabric) / model(same nodes under one non-blocking switch),
// the time the switches add, for the algorithm and protocol at hand.
// Algorithms modelled here: ring, tree, PAT; the others (NVLS, CollNet)
// depend on switch hardware we cannot see and keep NCCL's estimate.
#pragma once

#include <cstddef>

#include "hoccl_nccl/tuner.h"
#include "plugin/tuner/fabric.h"
#include "src/tune/model.h"

namespace hoccl {
namespace ncclplugin {

// Latencies per algorithm and protocol, NCCL's or (before v5, where NCCL
// passes none) values of the same order as NCCL 2.2x's defaults.
struct ProtoLatencies {
  double base[NCCL_NUM_ALGORITHMS][NCCL_NUM_PROTOCOLS];
  double nvlink[NCCL_NUM_ALGORITHMS][NCCL_NUM_PROTOCOLS];
  double net[NCCL_NUM_ALGORITHMS][NCCL_NUM_PROTOCOLS];
  static ProtoLatencies defaults();
  static ProtoLatencies fromNccl(const ncclTunerConstants_v5_t& c);
};

// Fraction of a link's bandwidth that carries data under each protocol.
double protocolEfficiency(int proto);

class NcclModel {
 public:
  NcclModel(int nRanks, int nNodes, const Fabric& fabric, const ProtoLatencies& lat);
  bool modelled(int coll, int algo) const;
  // Predicted microseconds of one call on the real fabric, or on the same
  // nodes under one non-blocking switch (what NCCL's own model assumes).
  double us(int coll, int algo, int proto, size_t nBytes, bool realFabric) const;
  // us(real) / us(flat): >= 1, how much the switches slow this choice down.
  double fabricFactor(int coll, int algo, int proto, size_t nBytes) const;

 private:
  tune::Machine machine(int algo, int proto, bool realFabric) const;
  double ringUs(const tune::Machine& m, int coll, double bytes) const;
  double treeUs(const tune::Machine& m, double bytes) const;
  double patUs(const tune::Machine& m, int coll, double bytes) const;

  int nRanks_, nNodes_;
  Fabric fabric_;
  ProtoLatencies lat_;
};

}  // namespace ncclplugin
}  // namespace hoccl
