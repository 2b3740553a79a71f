// The exported-buffer message (transport/p2p/ipc_wire.h) as an importing
// rank receives it from another process: decoded, then used as the importer
// uses it (the ranges it would map, the host it would name in errors).
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "transport/p2p/ipc_wire.h"

using namespace hoccl::cuda;

// The seed corpus (fuzz/corpus/ipc_buffer, made by make_seeds.py) was
// written for this layout.
static_assert(sizeof(IpcBufferMsg) == 200);

namespace {
volatile uint64_t g_sink;  // keeps the uses from being optimised away
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // The first byte picks the communicator's size, the rest is the message.
  if (size < 1) return 0;
  const int nranks = 1 + data[0] % 16;
  IpcBufferMsg m;
  if (!decodeIpcBuffer(data + 1, size - 1, nranks, &m).ok()) return 0;
  // What decode promises: ranges inside the allocation, apart, terminated host.
  if (m.connOffset + m.connBytes > m.size || m.slotsOffset + m.slotsBytes > m.size) __builtin_trap();
  if (m.slotsOffset < m.connOffset + m.connBytes && m.connOffset < m.slotsOffset + m.slotsBytes) __builtin_trap();
  if (m.size % m.granularity != 0 || m.from == m.to || m.from >= nranks || m.to >= nranks) __builtin_trap();
  g_sink = strlen(m.host) + m.size / m.granularity + std::strlen(ipcHandleName(IpcHandle(m.handleType)));
  return 0;
}
