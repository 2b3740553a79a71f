#include "plugin/net/transports.h"

#include <cstdlib>
#include <strings.h>

namespace hoccl {
namespace ncclplugin {
namespace {

Status makeSocket(const Settings& s, std::unique_ptr<NetTransport>* out) {
  SocketNetOptions o;
  // NCCL users already name their interface for NCCL's own socket transport.
  const char* ncclRule = getenv("NCCL_SOCKET_IFNAME");
  o.ifnameRule = !s.socketIfname.empty() ? s.socketIfname : ncclRule ? ncclRule : "";
  o.streams = s.socketStreams;
  o.timeoutSec = s.timeoutSec;
  return createSocketTransport(o, out);
}

struct Entry {
  const char* name;
  Status (*create)(const Settings&, std::unique_ptr<NetTransport>*);
};

// The verbs transport (transport/net/ib) joins as one more entry.
const Entry kTransports[] = {
    {"socket", makeSocket},
};

}  // namespace

Status createNamedTransport(const std::string& name, const Settings& settings, std::unique_ptr<NetTransport>* out) {
  std::string known;
  for (const Entry& e : kTransports) {
    if (strcasecmp(e.name, name.c_str()) == 0) return e.create(settings, out);
    known += known.empty() ? e.name : std::string(", ") + e.name;
  }
  return errorf(hocclInvalidUsage, "HOCCL_NET=%s: no such transport in this plugin (it has: %s)", name.c_str(),
                known.c_str());
}

}  // namespace ncclplugin
}  // namespace hoccl
