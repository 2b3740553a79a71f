// The verbs transport (see ib_net.h for the wire protocol and the
// connection state): the NetTransport calls in ib_transport.cc, the data
// path and the progress thread in ib_datapath.cc. One mutex guards every
// connection of the transport; completions are polled by whoever calls
// isend/irecv/test, and by a progress thread that sleeps in poll() on the
// devices' completion channels and the connections' side channels, so a
// rank sleeping on its doorbell is woken by the network.
#pragma once

#ifdef HOCCL_HAVE_IBVERBS

#include <atomic>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "transport/net/ib/ib_net.h"
#include "transport/net/net.h"

namespace hoccl {
namespace ibnet {

constexpr size_t kMaxMessage = size_t(1) << 30;

class IbTransport : public NetTransport {
 public:
  IbTransport(const IbNetOptions& opt, const Verbs* v, std::vector<std::unique_ptr<Device>> devs);
  ~IbTransport() override;
  Status start();  // the progress thread and its wake-up descriptor
  const char* name() const override { return "IB"; }
  int devices() const override { return static_cast<int>(devs_.size()); }

  Status getProperties(int dev, NetProperties* p) const override;
  Status listen(int dev, void* handle, void** listenComm) override;
  Status connect(int dev, void* handle, void** sendComm) override;
  Status accept(void* listenComm, void** recvComm) override;
  Status regMr(void* comm, void* data, size_t size, int type, void** mhandle) override;
  Status regMrDmaBuf(void* comm, void* data, size_t size, int type, uint64_t offset, int fd,
                     void** mhandle) override;
  Status iflush(void* recvComm, int n, void** data, int* sizes, void** mhandles, void** request) override;

  Status deregMr(void* comm, void* mhandle) override {
    if (!mhandle) return Status();
    std::lock_guard<std::mutex> lock(mu_);
    static_cast<Comm*>(comm)->dev->mrs.release(v_, static_cast<Mr*>(mhandle));
    return Status();
  }

  Status isend(void* sendComm, void* data, size_t size, int tag, void* mhandle, void** request) override;
  Status irecv(void* recvComm, int n, void** data, size_t* sizes, int* tags, void** mhandles,
               void** request) override;
  Status test(void* request, int* done, int* sizes) override;
  Status closeSend(void* comm) override { return closeComm(static_cast<Comm*>(comm)); }
  Status closeRecv(void* comm) override { return closeComm(static_cast<Comm*>(comm)); }
  Status closeListen(void* listenComm) override {
    closeListenComm(v_, static_cast<ListenComm*>(listenComm));
    return Status();
  }

  MrCacheStats stats(int dev) {
    std::lock_guard<std::mutex> lock(mu_);
    return devs_[dev]->mrs.stats();
  }

 private:
  Status checkDev(int dev) const {
    if (dev < 0 || dev >= devices())
      return errorf(hocclInvalidArgument, "IB transport: device %d does not exist (%d devices)", dev, devices());
    return Status();
  }

  void kick();

  void adopt(Comm* c) {
    std::lock_guard<std::mutex> lock(mu_);
    comms_.push_back(c);
    kick();
  }

  Status health(void* comm) override {
    Comm* c = static_cast<Comm*>(comm);
    std::lock_guard<std::mutex> lock(mu_);
    return c->goodbye ? Status() : c->failed;
  }

  Status closeComm(Comm* c);

  // The registration covering the request's buffer: the caller's if it
  // covers it, else one taken from the cache for this request (mu_ held).
  Status attachMr(Comm* c, Request* r, Mr* given);
  // isend and irecv: a request for one message of `size` bytes at `data`,
  // with its registration and the connection's next sequence number; once
  // queued, `launch` counts it in flight, hands it to the caller and moves
  // what can move (mu_ held).
  Status newRequest(Comm* c, bool isSend, void* data, size_t size, int tag, Mr* given, std::unique_ptr<Request>* out);
  void launch(Comm* c, std::unique_ptr<Request> r, void** request);
  void finish(Request* r);

  // Small messages go whole to one QP (in turn); large ones are cut into one
  // 4 KiB-aligned part per QP.
  static void splitParts(Request* r, int n);
  void failComm(Comm* c, const Status& why);
  int qpIndex(const Comm* c, uint32_t qpn) const;
  bool post(Comm* c, int qp, ibv_send_wr* wr);
  void progress(Comm* c);

  // Sender: writes each message once its FIFO entry has landed, in order,
  // as far as the send queues take (mu_ held).
  void progressSends(Comm* c);

  // Receiver: announces posted buffers to the sender, each FIFO slot once
  // its previous write has completed (mu_ held).
  void postFifo(Comm* c);
  void pollCq(Comm* c);
  void handleCompletion(Comm* c, const ibv_wc& wc);

  // The side channel closed: the peer exited or closed its end. What already
  // arrived still completes; the rest fails (mu_ held).
  void peerClosed(Comm* c, int err);
  void progressLoop();

  IbNetOptions opt_;
  const Verbs& v_;
  std::vector<std::unique_ptr<Device>> devs_;
  std::mutex mu_;
  std::vector<Comm*> comms_;
  int wake_ = -1;
  std::atomic<bool> stop_{false};
  std::atomic<bool> completed_{false};
  std::thread thread_;
};

}  // namespace ibnet
}  // namespace hoccl

#endif  // HOCCL_HAVE_IBVERBS
