// HOCCL_DEBUG_DUMP: a communicator's flight recorder (src/exec/flight.h),
// made at init, and the dumps written when one of its calls fails or it is
// aborted. The calls are recorded as they run (comm_run.cc), their waits by
// the executor (src/exec/progress.cc) and, while a call sets up its
// connections, by the bootstrap's wait hook (comm_callcheck.cc).
#include <unistd.h>

#include "base/log.h"
#include "src/comm/comm.h"

namespace hoccl {

void startFlightRecorder(hocclComm* c) {
  if (c->settings.debugDump.empty() || c->flight) return;
  FlightOwner o;
  o.commHash = c->commHash;
  o.rank = c->rank;
  o.nranks = c->nranks;
  o.host = c->hostId;
  o.pid = getpid();
  c->flight = std::make_unique<FlightRecorder>(o, static_cast<size_t>(c->settings.debugDumpCalls));
  flightRegister(c->flight.get(), c->settings.debugDump, c->settings.debugDumpSignal);
}

void dumpFlight(hocclComm* c, const std::string& reason) {
  if (!c->flight) return;
  std::string path, why;
  if (flightDump(reason, &path, &why))
    HINFO(kSubColl, "rank %d: flight recorder written to %s (%s)", c->rank, path.c_str(), reason.c_str());
  else
    HWARN(kSubColl, "rank %d: HOCCL_DEBUG_DUMP: %s", c->rank, why.c_str());
}

}  // namespace hoccl
