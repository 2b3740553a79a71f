// ProcessGroupHoccl: torch.distributed's collectives through hoccl's public
// C API (hoccl.h), as a c10d::ProcessGroup for torch 1.13 and a
// c10d::Backend for torch 2.x (torch_compat.h: one source for both).
//
// Execution (work_queue.cc): every call validates its arguments on the
// caller's thread (unsupported dtypes, ops and methods raise at once), then
// queues a task and returns a Work. One worker thread per process group runs
// the tasks in order, so the order of hoccl calls is program order on every
// rank, and DDP can overlap its bucket all-reduces with backward although a
// host hoccl call blocks until it is complete. The Work's future carries the
// outputs. Sends and receives are held back until something needs them (a
// wait on one, a later collective), then run together in one hoccl group:
// isend and irecv posted in any order cannot deadlock. A per-call timeout
// (c10d's options, Work.wait(timeout)) aborts the communicator when it
// passes, as ProcessGroupNCCL's Work.wait(timeout) does.
//
// Groups: a subgroup (new_group, DeviceMesh) is made from its parent's
// communicator by hocclCommCreateGroup (only its members take part) or
// hocclCommSplit (every rank of the parent), never by a new rendezvous.
//
// Devices: the backend registers for CPU tensors. A CUDA executor would
// enqueue the same hoccl calls on a stream (hocclStream_t) after an event
// recorded on the caller's current stream, and complete the Work from a
// stream callback; the argument checks and the mapping of methods to hoccl
// calls stay as they are.
#pragma once

#include <hoccl.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include "torch_compat.h"

namespace hoccl_torch {

class ProcessGroupHoccl;

// What a process group shares with its Works (which may outlive it): the
// lock over its queue, the worker's wake-up, and how far the caller has
// released the point-to-point tasks the worker holds back.
struct QueueState {
  std::mutex mutex;
  std::condition_variable cv;
  uint64_t releasedUpTo = 0;  // held p2p tasks numbered up to this may run
  ProcessGroupHoccl* group = nullptr;  // null once the group has stopped its worker
};

// A Work completed by the process group's worker; its future's value is the
// list of output tensors (what DDP's communication hook reads). Waiting on
// it in any way (wait, is_completed, the future) first releases the
// point-to-point tasks held back up to it (see ProcessGroupHoccl::enqueue).
class HocclWork : public c10d::Work {
 public:
  HocclWork(int rank, c10d::OpType type, std::vector<at::Tensor> outputs, std::shared_ptr<QueueState> queue,
            uint64_t seq);
  std::vector<at::Tensor> result() override { return outputs_; }
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;
  bool isCompleted() override;
  // With a timeout (not kNoTimeout): raises naming the op and the time if
  // the work is not complete by then, and aborts the group's communicator
  // (as ProcessGroupNCCL's Work.wait(timeout) does), so that no call is
  // left waiting for the missing peers.
  bool wait(std::chrono::milliseconds timeout) override;
  void synchronize() override { release(); }
  // Completes the work: with the outputs when `error` is null, else with it.
  void complete(std::exception_ptr error);
  uint64_t seq() const { return seq_; }

 private:
  void release();
  std::vector<at::Tensor> outputs_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
  std::shared_ptr<QueueState> queue_;
  uint64_t seq_;
};

class ProcessGroupHoccl : public BaseGroup {
 public:
  // Rendezvous through `store`: group rank 0 creates the unique id and
  // publishes it; every rank then joins the communicator. `timeoutSec`,
  // to the millisecond, becomes hoccl's bound on every wait
  // (hocclConfig_t.timeoutMs);
  // `algorithm` ("" = hoccl's choice, HOCCL_ALGO) is hocclConfig_t.algorithm.
  ProcessGroupHoccl(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size, double timeoutSec,
                    std::string groupName, std::string algorithm);
  // A group over a communicator made from another group's (split(),
  // createGroup()); `origin` says how ("split", "create_group").
  ProcessGroupHoccl(hocclComm_t comm, int timeoutMs, std::string groupName, std::string algorithm,
                    std::string origin);
  // Waits for queued work, then destroys the communicator; one that failed
  // is aborted instead, so its peers learn at once.
  ~ProcessGroupHoccl() override;

