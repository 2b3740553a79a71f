// How the communicator runs calls: schedules and connections first, then
// the executor; and what the executor may ask the communicator meanwhile.
#include <unistd.h>

#include <algorithm>
#include <functional>
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
  int pid = 0;
  return links && links->localPeerExited(peer, false, &pid);
}

namespace hoccl {

namespace {

// The executor's view of one prepared call: numbered, with its schedule.
void makeWork(const CommCall& c, std::shared_ptr<const Schedule> sched, Work* w) {
  hocclComm* comm = c.comm;
  w->owner = comm;
  w->call = c.call;
  if (w->call.coll == CollKind::SendRecv) {
    // Each message names its place in the stream between its two ranks.
    comm->sendSeq.resize(comm->nranks);
    comm->recvSeq.resize(comm->nranks);
    for (PeerPart& p : w->call.parts) p.seq = ++(p.send ? comm->sendSeq : comm->recvSeq)[p.peer];
    w->call.opSeq = comm->opSeq;
  } else {
    w->call.opSeq = ++comm->opSeq;
  }
  w->schedule = std::move(sched);
  w->sliceBytes = comm->settings.sliceBytes;
  w->checkCalls = comm->settings.checkCalls;
  w->directBytes = comm->settings.directBytes;
}

}  // namespace

Status runCalls(const CommCall* calls, size_t n) {
  if (n == 1) {  // one call, the common case: no allocation here
    std::shared_ptr<const Schedule> sched;
    Status st = calls[0].comm->prepareCall(calls[0].call, calls[0].key, &sched);
    if (!st.ok()) {
      calls[0].comm->fail(st, true);
      return st;
    }
    Work w;
    makeWork(calls[0], std::move(sched), &w);
    return hostExecutor().run(&w, 1);
  }
  // Schedules first. One that needs new connections sets them up with its
  // peers over the bootstrap, which waits for them to do the same; when one
  // thread drives several ranks (a group over several communicators), the
  // ranks that must connect do so on threads of their own.
  std::vector<std::shared_ptr<const Schedule>> scheds(n);
  std::vector<Status> sts(n);
  auto prep = [&](size_t i) {
    const CommCall& c = calls[i];
    sts[i] = c.comm->prepareCall(c.call, c.key, &scheds[i]);
  };
  // Calls still to build, per communicator: one thread per communicator
  // builds its calls in order (a communicator's schedule cache and
  // connections are not shared between threads).
  std::vector<std::pair<hocclComm*, std::vector<size_t>>> uncached;
  for (size_t i = 0; i < n; ++i) {
    const CommCall& c = calls[i];
    if (c.comm->hasSchedule(c.key, dtypeSize(c.call.dtype))) {
      prep(i);
      continue;
    }
    auto it = std::find_if(uncached.begin(), uncached.end(), [&](const auto& u) { return u.first == c.comm; });
    if (it == uncached.end()) it = uncached.insert(uncached.end(), {c.comm, {}});
    it->second.push_back(i);
  }
  auto prepAll = [&](const std::vector<size_t>& idx) {
    for (size_t i : idx) prep(i);
  };
  if (uncached.size() == 1) prepAll(uncached[0].second);
  if (uncached.size() > 1) {
    std::vector<std::thread> threads;
    for (const auto& u : uncached) threads.emplace_back(prepAll, std::cref(u.second));
    for (std::thread& t : threads) t.join();
  }
  std::vector<Work> work(n);
  for (size_t i = 0; i < n; ++i) {
    if (!sts[i].ok()) {
      calls[i].comm->fail(sts[i], true);
      return sts[i];
    }
    makeWork(calls[i], scheds[i], &work[i]);
  }
  return hostExecutor().run(work.data(), n);
}

}  // namespace hoccl
