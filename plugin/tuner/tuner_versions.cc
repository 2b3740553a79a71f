// One adapter per NCCL tuner ABI version over tuner_plugin.h, and the
// exported ncclTunerPlugin_v3 ... v6 constants NCCL looks up (newest first).
#include "plugin/tuner/tuner_plugin.h"

#define HOCCL_EXPORT extern "C" __attribute__((visibility("default")))

namespace hoccl {
namespace ncclplugin {
namespace {

constexpr const char* kTunerName = "hoccl";

// v3/v4: no context argument first, no constants, no NVLink domains.
ncclResult_t init3(size_t nRanks, size_t nNodes, ncclDebugLogger_t log, void** ctx) {
  return tunerInit(ctx, 0, nRanks, nNodes, log, nullptr, nullptr, "v3");
}
ncclResult_t init4(size_t nRanks, size_t nNodes, ncclDebugLogger_t log, void** ctx) {
  return tunerInit(ctx, 0, nRanks, nNodes, log, nullptr, nullptr, "v4");
}
ncclResult_t init5(void** ctx, uint64_t commId, size_t nRanks, size_t nNodes, ncclDebugLogger_t log,
                   ncclNvlDomainInfo_v5_t* nvl, ncclTunerConstants_v5_t* constants) {
  return tunerInit(ctx, commId, nRanks, nNodes, log, nvl, constants, "v5");
}
ncclResult_t init6(void** ctx, uint64_t commId, size_t nRanks, size_t nNodes, ncclDebugLogger_t log,
                   ncclNvlDomainInfo_v5_t* nvl, ncclTunerConstants_v5_t* constants) {
  return tunerInit(ctx, commId, nRanks, nNodes, log, nvl, constants, "v6");
}

// v3 has no regBuff: registration is unknown, treated as none.
ncclResult_t getCollInfo3(void* ctx, ncclFunc_t coll, size_t nBytes, int numPipeOps, float** table, int numAlgo,
                          int numProto, int* nChannels) {
  return tunerGetCollInfo(ctx, coll, nBytes, numPipeOps, table, numAlgo, numProto, 0, nChannels);
}

}  // namespace
}  // namespace ncclplugin
}  // namespace hoccl

using namespace hoccl::ncclplugin;

HOCCL_EXPORT const ncclTuner_v3_t ncclTunerPlugin_v3 = {
    .name = kTunerName,
    .init = init3,
    .getCollInfo = getCollInfo3,
    .destroy = tunerFinalize,
};

HOCCL_EXPORT const ncclTuner_v4_t ncclTunerPlugin_v4 = {
    .name = kTunerName,
    .init = init4,
    .getCollInfo = tunerGetCollInfo,
    .destroy = tunerFinalize,
};

HOCCL_EXPORT const ncclTuner_v5_t ncclTunerPlugin_v5 = {
    .name = kTunerName,
    .init = init5,
    .getCollInfo = tunerGetCollInfo,
    .finalize = tunerFinalize,
};

// getChunkSize stays NULL: nothing here models NCCL's chunking, and NULL
// keeps NCCL's own choice.
HOCCL_EXPORT const ncclTuner_v6_t ncclTunerPlugin_v6 = {
    .name = kTunerName,
    .init = init6,
    .getCollInfo = tunerGetCollInfo,
    .finalize = tunerFinalize,
    .getChunkSize = nullptr,
};
