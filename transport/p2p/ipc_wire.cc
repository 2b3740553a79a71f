// The exported-buffer message (ipc_wire.h).
#include "transport/p2p/ipc_wire.h"

#include <cinttypes>
#include <cstring>

namespace hoccl::cuda {
namespace {

// A refusal naming the field (`fmt` a literal).
#define HOCCL_IPC_BAD(...) errorf(hocclRemoteError, "ipc buffer message: " __VA_ARGS__)


bool allZero(const uint8_t* p, size_t n) {
  for (size_t i = 0; i < n; ++i)
    if (p[i]) return false;
  return true;
}

// [off, off + bytes) inside [0, size), without overflow.
bool inside(uint64_t off, uint64_t bytes, uint64_t size) { return off <= size && bytes <= size - off; }

}  // namespace

const char* ipcHandleName(IpcHandle h) {
  switch (h) {
    case IpcHandle::PosixFd: return "posix-fd";
    case IpcHandle::Fabric: return "fabric";
    case IpcHandle::LegacyIpc: return "legacy-ipc";
    case IpcHandle::HostShm: return "host-shm";
  }
  return "unknown";
}

std::string encodeIpcBuffer(const IpcBufferMsg& m) {
  return std::string(reinterpret_cast<const char*>(&m), sizeof m);
}

Status decodeIpcBuffer(const void* data, size_t bytes, int nranks, IpcBufferMsg* out) {
  if (bytes != sizeof(IpcBufferMsg)) return HOCCL_IPC_BAD("%zu bytes, expected %zu", bytes, sizeof(IpcBufferMsg));
  IpcBufferMsg m;
  std::memcpy(&m, data, sizeof m);
  if (m.magic != kIpcMagic) return HOCCL_IPC_BAD("magic 0x%08x, expected 0x%08x", m.magic, kIpcMagic);
  if (m.version != kIpcVersion)
    return HOCCL_IPC_BAD("version %u, this hoccl speaks %u (mixed hoccl versions?)", unsigned(m.version), unsigned(kIpcVersion));
  const auto type = IpcHandle(m.handleType);
  if (type != IpcHandle::PosixFd && type != IpcHandle::Fabric && type != IpcHandle::LegacyIpc &&
      type != IpcHandle::HostShm)
    return HOCCL_IPC_BAD("handleType %u is none of posix-fd (1), fabric (2), legacy-ipc (3), host-shm (4)",
                         unsigned(m.handleType));
  if (m.granularity == 0 || (m.granularity & (m.granularity - 1)) != 0)
    return HOCCL_IPC_BAD("granularity %" PRIu64 " is not a power of two", m.granularity);
  if (m.size == 0 || m.size > kIpcMaxBytes)
    return HOCCL_IPC_BAD("size %" PRIu64 " is 0 or above %" PRIu64, m.size, kIpcMaxBytes);
  if (m.size % m.granularity != 0)
    return HOCCL_IPC_BAD("size %" PRIu64 " is not a multiple of granularity %" PRIu64, m.size, m.granularity);
  if (m.connOffset % 64 != 0) return HOCCL_IPC_BAD("connOffset %" PRIu64 " is not 64-byte aligned", m.connOffset);
  if (m.connBytes == 0 || !inside(m.connOffset, m.connBytes, m.size))
    return HOCCL_IPC_BAD("connOffset %" PRIu64 " + connBytes %" PRIu64 " is empty or beyond size %" PRIu64, m.connOffset,
               m.connBytes, m.size);
  if (m.slotsOffset % 16 != 0) return HOCCL_IPC_BAD("slotsOffset %" PRIu64 " is not 16-byte aligned", m.slotsOffset);
  if (m.slotsBytes == 0 || !inside(m.slotsOffset, m.slotsBytes, m.size))
    return HOCCL_IPC_BAD("slotsOffset %" PRIu64 " + slotsBytes %" PRIu64 " is empty or beyond size %" PRIu64, m.slotsOffset,
               m.slotsBytes, m.size);
  if (m.slotsOffset < m.connOffset + m.connBytes && m.connOffset < m.slotsOffset + m.slotsBytes)
    return HOCCL_IPC_BAD("slotsOffset %" PRIu64 " (slotsBytes %" PRIu64 ") overlaps the DevConnMem at connOffset %" PRIu64,
               m.slotsOffset, m.slotsBytes, m.connOffset);
  if (m.from < 0 || m.from >= nranks || m.to < 0 || m.to >= nranks || m.from == m.to)
    return HOCCL_IPC_BAD("edge from %d to %d is not between two ranks of %d", m.from, m.to, nranks);
  if (m.link < 0) return HOCCL_IPC_BAD("link %d is negative", m.link);
  if (m.pid <= 0) return HOCCL_IPC_BAD("pid %d is not a process id", m.pid);
  if (!std::memchr(m.host, 0, sizeof m.host)) return HOCCL_IPC_BAD("host is not NUL-terminated within %zu bytes", sizeof m.host);
  const bool fdBeside = type == IpcHandle::PosixFd || type == IpcHandle::HostShm;
  if (fdBeside && !allZero(m.handle, sizeof m.handle))
    return HOCCL_IPC_BAD("handle bytes are set for a %s handle (the fd travels beside the message)",
                         ipcHandleName(type));
  if (!fdBeside && allZero(m.handle, sizeof m.handle))
    return HOCCL_IPC_BAD("handle is all zeros for a %s handle", ipcHandleName(type));
  *out = m;
  return Status();
}

}  // namespace hoccl::cuda
