#include "transport/shm/shm.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstring>
#include <ctime>

#include "base/descriptors.h"
#include "base/log.h"
#include "base/process.h"

namespace hoccl {
namespace {

constexpr uint32_t kConnMagic = 0x45434f48;  // "HOCE"
constexpr uint32_t kTagShmReady = 0x20000000;
constexpr size_t kConnHeaderBytes = 4096;

struct ConnHeader {
  alignas(64) std::atomic<uint64_t> head;  // slots posted (sender)
  alignas(64) std::atomic<uint64_t> tail;  // slots released (receiver)
  alignas(64) uint32_t magic;
  uint32_t slots;
  uint64_t slotBytes;
  int32_t sender;
  int32_t receiver;
  uint32_t directOk;  // DirectPath: how the receiver can read the sender's memory
};
static_assert(sizeof(ConnHeader) <= kConnHeaderBytes);

constexpr uint64_t kProbeValue = 0x484f43434d413031ull;  // "HOCCMA01"

// How this process can read `owner`'s memory: mapped in the same process,
// or fetched with process_vm_readv where permitted (same user, ptrace policy
// allows).
DirectPath canReadMemoryOf(const ControlBlock* owner, bool crossMemoryAttach) {
  if (owner->pid == getpid()) return DirectPath::Mapped;
  if (!crossMemoryAttach) return DirectPath::None;
  uint64_t value = 0;
  iovec local{&value, sizeof value};
  iovec remote{reinterpret_cast<void*>(owner->selfAddress + offsetof(ControlBlock, probeValue)), sizeof value};
  return process_vm_readv(owner->pid, &local, 1, &remote, 1, 0) == static_cast<ssize_t>(sizeof value) &&
                 value == kProbeValue
             ? DirectPath::Fetched
             : DirectPath::None;
}

size_t slotStride(size_t slotBytes) { return sizeof(SlotHeader) + slotBytes; }

long futex(std::atomic<uint32_t>* addr, int op, uint32_t val, const timespec* ts) {
  return syscall(SYS_futex, reinterpret_cast<uint32_t*>(addr), op, val, ts, nullptr, 0);
}

Status createSegment(const std::string& name, size_t bytes, void** addr) {
  int fd;
  {
    OpeningDescriptor opening;
    fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
    if (fd < 0 && errno == EEXIST) {
      // Left by a killed run that reused this name: it cannot be ours.
      shm_unlink(name.c_str());
      fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
    }
  }
  if (fd < 0) return sysErrorf("shm_open(%s)", name.c_str());
  // Reserved now, not at the first touch of each page: a full /dev/shm is
  // then this error at setup rather than a SIGBUS in the middle of a call.
  int rc = ftruncate(fd, static_cast<off_t>(bytes));
  if (rc == 0 && fallocate(fd, 0, 0, static_cast<off_t>(bytes)) != 0 && errno != EOPNOTSUPP) rc = -1;
  if (rc != 0) {
    int err = errno;
    struct statvfs fs {};
    unsigned long long freeBytes = fstatvfs(fd, &fs) == 0 ? 1ull * fs.f_bavail * fs.f_frsize : 0;
    errno = err;
    Status st = sysErrorf("cannot reserve %zu bytes in /dev/shm for shared segment %s (%llu bytes free there)",
                          bytes, name.c_str(), freeBytes);
    close(fd);
    shm_unlink(name.c_str());
    return st;
  }
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (p == MAP_FAILED) {
    shm_unlink(name.c_str());
    return sysErrorf("mmap of %s (%zu bytes)", name.c_str(), bytes);
  }
  *addr = p;
  return Status();
}

Status openSegment(const std::string& name, size_t bytes, void** addr) {
  int fd;
  {
    OpeningDescriptor opening;
    fd = shm_open(name.c_str(), O_RDWR | O_CLOEXEC, 0600);
  }
  if (fd < 0) return sysErrorf("shm_open(%s)", name.c_str());
  struct stat st;
  if (fstat(fd, &st) != 0 || static_cast<size_t>(st.st_size) < bytes) {
    close(fd);
    return errorf(hocclInternalError, "shared segment %s is smaller than expected", name.c_str());
  }
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (p == MAP_FAILED) return sysErrorf("mmap of %s", name.c_str());
  *addr = p;
  return Status();
}

// A slot header's transport-private bytes (SlotHeader::reserved): a small
// payload, then the stamp that publishes the slot (the sender's count of
// posts, from 1), written last with release order.
constexpr size_t kInlineBytes = 24;
static_assert(sizeof(SlotHeader::reserved) == kInlineBytes + sizeof(uint64_t));
uint8_t* inlineArea(SlotHeader* h) { return h->reserved; }
const uint8_t* inlineArea(const SlotHeader* h) { return h->reserved; }
uint64_t* stampOf(SlotHeader* h) { return reinterpret_cast<uint64_t*>(h->reserved + kInlineBytes); }
const uint64_t* stampOf(const SlotHeader* h) {
  return reinterpret_cast<const uint64_t*>(h->reserved + kInlineBytes);
}
bool carriedInline(const SlotHeader* h) { return h->bytes <= kInlineBytes && !(h->flags & kSlotDirect); }

// ringDoorbell after its fence (a caller that wakes several peers fences
// once).
void ringIfSleeping(ControlBlock* cb) {
  if (cb->sleepers.load(std::memory_order_relaxed) == 0) return;
  cb->doorbell.fetch_add(1, std::memory_order_seq_cst);
  futex(&cb->doorbell, FUTEX_WAKE, INT32_MAX, nullptr);
}

class ShmSend : public SendConn {
 public:
  ShmSend(ConnHeader* e, ControlBlock* peerCtl, int peer)
      : e_(e), peerCtl_(peerCtl), peer_(peer), head_(e->head.load(std::memory_order_relaxed)) {}
  bool tryAcquire(SlotHeader** header, void** payload) override {
    if (head_ - tailCache_ >= e_->slots) {
      tailCache_ = e_->tail.load(std::memory_order_acquire);
      if (head_ - tailCache_ >= e_->slots) return false;
    }
    char* slot = reinterpret_cast<char*>(e_) + kConnHeaderBytes + (head_ % e_->slots) * slotStride(e_->slotBytes);
    *header = reinterpret_cast<SlotHeader*>(slot);
    *payload = slot + sizeof(SlotHeader);
    return true;
  }
  void post() override {
    SlotHeader* h = reinterpret_cast<SlotHeader*>(reinterpret_cast<char*>(e_) + kConnHeaderBytes +
                                                  (head_ % e_->slots) * slotStride(e_->slotBytes));
    // A small payload rides in the header's line: the receiver reads one
    // line, and the payload line stays in this core's cache.
    if (carriedInline(h) && h->bytes) memcpy(inlineArea(h), h + 1, h->bytes);
    ++head_;
    __atomic_store_n(stampOf(h), head_, __ATOMIC_RELEASE);
    ringDoorbell(peerCtl_);
  }
  size_t slotBytes() const override { return e_->slotBytes; }
  int peer() const override { return peer_; }
  DirectPath direct() const override { return static_cast<DirectPath>(e_->directOk); }
  bool drained() const override { return e_->tail.load(std::memory_order_acquire) == head_; }

