#include "tests/plugin/oob.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

namespace pluginharness {

namespace {

bool fullIo(int fd, char* p, size_t n, bool write) {
  while (n > 0) {
    ssize_t r = write ? ::send(fd, p, n, MSG_NOSIGNAL) : ::recv(fd, p, n, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    p += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

}  // namespace

bool Oob::open(int rank, const std::string& addr, int port, double timeoutSec, std::string* err, int listenFd) {
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<uint16_t>(port));
  if (inet_pton(AF_INET, addr.c_str(), &sa.sin_addr) != 1) {
    *err = "bad address " + addr;
    return false;
  }
  auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeoutSec);
  if (rank == 0) {
    int l = listenFd;
    if (l < 0) l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (listenFd < 0 && (bind(l, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0 || listen(l, 1) != 0)) {
      *err = "listen on " + addr + ":" + std::to_string(port) + ": " + strerror(errno);
      close(l);
      return false;
    }
    timeval tv{static_cast<time_t>(timeoutSec), 0};
    setsockopt(l, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    fd_ = accept(l, nullptr, nullptr);
    close(l);
    if (fd_ < 0) {
      *err = std::string("no peer connected: ") + strerror(errno);
      return false;
    }
  } else {
    for (;;) {
      fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      if (connect(fd_, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0) break;
      close(fd_);
      fd_ = -1;
      if (std::chrono::steady_clock::now() > deadline) {
        *err = "cannot reach rank 0 at " + addr + ":" + std::to_string(port);
        return false;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  int one = 1;
  setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return true;
}

bool Oob::exchange(const void* mine, void* theirs, size_t bytes, std::string* err) {
  if (!fullIo(fd_, const_cast<char*>(static_cast<const char*>(mine)), bytes, true) ||
      !fullIo(fd_, static_cast<char*>(theirs), bytes, false)) {
    *err = "out-of-band exchange with the peer failed";
    return false;
  }
  return true;
}

Oob::~Oob() {
  if (fd_ >= 0) close(fd_);
}

int listenLocal(int* port) {
  int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof sa;
  if (s < 0 || bind(s, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0 || listen(s, 1) != 0 ||
      getsockname(s, reinterpret_cast<sockaddr*>(&sa), &len) != 0) {
    if (s >= 0) close(s);
    return -1;
  }
  *port = ntohs(sa.sin_port);
  return s;
}

}  // namespace pluginharness
