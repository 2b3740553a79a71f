// The hoccl network transport that serves NCCL: HOCCL_NET as hoccl itself
// reads it (auto: verbs when an active port exists, else TCP; ib; socket),
// with the interface rules NCCL users already set honoured as fallbacks.
#pragma once

#include <memory>
#include <string>

#include "base/config.h"
#include "transport/net/net.h"

namespace hoccl {
namespace ncclplugin {

// `chosen` gets a one-line account of what was picked and why.
Status createPluginTransport(const Settings& settings, std::unique_ptr<NetTransport>* out, std::string* chosen);

}  // namespace ncclplugin
}  // namespace hoccl