 private:
  ConnHeader* e_;
  ControlBlock* peerCtl_;
  int peer_;
  uint64_t head_;
  uint64_t tailCache_ = 0;
};

class ShmRecv : public RecvConn {
 public:
  ShmRecv(ConnHeader* e, ControlBlock* peerCtl, int peer)
      : e_(e), peerCtl_(peerCtl), peer_(peer), tail_(e->tail.load(std::memory_order_relaxed)) {}
  bool tryPeek(const SlotHeader** header, const void** payload) override {
    const char* slot = reinterpret_cast<const char*>(e_) + kConnHeaderBytes +
                       (tail_ % e_->slots) * slotStride(e_->slotBytes);
    const auto* h = reinterpret_cast<const SlotHeader*>(slot);
    if (__atomic_load_n(stampOf(h), __ATOMIC_ACQUIRE) != tail_ + 1) return false;
    *header = h;
    *payload = carriedInline(h) ? static_cast<const void*>(inlineArea(h)) : slot + sizeof(SlotHeader);
    return true;
  }
  void release() override {
    ++tail_;
    e_->tail.store(tail_, std::memory_order_release);
    ringDoorbell(peerCtl_);
  }
  int peer() const override { return peer_; }
  const void* mapDirect(const DirectRef& ref) override {
    return peerCtl_->pid == getpid() ? reinterpret_cast<const void*>(ref.address) : nullptr;
  }
  bool fetch(const DirectRef& ref, void* dst, size_t bytes) override {
    if (const void* p = mapDirect(ref)) {
      memcpy(dst, p, bytes);
      return true;
    }
    iovec local{dst, bytes};
    iovec remote{reinterpret_cast<void*>(ref.address), bytes};
    return process_vm_readv(peerCtl_->pid, &local, 1, &remote, 1, 0) == static_cast<ssize_t>(bytes);
  }

