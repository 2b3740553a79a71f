// The handle table: the communicators that are live in this process. Every
// entry point checks that the handle it was given is one, and a call marks the communicator in use so
// that hocclCommAbort on another thread waits for it before freeing.
//
// Both happen on every call, so they have a path without the table's
// lock and without atomic read-modify-writes:
// - Each thread remembers the last communicator it found in the table
//   and the table's removal count then. While nothing has been removed
//   since, that communicator is still live.
// - A thread marks a communicator in use by writing it into one of its
//   hazard slots (a word only that thread writes) before it checks the
//   count. A removal bumps the count, then waits until no slot holds the
//   communicator it removed.
// The two sides meet Dekker-style, each a store then a load; the fence
// between them is asymmetric: a compiler barrier on the call path, and
// membarrier(2) on the (rare) removal path, which makes every thread of
// the process pass a full barrier. Where membarrier is not available, the
// call path takes a real fence instead.
#include <linux/membarrier.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <thread>

#include "src/api/api_internal.h"
#include "base/log.h"
#include "base/tls.h"

namespace hoccl {
namespace {

std::mutex handlesMutex;
// Each live communicator with the process that made it: one inherited by a
// fork()ed child lives on in the parent, and its shared memory and
// connections are the parent's, so the child is refused it by name.
std::map<hocclComm*, pid_t>& liveHandles() {
  static std::map<hocclComm*, pid_t> live;
  return live;
}
std::atomic<uint64_t> removals{0};  // communicators removed so far
std::atomic<pid_t> thisProcess{0};  // getpid(), kept here: the slow path asks often

// A fork() while another thread holds the table's lock would leave it locked in
// the child; and the forking thread's "known live" answer must not carry
// over (the child's first use of a communicator asks the table).
void beforeFork() { handlesMutex.lock(); }
void afterForkInParent() { handlesMutex.unlock(); }
void afterForkInChild() {
  thisProcess.store(getpid(), std::memory_order_relaxed);
  removals.fetch_add(1, std::memory_order_relaxed);
  handlesMutex.unlock();
}

// membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) registered for this process:
// decided once, before the first communicator is registered.
std::atomic<bool> asymmetric{false};
void decideFences() {
  static std::once_flag once;
  std::call_once(once, [] {
    long cmds = syscall(SYS_membarrier, MEMBARRIER_CMD_QUERY, 0, 0);
    bool ok = cmds > 0 && (cmds & MEMBARRIER_CMD_PRIVATE_EXPEDITED) &&
              syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0;
    asymmetric.store(ok, std::memory_order_relaxed);
    thisProcess.store(getpid(), std::memory_order_relaxed);
    pthread_atfork(beforeFork, afterForkInParent, afterForkInChild);
  });
}
inline void lightFence() {
  if (asymmetric.load(std::memory_order_relaxed))
    std::atomic_signal_fence(std::memory_order_seq_cst);
  else
    std::atomic_thread_fence(std::memory_order_seq_cst);
}
void heavyFence() {
  if (!asymmetric.load(std::memory_order_relaxed) ||
      syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) != 0)
    std::atomic_thread_fence(std::memory_order_seq_cst);
}

// One per thread that has entered a communicator; never freed, reused once
// its thread has exited.
struct Hazards {
  static constexpr int kSlots = 4;
  std::atomic<hocclComm*> slot[kSlots] = {};
  std::atomic<bool> taken{true};
  Hazards* next = nullptr;
};
std::atomic<Hazards*> hazardList{nullptr};

Hazards* claimHazards() {
  for (Hazards* h = hazardList.load(std::memory_order_acquire); h; h = h->next) {
    bool free = false;
    if (!h->taken.load(std::memory_order_relaxed) && h->taken.compare_exchange_strong(free, true)) return h;
  }
  Hazards* h = new Hazards;
  Hazards* head = hazardList.load(std::memory_order_relaxed);
  do {
    h->next = head;
  } while (!hazardList.compare_exchange_weak(head, h));
  return h;
}

struct ThreadHazards {  // hands the slots back when the thread exits
  Hazards* h = nullptr;
  ~ThreadHazards() {
    if (h) h->taken.store(false, std::memory_order_release);
  }
};
thread_local ThreadHazards threadHazards;  // a destructor: the general TLS model, used once per thread
HOCCL_THREAD_LOCAL Hazards* myHazards = nullptr;
HOCCL_THREAD_LOCAL unsigned slotsUsed = 0;  // bit i: slot i holds a communicator
HOCCL_THREAD_LOCAL hocclComm* knownLive = nullptr;
HOCCL_THREAD_LOCAL uint64_t knownRemovals = ~uint64_t{0};

Status checkLive(hocclComm* comm, const char* fn) {  // under handlesMutex
  if (!comm) return errorf(hocclInvalidArgument, "%s: comm is NULL", fn);
  auto it = liveHandles().find(comm);
  if (it == liveHandles().end())
    return errorf(hocclInvalidUsage, "%s: comm %p is not a live communicator (destroyed, aborted or never created)",
                  fn, static_cast<void*>(comm));
  if (it->second != thisProcess.load(std::memory_order_relaxed))
    return errorf(hocclInvalidUsage,
                  "%s: comm %p belongs to process %d, which fork()ed this one; a communicator does not cross "
                  "fork(): the child makes its own (hocclGetUniqueId, hocclCommInitRank)",
                  fn, static_cast<void*>(comm), static_cast<int>(it->second));
  return Status();
}

bool inAnySlot(hocclComm* comm) {
  for (Hazards* h = hazardList.load(std::memory_order_acquire); h; h = h->next)
    for (auto& s : h->slot)
      if (s.load(std::memory_order_acquire) == comm) return true;
  return false;
}

}  // namespace

