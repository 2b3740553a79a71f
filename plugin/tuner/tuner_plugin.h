// The NCCL tuner plugin's one implementation; tuner_versions.cc adapts it to
// ABI versions 3 to 6.
//
// getCollInfo rescales NCCL's own estimates by how much the switch fabric
// slows each algorithm/protocol down (nccl_model.h), then applies the rule
// file; it never turns an IGNORE (-1) entry valid, leaves nChannels at
// NCCL's choice (0) unless a rule names a count, and always returns
// ncclSuccess (an error there would fail the user's collective).
#pragma once

#include <cstddef>
#include <cstdint>

#include "hoccl_nccl/tuner.h"

namespace hoccl {
namespace ncclplugin {

// `constants` is NCCL's (v5+) or nullptr.
ncclResult_t tunerInit(void** ctx, uint64_t commId, size_t nRanks, size_t nNodes, ncclDebugLogger_t log,
                       const ncclNvlDomainInfo_v5_t* nvl, const ncclTunerConstants_v5_t* constants, const char* abi);
ncclResult_t tunerGetCollInfo(void* ctx, ncclFunc_t coll, size_t nBytes, int numPipeOps, float** table, int numAlgo,
                              int numProto, int regBuff, int* nChannels);
ncclResult_t tunerFinalize(void* ctx);

}  // namespace ncclplugin
}  // namespace hoccl