 private:
  ConnHeader* e_;
  ControlBlock* peerCtl_;
  int peer_;
  uint64_t tail_;
};

class ShmOneShotSlots : public OneShotSlots {
 public:
  // byRank[r]: rank r's control block (this rank's own included).
  ShmOneShotSlots(std::vector<ControlBlock*> byRank, int self) : byRank_(std::move(byRank)), self_(byRank_[self]) {
    for (ControlBlock* cb : byRank_)
      if (cb != self_) peers_.push_back(cb);
  }
  size_t capacity() const override { return kOneShotBytes; }
  void* slot(uint64_t seq) override { return self_->oneShot[seq % 2].data; }
  void post(uint64_t seq, const OneShotNote& note) override {
    OneShotSlot& s = self_->oneShot[seq % 2];
    s.note = note;
    s.seq.store(seq, std::memory_order_release);
    std::atomic_thread_fence(std::memory_order_seq_cst);  // one fence for every peer's doorbell
    for (ControlBlock* cb : peers_) ringIfSleeping(cb);
  }
  const void* peek(int rank, uint64_t seq, OneShotNote* note) override {
    const OneShotSlot& s = byRank_[rank]->oneShot[seq % 2];
    if (s.seq.load(std::memory_order_acquire) != seq) return nullptr;
    *note = s.note;
    return s.data;
  }

 private:
  std::vector<ControlBlock*> byRank_;
  ControlBlock* self_;
  std::vector<ControlBlock*> peers_;
};

// Segments whose creator was killed before a peer could unlink them stay
// in /dev/shm until reboot. Their names carry the creator's pid
// ("hoccl-<hash>-<pid>-..."), so any later init removes those of dead
// processes; only this user's, so one user never removes another's.
void removeSegmentsOfDeadProcesses() {
  DIR* d;
  {
    OpeningDescriptor opening;
    d = opendir("/dev/shm");
  }
  if (!d) return;
  int removed = 0;
  while (dirent* e = readdir(d)) {
    unsigned long long hash = 0;
    int pid = 0, used = 0;
    if (sscanf(e->d_name, "hoccl-%16llx-%d-%n", &hash, &pid, &used) != 2 || used == 0 || pid <= 0) continue;
    struct stat st;
    if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode) ||
        st.st_uid != geteuid())
      continue;
    if (!processEnded(pid)) continue;  // alive, or not ours to judge
    if (shm_unlink((std::string("/") + e->d_name).c_str()) == 0) ++removed;
  }
  closedir(d);
  if (removed) HINFO(kSubShm, "removed %d shared-memory segments left by processes that no longer run", removed);
}

}  // namespace

// Ringers and sleepers meet Dekker-style: the ringer publishes, fences,
// then reads `sleepers`; the sleeper raises `sleepers`, fences, then polls
// (Doorbell in connection.h). One of them sees the other, so no wake-up
// is lost, and while nobody sleeps a ring writes nothing shared.
void ringDoorbell(ControlBlock* cb) {
  std::atomic_thread_fence(std::memory_order_seq_cst);
  ringIfSleeping(cb);
}

uint32_t armDoorbell(ControlBlock* cb) {
  cb->sleepers.fetch_add(1, std::memory_order_seq_cst);
  std::atomic_thread_fence(std::memory_order_seq_cst);
  return cb->doorbell.load(std::memory_order_acquire);
}

void disarmDoorbell(ControlBlock* cb) { cb->sleepers.fetch_sub(1, std::memory_order_seq_cst); }

void waitDoorbell(ControlBlock* cb, uint32_t seen, int timeoutMs) {
  if (cb->doorbell.load(std::memory_order_acquire) == seen) {
    timespec ts{timeoutMs / 1000, static_cast<long>(timeoutMs % 1000) * 1000000L};
    futex(&cb->doorbell, FUTEX_WAIT, seen, &ts);
  }
  cb->sleepers.fetch_sub(1, std::memory_order_seq_cst);
}

