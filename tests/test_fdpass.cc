// Fd passing between forked processes (base/fdpass.h): memfds sent
// with a payload map the same bytes on both sides; a peer that exits, a
// wrong payload size, missing fds and a truncated control message are
// errors that say so; every wait ends at its deadline.
#include <dirent.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "base/fdpass.h"

namespace hoccl {
namespace {

// A name no other test (or run) uses.
std::string uniqueName(const char* what) {
  static int n = 0;
  return "hoccl-test-" + std::string(what) + "-" + std::to_string(getpid()) + "-" + std::to_string(++n);
}

// Runs `child` in a forked process; returns its exit code (or 128 + signal).
pid_t spawn(const std::function<int()>& child) {
  const pid_t pid = fork();
  if (pid == 0) _exit(child());
  return pid;
}
int reap(pid_t pid) {
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

int memfdWith(const char* text, size_t bytes) {
  const int fd = memfd_create("hoccl-test", MFD_CLOEXEC);
  if (fd < 0 || ftruncate(fd, off_t(bytes)) != 0) return -1;
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  std::strcpy(static_cast<char*>(p), text);
  munmap(p, bytes);
  return fd;
}

int openFds() {
  int n = 0;
  DIR* d = opendir("/proc/self/fd");
  while (readdir(d)) ++n;
  closedir(d);
  return n;
}

struct Hello {
  uint64_t magic;
  uint64_t bytes[2];
};

TEST(FdPass, MemfdsCrossProcessesAndMapTheSameBytes) {
  const std::string name = uniqueName("memfd");
  FdListener listener;
  ASSERT_TRUE(FdListener::listen(name, &listener).ok());
  const size_t kBytes = 1 << 16;
  const pid_t child = spawn([&] {
    FdChannel ch;
    if (!FdChannel::connect(name, "the parent", Deadline::in(10), &ch).ok()) return 10;
    Hello h{};
    std::vector<int> fds;
    const Status st = ch.recv(&h, sizeof h, 2, &fds, Deadline::in(10));
    if (!st.ok() || h.magic != 0x5eed) return 11;
    for (int i = 0; i < 2; ++i) {
      auto* p = static_cast<char*>(mmap(nullptr, h.bytes[i], PROT_READ | PROT_WRITE, MAP_SHARED, fds[size_t(i)], 0));
      if (p == MAP_FAILED) return 12;
      if (std::strcmp(p, i == 0 ? "first" : "second") != 0) return 13 + i;
      p[h.bytes[i] - 1] = char('A' + i);  // the parent must see this
      munmap(p, h.bytes[i]);
    }
    const char ack = 'k';
    return ch.send(&ack, 1, nullptr, 0, Deadline::in(10)).ok() ? 0 : 15;
  });
  FdChannel ch;
  ASSERT_TRUE(listener.accept("the child", Deadline::in(10), &ch).ok());
  EXPECT_EQ(ch.peerPid(), child);
  const int fds[2] = {memfdWith("first", kBytes), memfdWith("second", 2 * kBytes)};
  const Hello h{0x5eed, {kBytes, 2 * kBytes}};
  ASSERT_TRUE(ch.send(&h, sizeof h, fds, 2, Deadline::in(10)).ok());
  char ack = 0;
  std::vector<int> none;
  const Status st = ch.recv(&ack, 1, 0, &none, Deadline::in(10));
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(ack, 'k');
  EXPECT_EQ(reap(child), 0);
  for (int i = 0; i < 2; ++i) {
    auto* p = static_cast<char*>(mmap(nullptr, h.bytes[i], PROT_READ, MAP_SHARED, fds[i], 0));
    ASSERT_NE(p, MAP_FAILED);
    EXPECT_EQ(p[h.bytes[i] - 1], char('A' + i)) << "the child's write through its fd " << i << " is not here";
    munmap(p, h.bytes[i]);
    close(fds[i]);
  }
}

// The parent receives what `child` sends (after connecting); returns the
// error of recv(bytes, nfds).
Status recvFromChild(const std::function<void(FdChannel&)>& child, size_t bytes, int nfds, int* fdsLeft = nullptr) {
  const std::string name = uniqueName("bad");
  FdListener listener;
  Status st = FdListener::listen(name, &listener);
  if (!st.ok()) return st;
  const pid_t pid = spawn([&] {
    FdChannel ch;
    if (!FdChannel::connect(name, "the parent", Deadline::in(10), &ch).ok()) return 1;
    child(ch);
    return 0;
  });
  FdChannel ch;
  st = listener.accept("rank 1 (the child)", Deadline::in(10), &ch);
  const int before = openFds();
  std::vector<int> fds;
  std::vector<char> buf(bytes);
  if (st.ok()) st = ch.recv(buf.data(), bytes, nfds, &fds, Deadline::in(10));
  if (fdsLeft) *fdsLeft = openFds() - before;
  for (int fd : fds) close(fd);
  reap(pid);
  return st;
}

TEST(FdPass, PeerThatExitsBeforeSendingIsNamed) {
  const Status st = recvFromChild([](FdChannel&) {}, 8, 1);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), hocclRemoteError);
  EXPECT_NE(st.message().find("rank 1 (the child) closed its end"), std::string::npos) << st.message();
}

TEST(FdPass, WrongPayloadSizeIsRefused) {
  int left = -1;
  const Status st = recvFromChild(
      [](FdChannel& ch) {
        const int fd = memfdWith("x", 4096);
        const char twelve[12] = {};
        ch.send(twelve, sizeof twelve, &fd, 1, Deadline::in(10));
      },
      8, 1, &left);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("12-byte payload, expected 8 bytes"), std::string::npos) << st.message();
  EXPECT_EQ(left, 0) << "the fd of a refused message stays open";
}

