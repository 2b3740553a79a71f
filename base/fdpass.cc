// Passing fds over abstract Unix sockets (fdpass.h).
#include "base/fdpass.h"

#include <errno.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <thread>

#include "base/random.h"

namespace hoccl {
namespace {

// An abstract address: sun_path starts with a NUL, the name follows (no
// terminator, the length says where it ends).
Status abstractAddress(const std::string& name, sockaddr_un* addr, socklen_t* len) {
  std::memset(addr, 0, sizeof *addr);
  addr->sun_family = AF_UNIX;
  if (name.empty() || name.size() + 1 > sizeof addr->sun_path)
    return errorf(hocclInternalError, "fd passing: socket name \"%s\" is empty or longer than %zu bytes",
                  name.c_str(), sizeof addr->sun_path - 1);
  std::memcpy(addr->sun_path + 1, name.data(), name.size());
  *len = socklen_t(offsetof(sockaddr_un, sun_path) + 1 + name.size());
  return Status();
}

// Waits for `events` on fd until dl: Status() when ready.
Status waitFor(int fd, short events, const Deadline& dl, const std::string& peer, const char* what) {
  for (;;) {
    pollfd p{fd, events, 0};
    const int n = poll(&p, 1, dl.remainingMs(100));
    if (n > 0) return Status();
    if (n < 0 && errno != EINTR) return sysErrorf("fd passing: poll while %s %s", what, peer.c_str());
    if (dl.expired())
      return errorf(hocclRemoteError, "fd passing: timed out %s %s (the peer did not answer in time)", what,
                    peer.c_str());
  }
}

void closeAll(std::vector<int>* fds) {
  for (int fd : *fds) ::close(fd);
  fds->clear();
}

}  // namespace

std::string fdSocketName(const void* commKey, size_t keyBytes, int rank) {
  const uint64_t h = fnv1a64(commKey, keyBytes);
  char buf[64];
  snprintf(buf, sizeof buf, "hoccl-fd-%016llx-%d", static_cast<unsigned long long>(h), rank);
  return buf;
}

int FdChannel::peerPid() const {
  ucred cred{};
  socklen_t len = sizeof cred;
  return sock_.valid() && getsockopt(sock_.fd(), SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0 ? int(cred.pid) : -1;
}

Status FdChannel::connect(const std::string& name, const std::string& peer, const Deadline& dl, FdChannel* out) {
  sockaddr_un addr;
  socklen_t len = 0;
  HOCCL_TRY(abstractAddress(name, &addr, &len));
  for (int wait = 1;; wait = std::min(wait * 2, 50)) {
    const int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) return sysErrorf("fd passing: socket() to reach %s", peer.c_str());
    if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), len) == 0) {
      out->sock_ = Socket(fd);
      out->peer_ = peer;
      return Status();
    }
    const int err = errno;
    ::close(fd);
    // Refused: nobody listens there yet. Again: its backlog is full.
    if (err != ECONNREFUSED && err != EAGAIN && err != ENOENT && err != EINTR) {
      errno = err;
      return sysErrorf("fd passing: connecting to %s at @%s", peer.c_str(), name.c_str());
    }
    if (dl.expired())
      return errorf(hocclRemoteError, "fd passing: timed out connecting to %s at @%s (nobody listens there: "
                    "is that process still alive?)", peer.c_str(), name.c_str());
    std::this_thread::sleep_for(std::chrono::milliseconds(std::min(wait, std::max(1, dl.remainingMs()))));
  }
}

Status FdChannel::send(const void* payload, size_t bytes, const int* fds, int nfds, const Deadline& dl) const {
  if (!sock_.valid()) return Status(hocclInternalError, "fd passing: send on a closed channel");
  if (bytes == 0 || bytes > kMaxFdPayload || nfds < 0 || nfds > kMaxPassedFds)
    return errorf(hocclInternalError, "fd passing: cannot send %zu bytes with %d fds to %s (1..%zu bytes, "
                  "0..%d fds)", bytes, nfds, peer_.c_str(), kMaxFdPayload, kMaxPassedFds);
  iovec iov{const_cast<void*>(payload), bytes};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxPassedFds)] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  if (nfds > 0) {
    msg.msg_control = control;
    msg.msg_controllen = CMSG_SPACE(sizeof(int) * size_t(nfds));
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int) * size_t(nfds));
    std::memcpy(CMSG_DATA(c), fds, sizeof(int) * size_t(nfds));
  }
  for (;;) {
    const ssize_t n = sendmsg(sock_.fd(), &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n == ssize_t(bytes)) return Status();
    if (n >= 0) return errorf(hocclSystemError, "fd passing: sent %zd of %zu bytes to %s", n, bytes, peer_.c_str());
    if (errno == EPIPE || errno == ECONNRESET)
      return errorf(hocclRemoteError, "fd passing: %s closed its end (did it exit?)", peer_.c_str());
    if (errno != EAGAIN && errno != EINTR) return sysErrorf("fd passing: sendmsg to %s", peer_.c_str());
    HOCCL_TRY(waitFor(sock_.fd(), POLLOUT, dl, peer_, "sending to"));
  }
}

