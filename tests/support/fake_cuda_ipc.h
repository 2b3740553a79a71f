// The fake libcuda's legacy IPC (fake_cuda.h), honest across fork()ed
// processes: the fake's cuMemAlloc places blocks of at least kSharedMin
// bytes in a memfd mapped MAP_SHARED; cuIpcGetMemHandle names such a block
// by the exporter's pid and that fd, and cuIpcOpenMemHandle in another
// process maps the same pages through /proc/<pid>/fd. It refuses what the
// driver refuses: a pointer that is not the start of an allocation, a
// handle from this same process, a handle it cannot read. Such a block is
// also what cuMemGetHandleForAddressRange exports as a "dma-buf": a new fd
// on its memfd (a CPU-mappable stand-in for a GPU's dma-buf).
#pragma once

#include <cstddef>
#include <map>
#include <string>

namespace hoccl::fakecuda::ipc {

inline constexpr size_t kSharedMin = size_t(1) << 20;

// A block of fake device memory another process can open; nullptr if none
// could be made.
void* allocShared(size_t bytes);
// True if p is such a block (then unmapped and closed).
bool freeShared(void* p);
// Name -> entry point, merged into the fake's cuGetProcAddress table.
const std::map<std::string, void*>& entryPoints();
// Handles opened here and not closed yet (a leak check).
int openLive();

}  // namespace hoccl::fakecuda::ipc