std::string ShmDomain::segmentName(const char* kind, int a, int b, int channel) const {
  // The job hash and the creator's pid make names unique, and let a cleanup
  // tool tell which segments belong to processes that no longer exist.
  char name[128];
  snprintf(name, sizeof name, "/hoccl-%016llx-%d-%s-%d-%d-%d",
           static_cast<unsigned long long>(opt_.commHash), static_cast<int>(getpid()), kind, a, b,
           channel);
  return name;
}

Status ShmDomain::create(OutOfBand& oob, const ShmOptions& opt, const std::vector<int>& localRanks,
                         std::unique_ptr<ShmDomain>* out) {
  removeSegmentsOfDeadProcesses();
  std::unique_ptr<ShmDomain> d(new ShmDomain());
  d->opt_ = opt;
  d->localRanks_ = localRanks;
  // 1. Create this rank's control block; 2. learn every rank's pid (names
  // contain the creator's pid); 3. map the local peers' blocks; 4. once all
  // have mapped, unlink this rank's name.
  std::string myName = d->segmentName("ctl", opt.rank, opt.rank, 0);
  void* addr = nullptr;
  HOCCL_TRY(createSegment(myName, sizeof(ControlBlock), &addr));
  d->mappings_.push_back({addr, sizeof(ControlBlock)});
  d->self_ = new (addr) ControlBlock();
  d->self_->pid = getpid();
  d->self_->commHash = opt.commHash;
  d->self_->selfAddress = reinterpret_cast<uint64_t>(d->self_);
  d->self_->probeValue = kProbeValue;
  d->controls_[opt.rank] = d->self_;
  d->doorbell_ = std::make_unique<ShmDoorbell>(d->self_);

  std::vector<int32_t> pids(oob.nranks());
  pids[opt.rank] = getpid();
  Status st = oob.allGather(pids.data(), sizeof(int32_t));
  for (int r : localRanks) {
    if (!st.ok() || r == opt.rank) continue;
    char name[128];
    snprintf(name, sizeof name, "/hoccl-%016llx-%d-ctl-%d-%d-0",
             static_cast<unsigned long long>(opt.commHash), pids[r], r, r);
    void* p = nullptr;
    st = openSegment(name, sizeof(ControlBlock), &p);
    if (!st.ok()) st.context("mapping the control block of local rank " + std::to_string(r));
    else {
      d->mappings_.push_back({p, sizeof(ControlBlock)});
      d->controls_[r] = static_cast<ControlBlock*>(p);
      if (pids[r] > 0 && (kill(pids[r], 0) == 0 || errno == EPERM)) d->visible_.insert(r);
      else
        HINFO(kSubShm, "local rank %d (pid %d) is in another pid namespace: only the timeout finds its death", r,
              pids[r]);
    }
  }
  Status bst = st.ok() ? oob.barrier() : st;
  shm_unlink(myName.c_str());
  HOCCL_TRY(bst);
  if (d->controls_.size() == static_cast<size_t>(oob.nranks())) {  // every rank is here: one-shot slots
    std::vector<ControlBlock*> byRank(oob.nranks());
    for (auto& [r, cb] : d->controls_) byRank[r] = cb;
    d->oneShot_ = std::make_unique<ShmOneShotSlots>(std::move(byRank), opt.rank);
  }
  *out = std::move(d);
  return Status();
}

ShmDomain::~ShmDomain() {
  if (self_) self_->closed.store(1, std::memory_order_release);
  sends_.clear();
  recvs_.clear();
  for (const Mapping& m : mappings_) munmap(m.addr, m.bytes);
}

ControlBlock* ShmDomain::control(int rank) {
  auto it = controls_.find(rank);
  return it == controls_.end() ? nullptr : it->second;
}

