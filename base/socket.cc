#include "base/socket.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>
#include <vector>

#include "base/name_rule.h"

namespace hoccl {

socklen_t SockAddr::len() const {
  return u.sa.sa_family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
}

int SockAddr::port() const {
  return ntohs(u.sa.sa_family == AF_INET6 ? u.in6.sin6_port : u.in4.sin_port);
}

void SockAddr::setPort(int port) {
  if (u.sa.sa_family == AF_INET6) u.in6.sin6_port = htons(static_cast<uint16_t>(port));
  else u.in4.sin_port = htons(static_cast<uint16_t>(port));
}

std::string SockAddr::toString() const {
  char host[INET6_ADDRSTRLEN] = "?";
  if (u.sa.sa_family == AF_INET6) {
    inet_ntop(AF_INET6, &u.in6.sin6_addr, host, sizeof host);
    return "[" + std::string(host) + "]:" + std::to_string(port());
  }
  inet_ntop(AF_INET, &u.in4.sin_addr, host, sizeof host);
  return std::string(host) + ":" + std::to_string(port());
}

Status parseHostPort(const std::string& text, SockAddr* out) {
  size_t colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0)
    return errorf(hocclInvalidArgument, "\"%s\" is not host:port", text.c_str());
  std::string host = text.substr(0, colon);
  std::string port = text.substr(colon + 1);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  int rc = getaddrinfo(host.c_str(), port.c_str(), &hints, &res);
  if (rc != 0 || !res)
    return errorf(hocclInvalidArgument, "cannot resolve \"%s\": %s", text.c_str(), gai_strerror(rc));
  *out = SockAddr{};
  memcpy(&out->u, res->ai_addr, std::min<size_t>(res->ai_addrlen, sizeof out->u));
  freeaddrinfo(res);
  return Status();
}

bool interfaceMatches(const std::string& rule, const std::string& name) {
  NameRule r;
  std::string why;
  return parseNameRule(rule, /*withPorts=*/false, &r, &why) && nameRuleSelects(r, name);
}

Status chooseLocalAddress(const std::string& rule, SockAddr* out, std::string* ifname) {
  NameRule parsed;
  std::string why;
  if (!parseNameRule(rule, /*withPorts=*/false, &parsed, &why))
    return errorf(hocclInvalidArgument, "HOCCL_SOCKET_IFNAME: %s", why.c_str());
  ifaddrs* list = nullptr;
  int rc;
  {
    OpeningDescriptor opening;
    rc = getifaddrs(&list);
  }
  if (rc != 0) return sysErrorf("getifaddrs");
  const ifaddrs* best = nullptr;
  const ifaddrs* loopback = nullptr;
  for (const ifaddrs* ifa = list; ifa; ifa = ifa->ifa_next) {
    if (!ifa->ifa_addr || !(ifa->ifa_flags & IFF_UP)) continue;
    int fam = ifa->ifa_addr->sa_family;
    if (fam != AF_INET && fam != AF_INET6) continue;
    if (fam == AF_INET6) {
      auto* a6 = reinterpret_cast<const sockaddr_in6*>(ifa->ifa_addr);
      if (IN6_IS_ADDR_LINKLOCAL(&a6->sin6_addr)) continue;  // needs a scope id; avoid
    }
    std::string name = ifa->ifa_name;
    if (!rule.empty()) {
      if (!nameRuleSelects(parsed, name)) continue;
    } else {
      if (ifa->ifa_flags & IFF_LOOPBACK) {
        if (!loopback || (fam == AF_INET && loopback->ifa_addr->sa_family != AF_INET)) loopback = ifa;
        continue;
      }
      if (name.compare(0, 6, "docker") == 0 || name.compare(0, 4, "virbr") == 0) continue;
    }
    // Prefer IPv4 within the first matching interface.
    if (!best || (best->ifa_name == name && fam == AF_INET && best->ifa_addr->sa_family != AF_INET))
      best = ifa;
  }
  const ifaddrs* pick = best ? best : loopback;
  if (!pick) {
    freeifaddrs(list);
    return errorf(hocclSystemError, "no usable network interface%s%s",
                  rule.empty() ? "" : " matches HOCCL_SOCKET_IFNAME=", rule.c_str());
  }
  *out = SockAddr{};
  memcpy(&out->u, pick->ifa_addr,
         pick->ifa_addr->sa_family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in));
  out->setPort(0);
  *ifname = pick->ifa_name;
  freeifaddrs(list);
  return Status();
}

