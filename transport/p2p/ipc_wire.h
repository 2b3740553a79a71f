// The message that describes one exported device buffer to the rank that
// imports it: a device connection's memory (a DevConnMem and its slots, in
// one allocation) made by the receiving rank with cuMemCreate and handed to
// the sending rank in another process (CUDA.md, "Intra-node").
//
// A fixed layout of naturally aligned fields, no padding, host byte order
// (both ends are on one host). The handle itself travels beside it: a POSIX
// fd by SCM_RIGHTS (fdpass.h), or the bytes of a fabric or legacy IPC
// handle inside the message. decodeIpcBuffer refuses every malformed
// message with an error naming the field; what it accepts is safe to map:
// offsets and sizes in range, host name terminated.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "base/error.h"

namespace hoccl::cuda {

inline constexpr uint32_t kIpcMagic = 0x43504948;  // "HIPC"
inline constexpr uint16_t kIpcVersion = 1;

enum class IpcHandle : uint16_t {
  PosixFd = 1,    // CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR; the fd rides with the message
  Fabric = 2,     // CU_MEM_HANDLE_TYPE_FABRIC; CUmemFabricHandle's 64 bytes in `handle`
  LegacyIpc = 3,  // cuIpcGetMemHandle's CUipcMemHandle (64 bytes) in `handle`
  HostShm = 4,    // host shared memory (a memfd; the fd rides with the message), which each
                  // process registers with cuMemHostRegister: connections staged through host memory
};
const char* ipcHandleName(IpcHandle h);

// The largest allocation a message may describe (a guard against a size
// that would make the importer reserve absurd address space).
inline constexpr uint64_t kIpcMaxBytes = uint64_t(1) << 40;

struct IpcBufferMsg {
  uint32_t magic = kIpcMagic;
  uint16_t version = kIpcVersion;
  uint16_t handleType = uint16_t(IpcHandle::PosixFd);
  uint64_t size = 0;         // of the allocation: a multiple of granularity
  uint64_t granularity = 0;  // the exporter's cuMemGetAllocationGranularity (HostShm: page size): a power of two
  uint64_t connOffset = 0;   // the DevConnMem: 64-byte aligned, connBytes inside the allocation
  uint64_t connBytes = 0;    // sizeof(DevConnMem) at the exporter (both must agree)
  uint64_t slotsOffset = 0;  // the slots: 16-byte aligned, not overlapping the DevConnMem
  uint64_t slotsBytes = 0;
  int32_t from = -1, to = -1, link = -1;  // the connection's edge (sender, receiver, link)
  int32_t pid = 0;                        // the exporter's, for error messages
  char host[64] = {};                     // the exporter's host name, NUL-terminated
  uint8_t handle[64] = {};                // Fabric / LegacyIpc: the handle; PosixFd, HostShm: zeros
};
static_assert(sizeof(IpcBufferMsg) == 200, "IpcBufferMsg is a wire format: no padding, fixed size");

// The message's bytes (sizeof(IpcBufferMsg)).
std::string encodeIpcBuffer(const IpcBufferMsg& m);
// Decodes and validates a message from a communicator of `nranks` ranks:
// hocclRemoteError naming the first bad field ("ipc buffer message: slotsOffset
// ... beyond size ...") for anything malformed.
Status decodeIpcBuffer(const void* data, size_t bytes, int nranks, IpcBufferMsg* out);

}  // namespace hoccl::cuda
