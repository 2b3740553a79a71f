// Shared-memory transport for the ranks of one node (threads or processes).
//
// Each rank owns a control block (doorbell, abort record, pid) that every
// local peer maps. Each connection is a segment created by its receiver and
// mapped by its sender, which unlinks the name at once, so nothing is left
// in /dev/shm once both sides have attached. Flow control is a head counter
// written by the sender and a tail counter written by the receiver; each
// move rings the other side's doorbell (a futex word), so a waiting rank
// can sleep instead of spinning when ranks outnumber cores.
#pragma once

#include <atomic>
#include <map>
#include <set>
#include <memory>
#include <string>
#include <vector>

#include "src/base/error.h"
#include "transport/connection.h"

namespace hoccl {

class Bootstrap;

struct ControlBlock {
  alignas(64) std::atomic<uint32_t> doorbell;
  std::atomic<uint32_t> sleepers;
  alignas(64) std::atomic<uint32_t> aborted;
  int32_t abortFrom;
  int32_t abortCode;
  char abortMsg[1024];
  alignas(64) int32_t pid;
  // Set when the owner frees its communicator: a pid that is gone after
  // this is a process that ended, not one that died.
  std::atomic<uint32_t> closed;
  uint64_t commHash;
  // For the cross-memory-attach probe: where this block sits in its owner's
  // address space, and a known value a peer reads there.
  uint64_t selfAddress;
  uint64_t probeValue;
};

// Wakes the owner of `cb` if it sleeps.
void ringDoorbell(ControlBlock* cb);
// Sleeps until the doorbell differs from `seen` or `timeoutMs` passes.
void waitDoorbell(ControlBlock* cb, uint32_t seen, int timeoutMs);

struct ShmOptions {
  uint64_t commHash = 0;
  int rank = 0;
  size_t slotBytes = 128 << 10;
  int slots = 8;
  // Let processes read each other's buffers (process_vm_readv). Off by
  // default: slower than two copies through shared slots on the machines
  // we measured (pinning pages costs more than the copy it saves).
  bool crossMemoryAttach = false;
};

// A connection to set up: this rank sends to or receives from `peer` on
// `channel`.
struct EdgeRequest {
  int peer;
  int channel;
  bool send;
  bool operator<(const EdgeRequest& o) const {
    return peer != o.peer ? peer < o.peer : channel != o.channel ? channel < o.channel : send < o.send;
  }
};

class ShmDomain {
 public:
  // Collective over the bootstrap: every rank of the communicator calls it;
  // ranks map the control blocks of the peers in `localRanks` (same node).
  static Status create(Bootstrap& boot, const ShmOptions& opt, const std::vector<int>& localRanks,
                       std::unique_ptr<ShmDomain>* out);
  ~ShmDomain();

  ControlBlock* self() { return self_; }
  ControlBlock* control(int rank);  // nullptr if `rank` is not on this node
  // Whether this process can see `rank`'s pid (checked at init, when every
  // rank lives): not when the peer runs in another pid namespace (another
  // container sharing /dev/shm), where a liveness check would call it dead.
  bool pidVisible(int rank) const { return visible_.count(rank) > 0; }

  // Sets up the missing connections in `edges` (pairwise with the peers,
  // over the bootstrap). Idempotent.
  Status connect(Bootstrap& boot, const std::vector<EdgeRequest>& edges);
  SendConn* sendConn(int peer, int channel);
  RecvConn* recvConn(int peer, int channel);

  // Records an abort in every local peer's control block and wakes them.
  void broadcastAbort(int code, const std::string& msg);
  const std::vector<int>& localRanks() const { return localRanks_; }

 private:
  struct Mapping {
    void* addr = nullptr;
    size_t bytes = 0;
  };
  ShmDomain() = default;
  std::string segmentName(const char* kind, int a, int b, int channel) const;

  ShmOptions opt_;
  std::vector<int> localRanks_;
  ControlBlock* self_ = nullptr;
  std::map<int, ControlBlock*> controls_;
  std::set<int> visible_;
  std::vector<Mapping> mappings_;
  std::map<std::pair<int, int>, std::unique_ptr<SendConn>> sends_;
  std::map<std::pair<int, int>, std::unique_ptr<RecvConn>> recvs_;
};

}  // namespace hoccl
