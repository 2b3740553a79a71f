// The heartbeat service (src/bootstrap/liveness.h) between two services of
// one process, each standing for a process: a peer that stops answering is
// silent, one that answers again is not, one that closes its service has
// left (not silent), and a service whose own thread stopped blames nobody.
// Whole ranks in processes, stopped with SIGSTOP, are in test_heartbeat.cc.
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <thread>

#include "base/clock.h"
#include "base/socket.h"
#include "src/bootstrap/liveness.h"

namespace {

using hoccl::Liveness;

constexpr double kInterval = 0.05;

// A service answering on loopback, and the address to watch it at.
hoccl::SockAddr answering(Liveness& svc) {
  hoccl::SockAddr a;
  EXPECT_TRUE(hoccl::parseHostPort("127.0.0.1:0", &a).ok());
  const int port = svc.listen(a);
  EXPECT_GT(port, 0);
  a.setPort(port);
  return a;
}

// Waits up to `limitSec` for cond; true if it held.
bool within(double limitSec, const std::function<bool()>& cond) {
  for (double end = hoccl::nowSec() + limitSec; hoccl::nowSec() < end;) {
    if (cond()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return cond();
}

TEST(Liveness, APeerThatAnswersIsNeverSilentOneThatStopsIs) {
  auto a = Liveness::create(), b = Liveness::create();
  auto w = a->watch(answering(*b), kInterval);
  // B's thread starts with a watch of its own (liveness.h): until then the
  // kernel holds A's pings. Here B watches A, as a peer on another host would.
  auto back = b->watch(answering(*a), kInterval);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  for (int i = 0; i < 10; ++i) {
    EXPECT_LT(w->silentFor(), 0.5) << "answering peer looked silent";
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  b->pauseForTesting(true);  // as if B's process were stopped
  EXPECT_TRUE(within(3, [&] { return w->silentFor() > 0.8; })) << w->silentFor();
  b->pauseForTesting(false);
  EXPECT_TRUE(within(3, [&] { return w->silentFor() < 0.3; })) << w->silentFor();
}

TEST(Liveness, APeerThatClosesItsServiceHasLeftNotFallenSilent) {
  auto a = Liveness::create();
  auto b = Liveness::create();
  auto w = a->watch(answering(*b), kInterval);
  auto back = b->watch(answering(*a), kInterval);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  back.reset();
  b.reset();  // its listener and connections close: the process exited
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  EXPECT_EQ(w->silentFor(), 0);
}

TEST(Liveness, APeerThatNeverAnswersIsSilentFromTheWatchOn) {
  auto a = Liveness::create();
  // A listener nobody serves: connections complete, pings are never echoed.
  hoccl::Socket deaf;
  hoccl::SockAddr at, bound;
  ASSERT_TRUE(hoccl::parseHostPort("127.0.0.1:0", &at).ok());
  ASSERT_TRUE(hoccl::Socket::listen(at, &deaf, &bound).ok());
  auto w = a->watch(bound, kInterval);
  EXPECT_TRUE(within(3, [&] { return w->silentFor() > 0.8; })) << w->silentFor();
}

TEST(Liveness, AServiceWhoseOwnThreadStoppedBlamesNobody) {
  auto a = Liveness::create(), b = Liveness::create();
  auto w = a->watch(answering(*b), kInterval);
  auto back = b->watch(answering(*a), kInterval);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  // A stopped, B alive: A's count would grow, but A cannot tell whose
  // silence it is.
  a->pauseForTesting(true);
  std::this_thread::sleep_for(std::chrono::milliseconds(1200));
  EXPECT_EQ(w->silentFor(), 0);
  a->pauseForTesting(false);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_LT(w->silentFor(), 0.3);
}

TEST(Liveness, ManyWatchesOfOnePeerShareItsCount) {
  auto a = Liveness::create(), b = Liveness::create();
  const hoccl::SockAddr at = answering(*b);
  auto back = b->watch(answering(*a), kInterval);
  auto w1 = a->watch(at, kInterval);
  auto w2 = a->watch(at, kInterval);
  w1.reset();  // the other watch keeps the peer's pings going
  std::this_thread::sleep_for(std::chrono::milliseconds(600));
  EXPECT_LT(w2->silentFor(), 0.5);
  b->pauseForTesting(true);
  EXPECT_TRUE(within(3, [&] { return w2->silentFor() > 0.8; })) << w2->silentFor();
  b->pauseForTesting(false);
}

}  // namespace
