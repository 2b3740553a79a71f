// The flight recorder (HOCCL_DEBUG_DUMP): each communicator keeps its last
// calls in a ring of fixed size, so that after a failure, or on a signal,
// every process can write one file saying what its ranks were doing: each
// call's number, collective, count, type, operator, root, algorithm, state,
// and for a call that stalled the step and the peers it waited on. The
// files of all ranks, read together (flight_why.h, `hoccl-info --why`),
// name the rank that never arrived or the call on which ranks disagree.
//
// Recording is on the path of every call, so it takes no lock, allocates
// nothing (the ring is allocated when the communicator is made) and reads
// the coarse clock twice. Only the thread running the communicator's calls
// writes its entries (the communicator takes calls from one thread at a
// time); a dump, on another thread, copies an entry whole or reads it again
// (a sequence lock per entry, flight.cc). The format is in docs/troubleshooting.md.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "src/exec/executor.h"

namespace hoccl {

enum class FlightState : uint8_t { Started, Running, Queued, Done, Failed };
const char* flightStateName(FlightState s);  // "started", "running", "queued", "done", "failed"

// What a call is, fixed when it begins.
struct FlightCallHead {
  uint64_t opSeq = 0;  // collectives: the call's number; point-to-point: the collective before it
  CollKind coll = CollKind::AllReduce;
  DType dtype = DType::Float32;
  RedOp op = RedOp::Sum;
  int root = 0;        // point-to-point: its first part's peer
  uint64_t count = 0;  // point-to-point: elements over all its sends and receives
  int parts = 0;       // point-to-point: sends and receives in the call
  bool device = false;
  double started = 0;  // seconds since the epoch
};

// One call as a dump shows it (a copy, taken under the recorder's lock).
struct FlightCall : FlightCallHead {
  std::string algorithm;  // empty until the schedule is chosen
  int channels = 0;
  FlightState state = FlightState::Started;
  double ended = 0;  // seconds since the epoch (the kernel's tick, 1 to 4 ms); 0 while unfinished
  // A stalled call: where it waits (CollTask::describeWait, or the
  // connection set-up) and on which peers.
  std::string waiting;
  std::vector<int> waitPeers;
  std::string error;  // a failed call's error
};

// Who a recorder belongs to.
struct FlightOwner {
  uint64_t commHash = 0;  // the same on every rank of the communicator
  int rank = 0, nranks = 1;
  std::string host;       // the rank's host id
  int pid = 0;
};

// A communicator's ring of its last calls. begin/running/finished/waiting
// are called by the thread running the communicator's calls; snapshot and
// noteFatal by any thread.
class FlightRecorder {
 public:
  FlightRecorder(const FlightOwner& owner, size_t capacity);  // capacity: rounded up to a power of two
  ~FlightRecorder();
  FlightRecorder(const FlightRecorder&) = delete;
  FlightRecorder& operator=(const FlightRecorder&) = delete;

  // A call about to be prepared (its connections may be set up first):
  // returns its id, for the calls below. opSeq as CollCall::opSeq will be.
  uint64_t begin(const CollCall& call, uint64_t opSeq);
  // Its schedule is chosen and it runs (or is queued on a stream).
  void running(uint64_t id, const char* algorithm, int channels, bool queued);
  // It ended: OK, or failed with st.
  void finished(uint64_t id, const Status& st);
  // It stalls: where (text) and on which peers. Called now and then, not
  // on every poll.
  void waiting(uint64_t id, const std::string& where, const std::vector<int>& peers);
  // The communicator's fatal error (the first), if it has one.
  void noteFatal(const std::string& why);

  const FlightOwner& owner() const { return owner_; }
  // The recorded calls, oldest first; *fatal: the fatal error or "".
  std::vector<FlightCall> snapshot(std::string* fatal = nullptr, uint64_t* recorded = nullptr) const;

 private:
  struct Entry;
  struct Texts;
  Entry* find(uint64_t id);
  // Under mu_: call `id`'s texts, cleared the first time it writes one.
  Texts* textsFor(uint64_t id);
  // Call `id`'s fields from its entry, whole (false: overwritten by a newer call).
  static bool read(const Entry& e, uint64_t id, FlightCall* c);
  const FlightOwner owner_;
  mutable std::mutex mu_;  // the texts and fatal_
  std::unique_ptr<Entry[]> ring_;
  std::unique_ptr<Texts[]> texts_;  // beside ring_
  const size_t capacity_;
  std::atomic<uint64_t> next_{1};  // the next call's id (ids from 1; 0: empty)
  std::string fatal_;
};

// The process's dumps. Every recorder registered here is in each dump;
// one file per process (so one per rank where each rank is a process).
// `pattern`: the file name, %h the host name, %p the pid, %% a percent
// sign (as HOCCL_DEBUG_FILE). `signal`: 0, or a signal (SIGUSR1 = 10) on
// which the process dumps, taken once, by the first registration that
// names it, without replacing a handler the program installed before: that
// handler still runs, after ours.
void flightRegister(FlightRecorder* r, const std::string& pattern, int signal);
void flightUnregister(FlightRecorder* r);
// Writes the dump now (to a temporary file, then renamed over the last
// one); false with *why if it could not. `reason` says why it was written.
bool flightDump(const std::string& reason, std::string* path = nullptr, std::string* why = nullptr);
// The dump as text, as flightDump writes it (tests).
std::string flightDumpText(const std::string& reason);
// How many signal-requested dumps the process has written (tests).
uint64_t flightSignalDumps();

}  // namespace hoccl