Status FdChannel::recv(void* payload, size_t bytes, int nfds, std::vector<int>* fds, const Deadline& dl) const {
  fds->clear();
  if (!sock_.valid()) return Status(hocclInternalError, "fd passing: recv on a closed channel");
  std::vector<char> buf(kMaxFdPayload + 1);
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxPassedFds)] = {};
  iovec iov{buf.data(), buf.size()};
  msghdr msg{};
  ssize_t n = -1;
  for (;;) {
    msg = msghdr{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    n = recvmsg(sock_.fd(), &msg, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
    if (n >= 0) break;
    if (errno == ECONNRESET)
      return errorf(hocclRemoteError, "fd passing: %s closed its end (did it exit?)", peer_.c_str());
    if (errno != EAGAIN && errno != EINTR) return sysErrorf("fd passing: recvmsg from %s", peer_.c_str());
    HOCCL_TRY(waitFor(sock_.fd(), POLLIN, dl, peer_, "receiving from"));
  }
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    const size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < k; ++i) {
      int fd;
      std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
      fds->push_back(fd);
    }
  }
  Status st;
  if (n == 0)
    st = errorf(hocclRemoteError, "fd passing: %s closed its end before sending (did it exit?)", peer_.c_str());
  else if (msg.msg_flags & MSG_CTRUNC)
    st = errorf(hocclRemoteError, "fd passing: the control message from %s was truncated (more than %d fds, or "
                "this process is out of fds)", peer_.c_str(), kMaxPassedFds);
  else if ((msg.msg_flags & MSG_TRUNC) || size_t(n) != bytes)
    st = errorf(hocclRemoteError, "fd passing: %s sent a %s%zd-byte payload, expected %zu bytes", peer_.c_str(),
                (msg.msg_flags & MSG_TRUNC) ? "more than " : "", n, bytes);
  else if (int(fds->size()) != nfds)
    st = errorf(hocclRemoteError, "fd passing: %s sent %zu fds, expected %d%s", peer_.c_str(), fds->size(), nfds,
                fds->empty() ? " (no fd received)" : "");
  if (!st.ok()) {
    closeAll(fds);
    return st;
  }
  std::memcpy(payload, buf.data(), bytes);
  return Status();
}

Status FdListener::listen(const std::string& name, FdListener* out) {
  sockaddr_un addr;
  socklen_t len = 0;
  HOCCL_TRY(abstractAddress(name, &addr, &len));
  const int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return sysErrorf("fd passing: socket() to listen at @%s", name.c_str());
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), len) != 0) {
    const int err = errno;
    ::close(fd);
    if (err == EADDRINUSE)
      return errorf(hocclSystemError, "fd passing: @%s is already taken by another socket (a second "
                    "communicator with the same id and rank on this host?)", name.c_str());
    errno = err;
    return sysErrorf("fd passing: bind @%s", name.c_str());
  }
  if (::listen(fd, 64) != 0) {
    const int err = errno;
    ::close(fd);
    errno = err;
    return sysErrorf("fd passing: listen @%s", name.c_str());
  }
  out->sock_ = Socket(fd);
  out->name_ = name;
  return Status();
}

bool FdListener::pending(int timeoutMs) const {
  pollfd p{sock_.fd(), POLLIN, 0};
  return sock_.valid() && poll(&p, 1, timeoutMs) > 0;
}

Status FdListener::accept(const std::string& peer, const Deadline& dl, FdChannel* out) const {
  if (!sock_.valid()) return Status(hocclInternalError, "fd passing: accept on a closed listener");
  for (;;) {
    const int fd = accept4(sock_.fd(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd >= 0) {
      out->sock_ = Socket(fd);
      out->peer_ = peer;
      return Status();
    }
    if (errno != EAGAIN && errno != EINTR && errno != ECONNABORTED)
      return sysErrorf("fd passing: accept at @%s for %s", name_.c_str(), peer.c_str());
    HOCCL_TRY(waitFor(sock_.fd(), POLLIN, dl, peer, "waiting for a connection from"));
  }
}

}  // namespace hoccl
