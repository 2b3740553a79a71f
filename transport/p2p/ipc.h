// Device connections between processes of one host (CUDA.md, "Intra-node"):
// the receiving rank allocates a connection's memory (its DevConnMem at
// offset 0, the slots after it, one allocation) with cuMemCreate, maps it
// for itself and exports it as a POSIX fd; the sending rank imports and
// maps it at an address of its own. The DevConnMem finds its slots by
// offset (transport/device_conn_mem.h), so both mappings work.
//
// The exchange: every rank that imports listens on an abstract Unix socket
// named from the communicator and its rank (fdpass.h); an exporter
// connects, sends the fd with an IpcBufferMsg (ipc_wire.h) and does not
// wait, so no rank waits for another's accept. The importer accepts until
// it has every connection it expects, bounded by the communicator's
// timeout, and stops early, naming the rank, when that rank's process is
// gone.
//
// With HOCCL_DEVICE_IPC=fabric the allocation is exported as a fabric
// handle instead, whose bytes travel in the message over the bootstrap: no
// fd and no Unix socket, so processes that share neither (containers in
// their own network namespaces) connect (a staged pair, below, still
// passes its memfd). It needs an IMEX channel.
//
// A connection staged through host memory (a pair of GPUs without peer
// access, or HOCCL_P2P_DISABLE) travels the same way as a memfd that both
// processes map and register with cuMemHostRegister (IpcHandle::HostShm).
#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "base/cuda_device_api.h"
#include "base/fdpass.h"
#include "transport/p2p/ipc_wire.h"

namespace hoccl::cuda {

// One mapping of a VMM allocation in this process.
struct VmmMapping {
  MemHandle handle = 0;
  DevPtr base = 0;
  size_t size = 0;
  bool mapped = false;
};

// Where a connection's slots start in its allocation (after the DevConnMem).
size_t ipcSlotsOffset();

// Allocates `bytes` (rounded up to the granularity) on `device`, exportable
// as `handleType` (kMemHandleTypePosixFd or kMemHandleTypeFabric), and maps
// it read-write here.
Status vmmCreate(const VmmApi& v, int device, size_t bytes, int handleType, VmmMapping* out, size_t* granularity);
// Imports an exported allocation of `size` bytes and maps it here.
Status vmmImport(const VmmApi& v, int device, int fd, size_t size, VmmMapping* out);
// The same for a fabric handle's kFabricHandleBytes bytes.
Status vmmImportFabric(const VmmApi& v, int device, const uint8_t* handle, size_t size, VmmMapping* out);
// Whether this process can share memory of `device` by fabric handle: the
// driver says the GPU supports it and a trial allocation exports one (it
// does not without an IMEX channel: CUDA_ERROR_NOT_PERMITTED). *why says
// why not.
bool fabricUsable(const DeviceApi& api, int device, std::string* why);
// Unmaps, frees the address range, releases the handle (errors ignored:
// teardown); the driver frees the memory once every process has.
void vmmRelease(const VmmApi& v, VmmMapping* m);

// `m` as a POSIX fd of the caller's to send (and close).
Status vmmExport(const VmmApi& v, const VmmMapping& m, int* fd);
// `m` as a fabric handle (kFabricHandleBytes bytes at `handle`).
Status vmmExportFabric(const VmmApi& v, const VmmMapping& m, uint8_t* handle);

// Host shared memory that GPUs of this process reach (cuMemHostRegister,
// portable and mapped): staged connections.
struct HostShm {
  int fd = -1;  // the memfd, until it was sent (hostShmCreate's caller closes it)
  void* host = nullptr;
  size_t size = 0;
  DevPtr dev = 0;  // its device address
  bool registered = false;
};
// A new memfd of `bytes` (rounded up to pages), mapped and registered here.
Status hostShmCreate(const DeviceApi& api, size_t bytes, HostShm* out);
// Maps and registers another process's memfd of `size` bytes.
Status hostShmImport(const DeviceApi& api, int fd, size_t size, HostShm* out);
// Unregisters, unmaps, closes (errors ignored: teardown).
void hostShmRelease(const DeviceApi& api, HostShm* m);

// Sends `fd` and `msg` to the importing rank that listens at `peerSocket`:
// connects (until dl, or until `peerGone()`), sends, closes the channel.
Status ipcSend(int fd, const IpcBufferMsg& msg, const std::string& peerSocket, const std::string& peerName,
               const std::function<bool()>& peerGone, const Deadline& dl);

// One received connection: a VMM mapping (msg.handleType PosixFd) or host
// shared memory (HostShm).
struct IpcReceived {
  IpcBufferMsg msg;
  VmmMapping mapping;
  HostShm shm;
  DevPtr base() const { return shm.dev ? shm.dev : mapping.base; }
};
// Accepts one export from each entry of `from` (exporting ranks, the
// receivers of the edges; a rank once per edge) on `listener`, decodes and
// maps each. `peerGone(rank)` is asked while waiting, about the ranks still
// expected; `describe(rank)` names a rank in errors. On error, what was
// mapped is in *out. (The message's pid is not checked against the
// socket's: ranks in containers may see each other's pids differently.)
// With `unmapped`, an export that this process cannot map is no error: its
// exporter's entry there says why, and the rest are still taken.
Status ipcReceive(const DeviceApi& api, int device, const FdListener& listener, int nranks, const std::vector<int>& from,
                  const std::function<bool(int)>& peerGone, const std::function<std::string(int)>& describe,
                  const Deadline& dl, std::vector<IpcReceived>* out,
                  std::map<int, std::string>* unmapped = nullptr);

}  // namespace hoccl::cuda
