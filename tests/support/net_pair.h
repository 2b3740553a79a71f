// A network transport connected to itself, and waiting on one of its
// requests: what the transport tests (test_net, test_net_conformance) start
// from, written once.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include "transport/net/net.h"

namespace testsupport {

struct NetPair {
  std::unique_ptr<hoccl::NetTransport> net;
  void* send = nullptr;
  void* recv = nullptr;
  std::string unavailable;  // why this transport cannot run here
};

// Listens on `recvDev` and connects to that from `sendDev`. connect and
// accept may each return no comm yet (NCCL's net semantics), so both are
// retried until the two ends are up, for ten seconds at most.
inline void connectToSelf(NetPair* p, int recvDev, int sendDev) {
  char handle[hoccl::kNetHandleBytes];
  void* lc = nullptr;
  EXPECT_TRUE(p->net->listen(recvDev, handle, &lc).ok());
  for (int i = 0; i < 200000 && (!p->send || !p->recv); ++i) {
    if (!p->send) {
      EXPECT_TRUE(p->net->connect(sendDev, handle, &p->send).ok());
    }
    if (!p->recv) {
      EXPECT_TRUE(p->net->accept(lc, &p->recv).ok());
    }
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  EXPECT_TRUE(p->net->closeListen(lc).ok());
}

inline void waitDone(hoccl::NetTransport& net, void* req, int* size = nullptr) {
  int done = 0;
  for (long i = 0; !done; ++i) {
    hoccl::Status st = net.test(req, &done, size);
    ASSERT_TRUE(st.ok()) << st.message();
    ASSERT_LT(i, 400000000L) << "request never completed";
    if (!done) std::this_thread::yield();
  }
}

}  // namespace testsupport
