// Passing file descriptors between processes of one host: a small payload
// plus a few fds per message, over an abstract-namespace Unix socket
// (SOCK_SEQPACKET, so a message arrives whole or is reported truncated) with
// SCM_RIGHTS. Used for CUDA VMM handles exported as POSIX fds (CUDA.md):
// the exporting rank listens, the importing rank connects.
//
// Every wait ends at a Deadline. Errors name the peer (the `peer` text
// given at connect/accept) and what went wrong: the peer closed, a payload
// of the wrong size, fewer or more fds than expected, a truncated message
// or control message. Received fds are close-on-exec; on any error none
// is left open.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/error.h"
#include "base/socket.h"

namespace hoccl {

// The most fds one message carries.
inline constexpr int kMaxPassedFds = 16;
// The largest payload of one message.
inline constexpr size_t kMaxFdPayload = 4096;

// The abstract socket name (without its leading NUL) where rank `rank` of
// the communicator identified by `commKey` (e.g. the bootstrap's unique id
// bytes) listens: "hoccl-fd-<hash of key>-<rank>". Equal keys and ranks
// give equal names in every process; different keys differ with
// overwhelming probability.
std::string fdSocketName(const void* commKey, size_t keyBytes, int rank);

// One connected end.
class FdChannel {
 public:

  // Connects to `name`, retrying while nobody listens there yet, until `dl`.
  // `peer` names the other end in error messages ("rank 1 (pid 42)").
  static Status connect(const std::string& name, const std::string& peer, const Deadline& dl, FdChannel* out);

  // One message: `bytes` of payload (1..kMaxFdPayload) and `nfds` fds
  // (0..kMaxPassedFds). The fds stay open here (the kernel dups them).
  Status send(const void* payload, size_t bytes, const int* fds, int nfds, const Deadline& dl) const;
  // Receives one message that must have exactly `bytes` of payload and
  // `nfds` fds; the fds (owned by the caller) go to *fds.
  Status recv(void* payload, size_t bytes, int nfds, std::vector<int>* fds, const Deadline& dl) const;

  bool valid() const { return sock_.valid(); }
  const std::string& peer() const { return peer_; }
  // The process at the other end (SO_PEERCRED), or -1.
  int peerPid() const;
  void close() { sock_.close(); }

 private:
  friend class FdListener;
  Socket sock_;  // owns the fd (moves, closes)
  std::string peer_;
};

class FdListener {
 public:

  // Listens on abstract name `name`; a name already taken is an error saying so.
  static Status listen(const std::string& name, FdListener* out);
  // The next connection, named `peer` in errors; times out at `dl`.
  Status accept(const std::string& peer, const Deadline& dl, FdChannel* out) const;

  // True once a connection waits to be accepted (polls up to timeoutMs).
  bool pending(int timeoutMs) const;

  const std::string& name() const { return name_; }
  void close() { sock_.close(); }

 private:
  Socket sock_;
  std::string name_;
};

}  // namespace hoccl
