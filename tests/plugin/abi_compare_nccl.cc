// NCCL's side of the comparison (abi_compare.h): compiled against NCCL's own
// plugin headers (its src/include: plugin/nccl_net.h, plugin/nccl_tuner.h,
// nccl_common.h, nccl_device/net_device.h) and nccl.h. CMake defines
// HOCCL_NCCL_HAS_NET_Vn / HOCCL_NCCL_HAS_TUNER_Vn for the versions whose
// headers it found; the others are left out of the table and reported.
#include <cstddef>
#include <cstdint>

#include "plugin/nccl_net.h"
#include "plugin/nccl_tuner.h"
#include "tests/plugin/abi_compare.h"

namespace abicompare {

// ROW_IF(HOCCL_NCCL_HAS_..., row): the row where that version was found.
#define ROW_IF(have, ...) ROW_IF_(have, __VA_ARGS__)
#define ROW_IF_(have, ...) ROW_IF_##have(__VA_ARGS__)
#define ROW_IF_1(...) __VA_ARGS__
#define ROW_IF_0(...)

#ifndef HOCCL_NCCL_HAS_NET_V8
#define HOCCL_NCCL_HAS_NET_V8 0
#endif
#ifndef HOCCL_NCCL_HAS_NET_V9
#define HOCCL_NCCL_HAS_NET_V9 0
#endif
#ifndef HOCCL_NCCL_HAS_NET_V10
#define HOCCL_NCCL_HAS_NET_V10 0
#endif
#ifndef HOCCL_NCCL_HAS_NET_V11
#define HOCCL_NCCL_HAS_NET_V11 0
#endif
#ifndef HOCCL_NCCL_HAS_NET_V12
#define HOCCL_NCCL_HAS_NET_V12 0
#endif
#ifndef HOCCL_NCCL_HAS_TUNER_V3
#define HOCCL_NCCL_HAS_TUNER_V3 0
#endif
#ifndef HOCCL_NCCL_HAS_TUNER_V4
#define HOCCL_NCCL_HAS_TUNER_V4 0
#endif
#ifndef HOCCL_NCCL_HAS_TUNER_V5
#define HOCCL_NCCL_HAS_TUNER_V5 0
#endif
#ifndef HOCCL_NCCL_HAS_TUNER_V6
#define HOCCL_NCCL_HAS_TUNER_V6 0
#endif

const Member kNccl[] = {
#define NET_SIZE(v, N, O) ROW_IF(HOCCL_NCCL_HAS_NET_V##v, ABI_SIZE_ROW(N))
#define NET_FIELD(v, N, O, f) ROW_IF(HOCCL_NCCL_HAS_NET_V##v, ABI_FIELD_ROW(N, N, f))
#define TUNER_SIZE(v, N, O) ROW_IF(HOCCL_NCCL_HAS_TUNER_V##v, ABI_SIZE_ROW(N))
#define TUNER_FIELD(v, N, O, f) ROW_IF(HOCCL_NCCL_HAS_TUNER_V##v, ABI_FIELD_ROW(N, N, f))
#include "tests/plugin/abi_fields.def"
    {nullptr, nullptr, 0, 0, 0}};

const char* const kNcclVersions = HOCCL_NCCL_HEADER_VERSIONS;

}  // namespace abicompare
