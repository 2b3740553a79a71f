#include "tests/plugin/nccl_table.h"

#include <algorithm>
#include <cmath>

namespace pluginharness {
namespace {

const double kBase[NCCL_NUM_ALGORITHMS][NCCL_NUM_PROTOCOLS] = {
    {6.8, 14.0, 8.4}, {6.6, 14.0, 8.4}, {0, 0, 0}, {0, 0, 0}, {0, 0, 0}, {0, 0, 0}, {6.6, 14.0, 8.4}};
const double kNvlink[NCCL_NUM_ALGORITHMS][NCCL_NUM_PROTOCOLS] = {
    {0.6, 1.25, 4}, {0.6, 1.9, 3.4}, {0, 0, 3.7}, {0, 0, 2.8}, {0, 0, 25}, {0, 0, 25}, {0.6, 1.9, 3.4}};
const double kNet[NCCL_NUM_ALGORITHMS][NCCL_NUM_PROTOCOLS] = {
    {5.0, 8.5, 14}, {2.7, 4.0, 14.0}, {0, 0, 31}, {0, 0, 30}, {0, 0, 18}, {0, 0, 20.9}, {2.7, 4.0, 14.0}};

int log2ceil(int n) {
  int k = 0;
  while ((1 << k) < n) ++k;
  return k;
}

}  // namespace

ncclTunerConstants_v5_t defaultConstants() {
  ncclTunerConstants_v5_t c{};
  for (int a = 0; a < NCCL_NUM_ALGORITHMS; ++a)
    for (int p = 0; p < NCCL_NUM_PROTOCOLS; ++p) {
      c.baseLatencies[a][p] = kBase[a][p];
      c.hwLatencies[NCCL_HW_NVLINK][a][p] = kNvlink[a][p];
      c.hwLatencies[NCCL_HW_PCI][a][p] = kNvlink[a][p];
      c.hwLatencies[NCCL_HW_NET][a][p] = kNet[a][p];
    }
  for (int cc = 0; cc < NCCL_NUM_COMPCAPS; ++cc)
    for (int s = 0; s < NCCL_NUM_TUNING_SCALES; ++s) {
      c.llMaxBws[cc][s] = 40;
      c.perChMaxRingLL128Bws[cc][s] = 20;
      c.perChMaxTreeLL128Bws[cc][s] = 20;
      c.perChMaxTreeBws[cc][s] = 25;
      c.perChMaxNVLSTreeBws[cc][s] = 25;
    }
  return c;
}

CostTable fillLikeNccl(int coll, size_t nBytes, int nRanks, int nNodes, const TableScenario& s) {
  CostTable t;
  for (auto& row : t.cost)
    for (float& c : row) c = NCCL_ALGO_PROTO_IGNORE;
  if (nRanks <= 1) {
    t.cost[NCCL_ALGO_RING][NCCL_PROTO_SIMPLE] = 0.0f;
    return t;
  }
  const int ppn = std::max(1, nRanks / std::max(nNodes, 1));
  const bool multiNode = nNodes > 1;
  // Bus bandwidth in GB/s: the NIC across nodes, NVLink inside one.
  const double busBw = multiNode ? s.nicGBps : 300;
  const double P = nRanks;
  double busFactor = 1;
  if (coll == ncclFuncAllReduce) busFactor = 2 * (P - 1) / P;
  else if (coll == ncclFuncAllGather || coll == ncclFuncReduceScatter) busFactor = (P - 1) / P;

  auto set = [&](int a, int p) {
    if (s.noLL128 && p == NCCL_PROTO_LL128) return;
    if (s.ringOnly && a != NCCL_ALGO_RING) return;
    double bw = busBw;
    if (p == NCCL_PROTO_LL) bw *= multiNode ? 1.0 / 4.0 : 1.0 / 3.0;
    if (p == NCCL_PROTO_LL128) bw *= ppn < 2 ? 0.7 : 0.92;
    if (a == NCCL_ALGO_TREE) bw *= 0.92;
    if (a == NCCL_ALGO_PAT) bw *= 0.75;
    if (a == NCCL_ALGO_NVLS) bw *= 1.6;
    double intra = kNvlink[a][p], inter = kNet[a][p];
    double lat = kBase[a][p];
    if (a == NCCL_ALGO_RING) {
      double steps = coll == ncclFuncAllReduce ? 2 : 1;
      lat += steps * ((nRanks - nNodes) * intra + (nNodes - 1) * inter);
    } else if (a == NCCL_ALGO_TREE) {
      lat += 2 * ((ppn - 1) * intra + log2ceil(nNodes) * inter);
    } else if (a == NCCL_ALGO_PAT) {
      lat += log2ceil(nRanks) * inter;
    } else {
      lat += inter + intra;
    }
    double us = lat + static_cast<double>(nBytes) * busFactor / (1000.0 * bw);
    t.cost[a][p] = static_cast<float>(us);
  };

  switch (coll) {
    case ncclFuncBroadcast:
    case ncclFuncReduce:
      for (int p = 0; p < NCCL_NUM_PROTOCOLS; ++p) set(NCCL_ALGO_RING, p);
      break;
    case ncclFuncAllGather:
    case ncclFuncReduceScatter:
      for (int p = 0; p < NCCL_NUM_PROTOCOLS; ++p) set(NCCL_ALGO_RING, p);
      if (multiNode && ppn == 1) set(NCCL_ALGO_PAT, NCCL_PROTO_SIMPLE);  // PAT: one GPU per node, Simple
      break;
    case ncclFuncAllReduce:
      for (int p = 0; p < NCCL_NUM_PROTOCOLS; ++p) {
        set(NCCL_ALGO_RING, p);
        set(NCCL_ALGO_TREE, p);
      }
      if (s.nvls) set(NCCL_ALGO_NVLS, NCCL_PROTO_SIMPLE);
      break;
    default:
      t.cost[NCCL_ALGO_RING][NCCL_PROTO_SIMPLE] = 1.0f;
      break;
  }
  return t;
}

bool pickLikeNccl(const CostTable& t, int* algo, int* proto) {
  bool found = false;
  float best = 0;
  for (int a = 0; a < NCCL_NUM_ALGORITHMS; ++a)
    for (int p = 0; p < NCCL_NUM_PROTOCOLS; ++p) {
      float c = t.cost[a][p];
      if (c < 0) continue;
      if (!found || c < best) {
        found = true;
        best = c;
        *algo = a;
        *proto = p;
      }
    }
  return found;
}

const char* algoLabel(int a) {
  static const char* n[] = {"TREE", "RING", "COLLNET_DIRECT", "COLLNET_CHAIN", "NVLS", "NVLS_TREE", "PAT"};
  return a >= 0 && a < NCCL_NUM_ALGORITHMS ? n[a] : "?";
}

const char* protoLabel(int p) {
  static const char* n[] = {"LL", "LL128", "SIMPLE"};
  return p >= 0 && p < NCCL_NUM_PROTOCOLS ? n[p] : "?";
}

}  // namespace pluginharness