  const std::string getBackendName() const override { return "hoccl"; }

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                                     const c10d::AllreduceCoalescedOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors, const c10d::ReduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_coalesced(std::vector<std::vector<at::Tensor>>& outputs,
                                                     std::vector<at::Tensor>& inputs,
                                                     const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs,
                                        std::vector<at::Tensor>& inputs, const c10d::GatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs,
                                         std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                      const c10d::ReduceScatterOptions& opts) override;
  // Several all-gathers (outputs[i]: size x inputs[i]) or reduce-scatters
  // (inputs[i]: size x outputs[i]) as one hoccl call when the tensors share
  // a dtype (packed rank-major), else one hoccl group: what FSDP and
  // torch's _coalescing_manager call (torch 2.x).
  c10::intrusive_ptr<c10d::Work> allgather_into_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                                 std::vector<at::Tensor>& inputs,
                                                                 const c10d::AllgatherOptions& opts)
      HOCCL_TORCH2_OVERRIDE;
  c10::intrusive_ptr<c10d::Work> reduce_scatter_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                                 std::vector<at::Tensor>& inputs,
                                                                 const c10d::ReduceScatterOptions& opts)
      HOCCL_TORCH2_OVERRIDE;
#if HOCCL_TORCH2
  // _coalescing_manager's bracket: the calls between them run in order as
  // always; endCoalescing's Work completes when they all have, and fails
  // if one of them failed.
  void startCoalescing() override;
  c10::intrusive_ptr<c10d::Work> endCoalescing() override;
