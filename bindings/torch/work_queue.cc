// How a ProcessGroupHoccl runs its work: the queue, the worker thread that
// runs it in program order, the point-to-point tasks it holds back until
// they are needed, the Works callers wait on, and per-call timeouts.
#include "process_group_hoccl.h"

#include <pthread.h>

#include <chrono>
#include <stdexcept>
#include <string>
#include <utility>

namespace hoccl_torch {

using c10d::OpType;

HocclWork::HocclWork(int rank, OpType type, std::vector<at::Tensor> outputs, std::shared_ptr<QueueState> queue,
                     uint64_t seq)
    : Work(rank, type),
      outputs_(std::move(outputs)),
      future_(c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()))),
      queue_(std::move(queue)),
      seq_(seq) {}

void HocclWork::release() {
  {
    std::lock_guard<std::mutex> lock(queue_->mutex);
    if (queue_->releasedUpTo >= seq_) return;
    queue_->releasedUpTo = seq_;
  }
  queue_->cv.notify_all();
}

c10::intrusive_ptr<c10::ivalue::Future> HocclWork::getFuture() {
  release();  // whoever takes the future means to wait on it
  return future_;
}

bool HocclWork::isCompleted() {
  release();
  return Work::isCompleted();
}

bool HocclWork::wait(std::chrono::milliseconds timeout) {
  release();
  std::unique_lock<std::mutex> lock(mutex_);
  if (timeout == kNoTimeout) {
    cv_.wait(lock, [this] { return completed_; });
  } else if (!cv_.wait_for(lock, timeout, [this] { return completed_; })) {
    lock.unlock();
    std::string error;
    {
      std::lock_guard<std::mutex> queue(queue_->mutex);  // keeps the group alive (its destructor takes it)
      if (queue_->group && !Work::isCompleted())
        error = queue_->group->timedOutLocked(opType_, timeout, "Work.wait(timeout)");
    }
    if (!error.empty()) throw std::runtime_error(error);
    lock.lock();  // it completed meanwhile (or is completing: the group is gone)
    cv_.wait(lock, [this] { return completed_; });
  }
  if (exception_) std::rethrow_exception(exception_);
  return true;
}

void HocclWork::complete(std::exception_ptr error) {
  if (error)
    future_->setError(error);
  else
    future_->markCompleted(c10::IValue(outputs_));
  finish(error);
}

void ProcessGroupHoccl::startWorker() {
  state_->group = this;
  worker_ = std::thread([this] { workerLoop(); });
  std::lock_guard<std::mutex> lock(liveMutex());
  liveGroups().insert(this);
}

std::mutex& ProcessGroupHoccl::liveMutex() {
  static std::mutex* mu = new std::mutex;  // never destroyed: used until the very end
  return *mu;
}

std::set<ProcessGroupHoccl*>& ProcessGroupHoccl::liveGroups() {
  static auto* live = new std::set<ProcessGroupHoccl*>;
  return *live;
}

void ProcessGroupHoccl::stopWorker() {
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    stop_ = true;
  }
  state_->cv.notify_all();
  std::lock_guard<std::mutex> join(joinMutex_);
  if (worker_.joinable()) worker_.join();  // queued work finishes (or times out) first
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    watchStop_ = true;
  }
  state_->cv.notify_all();
  if (watchdog_.joinable()) watchdog_.join();
}

void ProcessGroupHoccl::stopAllWorkers() {
  std::lock_guard<std::mutex> lock(liveMutex());
  for (ProcessGroupHoccl* pg : liveGroups()) pg->stopWorker();
}

void ProcessGroupHoccl::shutdown() {
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    shutDown_ = true;
  }
  stopWorker();  // queued work finishes first
  std::lock_guard<std::mutex> lock(state_->mutex);
  releaseCommLocked();
}

void ProcessGroupHoccl::releaseCommLocked() {
  if (comm_ && !aborted_) {
    if (failed_)
      hocclCommAbort(comm_);  // its peers learn at once
    else
      hocclCommDestroy(comm_);
  }
  comm_ = nullptr;
}

