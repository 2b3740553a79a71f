// The fake libcuda's streams, events and gates (fake_cuda.h).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

namespace hoccl::fakecuda {

// A stream: a worker thread running its queue in order.
class Stream {
 public:
  Stream() : thread_([this] { loop(); }) {}
  ~Stream() {
    {
      std::lock_guard<std::mutex> l(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  // Waits while kMaxQueued items are queued, as a driver's launch waits
  // when its queue is full: a program that queues calls in a loop without
  // waiting (a benchmark) cannot pile up more work than a GPU would hold.
  // Not from the stream's own thread (its work never queues more).
  static constexpr size_t kMaxQueued = 1024;
  void push(std::function<void()> f) {
    std::unique_lock<std::mutex> l(mu_);
    if (std::this_thread::get_id() != thread_.get_id())
      cv_.wait(l, [&] { return stop_ || pending_ < kMaxQueued; });
    q_.push_back(std::move(f));
    ++pending_;
    cv_.notify_all();
  }
  bool waitIdle(double sec) {
    std::unique_lock<std::mutex> l(mu_);
    return cv_.wait_for(l, std::chrono::duration<double>(sec), [&] { return pending_ == 0; });
  }
  bool idle() {
    std::lock_guard<std::mutex> l(mu_);
    return pending_ == 0;
  }

 private:
  void loop() {
    std::unique_lock<std::mutex> l(mu_);
    for (;;) {
      cv_.wait(l, [&] { return stop_ || !q_.empty(); });
      if (q_.empty()) return;
      std::function<void()> f = std::move(q_.front());
      q_.pop_front();
      l.unlock();
      f();
      l.lock();
      --pending_;
      cv_.notify_all();
    }
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> q_;
  size_t pending_ = 0;
  bool stop_ = false;
  std::thread thread_;
};

// An event: recorded generations, and how many of them have completed.
struct Event {
  std::mutex mu;
  std::condition_variable cv;
  uint64_t recorded = 0, completed = 0;
  bool captured = false;  // last recorded, without the external flag, in a capturing stream
};

// A gate a stream waits at (hold / release).
struct Gate {
  std::mutex mu;
  std::condition_variable cv;
  bool open = false;
};

}  // namespace hoccl::fakecuda
