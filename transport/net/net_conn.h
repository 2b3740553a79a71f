// Connections to ranks on other nodes: the slot interface of
// transport/connection.h over any NetTransport. Each connection owns local
// staging slots; a send posts an isend of a filled slot, a receive keeps an
// irecv posted on every free slot, so up to `slots` messages are in flight
// in each direction and both sides keep FIFO order.
#pragma once

#include <map>
#include <memory>
#include <vector>

#include "base/oob.h"
#include "transport/connection.h"
#include "transport/net/net.h"

namespace hoccl {

struct NetDomainOptions {
  int rank = 0;
  size_t slotBytes = 128 << 10;
  int slots = 8;
  double timeoutSec = 300;
  // This rank's index among the ranks of its node: rails, the l-th rank of
  // a node uses the node's device (port) l mod devices.
  int localIndex = 0;
};

// One network connection made by connectNetComms: `e.send` says which end.
struct NetCommMade {
  ConnRequest e;
  void* comm;  // a sendComm or a recvComm of the transport
};

// Makes the transport's connections for `requests`, pairwise over `oob`: the
// receiver of each listens and sends its handle (tag tagBase | channel),
// the sender connects, the receiver accepts; connects and accepts progress
// together. Asks oob.whileWaiting about a silent peer every 0.1 s; gives
// up after timeoutSec. *made lists what was made, also on failure (the
// peer may keep its end of those): the caller owns those comms.
Status connectNetComms(NetTransport& net, int dev, OutOfBand& oob, uint32_t tagBase,
                       const std::vector<ConnRequest>& requests, double timeoutSec, std::vector<NetCommMade>* made);

class NetDomain {
 public:
  // `net` is shared by all connections of one communicator.
  // `dev`: the transport device (IB port) this rank uses.
  NetDomain(std::unique_ptr<NetTransport> net, int rank, size_t slotBytes, int slots, double timeoutSec, int dev = 0)
      : net_(std::move(net)), rank_(rank), slotBytes_(slotBytes), slots_(slots), timeoutSec_(timeoutSec), dev_(dev) {}
  // Creates the transport `choice` names; its progress thread rings `wake`
  // whenever a request completes or a connection fails. `chosen` receives
  // a one-line account of the transport and device.
  static Status create(NetChoice choice, const NetDomainOptions& opt, Doorbell* wake,
                       std::unique_ptr<NetDomain>* out, std::string* chosen);
  ~NetDomain();

  // Sets up the missing connections in `requests` (pairwise over `oob`: the
  // receiver listens and sends its handle, the sender connects, the
  // receiver accepts). Idempotent.
  Status connect(OutOfBand& oob, const std::vector<ConnRequest>& requests);
  SendConn* sendConn(int peer, int channel);
  RecvConn* recvConn(int peer, int channel);
  NetTransport& transport() { return *net_; }
  void consumerWaiting(bool sleeping) { net_->consumerWaiting(sleeping); }
  // A connection that broke other than by the peer closing it (see
  // NetTransport::health): the peer's rank and the transport's account.
  bool lostPeer(int* peer, std::string* why) const;

 private:
  std::unique_ptr<NetTransport> net_;
  int rank_;
  size_t slotBytes_;
  int slots_;
  double timeoutSec_;
  int dev_ = 0;
  std::map<std::pair<int, int>, std::unique_ptr<SendConn>> sends_;
  std::map<std::pair<int, int>, std::unique_ptr<RecvConn>> recvs_;
};

}  // namespace hoccl