#endif
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                               std::vector<int64_t>& outputSplits,
                                               std::vector<int64_t>& inputSplits,
                                               const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
                                          const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dstRank, int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int srcRank, int tag) override;
  c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor>& tensors, int tag) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override;

  // hocclCommSplit on this group's communicator, in program order with its
  // other work (every rank of the group calls it): ranks with the same color
  // form the new group, ordered by key then by rank. Null for color < 0.
  c10::intrusive_ptr<ProcessGroupHoccl> split(int color, int key, const std::string& groupName);
  // hocclCommCreateGroup on this group's communicator, in program order
  // with its other work: only the ranks listed call it (group ranks, in the
  // new group's rank order), as torch calls a backend's creator for
  // new_group and DeviceMesh. `timeoutSec` (<= 0: this group's) bounds the
  // new group's calls.
  c10::intrusive_ptr<ProcessGroupHoccl> createGroup(const std::vector<int>& ranks, double timeoutSec,
                                                    const std::string& groupName, const std::string& algorithm);
  // hocclCommShrink: a group of this group's ranks minus `exclude` (group
  // ranks), renumbered in order, made from this group's communicator with no
  // rendezvous; every surviving rank calls it with the same list. With
  // `abortFirst` (HOCCL_SHRINK_ABORT, the mode after a failure) it runs at
  // once: a call of this group that waits for an excluded rank fails, and
  // this group runs no more collectives. Without, it runs in program order
  // after this group's queued work. Refused when this group was aborted
  // (its communicator is gone).
  c10::intrusive_ptr<ProcessGroupHoccl> shrink(const std::vector<int>& exclude, bool abortFirst,
                                               const std::string& groupName);
  // hocclCommNodeInfo: {node, nnodes, localRank, localRanks}.
  std::vector<int> nodeInfo() const;

  // hocclCommAbort: queued and running work fails at once, the peers are
  // told, and every later call raises.
  void abort();
  // Lets queued work finish, then destroys the communicator
  // (hocclCommDestroy); later calls raise. The orderly end of a group, as
  // ProcessGroupNCCL's shutdown.
  void shutdown();
  // The hoccl communicator's rank and size, and its timeout in seconds.
  double timeoutSec() const { return timeoutMs_ / 1000.0; }
  // How the communicator was made: "rendezvous" (a new unique id through
  // the store), "split", "create_group" or "shrink" (from another group's).
  const std::string& origin() const { return origin_; }
  // Lets queued work finish and ends the worker thread (later calls run
  // nothing and fail). Call without the GIL: the worker may need it.
  void stopWorker();
  // stopWorker() for every live group: run at interpreter exit (atexit),
  // before finalisation, when a worker that still held work would be
  // killed taking the GIL to free a tensor's Python object.
  static void stopAllWorkers();

 private:
  friend class HocclWork;
  // Aborts the communicator (hocclCommAbort) because a call of type `op`
  // did not complete within `timeout`; returns the error, which names the
  // op and the time (`how`: what bounded it). Under state_->mutex.
  std::string timedOutLocked(c10d::OpType op, std::chrono::milliseconds timeout, const char* how);
  // Queues fn for the worker; `timeout` (kUnsetTimeout: none) bounds the
  // call from now (the watchdog enforces it). Point-to-point tasks (p2p) are held
  // back, not started, until something needs them: a Work of one of them
  // (or of a later task) is waited on, a task that is not p2p is queued
  // behind them, or the worker stops; then all the held ones run together
  // in one hocclGroupStart/End, so no order of isend/irecv can deadlock.
  c10::intrusive_ptr<c10d::Work> enqueue(c10d::OpType type, std::vector<at::Tensor> outputs,
                                         std::function<void()> fn,
                                         std::chrono::milliseconds timeout = c10d::kUnsetTimeout, bool p2p = false);
  struct Task {
    c10::intrusive_ptr<HocclWork> work;
    std::function<void()> fn;
    bool p2p;
    std::chrono::steady_clock::time_point deadline;  // max(): none
    std::chrono::milliseconds timeout;
  };
  // Destroys the communicator (aborts it when a call failed; nothing once
  // aborted); later calls find none. Under state_->mutex.
  void releaseCommLocked();
  // Whether the task at the queue's front may run now. Under state_->mutex.
  bool frontRunnable() const;
  void runBatch(std::vector<Task>& batch);
  void watchLoop();
  void startWorker();
  void workerLoop();
  static std::mutex& liveMutex();
  static std::set<ProcessGroupHoccl*>& liveGroups();
  // Throws std::runtime_error with hoccl's message when `r` is not success.
  void check(hocclResult_t r, const char* call) const;
  std::function<void(hocclResult_t, const char*)> checker() const;

  hocclComm_t comm_ = nullptr;
  int timeoutMs_ = 0;  // hocclConfig_t.timeoutMs of the communicator and its splits
  std::string groupName_;
  std::string algorithm_;
  std::string origin_ = "rendezvous";

  std::shared_ptr<QueueState> state_ = std::make_shared<QueueState>();  // its mutex guards what follows
  std::deque<Task> queue_;
  uint64_t nextSeq_ = 1;
  bool stop_ = false;
  bool aborted_ = false;
  bool shutDown_ = false;        // shutdown() ran
  uint64_t coalescingFrom_ = 0;  // the first task of the block startCoalescing opened
  uint64_t lastFailedSeq_ = 0;   // the newest task that failed, and why
  std::string lastFailedWhat_;
  std::string timeoutError_;  // why a per-call timeout aborted the group ("" if none did)
  // The watchdog enforces per-call timeouts (started with the first one):
  // it aborts the communicator when a task passes its deadline, the running
  // one (watch*) or a queued one.
  std::thread watchdog_;
  std::chrono::steady_clock::time_point watchUntil_ = std::chrono::steady_clock::time_point::max();
  c10d::OpType watchedOp_ = c10d::OpType::UNKNOWN;
  std::chrono::milliseconds watchedTimeout_{0};
  bool watchStop_ = false;
  mutable std::atomic<bool> failed_{false};  // a hoccl call failed: the communicator is unusable
  std::thread worker_;
  std::mutex joinMutex_;  // stopWorker from atexit and from the destructor
};

}  // namespace hoccl_torch
