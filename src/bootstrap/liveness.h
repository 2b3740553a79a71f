// Heartbeats between the processes of a job that run on different hosts.
//
// A peer that dies closes its sockets, and the ranks waiting on it hear so
// at once. A peer that goes silent does not: behind a cut link, on a frozen
// host, or stopped (SIGSTOP, a debugger), its connections stay open, and
// only HOCCL_TIMEOUT, which must outlast a legitimately slow call, would
// end the wait. So each process pings every process on another host that
// it shares a communicator with, every HOCCL_HEARTBEAT_INTERVAL, and that
// process's heartbeat thread echoes the ping; a rank that waits on a peer
// asks how long the peer has not answered and fails once that passes
// HOCCL_HEARTBEAT_TIMEOUT.
//
// Why this shape:
//  - One thread and one connection per peer process, shared by every rank
//    (threads as ranks) and communicator (splits, shrinks) of the process:
//    the cost is a 16-byte ping and its echo per peer process per interval,
//    off the data path.
//  - A thread of its own, not the progress loop: a peer that is alive but
//    late to a call (its application is computing) still answers, and a
//    process whose threads all stop (SIGSTOP, a frozen host) does not.
//  - An echo, not one-way beats: what this process measures depends only
//    on the peer's thread answering, not on whether the peer has got round
//    to watching this process too.
//  - To the peer's bootstrap address: the socket transport uses the same
//    interface (and RoCE the same link), so a cut data link cuts the
//    heartbeats too. Where InfiniBand has a fabric of its own beside an
//    Ethernet control network, a cut IB link shows up as the transport's
//    own retry-exceeded error instead (HOCCL_IB_TIMEOUT, HOCCL_IB_RETRY_CNT).
//  - Silence this process caused is not blamed on a peer: when its own
//    heartbeat thread has not run for a while (the whole process was
//    stopped, or starved of CPU), Watch::silentFor() answers 0, and the
//    thread restarts every peer's count when it runs again.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "base/socket.h"

namespace hoccl {

struct LivenessPeer;

class Liveness : public std::enable_shared_from_this<Liveness> {
 public:
  // This process's service, made on first use (and made again in a forked
  // child: threads do not cross a fork).
  static std::shared_ptr<Liveness> process();
  // A service of its own (tests run two "processes" in one).
  static std::shared_ptr<Liveness> create();
  ~Liveness();
  Liveness(const Liveness&) = delete;
  Liveness& operator=(const Liveness&) = delete;

  // The port this process answers heartbeats on at `local`'s address (one
  // listener per address, opened on the first ask); 0, logged, if it
  // cannot listen there: peers then do not watch this process.
  int listen(const SockAddr& local);

  // Held while a communicator watches a peer process; the pings to that
  // process go on while some watch of it exists.
  class Watch {
   public:
    ~Watch();
    // Seconds since the peer last answered (since the watch began, before
    // its first answer). 0 while this process cannot tell (its own
    // heartbeat thread has fallen behind), and once the peer's service
    // closed the connection: its process exited or freed its
    // communicators, which other checks report.
    double silentFor() const;
    // What the heartbeat connection to the peer looks like now, for an
    // error message: pings unanswered, and TCP's view (retransmissions,
    // backoff, round-trip time) where connected.
    std::string describe() const;

   private:
    friend class Liveness;
    std::shared_ptr<Liveness> svc_;
    std::shared_ptr<LivenessPeer> peer_;
  };
  // Starts pinging the process that answers at `addr`, every intervalSec
  // at most (the service pings every peer at the smallest interval asked
  // for).
  std::unique_ptr<Watch> watch(const SockAddr& addr, double intervalSec);

  // Tests: while paused the thread neither pings nor answers, as if the
  // process were stopped.
  void pauseForTesting(bool paused);

 private:
  struct Listener {
    std::string ip;
    Socket sock;
    int port = 0;
  };
  struct Answering {  // a connection of a process that watches this one
    Socket sock;
    size_t have = 0;
    unsigned char buf[16] = {};
  };
  Liveness();
  void ensureThreadLocked();
  void wake() const;
  void run();
  double staleAfter() const;
  void pingOrConnect(LivenessPeer& p, double now);
  void readPongs(LivenessPeer& p, double now);
  void finishConnect(LivenessPeer& p, double now);
  bool answer(Answering& a);
  void acceptAll(const Listener& l);

  const pid_t pid_;
  int wakeFd_ = -1;  // an eventfd: a new peer to connect to, or stop
  std::mutex mu_;
  std::condition_variable pausedCv_;
  bool stop_ = false, paused_ = false;
  std::map<std::string, std::shared_ptr<LivenessPeer>> peers_;  // by "address:port"
  std::vector<Listener> listeners_;
  std::vector<Answering> answering_;  // the thread's own
  std::atomic<double> interval_{0.5};
  std::atomic<double> lastTick_{0};  // when the thread last ran its loop
  std::thread thread_;
};

}  // namespace hoccl