void registerComm(hocclComm* comm) {
  decideFences();
  static uint64_t registered = 0;  // under handlesMutex
  std::lock_guard<std::mutex> lock(handlesMutex);
  comm->serial = ++registered;
  liveHandles()[comm] = thisProcess.load(std::memory_order_relaxed);
}

bool unregisterComm(hocclComm* comm) {
  {
    std::lock_guard<std::mutex> lock(handlesMutex);
    if (!liveHandles().erase(comm)) return false;
    removals.fetch_add(1, std::memory_order_relaxed);
  }
  heavyFence();  // from here on, every thread that enters comm sees the new count
  return true;
}

bool waitUnused(hocclComm* comm, double seconds) {
  auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  for (;;) {
    if (!inAnySlot(comm) && comm->inFlight.load() == 0) return true;
    if (std::chrono::steady_clock::now() > end) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

Status checkComm(hocclComm* comm, const char* fn) {
  std::lock_guard<std::mutex> lock(handlesMutex);
  return checkLive(comm, fn);
}

namespace {

// enterComm when the communicator is not known live, or every slot is taken.
__attribute__((noinline)) Status enterSlowly(hocclComm* comm, CommUse* use, const char* fn, int i) {
  Hazards* h = myHazards;
  if (!h) h = myHazards = threadHazards.h = claimHazards();
  if (i < 0) {
    const unsigned free = ~slotsUsed & ((1u << Hazards::kSlots) - 1);
    i = free && comm ? __builtin_ctz(free) : -1;
    if (i >= 0) {
      h->slot[i].store(comm, std::memory_order_relaxed);
      lightFence();
    }
  }
  if (i >= 0) {
    // Ask the table, holding the slot so that the answer stays true.
    std::lock_guard<std::mutex> lock(handlesMutex);
    Status st = checkLive(comm, fn);
    if (!st.ok()) {
      h->slot[i].store(nullptr, std::memory_order_release);
      return st;
    }
    knownLive = comm;
    knownRemovals = removals.load(std::memory_order_relaxed);
    slotsUsed |= 1u << i;
    use->comm = comm;
    use->slot = i;
    return Status();
  }
  // Every slot taken (a group over many communicators): count it instead.
  std::lock_guard<std::mutex> lock(handlesMutex);
  HOCCL_TRY(checkLive(comm, fn));
  comm->inFlight.fetch_add(1);
  use->comm = comm;
  use->slot = -1;
  return Status();
}

}  // namespace

Status enterComm(hocclComm* comm, CommUse* use, const char* fn) {
  Hazards* h = myHazards;
  const unsigned free = ~slotsUsed & ((1u << Hazards::kSlots) - 1);
  if (!h || !free || !comm || comm != knownLive) return enterSlowly(comm, use, fn, -1);
  const int i = __builtin_ctz(free);
  h->slot[i].store(comm, std::memory_order_relaxed);
  lightFence();
  if (removals.load(std::memory_order_relaxed) != knownRemovals) return enterSlowly(comm, use, fn, i);
  slotsUsed |= 1u << i;
  use->comm = comm;
  use->slot = i;
  return Status();
}

void leaveComm(CommUse* use) {
  if (!use->comm) return;
  if (use->slot >= 0) {
    myHazards->slot[use->slot].store(nullptr, std::memory_order_release);
    slotsUsed &= ~(1u << use->slot);
  } else {
    use->comm->inFlight.fetch_sub(1);
  }
  use->comm = nullptr;
}

}  // namespace hoccl
