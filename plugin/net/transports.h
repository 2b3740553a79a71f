// The hoccl network transports the NCCL net plugin can serve, by HOCCL_NET
// name.
#pragma once

#include <memory>
#include <string>

#include "src/core/config.h"
#include "transport/net/net.h"

namespace hoccl {
namespace ncclplugin {

// Creates the transport `name` names; an unknown name is an error listing
// the known ones.
Status createNamedTransport(const std::string& name, const Settings& settings, std::unique_ptr<NetTransport>* out);

}  // namespace ncclplugin
}  // namespace hoccl