Status ShmDomain::connect(OutOfBand& oob, const std::vector<ConnRequest>& requests) {
  size_t bytes = kConnHeaderBytes + static_cast<size_t>(opt_.slots) * slotStride(opt_.slotBytes);
  // Receivers create their segments first (no waiting), then senders wait
  // for each receiver's "ready": no pair can wait on each other.
  size_t fetched = 0;  // incoming connections this rank reads with process_vm_readv
  for (const ConnRequest& e : requests) {
    if (e.send || recvs_.count({e.peer, e.channel})) continue;
    ControlBlock* peerCtl = control(e.peer);
    if (!peerCtl)
      return errorf(hocclInternalError, "rank %d is not on this node; no shared-memory path", e.peer);
    std::string name = segmentName("edge", e.peer, opt_.rank, e.channel);
    void* addr = nullptr;
    HOCCL_TRY(createSegment(name, bytes, &addr));
    mappings_.push_back({addr, bytes});
    auto* h = new (addr) ConnHeader();
    h->magic = kConnMagic;
    h->slots = static_cast<uint32_t>(opt_.slots);
    h->slotBytes = opt_.slotBytes;
    h->sender = e.peer;
    h->receiver = opt_.rank;
    h->directOk = static_cast<uint32_t>(canReadMemoryOf(peerCtl, opt_.crossMemoryAttach));
    fetched += h->directOk == static_cast<uint32_t>(DirectPath::Fetched);
    recvs_[{e.peer, e.channel}] = std::make_unique<ShmRecv>(h, peerCtl, e.peer);
    HOCCL_TRY(oob.send(e.peer, kTagShmReady | static_cast<uint32_t>(e.channel), name.data(), name.size()));
  }
  for (const ConnRequest& e : requests) {
    if (!e.send || sends_.count({e.peer, e.channel})) continue;
    ControlBlock* peerCtl = control(e.peer);
    if (!peerCtl)
      return errorf(hocclInternalError, "rank %d is not on this node; no shared-memory path", e.peer);
    std::string name;
    HOCCL_TRY(oob.recv(e.peer, kTagShmReady | static_cast<uint32_t>(e.channel), &name));
    void* addr = nullptr;
    Status st = openSegment(name, bytes, &addr);
    shm_unlink(name.c_str());
    HOCCL_TRY(st.context("connecting to local rank " + std::to_string(e.peer)));
    mappings_.push_back({addr, bytes});
    auto* h = static_cast<ConnHeader*>(addr);
    if (h->magic != kConnMagic || h->slots != static_cast<uint32_t>(opt_.slots) ||
        h->slotBytes != opt_.slotBytes || h->sender != opt_.rank || h->receiver != e.peer)
      return errorf(hocclInternalError, "shared segment %s does not match this connection", name.c_str());
    sends_[{e.peer, e.channel}] = std::make_unique<ShmSend>(h, peerCtl, e.peer);
  }
  HINFO(kSubShm, "rank %d: %zu shared-memory connections; %zu incoming read across processes (HOCCL_CMA)",
        opt_.rank, sends_.size() + recvs_.size(), fetched);
  return Status();
}

SendConn* ShmDomain::sendConn(int peer, int channel) {
  auto it = sends_.find({peer, channel});
  return it == sends_.end() ? nullptr : it->second.get();
}

RecvConn* ShmDomain::recvConn(int peer, int channel) {
  auto it = recvs_.find({peer, channel});
  return it == recvs_.end() ? nullptr : it->second.get();
}

bool ShmDomain::exited(int rank, bool unfreedOnly, int* pid) {
  ControlBlock* cb = rank != opt_.rank ? control(rank) : nullptr;
  if (!cb || !pidVisible(rank)) return false;
  *pid = cb->pid;
  if (!processEnded(cb->pid)) return false;
  // Read after the process is known to have ended: a peer that frees its
  // communicator and exits between a read of `closed` and the check of its
  // process would otherwise count as one that never freed it.
  return !unfreedOnly || cb->closed.load(std::memory_order_acquire) == 0;
}

bool ShmDomain::abortNotice(int* code, std::string* msg) const {
  if (!self_ || self_->aborted.load(std::memory_order_acquire) != 1) return false;
  *code = self_->abortCode;
  *msg = std::string(self_->abortMsg, strnlen(self_->abortMsg, sizeof self_->abortMsg));
  return true;
}

void ShmDomain::broadcastAbort(int code, const std::string& msg) {
  for (auto& [rank, cb] : controls_) {
    if (rank == opt_.rank) continue;
    // 0 -> 2 claims the record (one writer wins), 2 -> 1 publishes it.
    uint32_t expected = 0;
    if (cb->aborted.compare_exchange_strong(expected, 2)) {
      cb->abortFrom = opt_.rank;
      cb->abortCode = code;
      snprintf(cb->abortMsg, sizeof cb->abortMsg, "%s", msg.c_str());
      cb->aborted.store(1, std::memory_order_release);
    }
    ringDoorbell(cb);
  }
}

}  // namespace hoccl
