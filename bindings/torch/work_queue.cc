// How a ProcessGroupHoccl runs its work: the queue, the worker thread that
// runs it in program order, and the Works callers wait on.
#include "process_group_hoccl.h"

#include <stdexcept>
#include <string>
#include <utility>

namespace hoccl_torch {

using c10d::OpType;

HocclWork::HocclWork(int rank, OpType type, std::vector<at::Tensor> outputs)
    : Work(rank, type),
      outputs_(std::move(outputs)),
      future_(c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()))) {}

void HocclWork::complete(std::exception_ptr error) {
  if (error)
    future_->setError(error);
  else
    future_->markCompleted(c10::IValue(outputs_));
  finish(error);
}

void ProcessGroupHoccl::startWorker() {
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
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  cv_.notify_all();
  std::lock_guard<std::mutex> join(joinMutex_);
  if (worker_.joinable()) worker_.join();  // queued work finishes (or times out) first
}

void ProcessGroupHoccl::stopAllWorkers() {
  std::lock_guard<std::mutex> lock(liveMutex());
  for (ProcessGroupHoccl* pg : liveGroups()) pg->stopWorker();
}

void ProcessGroupHoccl::abort() {
  hocclComm_t comm;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (aborted_) return;
    aborted_ = true;
    comm = comm_;
  }
  // A call running on the worker returns with an error; queued work fails
  // without reaching hoccl (the worker sees aborted_).
  hocclCommAbort(comm);
  cv_.notify_all();
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHoccl::enqueue(OpType type, std::vector<at::Tensor> outputs,
                                                          std::function<void()> fn, bool p2p) {
  auto work = c10::make_intrusive<HocclWork>(rank_, type, std::move(outputs));
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!stop_) {
      queue_.push_back(Task{work, std::move(fn), p2p});
    } else {  // no worker any more (the process is exiting): fail, never wait
      work->complete(std::make_exception_ptr(
          std::runtime_error("hoccl: the process group's worker has stopped (interpreter exit); it runs no more collectives")));
      return work;
    }
  }
  cv_.notify_one();
  return work;
}

// One task, or a run of point-to-point tasks posted in one hoccl group (so
// isend/irecv pairs queued together cannot deadlock whatever their order).
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
  for (;;) {
    std::vector<Task> batch;
    bool aborted;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;
      do {
        batch.push_back(std::move(queue_.front()));
        queue_.pop_front();
      } while (batch[0].p2p && !queue_.empty() && queue_.front().p2p);
      aborted = aborted_;
    }
    std::exception_ptr error;
    try {
      if (aborted)
        throw std::runtime_error("hoccl: the process group was aborted (hocclCommAbort); it runs no more collectives");
      runBatch(batch);
    } catch (...) {
      error = std::current_exception();
    }
    for (auto& t : batch) t.fn = nullptr;  // drop the tensors the tasks held before completing
    for (auto& t : batch) t.work->complete(error);
  }
}

}  // namespace hoccl_torch
