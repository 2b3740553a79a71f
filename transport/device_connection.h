// The connection interface of the device path: what the device executor
// (src/exec/cuda) asks of a transport, as the host executor asks
// transport/connection.h's Connections. The executor flattens a schedule
// into a plan whose connections are edges (transport/device_conn_mem.h);
// before the plan's first launch it asks for those edges to be connected,
// then writes each edge's DevConnMem address into the plan's connection
// table. From there the kernel moves data through the counters and slots
// alone: no transport code runs per launch, which is what lets a launch be
// captured in a CUDA graph and replayed.
//
// Backends implement DeviceConnections and never include each other;
// transport/links owns them and routes each edge by where its peer is:
//   - transport/p2p: ranks of this host, connection memory on the
//     receiver's GPU (raw pointers between threads, VMM or IPC handles
//     between processes) or, where the sender's GPU cannot write into the
//     receiver's, in host memory both map;
//   - transport/net (net_device.h): ranks of other hosts, through a
//     network proxy. The edge is two local halves, a send half in the
//     sender's process and a receive half in the receiver's; the kernel
//     writes slots and `tail`, or waits on them, exactly as on a p2p edge,
//     and the proxy thread moves slots over the network and advances the
//     other counter. Its counters are in host memory, so system scope.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/cuda_device_api.h"
#include "base/cuda_driver.h"
#include "base/error.h"
#include "base/oob.h"
#include "transport/device_conn_mem.h"

namespace hoccl::cuda {

// One rank as a device transport must know it (by rank, from the
// communicator and the executor's exchange of GPU identities).
struct DevicePeer {
  bool sameProcess = false;  // a thread of this process: device pointers are valid in both
  int device = 0;            // its GPU's ordinal in its own process
  std::string bus;           // its GPU's PCI bus id, "" if unknown
  int pid = 0;               // for messages
  std::string host;
  // On this rank's host (its node id): p2p reaches it; otherwise the
  // network proxy does (transport/net/net_device.h).
  bool sameHost = true;
};

// Whether a GPU can write into another, as NVML answers it (topology
// knowledge, which the owner of the transports supplies: a transport does
// not include src/topo).
struct PeerWriteAnswer {
  enum Kind { Yes, No, Unknown } kind = Unknown;
  std::string why;  // No: NVML's reason; Unknown: why NVML could not say
};

// How connections between ranks are made (HOCCL_P2P_DISABLE,
// HOCCL_P2P_CHECK, HOCCL_DEVICE_IPC): the same on every rank.
struct DeviceConnSettings {
  bool p2pDisable = false;  // every connection between ranks staged through host memory
  bool p2pCheck = true;     // peer access only after its self-test passed
  std::string ipc = "auto";  // auto, fd (VMM), fabric or legacy (cuIpc*) between processes
  // HOCCL_NET_DEVICE_PATH: how a connection to another host moves data
  // (auto, host, copy; net_device.h).
  std::string netPath = "auto";
  double proxySpinUs = 200;    // HOCCL_PROXY_SPIN_US
  double proxyIdleUs = 1000;   // HOCCL_PROXY_IDLE_US
};

struct DeviceConnOptions {
  const Driver* driver = nullptr;  // device enumeration and the status line for messages
  const DeviceApi* api = nullptr;  // outlives the connections
  OutOfBand* oob = nullptr;        // set-up messages; outlives the connections
  int device = 0;                  // this rank's GPU, whose context is current on every call
  CuHandle setupStream = nullptr;  // a non-blocking stream for uploads, which are waited for
  CuHandle ctx = nullptr;          // the device's context (made current on the transport's own threads)
  std::vector<DevicePeer> peers;   // by rank, this rank's own entry included
  std::function<bool(int rank)> peerProcessGone;  // asked while waiting for a rank of another process
  size_t slotBytes = 0;            // of each slot: a multiple of 16
  double timeoutSec = 300;         // bounds every wait for a peer
  const char* timeoutFrom = "HOCCL_TIMEOUT";  // what set it, for messages
  DeviceConnSettings settings;
  // A transport's own thread (the network proxy) found a connection
  // broken: the executor records it and ends its launches (the kernel sees
  // the abort word); poll() then returns it.
  std::function<void(const Status&)> fail;
  // Whether a launch of this communicator may still run (the executor's
  // last launch, eager or replayed from a graph, has not ended).
  std::function<bool()> launchPending;
  // Asked by a transport's own thread (the network proxy) every 0.1 s while
  // a launch may run: news of a failure elsewhere (a peer's abort notice, a
  // peer process of this host that is gone), which the rank's own thread
  // cannot read while it waits in a launch. An error goes to `fail`.
  std::function<Status()> watch;
  // NVML's answer for the GPUs with these bus ids (from, to); the owner
  // fills it. Unset: Unknown.
  std::function<PeerWriteAnswer(const std::string& fromBus, const std::string& toBus)> peerWrite;
};

// A rank's device connections. Calls come from the thread that queues the
// communicator's launches, with the device's context current.
class DeviceConnections {
 public:
  // Releases the connection memory. The caller first makes sure no launch
  // that uses it still runs (a peer's may: memory shared with a peer is
  // freed by whichever end lets go last).
  virtual ~DeviceConnections() = default;
  // Sets up the edges of `edges` not set up yet; collective with the peers
  // they name, which call it with their side of the same edges. After a
  // failure, what did not complete is asked for again by the next call.
  virtual Status connect(const std::vector<DeviceEdge>& edges) = 0;
  // The DevConnMem of a connected edge, as a device address of this
  // rank's context; 0 if it was never connected.
  virtual DevPtr conn(const DeviceEdge& e) const = 0;
  // True if some connection's counters are, or will be, in host memory,
  // so that the kernel must hand slots over with system-scope fences, not
  // GPU scope. Known once the connections are open, before any connect().
  virtual bool inHostMemory() const = 0;
  // The executor queued a launch (a proxy may start polling now).
  virtual void launched() {}
  // The executor is going away without freeing this (a launch did not
  // end, or an abort could not wait for it): the transport's threads,
  // which call back into it, stop now, and what they served (a network
  // and its connections) closes; the memory a launch may still touch
  // stays, never freed. Nothing of the transport runs afterwards.
  virtual void quiesce() {}
  // What this rank's end of edge `e` is waiting for, for a timeout's
  // message; "" if nothing to add.
  virtual std::string describeWait(const DeviceEdge& e) const {
    (void)e;
    return "";
  }
};

}  // namespace hoccl::cuda