#if HOCCL_TORCH2
void ProcessGroupHoccl::startCoalescing() {
  std::lock_guard<std::mutex> lock(state_->mutex);
  coalescingFrom_ = nextSeq_;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHoccl::endCoalescing() {
  uint64_t from;
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    from = coalescingFrom_;
  }
  // Runs after every call of the block (the worker keeps program order).
  return enqueue(OpType::COALESCED, {}, [this, from] {
    std::lock_guard<std::mutex> lock(state_->mutex);
    if (lastFailedSeq_ >= from)
      throw std::runtime_error("hoccl: a call of the coalesced block failed: " + lastFailedWhat_);
  });
}
#endif

void ProcessGroupHoccl::abort() {
  hocclComm_t comm;
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    if (aborted_) return;
    aborted_ = true;
    comm = comm_;
  }
  // A call running on the worker returns with an error; queued work fails
  // without reaching hoccl (the worker sees aborted_).
  hocclCommAbort(comm);
  state_->cv.notify_all();
}

namespace {
// The error of a call that a timeout cut short; `what` says which timed out.
std::string timeoutMessage(const std::string& what) {
  return "hoccl: " + what +
         "; the process group was aborted (hocclCommAbort), so that no call waits for the missing ranks, and runs "
         "no more collectives";
}
}  // namespace

std::string ProcessGroupHoccl::timedOutLocked(OpType op, std::chrono::milliseconds timeout, const char* how) {
  std::string msg = "rank " + std::to_string(rank_) + ": " + c10d::opTypeToString(op) +
                    " did not complete within " + std::to_string(timeout.count()) + " ms (" + how + ")";
  if (!aborted_) {
    aborted_ = true;
    timeoutError_ = msg;
    hocclCommAbort(comm_);  // the running call returns with an error
  }
  state_->cv.notify_all();
  return timeoutMessage(msg);
}

// Per-call timeouts: aborts the communicator once a call passes its
// deadline, running or still queued (say, behind a call that waits for a
// missing rank); hoccl's own bound is the group's timeout.
void ProcessGroupHoccl::watchLoop() {
  pthread_setname_np(pthread_self(), "hoccl-pg-watch");
  const auto none = std::chrono::steady_clock::time_point::max();
  std::unique_lock<std::mutex> lock(state_->mutex);
  while (!watchStop_) {
    auto until = watchUntil_;
    OpType op = watchedOp_;
    std::chrono::milliseconds timeout = watchedTimeout_;
    for (const Task& t : queue_) {
      if (t.deadline < until) {
        until = t.deadline;
        op = t.work->retrieveOpType();
        timeout = t.timeout;
      }
    }
    if (until == none || aborted_) {  // nothing to watch (once aborted, every call fails at once)
      state_->cv.wait(lock);
    } else if (std::chrono::steady_clock::now() < until) {
      state_->cv.wait_until(lock, until);
    } else {
      timedOutLocked(op, timeout, "the call's timeout");
    }
  }
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHoccl::enqueue(OpType type, std::vector<at::Tensor> outputs,
                                                          std::function<void()> fn, std::chrono::milliseconds timeout,
                                                          bool p2p) {
  auto deadline = std::chrono::steady_clock::time_point::max();
  if (timeout.count() > 0) deadline = std::chrono::steady_clock::now() + timeout;  // kUnsetTimeout is -1
  c10::intrusive_ptr<HocclWork> work;
  bool stopped, shut;
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    work = c10::make_intrusive<HocclWork>(rank_, type, std::move(outputs), state_, nextSeq_++);
    stopped = stop_;
    shut = shutDown_;
    if (!stopped) {
      queue_.push_back(Task{work, std::move(fn), p2p, deadline, timeout});
      if (deadline != std::chrono::steady_clock::time_point::max() && !watchdog_.joinable())
        watchdog_ = std::thread([this] { watchLoop(); });
    }
  }
  if (stopped) {  // no worker any more (the process is exiting): fail, never wait
    work->complete(std::make_exception_ptr(
        std::runtime_error(shut ? "hoccl: the process group was shut down; it runs no more collectives"
                                     : "hoccl: the process group's worker has stopped (interpreter exit); it runs no "
                                       "more collectives")));
    return work;
  }
  state_->cv.notify_all();  // the worker, and the watchdog, wait on it
  return work;
}

