// The fake libcuda's virtual memory management (fake_cuda.h), honest across
// fork()ed processes: an allocation (cuMemCreate) is a memfd, exporting it
// as a POSIX fd gives a dup of that fd, and mapping it (cuMemAddressReserve,
// cuMemMap, cuMemSetAccess) mmaps it MAP_SHARED, so two processes that map
// the same allocation see the same "device memory".
//
// Fabric handles (setFabric) are off by default, as on a GPU without them
// (CUDA_ERROR_NOT_SUPPORTED); NotPermitted is a GPU that has them but no
// IMEX channel (what an H100 without IMEX says); Works names the memfd by
// the exporter's pid and fd, and an importer maps it through /proc.
//
// It refuses what the driver refuses: handle types other than POSIX fds
// and fabric handles, sizes that are not multiples
// of the granularity (2 MiB, as on current GPUs), exporting a handle type
// not requested at creation, maps outside a reserved range or over another
// map, unmaps and frees of ranges that are not exactly what was mapped or
// reserved. Memory mapped but not yet given access stays inaccessible
// (PROT_NONE), as on a GPU.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>

namespace hoccl::fakecuda::vmm {

inline constexpr size_t kGranularity = size_t(2) << 20;

enum class Fabric { Unsupported, NotPermitted, Works };
void setFabric(Fabric f);  // before fork(): children inherit it
void setDevices(int n);    // memory may be placed on GPUs 0..n-1 (FakeCuda::setDevices; 1 after reset)
// cuMemImportFromShareableHandle(POSIX fd) says CUDA_ERROR_NOT_SUPPORTED (a
// driver that cannot map another GPU's memory for this one); off after reset.
void refuseImports(bool on);
Fabric fabric();
int fabricExports();  // fabric handles this process exported so far

// Name -> entry point, merged into the fake's cuGetProcAddress table.
const std::map<std::string, void*>& entryPoints();
// True if p lies in a mapped range (cuPointerGetAttribute calls it device memory).
bool mapped(uintptr_t p);
// Live handles plus reserved ranges (a leak check: 0 once all is released).
int live();
// Unmaps, frees and closes everything (the fake's destructor).
void reset();

}  // namespace hoccl::fakecuda::vmm