TEST(FdPass, MissingFdIsRefused) {
  const Status st = recvFromChild(
      [](FdChannel& ch) {
        const char eight[8] = {};
        ch.send(eight, sizeof eight, nullptr, 0, Deadline::in(10));
      },
      8, 1);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("sent 0 fds, expected 1 (no fd received)"), std::string::npos) << st.message();
}

TEST(FdPass, ExtraFdsAreRefusedAndClosed) {
  int left = -1;
  const Status st = recvFromChild(
      [](FdChannel& ch) {
        const int fds[3] = {memfdWith("a", 64), memfdWith("b", 64), memfdWith("c", 64)};
        const char eight[8] = {};
        ch.send(eight, sizeof eight, fds, 3, Deadline::in(10));
      },
      8, 2, &left);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("sent 3 fds, expected 2"), std::string::npos) << st.message();
  EXPECT_EQ(left, 0);
}

// More fds than a message may carry (sent with a raw sendmsg, as FdChannel
// refuses to): the kernel truncates the control message.
TEST(FdPass, TruncatedControlMessageIsRefusedAndClosed) {
  const std::string name = uniqueName("ctrunc");
  FdListener listener;
  ASSERT_TRUE(FdListener::listen(name, &listener).ok());
  const pid_t pid = spawn([&] {
    const int s = socket(AF_UNIX, SOCK_SEQPACKET, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::memcpy(a.sun_path + 1, name.data(), name.size());
    if (connect(s, reinterpret_cast<sockaddr*>(&a), socklen_t(offsetof(sockaddr_un, sun_path) + 1 + name.size())))
      return 1;
    constexpr int kMany = kMaxPassedFds + 4;
    int fds[kMany];
    for (int& fd : fds) fd = memfdWith("z", 64);
    char eight[8] = {};
    iovec iov{eight, sizeof eight};
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof fds)] = {};
    msghdr m{};
    m.msg_iov = &iov;
    m.msg_iovlen = 1;
    m.msg_control = control;
    m.msg_controllen = sizeof control;
    cmsghdr* c = CMSG_FIRSTHDR(&m);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof fds);
    std::memcpy(CMSG_DATA(c), fds, sizeof fds);
    if (sendmsg(s, &m, 0) != 8) return 2;
    char ack;
    return read(s, &ack, 1) >= 0 ? 0 : 3;  // stays until the parent closes
  });
  FdChannel ch;
  ASSERT_TRUE(listener.accept("the raw child", Deadline::in(10), &ch).ok());
  const int before = openFds();
  std::vector<int> fds;
  char buf[8];
  const Status bad = ch.recv(buf, 8, 1, &fds, Deadline::in(10));
  EXPECT_EQ(openFds() - before, 0) << "fds of a truncated message stay open";
  ch.close();
  reap(pid);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("control message from the raw child was truncated"), std::string::npos)
      << bad.message();
}

TEST(FdPass, WaitsEndAtTheirDeadline) {
  FdChannel ch;
  const double t0 = nowSec();
  Status st = FdChannel::connect(uniqueName("nobody"), "rank 3", Deadline::in(0.2), &ch);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("timed out connecting to rank 3"), std::string::npos) << st.message();
  EXPECT_LT(nowSec() - t0, 2.0);

  const std::string name = uniqueName("silent");
  FdListener listener;
  ASSERT_TRUE(FdListener::listen(name, &listener).ok());
  FdChannel server;
  st = listener.accept("rank 4", Deadline::in(0.2), &server);
  EXPECT_NE(st.message().find("timed out waiting for a connection from rank 4"), std::string::npos) << st.message();
  ASSERT_TRUE(FdChannel::connect(name, "the listener", Deadline::in(5), &ch).ok());
  ASSERT_TRUE(listener.accept("rank 5", Deadline::in(5), &server).ok());
  std::vector<int> fds;
  char buf[4];
  st = server.recv(buf, 4, 0, &fds, Deadline::in(0.2));
  EXPECT_NE(st.message().find("timed out receiving from rank 5"), std::string::npos) << st.message();
}

TEST(FdPass, NamesAreTakenOnceAndDifferByCommunicatorAndRank) {
  const std::string name = uniqueName("twice");
  FdListener a, b;
  ASSERT_TRUE(FdListener::listen(name, &a).ok());
  const Status st = FdListener::listen(name, &b);
  EXPECT_NE(st.message().find("already taken"), std::string::npos) << st.message();
  const char k1[] = "unique-id-one", k2[] = "unique-id-two";
  EXPECT_EQ(fdSocketName(k1, sizeof k1, 0), fdSocketName(k1, sizeof k1, 0));
  EXPECT_NE(fdSocketName(k1, sizeof k1, 0), fdSocketName(k1, sizeof k1, 1));
  EXPECT_NE(fdSocketName(k1, sizeof k1, 0), fdSocketName(k2, sizeof k2, 0));
  const Status bad = FdListener::listen(std::string(200, 'x'), &b);
  EXPECT_NE(bad.message().find("longer than"), std::string::npos) << bad.message();
}

}  // namespace
}  // namespace hoccl
