// A network transport for tests that registers dma-bufs the CPU can map:
// it wraps another (TCP) and, for regMrDmaBuf, maps the dma-buf and sends
// and receives through that mapping. With the fake driver, whose "dma-bufs"
// are memfds (fake_cuda_ipc.h), the network proxy's gdr path
// (HOCCL_NET_DEVICE_PATH=gdr) then runs end to end without a NIC: the
// frames are registered by fd and offset, never by their device address,
// and every receive into them is flushed. A GPU's dma-buf refuses CPU
// mappings, so this is no way to run the gdr path on real hardware.
#pragma once

#include <memory>

#include "transport/net/net.h"

namespace hoccl::testsupport {

// Install with NetDeviceConnections::wrapForTesting = wrapWithDmabuf.
std::unique_ptr<NetTransport> wrapWithDmabuf(std::unique_ptr<NetTransport> inner);

// What the wrappers of this process did: dma-bufs registered, iflush calls
// on them, and sends and receives through them.
struct DmabufNetCounts {
  int registrations = 0, flushes = 0, transfers = 0;
};
DmabufNetCounts dmabufNetCounts();

}  // namespace hoccl::testsupport
