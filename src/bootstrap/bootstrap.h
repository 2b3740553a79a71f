// Bootstrap: how ranks find each other before any transport exists.
//
// One process serves a rendezvous (the "root", started by hocclGetUniqueId
// or, with HOCCL_COMM_ID, by rank 0's init). Every rank connects to it and
// sends a hello (job magic, rank, library version, wire settings, node id,
// its own listening address); the root checks that they agree and returns
// the table of all ranks, or an error naming the rank and value that differ.
// Afterwards ranks talk to each other directly over tagged TCP messages.
#pragma once

#include <cstdint>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "base/error.h"
#include "base/oob.h"
#include "base/random.h"
#include "base/socket.h"
#include "src/bootstrap/liveness.h"

namespace hoccl {

constexpr uint32_t kUniqueIdTag = 0x49434f48;  // "HOCI"
constexpr uint32_t kBootstrapProtocol = 3;  // 3: RankInfo::heartbeatPort

// The contents of an hocclUniqueId.
struct UniqueIdData {
  uint32_t tag = kUniqueIdTag;
  uint32_t protocol = kBootstrapProtocol;
  uint64_t magic = 0;          // per job: a stale or foreign peer is refused
  SockAddr root;               // where the rendezvous listens
  uint8_t rootStartedByInit = 0;  // HOCCL_COMM_ID: rank 0 starts the root
  // FNV-1a of the hocclUniqueId's bytes with these as zeros: a corrupted id
  // is refused as such instead of used (src/api/api.cc).
  uint64_t checksum = 0;
};
static_assert(sizeof(UniqueIdData) <= 128, "must fit an hocclUniqueId");

// What each rank tells all others (fixed size: it travels as bytes).
struct RankInfo {
  char hostId[128] = {0};
  char machineId[64] = {0};  // the kernel's boot id: same value = same physical machine
  int32_t pid = 0;
  SockAddr listenAddr;
  // Where the rank's process answers heartbeats (src/bootstrap/liveness.h):
  // this port at listenAddr's address; 0 if it does not.
  int32_t heartbeatPort = 0;
};

// Whether two ranks run in one process (the same pid on the same machine).
inline bool sameProcess(const RankInfo& a, const RankInfo& b) {
  return a.pid == b.pid && strcmp(a.machineId, b.machineId) == 0;
}

// A collective's signature as one rank ran it. A rank whose call has
// stalled sends it to the ranks it waits on: where ranks disagree about a
// call in a way that changes who sends (different roots, a reduce against
// a broadcast), every rank may wait to receive and no message carrying the
// signature ever arrives, so only this notice can name the difference.
struct CallNotice {
  int32_t rank = 0;  // the sender
  int32_t root = 0;
  uint64_t opSeq = 0;  // the collective's number on its communicator, from 1
  uint64_t count = 0;
  uint8_t coll = 0, dtype = 0, op = 0;
  uint8_t pad[5] = {};
};
static_assert(sizeof(CallNotice) == 32, "travels as bytes: no implicit padding");

// Starts the rendezvous thread for `nranks` unknown until the first hello.
// It waits for the first hello without a limit, then exits once it has
// answered every rank or `timeoutSec` after that first hello (set by
// `timeoutFrom`, as the timeout's message names it).
Status startRoot(const SockAddr& bindAddr, uint64_t magic, double timeoutSec, SockAddr* bound,
                 const std::string& timeoutFrom = "HOCCL_TIMEOUT");

// If this process serves the rendezvous `magic`, waits (up to timeoutSec)
// until it has answered every rank.
void waitForLocalRoot(uint64_t magic, double timeoutSec);

// Heartbeats to the ranks on other hosts (liveness.h): a peer silent for
// longer than timeoutSec is dead (0: no heartbeats).
struct HeartbeatOptions {
  double timeoutSec = 0;    // HOCCL_HEARTBEAT_TIMEOUT
  double intervalSec = 0.5; // HOCCL_HEARTBEAT_INTERVAL
};

struct BootstrapOptions {
  int rank = 0;
  int nranks = 1;
  double timeoutSec = 300;
  int connectRetries = 100;
  std::string hostId;
  std::string machineId;
  std::string fingerprint;  // wire settings, "NAME=value\n" lines
  std::string ifnameRule;   // HOCCL_SOCKET_IFNAME
  int libVersion = 0;       // 0: this library's (tests pretend to be others)
  HeartbeatOptions heartbeat;
};

// The transports reach it through OutOfBand (base/oob.h).
class Bootstrap : public OutOfBand {
 public:
  // Joins the rendezvous described by `id`.
  static Status join(const UniqueIdData& id, const BootstrapOptions& opt,
                     std::unique_ptr<Bootstrap>* out);
  // A bootstrap among ranks whose table is already known (communicator
  // split); `listener` is this rank's already-listening socket. The
  // table's heartbeat ports are those of processes that still answer (the
  // parent's bootstrap holds this process's service).
  static Status fromTable(uint64_t magic, int rank, std::vector<RankInfo> table, Socket listener,
                          double timeoutSec, std::unique_ptr<Bootstrap>* out, const HeartbeatOptions& hb = {});
  // A listening socket on the same interface as this bootstrap (for splits).
  Status newListener(Socket* sock, SockAddr* addr) const;

