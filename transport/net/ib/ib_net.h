// InfiniBand / RoCE verbs transport: internals shared by its files.
//
// A connection is one TCP side channel (set-up, then liveness: a peer that
// exits closes it) and N reliable-connected queue pairs. Data moves by RDMA
// WRITE WITH IMMEDIATE from the sender's buffer straight into the buffer the
// receiver posted; the receiver tells the sender where that buffer is
// through a FIFO in the sender's memory (as NCCL's IB plugin does): irecv
// writes entry k (address, rkey, capacity) with an RDMA write whose
// immediate wakes the sender, and the sender writes message k there once
// the entry has arrived. Message k is cut into one part per QP (small ones
// go whole to QP k mod N and the other QPs carry an empty part), each part
// ends with a write whose immediate carries the part's length, so the
// receiver counts N immediates per message, in order on every QP.
#pragma once

#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "base/socket.h"
#include "base/verbs.h"
#include "transport/net/ib/ib_stats.h"
#include "transport/net/net.h"

#ifdef HOCCL_HAVE_IBVERBS

namespace hoccl {
namespace ibnet {

constexpr uint64_t kMagic = 0x484f434c49425652ull;  // "HOCLIBVR"
constexpr int kMaxQps = 16;
constexpr int kFifoDepth = kNetMaxRequests;
constexpr uint32_t kImmFifo = 0xffffffffu;       // receiver -> sender: a FIFO entry landed
constexpr uint32_t kImmTruncated = 0x80000000u;  // sender -> receiver: the message did not fit
constexpr size_t kSplitMin = 64 << 10;           // smaller messages use one QP
constexpr int kSendDepth = 128;                  // work requests per send queue
constexpr int kRecvDepth = 2 * kFifoDepth;       // receives kept posted per QP
constexpr uint64_t kFifoWr = 1ull << 63;         // wr_id of a FIFO write (| slot)

// One receive buffer, as the receiver announces it to the sender.
struct FifoEntry {
  uint64_t addr;
  uint64_t size;  // capacity
  uint32_t rkey;
  int32_t tag;
  uint32_t seq;   // message index + 1, written last
  uint32_t pad;
};
static_assert(sizeof(FifoEntry) == 32);

// What each side tells the other over the side channel.
struct PeerInfo {
  uint64_t magic;
  uint8_t gid[16];
  uint32_t nqps;
  uint32_t qpn[kMaxQps];
  uint32_t psn;
  uint16_t lid;
  uint8_t linkLayer;  // IBV_LINK_LAYER_*
  uint8_t mtu;        // enum ibv_mtu
  int32_t gidIndex;
  int32_t port;
  uint64_t fifoAddr;  // the sender's FIFO (zero from the receiver)
  uint32_t fifoRkey;
  int32_t pid;
  char device[32];
  char host[64];
};

struct ConnectState;
struct Handle {
  uint64_t magic;
  SockAddr addr;         // the listener's side channel
  uint32_t pad;
  ConnectState* state;   // the connector's progress between connect() calls
};
static_assert(sizeof(Handle) <= kNetHandleBytes);

// A registered range; shared by every user that falls inside it.
struct Mr {
  ibv_mr* mr = nullptr;
  uintptr_t start = 0, end = 0;
  int refs = 0;
  // GPU memory (a dma-buf, or a device pointer through nvidia_peermem):
  // receives into it are flushed (iflush). A dma-buf registration is never
  // shared by address: its owner names the range by fd and offset.
  bool gpu = false;
  bool dmabuf = false;
};

// Registrations of one device: a request for a range inside a registered
// one takes a reference instead of registering again; the last release
// deregisters (nothing stays pinned after its owner let go, so a freed and
// reused address range can never meet a stale registration).
using MrCacheStats = IbRegistrationStats;
class MrCache {
 public:
  // `gpu`: addr is a device pointer the provider pins through
  // nvidia_peermem (NCCL_PTR_CUDA); host and GPU ranges are never shared.
  Status acquire(const Verbs& v, ibv_pd* pd, const std::string& devName, void* addr, size_t size, Mr** out,
                 bool gpu = false);
  // ibv_reg_dmabuf_mr of `size` bytes at `offset` in dma-buf `fd`, mapped at
  // device address `addr`; released as any other.
  Status acquireDmabuf(const Verbs& v, ibv_pd* pd, const std::string& devName, void* addr, size_t size,
                       uint64_t offset, int fd, Mr** out);
  void release(const Verbs& v, Mr* mr);
  void clear(const Verbs& v);
  MrCacheStats stats() const;