Status probeRouteTo(const SockAddr& remote, SockAddr* local, std::string* ifname) {
  int fd;
  {
    OpeningDescriptor opening;
    fd = ::socket(remote.u.sa.sa_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  }
  if (fd < 0) return sysErrorf("socket");
  Socket s(fd);
  SockAddr probe = remote;
  if (probe.port() == 0) probe.setPort(9);
  if (::connect(fd, &probe.u.sa, probe.len()) != 0) return sysErrorf("no route to %s", remote.toString().c_str());
  SockAddr mine;
  socklen_t len = sizeof mine.u;
  if (getsockname(fd, &mine.u.sa, &len) != 0) return sysErrorf("getsockname");
  mine.setPort(0);
  // Name the interface that holds the address.
  ifaddrs* list = nullptr;
  ifname->clear();
  int rc;
  {
    OpeningDescriptor opening;
    rc = getifaddrs(&list);
  }
  if (rc == 0) {
    for (const ifaddrs* ifa = list; ifa; ifa = ifa->ifa_next) {
      if (!ifa->ifa_addr || ifa->ifa_addr->sa_family != mine.u.sa.sa_family) continue;
      bool same = mine.u.sa.sa_family == AF_INET
                      ? reinterpret_cast<const sockaddr_in*>(ifa->ifa_addr)->sin_addr.s_addr == mine.u.in4.sin_addr.s_addr
                      : memcmp(&reinterpret_cast<const sockaddr_in6*>(ifa->ifa_addr)->sin6_addr, &mine.u.in6.sin6_addr,
                               sizeof(in6_addr)) == 0;
      if (same) {
        *ifname = ifa->ifa_name;
        break;
      }
    }
    freeifaddrs(list);
  }
  if (ifname->empty()) *ifname = "?";
  *local = mine;
  return Status();
}

Socket& Socket::operator=(Socket&& o) noexcept {
  if (this != &o) {
    close();
    fd_ = o.fd_;
    o.fd_ = -1;
  }
  return *this;
}

void Socket::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

static void tuneSocket(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
}

Status Socket::listen(const SockAddr& addr, Socket* out, SockAddr* bound) {
  int fd;
  {
    OpeningDescriptor opening;
    fd = ::socket(addr.u.sa.sa_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  }
  if (fd < 0) return sysErrorf("socket");
  Socket s(fd);
  int one = 1;
  // SO_REUSEADDR lets a restarted job reuse a port in TIME_WAIT; it does not
  // allow two live listeners on one port.
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (::bind(fd, &addr.u.sa, addr.len()) != 0) {
    if (errno == EADDRINUSE)
      return errorf(hocclSystemError, "cannot listen on %s: the port is already in use by another process",
                    addr.toString().c_str());
    return sysErrorf("cannot bind %s", addr.toString().c_str());
  }
  if (::listen(fd, 1024) != 0) return sysErrorf("listen on %s", addr.toString().c_str());
  SockAddr b = addr;
  socklen_t len = sizeof b.u;
  getsockname(fd, &b.u.sa, &len);
  tuneSocket(fd);
  *bound = b;
  *out = std::move(s);
  return Status();
}

Status Socket::connect(const SockAddr& addr, int retries, const Deadline& dl, Socket* out,
                       const std::function<Status()>& between) {
  int delayMs = 1;
  for (int attempt = 0;; ++attempt) {
    int fd;
    {
      OpeningDescriptor opening;
      fd = ::socket(addr.u.sa.sa_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    }
    if (fd < 0) return sysErrorf("socket");
    Socket s(fd);
    int rc = ::connect(fd, &addr.u.sa, addr.len());
    int err = rc == 0 ? 0 : errno;
    if (err == EINPROGRESS) {
      // A peer behind a cut link leaves the attempt pending for minutes:
      // `between` looks every 100 ms meanwhile (a peer's abort, its silence).
      pollfd p{fd, POLLOUT, 0};
      int prc;
      for (;;) {
        do prc = poll(&p, 1, between ? dl.remainingMs(100) : dl.remainingMs()); while (prc < 0 && errno == EINTR);
        if (prc != 0 || dl.expired()) break;
        if (between) HOCCL_TRY(between());
      }
      if (prc == 0) return errorf(hocclTimeout, "timed out connecting to %s", addr.toString().c_str());
      socklen_t l = sizeof err;
      getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &l);
    }
    if (err == 0) {
      tuneSocket(fd);
      *out = std::move(s);
      return Status();
    }
    bool transient = err == ECONNREFUSED || err == ECONNRESET || err == ETIMEDOUT ||
                     err == EHOSTUNREACH || err == ENETUNREACH || err == EAGAIN;
    if (!transient || attempt >= retries || dl.expired()) {
      errno = err;
      // connect's EADDRNOTAVAIL: no local port left to connect from.
      return sysErrorf("cannot connect to %s after %d attempts%s", addr.toString().c_str(), attempt + 1,
                       err == EADDRNOTAVAIL ? " (out of local ports: net.ipv4.ip_local_port_range)" : "");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(std::min(delayMs, dl.remainingMs())));
    delayMs = std::min(delayMs * 2, 200);
    if (between) HOCCL_TRY(between());
  }
}

Status Socket::accept(const Deadline& dl, Socket* out) const {
  for (;;) {
    int fd;
    {
      OpeningDescriptor opening;
      fd = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
    }
    if (fd >= 0) {
      tuneSocket(fd);
      *out = Socket(fd);
      return Status();
    }
    // Out of descriptors, accept fails even with nothing queued: that is an
    // error only once a connection waits.
    const int err = errno;
    const bool starved = err == EMFILE || err == ENFILE;
    if ((starved && waitReadable(0)) ||
        (!starved && err != EAGAIN && err != EWOULDBLOCK && err != EINTR && err != ECONNABORTED)) {
      errno = err;
      return sysErrorf("accept");
    }
    if (dl.expired()) return errorf(hocclTimeout, "timed out waiting for a connection");
    waitReadable(dl.remainingMs(100));
  }
}

bool Socket::waitReadable(int timeoutMs) const {
  pollfd p{fd_, POLLIN, 0};
  int rc;
  do rc = poll(&p, 1, timeoutMs); while (rc < 0 && errno == EINTR);
  return rc > 0;
}

Status Socket::sendAll(const void* data, size_t bytes, const Deadline& dl) const {
  const char* p = static_cast<const char*>(data);
  while (bytes > 0) {
    ssize_t n = ::send(fd_, p, bytes, MSG_NOSIGNAL);
    if (n > 0) {
      p += n;
      bytes -= static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (dl.expired()) return errorf(hocclTimeout, "timed out sending");
      pollfd pf{fd_, POLLOUT, 0};
      poll(&pf, 1, dl.remainingMs(100));
      continue;
    }
    if (errno == EPIPE || errno == ECONNRESET)
      return errorf(hocclRemoteError, "connection closed by the peer while sending");
    return sysErrorf("send");
  }
  return Status();
}

Status Socket::recvAll(void* data, size_t bytes, const Deadline& dl) const {
  char* p = static_cast<char*>(data);
  while (bytes > 0) {
    ssize_t n = ::recv(fd_, p, bytes, 0);
    if (n > 0) {
      p += n;
      bytes -= static_cast<size_t>(n);
      continue;
    }
    if (n == 0) return errorf(hocclRemoteError, "connection closed by the peer");
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      if (dl.expired()) return errorf(hocclTimeout, "timed out receiving");
      waitReadable(dl.remainingMs(100));
      continue;
    }
    if (errno == ECONNRESET) return errorf(hocclRemoteError, "connection reset by the peer");
    return sysErrorf("recv");
  }
  return Status();
}

}  // namespace hoccl
