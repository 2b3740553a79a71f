// hoccl-topo probe: running a whole probe, shared by the `hoccl-topo probe`
// command and communicator set-up under HOCCL_TOPO_PROBE=1.
//
// Every process of the job calls run(). One process per node measures (its
// Agent sends and receives the round's flows); the others only take part
// in each round's exchange of reports. Every process gets every report and
// runs the same Prober on them, so all end with the same result, or the
// same error, without a controller and without a hang.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "base/error.h"
#include "base/socket.h"
#include "src/topo/probe/probe_plan.h"

namespace hoccl {
namespace probe {

struct Session {
  int slot = 0, slots = 1;  // this process's place in the exchange, and how many take part
  int node = -1;            // the node this process measures, 0..nodes-1; -1: it measures nothing
  int nodes = 1;
  // A measuring process's node: where its agent listens (port 0: any),
  // the name the files give it (HOCCL_HOSTID), and the interface of that
  // address (its MTU turns TCP goodput into line rate; "": unknown).
  SockAddr listen;
  std::string host;
  std::string ifname;
  // Gathers `bytes` from every slot: `all` holds slots x bytes, this
  // process's part already at slot x bytes; on return every part is there.
  std::function<Status(void* all, size_t bytes)> allGather;
  // Called before each round (may be empty).
  std::function<void(int index, const Round& r)> progress;
};

struct Outcome {
  Result result;                   // rates on the wire (toLineRate applied)
  std::vector<std::string> hosts;  // per node
  double seconds = 0;              // from the first round to the last report
};

// Runs the probe. Errors name the node, its host and the round; every
// process returns the same one.
Status run(const Session& s, const Options& o, Outcome* out);

}  // namespace probe
}  // namespace hoccl