 private:
  void keep(ibv_mr* mr, uintptr_t start, uintptr_t end, bool gpu, bool dmabuf, Mr** out);
  std::vector<std::unique_ptr<Mr>> mrs_;
  uint64_t registrations_ = 0, hits_ = 0;
};

// One usable (HCA, port): what the transport calls a device.
struct Device {
  std::string hca;
  int port = 1;
  std::string name;      // "rxe0:1"
  ibv_context* ctx = nullptr;
  ibv_pd* pd = nullptr;
  ibv_comp_channel* channel = nullptr;  // completion events of all its CQs
  ibv_port_attr attr{};
  int gidIndex = 0;
  ibv_gid gid{};
  std::string gidType;
  uint64_t guid = 0;
  std::string pciPath;
  int speedMbps = 0;
  // Whether the device registers dma-bufs (GPUDirect RDMA without
  // nvidia_peermem), as probeDmabuf found; if not, why.
  bool dmabuf = false;
  std::string dmabufWhy;
  // Whether nvidia_peermem is loaded: ibv_reg_mr then pins device pointers
  // (NCCL_PTR_CUDA), the older GPUDirect RDMA path.
  bool peermem = false;
  MrCache mrs;
  // The loopback queue pair of GPU flushes (ib_flush.cc), made on first use.
  struct Flush {
    ibv_cq* cq = nullptr;
    ibv_qp* qp = nullptr;
    ibv_mr* mr = nullptr;   // `buf`, where the reads land
    char* buf = nullptr;
    uint64_t posted = 0, completed = 0;
    Status failed;          // the loopback could not be made or a read failed
  } flush;
};

// GPU flushes (ib_flush.cc): an RDMA read of one byte of the received
// buffer, from this device to itself, which completes only after the NIC's
// earlier writes to that memory have (NCCL's IB plugin flushes alike).
// postFlush returns the flush's ticket; flushDone says whether it
// completed, or the error that ended the loopback.
Status postFlush(const Verbs& v, const IbNetOptions& opt, Device* d, const Mr& mr, const void* addr,
                 uint64_t* ticket);
Status flushDone(const Verbs& v, Device* d, uint64_t ticket, bool* done);
void closeFlush(const Verbs& v, Device* d);
// Whether nvidia_peermem (or the older nv_peer_mem) is loaded.
bool peerMemoryLoaded();

// Asks the provider whether it registers dma-bufs, as NCCL's IB plugin
// does: ibv_reg_dmabuf_mr with fd -1 fails with EBADF where it does and
// with EOPNOTSUPP (or EPROTONOSUPPORT) where it does not (rxe).
void probeDmabuf(const Verbs& v, Device* d);

// Opens every active port `opt` allows; on none, says why (no library, no
// device, all ports down, the rule matched nothing, no usable GID).
Status openDevices(const Verbs& v, const IbNetOptions& opt, std::vector<std::unique_ptr<Device>>* out);
void closeDevice(const Verbs& v, Device* d);

struct Comm;

struct Request {
  Comm* comm = nullptr;
  bool isSend = false;
  bool done = false;
  Status error;
  char* data = nullptr;
  size_t size = 0;        // send: bytes; receive: capacity
  size_t received = 0;    // receive: bytes that arrived
  int tag = 0;
  uint64_t seq = 0;       // message index on its connection
  Mr* mr = nullptr;       // registration covering data
  bool ownsMr = false;    // taken by this request (no mhandle given)
  // Sender: where the receiver wants it, and how far posting got.
  bool haveDest = false;
  uint64_t raddr = 0;
  uint32_t rkey = 0;
  bool truncated = false;
  size_t partStart[kMaxQps] = {0}, partEnd[kMaxQps] = {0}, cursor[kMaxQps] = {0};
  bool partClosed[kMaxQps] = {false};  // its immediate has been posted
  int wrsLeft = 0;
  // A GPU flush (iflush): done once the device's flush `ticket` completed.
  bool flush = false;
  uint64_t ticket = 0;
  // Receiver.
  int partsArrived = 0;
  bool fifoPosted = false;
};

struct Comm {
  bool isSend = false;
  Device* dev = nullptr;
  int sideFd = -1;
  std::string peer;        // "host H pid P (side channel A)"
  PeerInfo remote{};
  ibv_cq* cq = nullptr;
  std::vector<ibv_qp*> qps;
  std::vector<int> sqUsed;
  // Sender: the FIFO the receiver writes; entries that have landed.
  FifoEntry* fifo = nullptr;
  ibv_mr* fifoMr = nullptr;
  uint64_t fifoArrived = 0;
  uint64_t nextSeq = 0;
  std::deque<Request*> unposted;  // sends not yet fully posted, in order
  // Receiver: local copies of FIFO entries (the source of the writes).
  FifoEntry* fifoOut = nullptr;
  ibv_mr* fifoOutMr = nullptr;
  Request* slots[kFifoDepth] = {nullptr};
  bool fifoBusy[kFifoDepth] = {false};
  std::deque<Request*> fifoPending;
  std::vector<uint64_t> partsSeen;  // immediates per QP
  int inflight = 0;
  Status failed;
  // The peer wrote kGoodbyeByte on the side channel before closing it: it
  // closed the connection in order rather than exiting or being killed.
  bool goodbye = false;
  std::vector<std::unique_ptr<Request>> requests;  // owned until tested done
};
constexpr char kGoodbyeByte = 'G';

// Connection set-up (ib_connect.cc).
struct ListenComm;
Status listenOn(const IbNetOptions& opt, Device* dev, ListenComm** out, Handle* h);
Status connectStep(const Verbs& v, const IbNetOptions& opt, Device* dev, ConnectState* st, const Handle& h,
                   Comm** out);
Status acceptStep(const Verbs& v, const IbNetOptions& opt, ListenComm* lc, Comm** out);
void closeListenComm(const Verbs& v, ListenComm* lc);
ConnectState* newConnectState();
void destroyConnectState(const Verbs& v, ConnectState* st);
void destroyComm(const Verbs& v, Comm* c);
Status postRecvs(const Verbs& v, Comm* c, int qp, int n);
// The message for a failed work completion on QP index `qp` (ib_errors.cc).
std::string completionError(const Verbs& v, const IbNetOptions& opt, const Comm& c, const ibv_wc& wc, int qp);

}  // namespace ibnet
}  // namespace hoccl

#endif  // HOCCL_HAVE_IBVERBS
