// How the communicator runs calls: schedules and connections first, then
// the executor; and what the executor may ask the communicator meanwhile.
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <thread>

#include "src/comm/comm.h"

using namespace hoccl;

std::string hocclComm::describeSelf() const {
  return "rank " + std::to_string(rank) + " (pid " + std::to_string(getpid()) + " on " + hostId + ")";
}

PeerInfo hocclComm::peerInfo(int peer) const {
  const RankInfo& info = boot->table()[peer];
  return PeerInfo{info.pid, info.hostId};
}

bool hocclComm::peerProcessGone(int peer) {
  ControlBlock* cb = isLocal[peer] && shm ? shm->control(peer) : nullptr;
  if (!cb || !shm->pidVisible(peer)) return false;
  return cb->pid > 0 && kill(cb->pid, 0) != 0 && errno == ESRCH;
}

uint32_t hocclComm::doorbellToken() { return shm->self()->doorbell.load(std::memory_order_acquire); }

void hocclComm::sleepOnDoorbell(uint32_t token, int timeoutMs) { waitDoorbell(shm->self(), token, timeoutMs); }

namespace hoccl {

Status runCalls(const std::vector<CommCall>& calls) {
  // Schedules first. One that needs new connections sets them up with its
  // peers over the bootstrap, which waits for them to do the same; when one
  // thread drives several ranks (a group over several communicators), the
  // ranks that must connect do so on threads of their own.
  const size_t n = calls.size();
  std::vector<std::shared_ptr<const Schedule>> scheds(n);
  std::vector<Status> sts(n);
  auto prep = [&](size_t i) {
    const CommCall& c = calls[i];
    sts[i] = c.comm->prepare(c.key, dtypeSize(c.call.dtype), &scheds[i]);
  };
  std::vector<size_t> uncached;
  for (size_t i = 0; i < n; ++i) {
    const CommCall& c = calls[i];
    if (n > 1 && !c.comm->hasSchedule(c.key, dtypeSize(c.call.dtype))) uncached.push_back(i);
    else prep(i);
  }
  if (uncached.size() == 1) prep(uncached[0]);
  if (uncached.size() > 1) {
    std::vector<std::thread> threads;
    for (size_t i : uncached) threads.emplace_back(prep, i);
    for (std::thread& t : threads) t.join();
  }
  std::vector<Work> work(n);
  for (size_t i = 0; i < n; ++i) {
    hocclComm* comm = calls[i].comm;
    if (!sts[i].ok()) {
      comm->fail(sts[i], true);
      return sts[i];
    }
    Work& w = work[i];
    w.owner = comm;
    w.call = calls[i].call;
    w.call.opSeq = ++comm->opSeq;
    w.schedule = scheds[i];
    w.sliceBytes = comm->settings.sliceBytes;
    w.checkCalls = comm->settings.checkCalls;
    w.directBytes = comm->settings.directBytes;
  }
  return hostExecutor().run(work);
}

}  // namespace hoccl
