// NCCL's tuner plugin ABI, versions 3 to 6 (see common.h for what these
// declarations are). One exported constant per version:
//   const ncclTuner_vN_t ncclTunerPlugin_vN;
#pragma once

#include "hoccl_nccl/common.h"

#ifdef __cplusplus
extern "C" {
#endif

#define NCCL_NUM_ALGORITHMS 7
#define NCCL_ALGO_UNDEF -1
#define NCCL_ALGO_TREE 0
#define NCCL_ALGO_RING 1
#define NCCL_ALGO_COLLNET_DIRECT 2
#define NCCL_ALGO_COLLNET_CHAIN 3
#define NCCL_ALGO_NVLS 4
#define NCCL_ALGO_NVLS_TREE 5
#define NCCL_ALGO_PAT 6

#define NCCL_NUM_PROTOCOLS 3
#define NCCL_PROTO_UNDEF -1
#define NCCL_PROTO_LL 0
#define NCCL_PROTO_LL128 1
#define NCCL_PROTO_SIMPLE 2

// A cost-table entry NCCL does not offer (unsupported, or excluded by
// NCCL_ALGO / NCCL_PROTO). A tuner must leave it as it is.
#define NCCL_ALGO_PROTO_IGNORE -1.0f

#define NCCL_HW_NVLINK 0
#define NCCL_HW_PCI 1
#define NCCL_HW_NET 2
#define NCCL_NUM_HW_LINKS 3

#define NCCL_VOLTA_COMPCAP_IDX 0
#define NCCL_AMPERE_COMPCAP_IDX 1
#define NCCL_HOPPER_COMPCAP_IDX 2
#define NCCL_BLACKWELL_COMPCAP_IDX 3
#define NCCL_NUM_COMPCAPS 4

#define NCCL_TUNING_SCALE_1NODE 0
#define NCCL_TUNING_SCALE_2NODES 1
#define NCCL_TUNING_SCALE_4NODES 2
#define NCCL_NUM_TUNING_SCALES 3

typedef struct {
  int nNvlDomains;
  int minRanksPerNvlDomain;
  int maxRanksPerNvlDomain;
} ncclNvlDomainInfo_v5_t;  // also v6

// NCCL's own model constants, passed to init (v5+) so a tuner may edit them
// before NCCL builds its tables. Latencies in us, bandwidths in GB/s.
typedef struct {
  double baseLatencies[NCCL_NUM_ALGORITHMS][NCCL_NUM_PROTOCOLS];
  double hwLatencies[NCCL_NUM_HW_LINKS][NCCL_NUM_ALGORITHMS][NCCL_NUM_PROTOCOLS];
  double llMaxBws[NCCL_NUM_COMPCAPS][NCCL_NUM_TUNING_SCALES];
  double perChMaxRingLL128Bws[NCCL_NUM_COMPCAPS][NCCL_NUM_TUNING_SCALES];
  double perChMaxTreeLL128Bws[NCCL_NUM_COMPCAPS][NCCL_NUM_TUNING_SCALES];
  double perChMaxTreeBws[NCCL_NUM_COMPCAPS][NCCL_NUM_TUNING_SCALES];
  double perChMaxNVLSTreeBws[NCCL_NUM_COMPCAPS][NCCL_NUM_TUNING_SCALES];  // since 2.28.3
} ncclTunerConstants_v5_t;  // also v6

// The cost table: NCCL passes float[NCCL_NUM_ALGORITHMS][NCCL_NUM_PROTOCOLS]
// cast to float**; cast it back, never index it as pointers.
typedef ncclResult_t (*ncclTunerGetCollInfo_v4_t)(void* context, ncclFunc_t collType, size_t nBytes, int numPipeOps,
                                                  float** collCostTable, int numAlgo, int numProto, int regBuff,
                                                  int* nChannels);

typedef struct {
  const char* name;
  ncclResult_t (*init)(size_t nRanks, size_t nNodes, ncclDebugLogger_t logFunction, void** context);
  ncclResult_t (*getCollInfo)(void* context, ncclFunc_t collType, size_t nBytes, int numPipeOps, float** collCostTable,
                              int numAlgo, int numProto, int* nChannels);
  ncclResult_t (*destroy)(void* context);
} ncclTuner_v3_t;

typedef struct {
  const char* name;
  ncclResult_t (*init)(size_t nRanks, size_t nNodes, ncclDebugLogger_t logFunction, void** context);
  ncclTunerGetCollInfo_v4_t getCollInfo;
  ncclResult_t (*destroy)(void* context);
} ncclTuner_v4_t;

typedef struct {
  const char* name;
  ncclResult_t (*init)(void** ctx, uint64_t commId, size_t nRanks, size_t nNodes, ncclDebugLogger_t logFunction,
                       ncclNvlDomainInfo_v5_t* nvlDomainInfo, ncclTunerConstants_v5_t* constants);
  ncclTunerGetCollInfo_v4_t getCollInfo;
  ncclResult_t (*finalize)(void* context);
} ncclTuner_v5_t;

typedef struct {
  const char* name;
  ncclResult_t (*init)(void** ctx, uint64_t commId, size_t nRanks, size_t nNodes, ncclDebugLogger_t logFunction,
                       ncclNvlDomainInfo_v5_t* nvlDomainInfo, ncclTunerConstants_v5_t* constants);
  ncclTunerGetCollInfo_v4_t getCollInfo;
  ncclResult_t (*finalize)(void* context);
  // Optional: may change the chunk size NCCL computed for the chosen
  // algorithm, protocol and channel count (NCCL clamps and rounds it).
  ncclResult_t (*getChunkSize)(void* context, ncclFunc_t collType, size_t nBytes, int algo, int proto, int nChannels,
                               size_t* chunkSize);
} ncclTuner_v6_t;

#ifdef __cplusplus
}
#endif

// The layouts above, checked against NCCL's numbers.
#define HOCCL_NCCL_TUNER_DECLARED 1
#include "hoccl_nccl/abi_check.h"