bool ProcessGroupHoccl::frontRunnable() const {
  if (queue_.empty()) return false;
  const Task& front = queue_.front();
  if (!front.p2p || stop_ || aborted_ || front.work->seq() <= state_->releasedUpTo) return true;
  for (const Task& t : queue_)  // a collective queued behind the held p2p tasks needs them done first
    if (!t.p2p) return true;
  return false;
}

// One task, or the run of held point-to-point tasks posted in one hoccl
// group (so isend/irecv cannot deadlock whatever their order).
void ProcessGroupHoccl::runBatch(std::vector<Task>& batch) {
  if (!batch[0].p2p) {
    batch[0].fn();
    return;
  }
  check(hocclGroupStart(), "hocclGroupStart");
  std::exception_ptr posting;
  for (auto& t : batch) {
    try {
      t.fn();
    } catch (...) {
      if (!posting) posting = std::current_exception();
    }
  }
  hocclResult_t r = hocclGroupEnd();  // always closes the group
  if (posting) std::rethrow_exception(posting);
  check(r, "hocclGroupEnd (send/recv)");
}

void ProcessGroupHoccl::workerLoop() {
  pthread_setname_np(pthread_self(), "hoccl-pg-work");
  for (;;) {
    std::vector<Task> batch;
    bool aborted;
    std::string timeoutError;
    {
      std::unique_lock<std::mutex> lock(state_->mutex);
      state_->cv.wait(lock, [this] { return (stop_ && queue_.empty()) || frontRunnable(); });
      if (queue_.empty()) return;
      do {
        batch.push_back(std::move(queue_.front()));
        queue_.pop_front();
      } while (batch[0].p2p && !queue_.empty() && queue_.front().p2p);
      aborted = aborted_;
      timeoutError = timeoutError_;
      if (batch[0].deadline != std::chrono::steady_clock::time_point::max()) {  // a collective with a timeout
        watchUntil_ = batch[0].deadline;
        watchedOp_ = batch[0].work->retrieveOpType();
        watchedTimeout_ = batch[0].timeout;
        state_->cv.notify_all();
      }
    }
    std::exception_ptr error;
    try {
      if (aborted && timeoutError.empty())
        throw std::runtime_error("hoccl: the process group was aborted (hocclCommAbort); it runs no more collectives");
      if (aborted)
        throw std::runtime_error("hoccl: the process group was aborted after a timeout and runs no more collectives (" +
                                 timeoutError + ")");
      runBatch(batch);
    } catch (...) {
      error = std::current_exception();
    }
    {
      std::lock_guard<std::mutex> lock(state_->mutex);
      watchUntil_ = std::chrono::steady_clock::time_point::max();
      // The call failed because a timeout aborted the group: say so.
      if (error && !aborted && !timeoutError_.empty())
        error = std::make_exception_ptr(std::runtime_error(timeoutMessage(timeoutError_)));
    }
    if (error) {
      std::lock_guard<std::mutex> lock(state_->mutex);
      lastFailedSeq_ = batch.back().work->seq();
      try {
        std::rethrow_exception(error);
      } catch (const std::exception& e) {
        lastFailedWhat_ = e.what();
      } catch (...) {
        lastFailedWhat_ = "an unknown error";
      }
    }
    for (auto& t : batch) t.fn = nullptr;  // drop the tensors the tasks held before completing
    for (auto& t : batch) t.work->complete(error);
  }
}

}  // namespace hoccl_torch
