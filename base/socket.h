// TCP helpers for the bootstrap: addresses, interface choice, and sends,
// receives, accepts and connects that all end at a deadline.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <cstdint>
#include <functional>
#include <string>

#include "base/clock.h"
#include "base/descriptors.h"
#include "base/error.h"

namespace hoccl {

// An IPv4 or IPv6 socket address in a fixed-size form that can be copied
// into unique ids and bootstrap messages.
struct SockAddr {
  union {
    sockaddr sa;
    sockaddr_in in4;
    sockaddr_in6 in6;
  } u{};
  socklen_t len() const;
  int port() const;
  void setPort(int port);
  std::string toString() const;  // "1.2.3.4:5678" or "[::1]:5678"
};
static_assert(sizeof(SockAddr) == 28, "SockAddr is part of the wire format");

// Parses "host:port" ("[v6]:port" too); the host may be a name.
Status parseHostPort(const std::string& text, SockAddr* out);

// Picks the local address the bootstrap listens on, following
// HOCCL_SOCKET_IFNAME rules (prefix list, ^ excludes, = exact match).
// Without a rule: the first interface that is up and not loopback or
// docker, else loopback. `ifname` receives the interface's name.
Status chooseLocalAddress(const std::string& rule, SockAddr* out, std::string* ifname);
// The local address (and its interface) the kernel routes through to reach
// `remote`: a UDP socket "connected" to it, no packet sent. Used when no
// HOCCL_SOCKET_IFNAME rule is given, so every rank picks an interface that
// reaches the rendezvous.
Status probeRouteTo(const SockAddr& remote, SockAddr* local, std::string* ifname);
// True if interface `name` passes `rule` (exposed for tests).
bool interfaceMatches(const std::string& rule, const std::string& name);

class Socket {
 public:
  Socket() = default;
  explicit Socket(int fd) : fd_(fd) {}
  Socket(Socket&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  Socket& operator=(Socket&& o) noexcept;
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;
  ~Socket() { close(); }

  // Binds and listens on `addr` (port 0: any free port); `bound` gets the
  // actual address. A busy port is an error that says so.
  static Status listen(const SockAddr& addr, Socket* out, SockAddr* bound);
  // Connects, retrying refused or unreachable attempts with back-off until
  // `retries` attempts or the deadline. `between`, if given, runs between
  // attempts and every 100 ms while one is pending; an error from it ends
  // the connect with that error.
  static Status connect(const SockAddr& addr, int retries, const Deadline& dl, Socket* out,
                        const std::function<Status()>& between = nullptr);
  Status accept(const Deadline& dl, Socket* out) const;

  Status sendAll(const void* data, size_t bytes, const Deadline& dl) const;
  // Receives exactly `bytes`; the peer closing first is hocclRemoteError.
  Status recvAll(void* data, size_t bytes, const Deadline& dl) const;
  // Waits until readable; returns false on timeout.
  bool waitReadable(int timeoutMs) const;

  int fd() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  void close();

 private:
  int fd_ = -1;
};

}  // namespace hoccl
