// hoccl's side of the comparison with NCCL's headers (abi_compare.h).
#include "hoccl_nccl/net.h"
#include "hoccl_nccl/tuner.h"
#include "tests/plugin/abi_compare.h"

namespace abicompare {

const Member kHoccl[] = {
#define NET_SIZE(v, N, O) {#N, "", 0, sizeof(O), 0},
#define NET_FIELD(v, N, O, f) ABI_FIELD_ROW(N, O, f)
#define TUNER_SIZE NET_SIZE
#define TUNER_FIELD NET_FIELD
#include "tests/plugin/abi_fields.def"
    {nullptr, nullptr, 0, 0, 0}};

}  // namespace abicompare
