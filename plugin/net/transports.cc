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
  NetChoice c;
  c.mode = s.net;
  c.socket.ifnameRule = orNccl(s.socketIfname, "NCCL_SOCKET_IFNAME");
  c.socket.streams = s.socketStreams;
  c.socket.timeoutSec = s.timeoutSec;
  c.ib.hcaRule = orNccl(s.ibHca, "NCCL_IB_HCA");
  c.ib.gidIndex = s.ibGidIndex;
  c.ib.qpsPerConn = s.ibQpsPerConn;
  c.ib.timeout = s.ibTimeout;
  c.ib.retryCnt = s.ibRetryCnt;
  c.ib.ifnameRule = c.socket.ifnameRule;
  c.ib.timeoutSec = s.timeoutSec;
  return createNetTransport(c, out, chosen);
}

}  // namespace ncclplugin
}  // namespace hoccl
