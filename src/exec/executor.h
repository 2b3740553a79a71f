// The executor: one engine that runs any schedule. A collective becomes a
// CollTask; progress() advances every channel as far as it can without
// blocking (a channel waiting on one peer never holds up another channel),
// slice by slice. A host call with a NULL stream runs its task to
// completion in the caller's thread through runTasks(); a GPU backend will
// enqueue the same task on a stream instead.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "algorithms/schedule.h"
#include "src/core/error.h"
#include "src/exec/dataops.h"
#include "transport/connection.h"

namespace hoccl {

// What a task needs from its communicator.
class ExecLinks {
 public:
  virtual ~ExecLinks() = default;
  virtual SendConn* sendConn(int peer, int channel) = 0;
  virtual RecvConn* recvConn(int peer, int channel) = 0;
};

struct CollCall {
  CollKind coll = CollKind::AllReduce;
  const void* sendbuff = nullptr;
  void* recvbuff = nullptr;
  uint64_t count = 0;
  DType dtype = DType::Float32;
  RedOp op = RedOp::Sum;
  int root = 0;
  uint64_t opSeq = 0;
};

// "AllReduce(count=1000, float, sum)" as it appears in messages.
std::string describeCall(CollKind coll, uint64_t count, DType dtype, RedOp op, int root);

class CollTask {
 public:
  // Slices of at least directMinBytes whose value stays put go by reference
  // where the connection allows (0: never).
  CollTask(const CollCall& call, std::shared_ptr<const Schedule> schedule, ExecLinks* links,
           size_t sliceBytes, bool checkCalls, size_t directMinBytes);
  // Advances all channels as far as possible without waiting. Returns an
  // error for a mismatched message; sets *progressed if anything moved.
  Status progress(bool* progressed);
  bool done() const { return done_; }
  const CollCall& call() const { return call_; }
  int channelCount() const { return static_cast<int>(chans_.size()); }
  // Where the task waits now: "channel 0 step 3 (recvReduceSend): waiting to
  // receive from rank 1; last completed step 2".
  std::string describeWait() const;
  // Peers the unfinished channels wait on now (for liveness checks).
  std::vector<int> waitingOn() const;

 private:
  struct ChannelState {
    size_t step = 0;
    uint64_t done = 0;  // elements of the current step completed
    int waitPeer = -1;
    bool waitSend = false;
  };
  bool stepDone(int channel, int step) const;
  Status advance(int channel, bool* progressed);
  char* bufferAt(const Slice& s);
  Status checkHeader(const SlotHeader& h, uint32_t expectBytes, int peer) const;
  Status directFailure(int peer) const;
  void finish();

  CollCall call_;
  std::shared_ptr<const Schedule> sched_;
  ExecLinks* links_;
  const DataOps& ops_;
  size_t esize_;
  uint64_t sliceElems_;
  bool checkCalls_;
  size_t directMinBytes_;
  std::vector<ChannelState> chans_;
  std::vector<char> scratch_;
  std::vector<SendConn*> directSends_;  // connections that carried references
  std::vector<uint64_t> lent_;          // addresses lent (ThreadSanitizer annotations)
  bool done_ = false;
};

}  // namespace hoccl
