// What tests may ask an IB transport about its registration cache. Free of
// verbs types, so it compiles everywhere.
#pragma once

#include <cstdint>

#include "transport/net/net.h"

namespace hoccl {

struct IbRegistrationStats {
  uint64_t registrations = 0;  // ibv_reg_mr calls
  uint64_t hits = 0;           // requests served by an existing registration
  int live = 0;                // registrations held now
};

// False if `net` is not an IB transport or has no device `dev`.
bool ibRegistrationStats(NetTransport& net, int dev, IbRegistrationStats* out);

}  // namespace hoccl
