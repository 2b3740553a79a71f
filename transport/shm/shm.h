// Shared-memory transport for the ranks of one node (threads or processes).
//
// Each rank owns a control block (doorbell, abort record, pid) that every
// local peer maps. Each connection is a segment created by its receiver and
// mapped by its sender, which unlinks the name at once, so nothing is left
// in /dev/shm once both sides have attached. A posted slot carries a
// sequence stamp in its header's last word, which the receiver polls (a
// payload of up to 24 bytes travels in the header's line too, so a small
// message is one cache line); the receiver's tail counter gives slots back.
// Each move rings the other side's doorbell (a futex word) when it sleeps,
// so a waiting rank can sleep instead of spinning when ranks outnumber
// cores, at no cost while it spins.
#pragma once

#include <atomic>
#include <cstddef>
#include <map>
#include <set>
#include <memory>
#include <string>
#include <vector>

#include "base/error.h"
#include "base/oob.h"
#include "transport/connection.h"

namespace hoccl {

// A rank's one-shot slot (OneShotSlots in connection.h): the note and the first 32
// payload bytes share the line that `seq` publishes.
constexpr size_t kOneShotBytes = 512;
struct OneShotSlot {
  alignas(64) std::atomic<uint64_t> seq;  // the one-shot call it holds; written last
  OneShotNote note;
  uint8_t data[kOneShotBytes];
};
static_assert(offsetof(OneShotSlot, data) == 32, "the note and 32 payload bytes in seq's line");

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
  OneShotSlot oneShot[2];  // one-shot call b in oneShot[b % 2]
};

// Wakes the owner of `cb` if it sleeps (announced in `sleepers`); call it
// after publishing what the owner should see.
void ringDoorbell(ControlBlock* cb);
// The owner's side (connection.h, Doorbell): announce, then sleep until the
// doorbell differs from `seen` or `timeoutMs` passes, then withdraw.
uint32_t armDoorbell(ControlBlock* cb);
void disarmDoorbell(ControlBlock* cb);
void waitDoorbell(ControlBlock* cb, uint32_t seen, int timeoutMs);

struct ShmOptions {
  uint64_t commHash = 0;
  int rank = 0;
  size_t slotBytes = 128 << 10;
  int slots = 8;
  // Let processes read each other's buffers (process_vm_readv), where the
  // kernel allows it; the executor decides which calls use it (HOCCL_CMA).
  bool crossMemoryAttach = false;
};

// This rank's doorbell: the futex word in its control block, which local
// peers ring when they post or release a slot.
class ShmDoorbell : public Doorbell {
 public:
  explicit ShmDoorbell(ControlBlock* cb) : cb_(cb) {}
  void ring() override { ringDoorbell(cb_); }
  uint32_t arm() override { return armDoorbell(cb_); }
  void disarm() override { disarmDoorbell(cb_); }
  void wait(uint32_t seen, int timeoutMs) override { waitDoorbell(cb_, seen, timeoutMs); }

 private:
  ControlBlock* cb_;
};

class ShmDomain {
 public:
  // Collective over `oob`: every rank of the communicator calls it; ranks
  // map the control blocks of the peers in `localRanks` (same node).
  static Status create(OutOfBand& oob, const ShmOptions& opt, const std::vector<int>& localRanks,
                       std::unique_ptr<ShmDomain>* out);
  ~ShmDomain();

  ControlBlock* self() { return self_; }
  // The ranks' one-shot slots; for a communicator whose ranks are all local.
  OneShotSlots* oneShotSlots() { return oneShot_.get(); }
  Doorbell& doorbell() { return *doorbell_; }
  ControlBlock* control(int rank);  // nullptr if `rank` is not on this node
  // Whether this process can see `rank`'s pid (checked at init, when every
  // rank lives): not when the peer runs in another pid namespace (another
  // container sharing /dev/shm), where a liveness check would call it dead.
  bool pidVisible(int rank) const { return visible_.count(rank) > 0; }
  // Whether local `rank`'s process is gone (only where its pid is visible);
  // with `unfreedOnly`, only if it had not freed its communicator first.
  // *pid receives its pid.
  bool exited(int rank, bool unfreedOnly, int* pid);
  // The abort a local peer recorded in this rank's control block, if any.
  bool abortNotice(int* code, std::string* msg) const;
  // Whether a peer has posted an abort notice (abortNotice reads it): one
  // load, for the progress loop's every pass.
  bool abortFlagged() const { return self_ && self_->aborted.load(std::memory_order_acquire) == 1; }

  // Sets up the missing connections in `requests` (pairwise with the peers,
  // over `oob`). Idempotent.
  Status connect(OutOfBand& oob, const std::vector<ConnRequest>& requests);
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
  std::unique_ptr<ShmDoorbell> doorbell_;
  std::map<int, ControlBlock*> controls_;
  std::set<int> visible_;
  std::vector<Mapping> mappings_;
  std::map<std::pair<int, int>, std::unique_ptr<SendConn>> sends_;
  std::map<std::pair<int, int>, std::unique_ptr<RecvConn>> recvs_;
  std::unique_ptr<OneShotSlots> oneShot_;
};

}  // namespace hoccl
