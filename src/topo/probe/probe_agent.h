// hoccl-topo probe: one node's side of a round (probe_plan.h). It listens
// on the node's network address; in a round it sends its flow, receives
// and times the flow sent to it, and ping-pongs its partner, over plain TCP
// connections that last one round.
#pragma once

#include <string>
#include <vector>

#include "base/error.h"
#include "base/socket.h"
#include "src/topo/probe/probe_plan.h"

namespace hoccl {
namespace probe {

class Agent {
 public:
  // Listens on `local` (port 0: any).
  Status start(const SockAddr& local);
  const SockAddr& address() const { return bound_; }
  // This node's part of round `index` (node `self`; peers[i] is node i's
  // address). Connections that do not come, or break, are errors naming
  // the peer and the round.
  Status run(const Round& r, int index, int self, const std::vector<SockAddr>& peers, const Options& o,
             Report* out);

 private:
  Socket listener_;
  SockAddr bound_;
};

}  // namespace probe
}  // namespace hoccl
