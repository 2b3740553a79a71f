// Communicators made from a parent's, with no new unique id:
// hocclCommSplit (collective over the parent) and hocclCommCreateGroup
// (collective over the listed ranks only). Both build the child the same
// way, from each member's entry (its new listener, settings and algorithm).
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "base/random.h"
#include "src/comm/comm.h"
#include "src/comm/comm_settings.h"

namespace hoccl {
namespace {

// What each rank says about itself when a communicator is made from a
// parent (hocclCommSplit, hocclCommCreateGroup).
struct ChildEntry {
  int32_t color;
  int32_t key;
  RankInfo info;
  char algo[32];     // the new communicator's algorithm; "" if this rank's config is invalid
  char failed[200];  // why this rank cannot take part (its listener failed); "" if it can
};

// This rank's entry: a new listener for the child's bootstrap (none for
// HOCCL_SPLIT_NOCOLOR) and the child's settings. A rank whose listener
// fails still takes part in the exchange, saying why, so every member
// fails at once and the parent stays in step.
void fillEntry(hocclComm* parent, bool member, int color, int key, const Settings& settings,
               const Status& configured, Socket* listener, ChildEntry* me) {
  SockAddr addr;
  Status listening = member ? parent->boot->newListener(listener, &addr) : Status();
  std::memset(static_cast<void*>(me), 0, sizeof *me);
  me->color = color;
  me->key = key;
  me->info = parent->boot->table()[parent->rank];
  me->info.listenAddr = addr;
  if (configured.ok()) snprintf(me->algo, sizeof me->algo, "%s", settings.algo.c_str());
  if (!listening.ok())
    snprintf(me->failed, sizeof me->failed, "rank %d (pid %d on %s) cannot listen: %s", parent->rank,
             static_cast<int>(getpid()), parent->hostId.c_str(), listening.message().c_str());
}

// Builds the child of `parent` whose members are `members` (parent ranks,
// in the child's rank order) from their entries `all` (indexed by parent
// rank). `what` names the call in messages.
Status buildChild(hocclComm* parent, const char* what, const std::vector<int>& members,
                  std::vector<ChildEntry>& all, const Settings& settings, uint64_t commHash, Socket listener,
                  hocclComm** out) {
  const ChildEntry& me = all[parent->rank];
  for (int r : members) {
    all[r].failed[sizeof all[r].failed - 1] = '\0';
    if (all[r].failed[0]) return errorf(hocclSystemError, "%s: %s", what, all[r].failed);
  }
  // Members agree on the algorithm, or their schedules would not match.
  for (int r : members) {
    if (!all[r].algo[0]) return errorf(hocclInvalidUsage, "%s: rank %d passed an invalid config", what, r);
    if (strncmp(all[r].algo, me.algo, sizeof me.algo) != 0)
      return errorf(hocclInvalidUsage,
                    "%s: ranks %d and %d asked for different algorithms (\"%.32s\" and \"%.32s\"); "
                    "config->algorithm must be the same on every member",
                    what, parent->rank, r, me.algo, all[r].algo);
  }
  std::vector<RankInfo> table;
  int newRank = -1;
  for (int r : members) {
    if (r == parent->rank) newRank = static_cast<int>(table.size());
    table.push_back(all[r].info);
  }
  std::unique_ptr<hocclComm> c(new hocclComm());
  c->settings = settings;
  c->rank = newRank;
  c->nranks = static_cast<int>(table.size());
  c->hostId = parent->hostId;
  c->probed = parent->probed;  // a child measures nothing its parent measured
  c->sharingMachine = parent->sharingMachine;
  c->commHash = commHash;
  HOCCL_TRY(Bootstrap::fromTable(c->commHash, newRank, std::move(table), std::move(listener),
                                 c->settings.timeoutSec, &c->boot, heartbeatOptions(c->settings)));
  HOCCL_TRY(tellPeersSetupFailed(c.get(), finishInit(c.get())).context(what));
  *out = c.release();
  return Status();
}

// The tag of hocclCommCreateGroup's messages on the parent's bootstrap.
constexpr uint32_t kTagCreateGroup = 0x30000000;

// A child's settings before its config: its parent's, as the parent was
// asked for them (HOCCL_SLICE_BYTES=auto chooses anew for the members).
Settings childSettings(const hocclComm& parent) {
  Settings s = parent.settings;
  s.sliceBytes = parent.sliceBytesAsked;
  return s;
}

}  // namespace

Status commSplit(hocclComm* parent, int color, int key, const hocclConfig_t* config, hocclComm** out) {
  Settings settings = childSettings(*parent);
  Status configured = applyConfig(config, &settings);
  Socket listener;
  std::vector<ChildEntry> all(parent->nranks);
  fillEntry(parent, color != HOCCL_SPLIT_NOCOLOR, color, key, settings, configured, &listener, &all[parent->rank]);
  HOCCL_TRY(parent->boot->allGather(all.data(), sizeof(ChildEntry)).context("hocclCommSplit"));
  int generation = parent->splitCount++;
  *out = nullptr;
  HOCCL_TRY(configured.context("hocclCommSplit"));
  if (color == HOCCL_SPLIT_NOCOLOR) return Status();
  std::vector<int> members;
  for (int r = 0; r < parent->nranks; ++r)
    if (all[r].color == color) members.push_back(r);
  std::stable_sort(members.begin(), members.end(), [&](int a, int b) { return all[a].key < all[b].key; });
  uint64_t seed[3] = {parent->commHash, static_cast<uint64_t>(generation), static_cast<uint64_t>(color)};
  return buildChild(parent, "hocclCommSplit", members, all, settings, fnv1a64(seed, sizeof seed),
                    std::move(listener), out);
}

// Collective over `members` only, as MPI_Comm_create_group: every member
// sends its entry to the first member (the leader), which answers each
// with all of them, or with why it cannot. All these messages between two
// ranks share one tag, so a pair of ranks reads them in the order both
// created their groups; each carries the member list's hash and how many
// groups of that list this rank made before, so ranks whose lists or order
// differ are told so (naming both) instead of mixing their entries.
Status commCreateGroup(hocclComm* parent, const std::vector<int>& members, const hocclConfig_t* config,
                       hocclComm** out, bool afterFailure, const char* what) {
  *out = nullptr;
  // After a failure the parent's bootstrap has seen abort notices; the
  // survivors talk past them (and only to each other) until the child exists.
  struct IgnoreAborts {
    Bootstrap* boot;
    ~IgnoreAborts() {
      if (boot) boot->setIgnoreAborts(false);
    }
  } ignore{afterFailure ? parent->boot.get() : nullptr};
  if (afterFailure) parent->boot->setIgnoreAborts(true);
  Settings settings = childSettings(*parent);
  Status configured = applyConfig(config, &settings);
  struct Entry {
    uint64_t listHash;
    uint64_t count;
    ChildEntry entry;
  };
  struct Answer {
    uint64_t listHash;
    uint64_t count;
    int32_t code;  // hocclSuccess: member entries follow, in list order
    char why[236];
  };
  const uint64_t listHash = fnv1a64(members.data(), members.size() * sizeof(int), parent->commHash);
  const uint64_t count = parent->groupCounts[listHash]++;
  Socket listener;
  std::vector<ChildEntry> all(parent->nranks);
  fillEntry(parent, true, 0, 0, settings, configured, &listener, &all[parent->rank]);
  auto differs = [&](int from) {
    return errorf(hocclInvalidUsage,
                  "%s: ranks %d and %d are creating different groups (their member lists differ, or they create "
                  "groups in a different order)",
                  what, std::min(parent->rank, from), std::max(parent->rank, from));
  };
  const int leader = members.front();
  if (parent->rank == leader) {
    Status bad;
    for (size_t i = 1; i < members.size() && bad.ok(); ++i) {
      std::string got;
      HOCCL_TRY(parent->boot->recv(members[i], kTagCreateGroup, &got).context(what));
      Entry e;
      if (got.size() != sizeof e) {
        bad = differs(members[i]);
        break;
      }
      std::memcpy(static_cast<void*>(&e), got.data(), sizeof e);
      if (e.listHash != listHash || e.count != count) bad = differs(members[i]);
      all[members[i]] = e.entry;
    }
    Answer head{listHash, count, static_cast<int32_t>(bad.code()), {}};
    snprintf(head.why, sizeof head.why, "%s", bad.message().c_str());
    std::string answer(reinterpret_cast<const char*>(&head), sizeof head);
    if (bad.ok())
      for (int r : members) answer.append(reinterpret_cast<const char*>(&all[r]), sizeof(ChildEntry));
    for (size_t i = 1; i < members.size(); ++i)
      HOCCL_TRY(parent->boot->send(members[i], kTagCreateGroup, answer.data(), answer.size()).context(what));
    HOCCL_TRY(bad);
  } else {
    Entry mine{listHash, count, all[parent->rank]};
    HOCCL_TRY(parent->boot->send(leader, kTagCreateGroup, &mine, sizeof mine).context(what));
    std::string got;
    HOCCL_TRY(parent->boot->recv(leader, kTagCreateGroup, &got).context(what));
    Answer head;
    if (got.size() < sizeof head) return differs(leader);
    std::memcpy(static_cast<void*>(&head), got.data(), sizeof head);
    head.why[sizeof head.why - 1] = '\0';
    if (head.listHash != listHash || head.count != count) return differs(leader);
    if (head.code != hocclSuccess)
      return Status(static_cast<hocclResult_t>(head.code),
                    std::string(head.why) + " (as rank " + std::to_string(leader) + " found)");
    if (got.size() != sizeof head + members.size() * sizeof(ChildEntry)) return differs(leader);
    for (size_t i = 0; i < members.size(); ++i)
      std::memcpy(static_cast<void*>(&all[members[i]]), got.data() + sizeof head + i * sizeof(ChildEntry),
                  sizeof(ChildEntry));
  }
  HOCCL_TRY(configured.context(what));
  uint64_t seed[3] = {parent->commHash, listHash, count};
  return buildChild(parent, what, members, all, settings, fnv1a64(seed, sizeof seed), std::move(listener), out);
}

Status commCreateGroupOf(hocclComm* comm, const int* ranks, int nranks, const hocclConfig_t* config,
                         hocclComm** out) {
  const char* what = "hocclCommCreateGroup";
  Status st;
  if (st.ok() && (nranks < 1 || nranks > comm->nranks))
    st = errorf(hocclInvalidArgument, "%s: nranks %d must lie in 1..%d (the communicator's size)", what, nranks,
                comm->nranks);
  std::vector<int> members;
  if (st.ok()) {
    std::vector<bool> seen(comm->nranks, false);
    bool self = false;
    for (int i = 0; i < nranks && st.ok(); ++i) {
      const int r = ranks[i];
      if (r < 0 || r >= comm->nranks)
        st = errorf(hocclInvalidArgument, "%s: ranks[%d] = %d is out of range [0, %d)", what, i, r, comm->nranks);
      else if (seen[r])
        st = errorf(hocclInvalidArgument, "%s: rank %d is listed twice", what, r);
      else
        seen[r] = true;
      self = self || r == comm->rank;
      members.push_back(r);
    }
    if (st.ok() && !self)
      st = errorf(hocclInvalidArgument, "%s: the calling rank %d is not in ranks (only members call it)", what,
                  comm->rank);
  }
  if (!st.ok()) return st;
  return commCreateGroup(comm, members, config, out);
}

Status commShrink(hocclComm* comm, const int* excludeRanksList, int excludeRanksCount, int shrinkFlags,
                  const hocclConfig_t* config, hocclComm** out) {
  const char* what = "hocclCommShrink";
  Status st;
  if (st.ok() && excludeRanksCount > 0 && !excludeRanksList)
    st = errorf(hocclInvalidArgument, "%s: excludeRanksList is NULL with excludeRanksCount %d", what,
                excludeRanksCount);
  if (st.ok() && (shrinkFlags & ~HOCCL_SHRINK_ABORT))
    st = errorf(hocclInvalidArgument, "%s: unknown flags %#x (HOCCL_SHRINK_DEFAULT or HOCCL_SHRINK_ABORT)", what,
                shrinkFlags);
  if (st.ok() && (excludeRanksCount < 0 || excludeRanksCount >= comm->nranks))
    st = errorf(hocclInvalidArgument, "%s: excludeRanksCount %d must lie in 0..%d (at least one rank survives)", what,
                excludeRanksCount, comm->nranks - 1);
  std::vector<int> members;
  if (st.ok()) {
    std::vector<bool> excluded(comm->nranks, false);
    for (int i = 0; i < excludeRanksCount && st.ok(); ++i) {
      const int r = excludeRanksList[i];
      if (r < 0 || r >= comm->nranks)
        st = errorf(hocclInvalidArgument, "%s: excludeRanksList[%d] = %d is out of range [0, %d)", what, i, r,
                    comm->nranks);
      else if (excluded[r])
        st = errorf(hocclInvalidArgument, "%s: rank %d is excluded twice", what, r);
      else
        excluded[r] = true;
    }
    if (st.ok() && excluded[comm->rank])
      st = errorf(hocclInvalidArgument, "%s: the calling rank %d is in excludeRanksList (excluded ranks do not call it)",
                  what, comm->rank);
    for (int r = 0; r < comm->nranks; ++r)
      if (!excluded[r]) members.push_back(r);
  }
  if (!st.ok()) return st;
  const bool abandon = shrinkFlags & HOCCL_SHRINK_ABORT;
  if (abandon) {
    // Work in flight on comm ends now; comm stays failed. The peers are not
    // told: the survivors are shrinking too, the excluded may be gone.
    comm->fail(Status(hocclRemoteError, "rank " + std::to_string(comm->rank) +
                                            ": hocclCommShrink(HOCCL_SHRINK_ABORT) abandoned this communicator's work"),
               false);
    if (comm->links) comm->links->doorbell().ring();
    if (cuda::DeviceExecutor* exec = comm->deviceExecutor()) {
      exec->requestAbort();
      (void)exec->waitIdle(1.0);
    }
  }
  return commCreateGroup(comm, members, config, out, abandon || !comm->fatalError().ok(), what);
}

}  // namespace hoccl
