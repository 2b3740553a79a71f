// Reading the flight recorder's dumps (flight.h) of all ranks together, as
// `hoccl-info --why FILE...` does: per communicator, the call on which
// ranks disagree, else the ranks that never started the call the others
// wait in, else the calls that failed and the first failure; and the last
// call every rank completed. Text in, text out: no communicator needed.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/error.h"

namespace hoccl {

// One call as a dump wrote it (names as the dump spells them).
struct DumpedCall {
  uint64_t seq = 0;
  std::string coll, dtype, op;  // "AllReduce", "float", "sum"
  int root = 0;
  uint64_t count = 0;
  std::string algorithm, state, waiting, error;
  std::vector<int> waitPeers;
  double started = 0, ended = 0;
  bool collective() const { return coll != "SendRecv"; }
  // "AllReduce(count=1024, float, sum)", as hoccl's messages name a call.
  std::string describe() const;
};

// One rank of one communicator, from one dump file.
struct DumpedRank {
  std::string file;
  double dumpTime = 0;
  std::string reason;
  std::string comm;  // "0x..." (the same on every rank)
  int rank = 0, nranks = 0;
  std::string host;
  int pid = 0;
  std::string error;  // the communicator's fatal error, if any
  std::vector<DumpedCall> calls;  // oldest first
};

// Every communicator in one dump's text (`file` names it in errors and in
// the result). A text that is not a dump: hocclInvalidArgument saying where.
Status readFlightDump(const std::string& text, const std::string& file, std::vector<DumpedRank>* out);

struct FlightVerdict {
  std::string text;     // the report, one or more lines per communicator
  bool problem = false; // a mismatch, a missing or late rank, or a failed call
};
// The report on all ranks read (any order; a rank dumped twice: its latest).
FlightVerdict explainFlight(std::vector<DumpedRank> ranks);

// "0", "0-2", "0,2,5-7".
std::string rankList(std::vector<int> ranks);

}  // namespace hoccl
