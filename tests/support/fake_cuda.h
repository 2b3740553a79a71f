// A fake libcuda that runs the device path on the host (tests of the
// device executor through the public API, test_cuda_device.cc).
//
//  - Device memory is host memory in the fake's allocation table, so
//    cuPointerGetAttribute calls it device memory; mapped host memory is
//    host memory whose device address is itself, and so is host memory
//    registered with cuMemHostRegister.
//  - cuModuleLoadData takes any bytes; cuModuleGetFunction knows the
//    interpreter kernels by their names (kernel_names.h).
//  - A stream is a worker thread running its queue in order, so a call that
//    "returns once queued" really does; events order streams.
//  - cuLaunchKernel queues the launch: on the stream's thread, the
//    host-compiled interpreter (interp_host.h) runs the grid, one group of
//    lane threads per CTA (channel). Where the host interpreter has no avg
//    of its own, an avg kernel sums and then divides as DataOps' finish().
//  - Stream capture: setCapture marks a stream as being captured into a
//    CUDA graph in the global mode. Its work runs at once (one replay),
//    but the driver's rules hold: a thread that has not relaxed its capture
//    mode may not allocate or load modules meanwhile (the call fails and
//    invalidates the capture), and an event recorded in the capture without
//    the external flag cannot be queried or waited on from outside it.
//  - The VMM entry points (cuMemCreate, export/import as POSIX fds, reserve,
//    map, access) work across fork()ed processes: fake_cuda_vmm.h.
//
// Constructing a FakeCuda makes it the process's driver
// (setProcessDriverForTesting); destroying it waits for its streams and
// restores the real one. One at a time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <set>
#include <string>

#include "base/cuda_driver.h"

namespace hoccl::fakecuda {

class FakeCuda {
 public:
  // `missing`: entry points the fake's cuGetProcAddress does not have.
  explicit FakeCuda(std::set<std::string> missing = {});
  ~FakeCuda();
  FakeCuda(const FakeCuda&) = delete;
  FakeCuda& operator=(const FakeCuda&) = delete;

  const cuda::Driver& driver() const;

  // Fake device memory, filled with 0xA5 (cuMemAlloc does not zero).
  void* alloc(size_t bytes);
  void free(void* p);
  // Several GPUs: setDevices(n) makes n (one context stands for all);
  // allocOn places memory on one (cuPointerGetAttribute's device ordinal);
  // peer access between them is granted unless refused here.
  void setDevices(int n);
  void* allocOn(int device, size_t bytes);
  void refusePeerAccess(int device, int peer);
  // This process sees GPUs first.. as its ordinals 0.. (their names and PCI
  // bus ids say so): CUDA_VISIBLE_DEVICES=first in a forked rank, whose
  // peers' GPUs it then does not see.
  void setFirstDevice(int first);
  int peerEnables() const;  // cuCtxEnablePeerAccess calls so far
  // cuMemcpyDtoDAsync loses a byte in every 4 KiB it writes (a peer path
  // that ACS or an IOMMU breaks; the peer-access self-test's copies).
  void corruptDeviceCopies(bool on);
  // Blocks of mapped host memory live in this process: cuMemHostAlloc'ed
  // and cuMemHostRegister'ed (control blocks, staged connections).
  int hostLive() const;
  int deviceLive() const;  // cuMemAlloc'ed blocks live (and the tests' own)
  // A stream of its own (freed with the fake).
  void* createStream();
  // True once everything queued on `stream` has run (waits up to `sec`).
  bool sync(void* stream, double sec = 60);
  bool busy(void* stream);  // cuStreamQuery says CUDA_ERROR_NOT_READY
  // Holds `stream` at this point of its queue until release(stream).
  void hold(void* stream);
  void release(void* stream);

  int moduleLoads() const;  // cuModuleLoadData calls so far
  int launches() const;     // cuLaunchKernel calls so far
  // Lane threads per CTA: min(blockDim.x, lanes). Set before launching.
  void setLanes(int lanes);
  // What cuDeviceGetAttribute(MULTIPROCESSOR_COUNT) says (default 8): the
  // device executor's cap on channels.
  void setMultiprocessors(int n);
  // The grid (channels) of the last launch.
  int lastGrid() const;
  uint32_t lastFlags() const;  // InterpArgs::flags of the last launch
  // VMM handles and reserved ranges still live in this process
  // (fake_cuda_vmm.h; a leak check).
  int vmmLive() const;
  // Marks `stream` as captured (kCaptureStatusActive), its capture broken
  // (kCaptureStatusInvalidated) or not captured (kCaptureStatusNone).
  void setCapture(void* stream, int status);
  int captureStatus(void* stream) const;  // what cuStreamIsCapturing says

  struct State;  // what the entry points see (fake_cuda.cc)

 private:
  std::unique_ptr<State> state_;
};

}  // namespace hoccl::fakecuda
