#include "plugin/net/transports.h"

#include <cstdlib>

namespace hoccl {
namespace ncclplugin {

Status createPluginTransport(const Settings& s, std::unique_ptr<NetTransport>* out, std::string* chosen) {
  // NCCL users already name their interfaces and HCAs for NCCL's own
  // transports; hoccl's settings win where both are set.
  auto orNccl = [](const std::string& own, const char* ncclVar) {
    const char* v = getenv(ncclVar);
    return !own.empty() ? own : v ? std::string(v) : std::string();
  };
  NetChoice c = netChoiceFrom(s);
  c.socket.ifnameRule = c.ib.ifnameRule = orNccl(s.socketIfname, "NCCL_SOCKET_IFNAME");
  c.ib.hcaRule = orNccl(s.ibHca, "NCCL_IB_HCA");
  return createNetTransport(c, out, chosen);
}

}  // namespace ncclplugin
}  // namespace hoccl
