// HOCCL_NET: which network transport connects ranks on different nodes.
// The caller logs `chosen` (with the reason when IB was unavailable).
#include "transport/net/net.h"

namespace hoccl {

NetChoice netChoiceFrom(const Settings& s) {
  NetChoice c;
  c.mode = s.net;
  c.socket.ifnameRule = s.socketIfname;
  c.socket.streams = s.socketStreams;
  c.socket.duplex = s.socketDuplex;
  c.socket.timeoutSec = s.timeoutSec;
  c.ib.hcaRule = s.ibHca;
  c.ib.gidIndex = s.ibGidIndex;
  c.ib.qpsPerConn = s.ibQpsPerConn;
  c.ib.timeout = s.ibTimeout;
  c.ib.retryCnt = s.ibRetryCnt;
  c.ib.gdrFlush = s.ibGdrFlush;
  c.ib.ifnameRule = s.socketIfname;
  c.ib.timeoutSec = s.timeoutSec;
  return c;
}

Status createNetTransport(const NetChoice& choice, std::unique_ptr<NetTransport>* out, std::string* chosen) {
  if (choice.mode == "socket") {
    *chosen = "Socket (HOCCL_NET=socket)";
    return createSocketTransport(choice.socket, out);
  }
  Status ib = createIbTransport(choice.ib, out);
  if (ib.ok()) {
    *chosen = "IB (" + std::to_string((*out)->devices()) + (choice.mode == "ib" ? " ports, HOCCL_NET=ib)" : " ports)");
    return ib;
  }
  // A malformed HOCCL_IB_* setting is a mistake to report, not a reason to
  // fall back quietly, nor a sign that IB is missing.
  if (ib.code() == hocclInvalidArgument) return ib;
  if (choice.mode == "ib") return Status(ib.code(), "HOCCL_NET=ib, but IB is unavailable: " + ib.message());
  *chosen = "Socket (IB unavailable: " + ib.message() + ")";
  return createSocketTransport(choice.socket, out);
}

}  // namespace hoccl
