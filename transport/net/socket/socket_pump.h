// The TCP transport's byte movers (see socket_net.h): what a connection's
// sockets take or give now, the control stream's headers and their matching
// with posted receives, and the pairing of two connections' control streams.
// Every member runs with the transport's mutex held.
#pragma once

#include <atomic>

#include "transport/net/socket/socket_net.h"

namespace hoccl {
namespace socknet {

class SocketPump {
 protected:
  static void sayGoodbye(Comm* c);
  static void destroy(Comm* c);
  // send (to a peer) and recv (from it) carry both directions' headers on
  // one socket: send's when sendOwns, recv's otherwise.
  Status pair(Comm* send, Comm* recv, bool sendOwns);

  void match(Comm* c);
  void failUnmatchable(Comm* c);
  void complete(Request* r);
  void fail(Comm* c, const Status& why);
  static Status brokenPeer(Comm* c, const char* what, int err);
  void markLost(Comm* c, int err);

  void pumpStream(Comm* c, Stream& s);
  void readBack(Comm* c);
  void writeControl(Comm* c);
  void readControl(Comm* c);
  void pumpControl(Comm* c);
  // Moves what can move on every socket of c without waiting (in the
  // caller's thread); returns true if work remains for the progress thread.
  bool pumpAll(Comm* c);

  std::atomic<bool> completed_{false};
  // A stream got work after the progress thread built its poll set.
  bool pollSetStale_ = false;

 private:
  void parseControl(Comm* c);
  void socketEnded(Comm* c, int err, bool sender);
};

}  // namespace socknet
}  // namespace hoccl
