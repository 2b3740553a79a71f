// The network transport interface, shaped as NCCL's net plugin (ncclNet_v8
// and later): devices and properties, non-blocking listen/connect/accept,
// memory registration, isend/irecv/test with FIFO matching. hoccl's TCP and
// verbs transports implement it; the NCCL net plugin exports it unchanged,
// and any NCCL net plugin could serve hoccl through it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "base/config.h"
#include "base/error.h"
#include "base/socket.h"

namespace hoccl {

constexpr int kNetHandleBytes = 128;   // NCCL_NET_HANDLE_MAXSIZE
constexpr int kNetMaxRequests = 32;    // NCCL_NET_MAX_REQUESTS
constexpr int kPtrHost = 0x1;          // NCCL_PTR_HOST
constexpr int kPtrCuda = 0x2;          // NCCL_PTR_CUDA
constexpr int kPtrDmabuf = 0x4;        // NCCL_PTR_DMABUF

struct NetProperties {
  std::string name;         // device (interface) name
  std::string pciPath;      // sysfs path, empty if virtual
  uint64_t guid = 0;
  int ptrSupport = kPtrHost;
  int regIsGlobal = 0;
  int speedMbps = 0;        // link speed, 0 unknown
  int port = 0;
  float latencyUs = 0;
  int maxComms = 65536;
  int maxRecvs = 1;         // grouped receives per irecv
  size_t maxP2pBytes = size_t(1) << 31;
  // Why the network proxy cannot let this device read and write GPU memory
  // directly (GPUDirect RDMA), for its log: the transport's or the
  // device's reason; "" where it can (ptrSupport has kPtrDmabuf).
  std::string gdrWhy = "this transport does not register GPU memory";
};

// Called by a transport's progress thread whenever a request completes or a
// connection fails, so a rank sleeping on its doorbell wakes up.
using NetNotify = void (*)(void* arg);

class NetTransport {
 public:
  virtual ~NetTransport() = default;
  virtual const char* name() const = 0;
  virtual int devices() const = 0;
  virtual Status getProperties(int dev, NetProperties* props) const = 0;
  // Fills `handle` (kNetHandleBytes) for the peer's connect().
  virtual Status listen(int dev, void* handle, void** listenComm) = 0;
  // Non-blocking: *sendComm stays nullptr until the connection is ready;
  // call again with the same handle (it holds the connection's progress, as
  // in NCCL's plugins).
  virtual Status connect(int dev, void* handle, void** sendComm) = 0;
  virtual Status accept(void* listenComm, void** recvComm) = 0;
  virtual Status regMr(void* comm, void* data, size_t size, int type, void** mhandle) = 0;
  // GPU memory exported as a dma-buf (cuMemGetHandleForAddressRange):
  // `fd` and `offset` name the range, `data` is its device address (the
  // address isend/irecv will be given), `type` kPtrDmabuf|kPtrCuda. Only
  // where getProperties advertises kPtrDmabuf; other transports refuse with
  // hocclInvalidUsage naming themselves.
  virtual Status regMrDmaBuf(void* comm, void* data, size_t size, int type, uint64_t offset, int fd,
                             void** mhandle) {
    (void)comm, (void)data, (void)size, (void)type, (void)offset, (void)fd;
    *mhandle = nullptr;
    return errorf(hocclInvalidUsage, "the %s network transport does not register dma-bufs", name());
  }
  virtual Status deregMr(void* comm, void* mhandle) = 0;
  // *request stays nullptr when the comm has kNetMaxRequests in flight.
  virtual Status isend(void* sendComm, void* data, size_t size, int tag, void* mhandle, void** request) = 0;
  virtual Status irecv(void* recvComm, int n, void** data, size_t* sizes, int* tags, void** mhandles,
                       void** request) = 0;
  // *done = 1 once complete; sizes[i] = bytes received (or sent). A failed
  // connection returns hocclRemoteError naming the peer's address.
  virtual Status test(void* request, int* done, int* sizes) = 0;
  // After test() said a receive into GPU memory is done, makes the data
  // visible to the GPU (NCCL's iflush): the NIC's writes may still sit in
  // the PCIe path, and a read through the same path pushes them out.
  // *request stays nullptr when there is nothing to flush (host memory, or
  // a transport that never writes GPU memory); else test() it to done.
  virtual Status iflush(void* recvComm, int n, void** data, int* sizes, void** mhandles, void** request) {
    (void)recvComm, (void)n, (void)data, (void)sizes, (void)mhandles;
    *request = nullptr;
    return Status();
  }
  virtual Status closeSend(void* sendComm) = 0;
  virtual Status closeRecv(void* recvComm) = 0;
  virtual Status closeListen(void* listenComm) = 0;
  // An error once the connection `comm` is broken for a reason other than
  // the peer closing it in order (its process exited or was killed, the
  // link failed), found by the progress thread even while no request is
  // pending; hocclCommGetAsyncError reports it between calls. Transports
  // that cannot tell keep the default.
  virtual Status health(void* comm) { return Status(); }
  // The consumer of completions (an executor that calls test() while it
  // waits) is about to sleep on its doorbell (true), or polls again (false).
  // A transport created with consumerPolls reads arriving messages itself
  // only while its consumer sleeps: a consumer that polls reads them in its
  // own thread, and a progress thread woken for each would only contend with
  // it for the socket and the core.
  virtual void consumerWaiting(bool sleeping) { (void)sleeping; }
  // sendComm (to a peer) and recvComm (from the same peer), both new and
  // unused, may share one channel for their small messages (TCP: each
  // direction's acknowledgements then ride on the other's data). Both ranks
  // call it for the pair before either sends, sendOwns true on exactly one
  // of them. A transport without such sharing does nothing.
  virtual Status pairControl(void* sendComm, void* recvComm, bool sendOwns) {
    (void)sendComm, (void)recvComm, (void)sendOwns;
    return Status();
  }
};

struct SocketNetOptions {
  std::string ifnameRule;   // HOCCL_SOCKET_IFNAME
  // Without a rule: the address to listen on (the bootstrap's, which was
  // probed to reach the other ranks); family AF_UNSPEC = choose by rule.
  SockAddr localAddr;
  std::string localIfname;
  int streams = 1;          // HOCCL_SOCKET_NSTREAMS: data streams per connection
  double timeoutSec = 300;
  NetNotify notify = nullptr;
  void* notifyArg = nullptr;
  // The consumer polls test() and says when it sleeps (consumerWaiting):
  // the progress thread then watches for arriving headers only meanwhile.
  // Off (the NCCL plugin), it always watches.
  bool consumerPolls = false;
  // HOCCL_SOCKET_DUPLEX: pairControl shares one control socket between the
  // two directions of a pair of ranks.
  bool duplex = true;
};

// TCP: transport/net/socket.
Status createSocketTransport(const SocketNetOptions& opt, std::unique_ptr<NetTransport>* out);

struct IbNetOptions {
  std::string hcaRule;      // HOCCL_IB_HCA (NCCL_IB_HCA syntax)
  int gidIndex = -1;        // HOCCL_IB_GID_INDEX; -1 = choose (RoCE v2 IPv4 first)
  int qpsPerConn = 1;       // HOCCL_IB_QPS_PER_CONN: queue pairs per connection
  int timeout = 20;         // HOCCL_IB_TIMEOUT: ack timeout 4.096 us * 2^timeout
  int retryCnt = 7;         // HOCCL_IB_RETRY_CNT
  // iflush on receives into GPU registrations (HOCCL_IB_GDR_FLUSH, as
  // NCCL_GDR_FLUSH_DISABLE=0); flushHost also on host ones, which only tests
  // want: host memory needs no flush, but the loopback read runs the same.
  bool gdrFlush = true;
  bool flushHost = false;
  // Connection set-up and liveness go over TCP (as NCCL's IB plugin does):
  // on this address, or chosen by `ifnameRule` when it is unset.
  SockAddr localAddr;
  std::string ifnameRule;
  double timeoutSec = 300;
  NetNotify notify = nullptr;
  void* notifyArg = nullptr;
};

// InfiniBand / RoCE verbs: transport/net/ib. libibverbs is loaded at run
// time; without it, or without an active port that the options allow, this
// fails with hocclSystemError and a message that says why.
Status createIbTransport(const IbNetOptions& opt, std::unique_ptr<NetTransport>* out);

// HOCCL_NET: "ib", "socket", or "auto" (IB when a usable port exists, else
// TCP, saying why at INFO). `chosen` receives a one-line account.
struct NetChoice {
  std::string mode = "auto";
  SocketNetOptions socket;
  IbNetOptions ib;
};
Status createNetTransport(const NetChoice& choice, std::unique_ptr<NetTransport>* out, std::string* chosen);

// The choice the settings make (HOCCL_NET, HOCCL_SOCKET_*, HOCCL_IB_*,
// HOCCL_TIMEOUT); the one place that maps them. The caller adds what only
// it knows: the local address and interface, the completion notifier.
NetChoice netChoiceFrom(const Settings& s);

}  // namespace hoccl
