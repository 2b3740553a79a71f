// A whole probe over some all-gather (probe_run.h).
#include "src/topo/probe/probe_run.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>

#include "base/clock.h"
#include "src/topo/probe/probe_agent.h"

namespace hoccl {
namespace probe {
namespace {

struct Hello {
  int32_t node;  // -1: measures nothing
  int32_t mtu;
  char host[160];
  SockAddr addr;
};

// The interface's MTU (0 if unknown).
int interfaceMtu(const std::string& ifname) {
  if (ifname.empty()) return 0;
  std::ifstream f("/sys/class/net/" + ifname + "/mtu");
  int mtu = 0;
  return f >> mtu ? mtu : 0;
}

struct WireReport {
  Report r;
  int32_t failed;
  char error[300];
};

}  // namespace

Status run(const Session& s, const Options& o, Outcome* out) {
  *out = Outcome();
  if (s.nodes < 1 || s.slots < 1 || s.slot < 0 || s.slot >= s.slots || s.node >= s.nodes || !s.allGather)
    return errorf(hocclInternalError, "probe: bad session (slot %d of %d, node %d of %d)", s.slot, s.slots, s.node,
                  s.nodes);
  Agent agent;
  Status started;
  if (s.node >= 0) started = agent.start(s.listen);
  // The hello tells everyone who measures which node, and where; a node
  // that could not start its agent says so here, and everyone stops.
  std::vector<Hello> hellos(static_cast<size_t>(s.slots));
  Hello& mine = hellos[static_cast<size_t>(s.slot)];
  mine.node = started.ok() ? s.node : -2;
  mine.mtu = s.node >= 0 ? interfaceMtu(s.ifname) : 0;
  snprintf(mine.host, sizeof mine.host, "%s", started.ok() ? s.host.c_str() : started.message().c_str());
  if (s.node >= 0 && started.ok()) mine.addr = agent.address();
  HOCCL_TRY(s.allGather(hellos.data(), sizeof(Hello)).context("probe: exchanging node addresses"));
  std::vector<int> slotOf(static_cast<size_t>(s.nodes), -1);
  std::vector<SockAddr> peers(static_cast<size_t>(s.nodes));
  out->hosts.assign(static_cast<size_t>(s.nodes), "");
  int mtu = 0;  // the smallest: TCP's segments fit every link
  for (int i = 0; i < s.slots; ++i) {
    const Hello& h = hellos[static_cast<size_t>(i)];
    if (h.node == -2)
      return errorf(hocclSystemError, "probe: slot %d cannot listen for the probe's flows: %.160s", i, h.host);
    if (h.node < 0) continue;
    if (h.node >= s.nodes || slotOf[static_cast<size_t>(h.node)] >= 0)
      return errorf(hocclInternalError, "probe: node %d is measured by slots %d and %d", h.node,
                    h.node < s.nodes ? slotOf[static_cast<size_t>(h.node)] : -1, i);
    slotOf[static_cast<size_t>(h.node)] = i;
    peers[static_cast<size_t>(h.node)] = h.addr;
    out->hosts[static_cast<size_t>(h.node)] = std::string(h.host, strnlen(h.host, sizeof h.host));
    if (h.mtu > 0) mtu = mtu > 0 ? std::min(mtu, int(h.mtu)) : int(h.mtu);
  }
  for (int n = 0; n < s.nodes; ++n)
    if (slotOf[static_cast<size_t>(n)] < 0) return errorf(hocclInternalError, "probe: no process measures node %d", n);

  Prober prober(s.nodes, o);
  const double start = nowSec();
  std::vector<WireReport> reports(static_cast<size_t>(s.slots));
  for (int index = 0; !prober.done(); ++index) {
    const Round& round = prober.round();
    if (s.progress) s.progress(index, round);
    WireReport& w = reports[static_cast<size_t>(s.slot)];
    w = WireReport();
    if (s.node >= 0) {
      Status st = agent.run(round, index, s.node, peers, o, &w.r);
      if (!st.ok()) {
        w.failed = 1;
        snprintf(w.error, sizeof w.error, "%s", st.message().c_str());
      }
    }
    HOCCL_TRY(s.allGather(reports.data(), sizeof(WireReport)).context("probe: exchanging round reports"));
    std::vector<Report> rep(static_cast<size_t>(s.nodes));
    for (int n = 0; n < s.nodes; ++n) {
      const WireReport& r = reports[static_cast<size_t>(slotOf[static_cast<size_t>(n)])];
      if (r.failed)
        return errorf(hocclSystemError, "probe: node %d (%s), round %d (%s): %.300s", n,
                      out->hosts[static_cast<size_t>(n)].c_str(), index + 1, round.what.c_str(), r.error);
      rep[static_cast<size_t>(n)] = r.r;
    }
    prober.record(rep);
  }
  out->seconds = nowSec() - start;
  out->result = prober.result();
  toLineRate(&out->result, mtu);
  return Status();
}

}  // namespace probe
}  // namespace hoccl