  int rank() const override { return rank_; }
  int nranks() const override { return static_cast<int>(table_.size()); }
  uint64_t magic() const { return magic_; }
  const std::vector<RankInfo>& table() const { return table_; }
  // The interface and address this rank listens on (the network transport
  // uses the same one unless HOCCL_SOCKET_IFNAME says otherwise).
  const std::string& interfaceName() const { return ifname_; }
  const SockAddr& listenAddress() const { return listenAddr_; }

  // A recv, allGather or barrier ends early with the abort of any peer
  // that sent one (see broadcastAbort).
  Status send(int peer, uint32_t tag, const void* data, size_t bytes) override;
  Status recv(int peer, uint32_t tag, std::string* data) override;
  // `all` holds nranks blocks of `bytes`; this rank's block is filled in.
  Status allGather(void* all, size_t bytes) override;
  Status barrier() override;
  // A peer's abort, then the wait hook (setWaitHook) with the notices that
  // arrived.
  Status whileWaiting(int peer) override;

  // Failure propagation: tells every rank r with tell[r] that this rank
  // stopped, with `code` and `msg`: over a connection the two already
  // have, when no other thread is inside a call above (no descriptor
  // needed: a rank that ran out still reaches its peers), else over a short
  // connection of its own, so any thread may call it. Returns within
  // `budgetSec`; a peer not reached by then is skipped.
  void broadcastAbort(hocclResult_t code, const std::string& msg, const std::vector<bool>& tell,
                      double budgetSec);
  // The first abort a peer sent us, after reading what has arrived without
  // waiting; OK if none. Any thread: while another thread is inside a call
  // above, it reports what that call has read so far.
  Status pollAbort();
  // Sends `notice` to every rank r with tell[r], as broadcastAbort sends
  // (short connections, within budgetSec, any thread).
  void sendCallNotice(const CallNotice& notice, const std::vector<bool>& tell, double budgetSec);
  // The call notices peers sent since the last time, after reading what
  // has arrived without waiting.
  std::vector<CallNotice> takeCallNotices();
  // Called while a recv waits, every 100 ms or so after its first 100 ms,
  // with the peer it waits for and the call notices that arrived since
  // (taken: the hook keeps what it does not use); an error ends the wait
  // with it. Set once, before any call (the communicator's call check).
  using WaitHook = std::function<Status(int peer, std::vector<CallNotice> notices)>;
  void setWaitHook(WaitHook hook) { waitHook_ = std::move(hook); }
  // The first abort a peer sent us among what has been read; OK if none.
  Status abortSeen();
  // hocclRemoteError if `peer` is on another host and its process has not
  // answered a heartbeat for longer than HOCCL_HEARTBEAT_TIMEOUT: "rank 2:
  // peer rank 5 (pid 123 on nodeB) is silent: no heartbeat for 3.0 s ...";
  // else OK. Any thread, no system call.
  Status peerSilent(int peer) const;
  // Seconds `peer` has not answered (0: not watched, or cannot tell).
  double silentFor(int peer) const;
  // While on, abort notices are still recorded but abortSeen() reports
  // none, so the bootstrap carries messages among the ranks that survived
  // a failure (hocclCommShrink). Off again restores what was seen.
  void setIgnoreAborts(bool on);

  ~Bootstrap() override;

 private:
  // Sends one frame to every rank r with tell[r] within budgetSec: with
  // viaExisting, over a connection this rank already has with r where one
  // takes it at once; else (and for the rest) over a short connection of
  // its own.
  void sendShort(uint32_t tag, const void* data, size_t bytes, const std::vector<bool>& tell, double budgetSec,
                 bool viaExisting);
  Bootstrap() = default;
  Status connectTo(int peer);
  Status pump(const Deadline& dl, int waitPeer);
  Status acceptOne(const Deadline& dl);
  void readQueuedNotices();
  Status noticeOf(const Status& lost);
  void recordAbort(const std::string& payload);
  // Watches every rank on another host that answers heartbeats.
  void watchPeers(const HeartbeatOptions& hb);
  // A peer silent for a few heartbeats: a notice to it would wait out its
  // budget (a cut link) or lie unread (a stopped process).
  bool quiet(int peer) const;
  Status sendLocked(int peer, uint32_t tag, const void* data, size_t bytes);
  Status recvLocked(int peer, uint32_t tag, std::string* data);

  int rank_ = 0;
  uint64_t magic_ = 0;
  double timeoutSec_ = 300;
  int connectRetries_ = 100;
  uint32_t collTag_ = 0;
  std::vector<RankInfo> table_;
  Socket listener_;
  SockAddr listenAddr_;
  std::string ifname_;
  std::vector<Socket> out_;  // per peer, connections this rank opened
  std::vector<Socket> in_;   // per peer, connections the peer opened
  std::map<std::pair<int, uint32_t>, std::deque<std::string>> inbox_;
  std::mutex mu_;  // the sockets and inbox above, after construction
  std::mutex abortMu_;
  Status abort_;   // the first abort notice received
  bool ignoreAborts_ = false;  // under abortMu_: see setIgnoreAborts
  std::vector<CallNotice> notices_;  // call notices not yet taken (under abortMu_)
  WaitHook waitHook_;
  int refused_ = 0;  // incoming connections that were not ours (the first is logged)
  std::shared_ptr<Liveness> liveness_;  // while heartbeats are on
  // Per rank, set at construction: the watch of a peer on another host.
  std::vector<std::unique_ptr<Liveness::Watch>> watches_;
  HeartbeatOptions heartbeat_;
};

}  // namespace hoccl
