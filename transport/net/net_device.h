// Device connections to ranks on other hosts: the network proxy (CUDA-NET
// design, §2). An edge whose two ends are on different hosts is two local
// halves, each a DevConnMem of its own rank's process:
//   - the send half, in the sender's process: the kernel writes slots,
//     headers and `tail` into it as into any device connection; the proxy
//     sends each posted slot and advances `head` once the network is done
//     with it;
//   - the receive half, in the receiver's process: the proxy receives each
//     message into a free slot, writes its header and advances `tail`; the
//     kernel consumes it and advances `head`.
// Both halves count one FIFO from 0, so the kernel's sequence check holds
// end to end, and counters only grow across launches: a launch, or the
// replay of a captured one, hands the proxy nothing but the counters.
//
// On the wire every message is [DevSlotHeader][payload] (16 + bytes), one
// isend per slot, so each end picks its data path on its own:
//   host  (path B) the slots are host memory the GPU maps
//         (cuMemHostAlloc, DEVICEMAP); the kernel stores and loads them
//         across PCIe and the transport sends and receives them in place.
//         Each slot has 16 bytes before it where the proxy puts the header.
//   copy  (path C) the slots are GPU memory; the proxy copies each message
//         through host frames of its own with the copy engine
//         (cuMemcpyDtoHAsync / HtoDAsync on its own stream) around the
//         transport's send and receive.
//   gdr   (path A, GPUDirect RDMA) the frames are GPU memory, exported as
//         a dma-buf (cuMemGetHandleForAddressRange) and registered with the
//         transport (regMrDmaBuf), which sends and receives them in place;
//         the proxy copies each 16-byte header between the frame and the
//         kernel's side, and flushes each receive (iflush) before it
//         publishes it. Asked for only: `auto` takes host until path A has
//         run on hardware, and says whether the device offers it.
//
// The proxy is one thread per communicator's device connections (NCCL's
// choice: a communicator's aborts, timeouts and teardown stay its own). It
// spins for HOCCL_PROXY_SPIN_US after it last moved something; then, while
// a launch of its communicator may run, it looks again after 20 us, then
// 40, 80, ... up to HOCCL_PROXY_IDLE_US while nothing moves, and otherwise
// sleeps; the transport completing a request or the executor launching
// wakes it at once. Asleep, it looks every HOCCL_PROXY_IDLE_US (how long a
// replayed graph's first message can wait for it).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "transport/device_connection.h"
#include "transport/net/net.h"

namespace hoccl::cuda {

class NetProxy;

using NetWrap = std::unique_ptr<NetTransport> (*)(std::unique_ptr<NetTransport>);

class NetDeviceConnections final : public DeviceConnections {
 public:
  // Tests: wraps every proxy's transport as it opens (tests/support/
  // dmabuf_net.h gives TCP dma-buf registration over the fake driver's
  // memfds, so the gdr path runs without a NIC). Set before any init.
  static NetWrap wrapForTesting;
  // Opens the network transport `choice` names, for this communicator's
  // device connections alone (its own progress thread, whose completions
  // wake the proxy), and starts the proxy. `dev`: the transport device
  // (rail) this rank uses. Not collective.
  static Status open(const DeviceConnOptions& o, NetChoice choice, int localIndex,
                     std::unique_ptr<NetDeviceConnections>* out);
  ~NetDeviceConnections() override;

  // Collective with the peers named: `edges` must all have their other end
  // on another host.
  Status connect(const std::vector<DeviceEdge>& edges) override;
  DevPtr conn(const DeviceEdge& e) const override;
  bool inHostMemory() const override { return true; }
  void launched() override;
  void quiesce() override;
  std::string describeWait(const DeviceEdge& e) const override;

 private:
  explicit NetDeviceConnections(const DeviceConnOptions& o);
  DeviceConnOptions o_;
  std::string netName_;
  std::string gdrWhy_;  // why the NIC does not reach GPU memory here (NetProperties::gdrWhy)
  bool gdrOffered_ = false;  // the transport registers dma-bufs (kPtrDmabuf)
  std::unique_ptr<NetProxy> proxy_;
};

}  // namespace hoccl::cuda
