// Bad input gets a clear error that names the problem: never a hang, a
// crash or a silent wrong answer.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>
#include <vector>

#include "base/config.h"
#include "tests/support/harness.h"

using namespace testutil;

namespace {

std::string lastError() { return hocclGetLastError(nullptr); }

TEST(BadInput, NullAndRangeArgumentsOnALiveComm) {
  std::string err;
  ASSERT_TRUE(runThreads(1, [&](hocclComm_t comm, int) {
    float x[4] = {1, 2, 3, 4}, y[4];
    EXPECT_EQ(hocclAllReduce(nullptr, y, 4, hocclFloat, hocclSum, comm, nullptr), hocclInvalidArgument);
    EXPECT_NE(lastError().find("sendbuff is NULL"), std::string::npos) << lastError();
    EXPECT_EQ(hocclAllReduce(x, nullptr, 4, hocclFloat, hocclSum, comm, nullptr), hocclInvalidArgument);
    EXPECT_NE(lastError().find("recvbuff is NULL"), std::string::npos) << lastError();
    // A zero count needs no buffers.
    EXPECT_EQ(hocclAllReduce(nullptr, nullptr, 0, hocclFloat, hocclSum, comm, nullptr), hocclSuccess);
    EXPECT_EQ(hocclAllReduce(x, y, 4, static_cast<hocclDataType_t>(12), hocclSum, comm, nullptr),
              hocclInvalidArgument);
    EXPECT_NE(lastError().find("datatype 12"), std::string::npos) << lastError();
    EXPECT_EQ(hocclAllReduce(x, y, 4, hocclFloat, static_cast<hocclRedOp_t>(9), comm, nullptr), hocclInvalidArgument);
    EXPECT_NE(lastError().find("op 9"), std::string::npos) << lastError();
    EXPECT_EQ(hocclAllReduce(x, y, 4, hocclFloat, static_cast<hocclRedOp_t>(-1), comm, nullptr), hocclInvalidArgument);
    EXPECT_EQ(hocclBroadcast(x, y, 4, hocclFloat, 1, comm, nullptr), hocclInvalidArgument);
    EXPECT_NE(lastError().find("root 1"), std::string::npos) << lastError();
    EXPECT_EQ(hocclReduce(x, y, 4, hocclFloat, hocclSum, -1, comm, nullptr), hocclInvalidArgument);
    EXPECT_EQ(hocclAllReduce(x, y, SIZE_MAX / 2, hocclFloat, hocclSum, comm, nullptr), hocclInvalidArgument);
    EXPECT_NE(lastError().find("too large"), std::string::npos) << lastError();
    EXPECT_EQ(hocclAllGather(x, y, SIZE_MAX / 4, hocclFloat64, comm, nullptr), hocclInvalidArgument);
    // Overlapping but not in place.
    EXPECT_EQ(hocclAllReduce(x, x + 1, 3, hocclFloat, hocclSum, comm, nullptr), hocclInvalidArgument);
    EXPECT_NE(lastError().find("overlap"), std::string::npos) << lastError();
    // The communicator is still usable after rejected calls.
    EXPECT_EQ(hocclAllReduce(x, y, 4, hocclFloat, hocclSum, comm, nullptr), hocclSuccess);
    EXPECT_EQ(y[3], 4.0f);
    int v = 0;
    EXPECT_EQ(hocclCommCount(comm, nullptr), hocclInvalidArgument);
    EXPECT_EQ(hocclCommUserRank(comm, nullptr), hocclInvalidArgument);
    EXPECT_EQ(hocclCommCount(comm, &v), hocclSuccess);
    EXPECT_EQ(v, 1);
  }, &err)) << err;
}

TEST(BadInput, InitArguments) {
  hocclUniqueId id;
  ASSERT_EQ(hocclGetUniqueId(&id), hocclSuccess);
  hocclComm_t comm = nullptr;
  EXPECT_EQ(hocclCommInitRank(nullptr, 1, id, 0), hocclInvalidArgument);
  EXPECT_EQ(hocclCommInitRank(&comm, 0, id, 0), hocclInvalidArgument);
  EXPECT_NE(lastError().find("nranks 0"), std::string::npos) << lastError();
  EXPECT_EQ(hocclCommInitRank(&comm, 2, id, 2), hocclInvalidArgument);
  EXPECT_NE(lastError().find("rank 2"), std::string::npos) << lastError();
  hocclUniqueId garbage;
  memset(&garbage, 0x5a, sizeof garbage);
  EXPECT_EQ(hocclCommInitRank(&comm, 1, garbage, 0), hocclInvalidArgument);
  EXPECT_NE(lastError().find("unique id"), std::string::npos) << lastError();
  // A valid header and a damaged body: named as a damaged id, not blamed
  // on HOCCL_COMM_ID (which is not set) or the network.
  hocclUniqueId damaged = id;
  for (size_t i = 8; i < sizeof damaged.internal; ++i) damaged.internal[i] = static_cast<char>(i * 37 + 11);
  hocclUniqueId flipped = id;
  flipped.internal[12] ^= 1;  // in the job's magic
  for (const hocclUniqueId& bad : {damaged, flipped}) {
    EXPECT_EQ(hocclCommInitRank(&comm, 1, bad, 0), hocclInvalidArgument);
    EXPECT_NE(lastError().find("not a valid unique id"), std::string::npos) << lastError();
    EXPECT_EQ(lastError().find("HOCCL_COMM_ID"), std::string::npos) << lastError();
  }
  EXPECT_EQ(hocclGetUniqueId(nullptr), hocclInvalidArgument);
  hocclConfig_t bad = HOCCL_CONFIG_INITIALIZER;
  bad.magic = 0;
  EXPECT_EQ(hocclCommInitRankConfig(&comm, 1, id, 0, &bad), hocclInvalidArgument);
  EXPECT_NE(lastError().find("HOCCL_CONFIG_INITIALIZER"), std::string::npos) << lastError();
}

TEST(BadInput, UseAfterDestroyAndNullComm) {
  hocclComm_t kept = nullptr;
  std::string err;
  ASSERT_TRUE(runThreads(1, [&](hocclComm_t comm, int) { kept = comm; }, &err)) << err;
  // runThreads destroyed it.
  float x = 1, y = 0;
  EXPECT_EQ(hocclAllReduce(&x, &y, 1, hocclFloat, hocclSum, kept, nullptr), hocclInvalidUsage);
  EXPECT_NE(lastError().find("not a live communicator"), std::string::npos) << lastError();
  EXPECT_EQ(hocclCommDestroy(kept), hocclInvalidUsage);
  EXPECT_EQ(hocclAllReduce(&x, &y, 1, hocclFloat, hocclSum, nullptr, nullptr), hocclInvalidArgument);
  EXPECT_NE(lastError().find("comm is NULL"), std::string::npos) << lastError();
  EXPECT_EQ(hocclCommDestroy(nullptr), hocclSuccess);
  EXPECT_EQ(hocclGroupEnd(), hocclInvalidUsage);
}

// A handle this thread used a moment ago (so its liveness is cached on the
// call path) is refused once it is destroyed, in a group too; a new
// communicator works, and if it was given the old address, that is it.
TEST(BadInput, AHandleUsedJustBeforeItsDestroyIsRefusedAfter) {
  hocclUniqueId id;
  ASSERT_EQ(hocclGetUniqueId(&id), hocclSuccess);
  hocclComm_t comm = nullptr;
  ASSERT_EQ(hocclCommInitRank(&comm, 1, id, 0), hocclSuccess);
  float x = 1, y = 0;
  for (int i = 0; i < 100; ++i) ASSERT_EQ(hocclAllReduce(&x, &y, 1, hocclFloat, hocclSum, comm, nullptr), hocclSuccess);
  ASSERT_EQ(hocclCommDestroy(comm), hocclSuccess);
  EXPECT_EQ(hocclAllReduce(&x, &y, 1, hocclFloat, hocclSum, comm, nullptr), hocclInvalidUsage);
  EXPECT_NE(lastError().find("not a live communicator"), std::string::npos) << lastError();
  ASSERT_EQ(hocclGroupStart(), hocclSuccess);
  EXPECT_EQ(hocclAllReduce(&x, &y, 1, hocclFloat, hocclSum, comm, nullptr), hocclInvalidUsage);
  EXPECT_EQ(hocclGroupEnd(), hocclInvalidUsage);  // the group had a refused call: nothing ran
  hocclUniqueId id2;
  ASSERT_EQ(hocclGetUniqueId(&id2), hocclSuccess);
  hocclComm_t fresh = nullptr;
  ASSERT_EQ(hocclCommInitRank(&fresh, 1, id2, 0), hocclSuccess);
  y = 0;
  EXPECT_EQ(hocclAllReduce(&x, &y, 1, hocclFloat, hocclSum, fresh, nullptr), hocclSuccess);
  EXPECT_EQ(y, 1.0f);
  if (fresh != comm) {
    EXPECT_EQ(hocclAllReduce(&x, &y, 1, hocclFloat, hocclSum, comm, nullptr), hocclInvalidUsage);
  }
  EXPECT_EQ(hocclCommDestroy(fresh), hocclSuccess);
}

// hocclGetLastError(comm) gives that communicator's newest error, an
// argument error of a call on it too, and leaves the thread's own last
// error (hocclGetLastError(NULL)) as it was, even when that is newer.
TEST(BadInput, LastErrorOfACommIsItsNewestAndLeavesTheThreadsAlone) {
  std::string err;
  ASSERT_TRUE(runThreads(1, [&](hocclComm_t comm, int) {
    float x = 1, y = 0;
    // An older error of the communicator.
    EXPECT_EQ(hocclRedOpDestroy(hocclSum, comm), hocclInvalidArgument);
    EXPECT_NE(std::string(hocclGetLastError(comm)).find("built-in op"), std::string::npos) << hocclGetLastError(comm);
    // The newest: an argument error of a call on it.
    EXPECT_EQ(hocclAllReduce(&x, &y, 1, static_cast<hocclDataType_t>(12), hocclSum, comm, nullptr),
              hocclInvalidArgument);
    EXPECT_NE(std::string(hocclGetLastError(comm)).find("datatype 12"), std::string::npos) << hocclGetLastError(comm);
    EXPECT_NE(lastError().find("datatype 12"), std::string::npos) << lastError();
    // A newer error of this thread that is not the communicator's.
    EXPECT_EQ(hocclAllReduce(&x, &y, 1, hocclFloat, hocclSum, nullptr, nullptr), hocclInvalidArgument);
    EXPECT_NE(std::string(hocclGetLastError(comm)).find("datatype 12"), std::string::npos) << hocclGetLastError(comm);
    EXPECT_NE(lastError().find("comm is NULL"), std::string::npos) << lastError();
  }, &err)) << err;
}

TEST(BadInput, ErrorStringsNameEveryResult) {
  for (int r = 0; r < hocclNumResults; ++r) {
    std::string s = hocclGetErrorString(static_cast<hocclResult_t>(r));
    EXPECT_FALSE(s.empty());
    EXPECT_EQ(s.find("unknown"), std::string::npos) << r;
  }
  int v = 0;
  EXPECT_EQ(hocclGetVersion(&v), hocclSuccess);
  EXPECT_EQ(v, HOCCL_VERSION_CODE);
}

// Rank 0 all-reduces 1000 floats, rank 1 1001: both get an error naming the
// mismatch, promptly, and the communicator then refuses further calls.
TEST(Mismatch, DifferentCountsAreReportedOnEveryRank) {
  for (int n : {2, 3, 5}) {
    std::vector<hocclResult_t> rc(n);
    std::vector<std::string> msg(n);
    std::string err;
    auto start = std::chrono::steady_clock::now();
    ASSERT_TRUE(runThreads(n, [&](hocclComm_t comm, int rank) {
      std::vector<float> buf(1001, 1.0f);
      size_t count = rank == 1 ? 1001 : 1000;
      rc[rank] = hocclAllReduce(buf.data(), buf.data(), count, hocclFloat, hocclSum, comm, nullptr);
      msg[rank] = hocclGetLastError(comm);
      float x = 0;
      EXPECT_EQ(hocclAllReduce(&x, &x, 1, hocclFloat, hocclSum, comm, nullptr), rc[rank]);
    }, &err)) << err;
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_LT(secs, 60.0);
    for (int r = 0; r < n; ++r) {
      EXPECT_EQ(rc[r], hocclInvalidUsage) << "P=" << n << " rank " << r;
      EXPECT_NE(msg[r].find("mismatch"), std::string::npos) << "P=" << n << " rank " << r << ": " << msg[r];
      EXPECT_NE(msg[r].find("count=1001"), std::string::npos) << msg[r];
      EXPECT_NE(msg[r].find("count=1000"), std::string::npos) << msg[r];
    }
  }
}

TEST(Mismatch, DifferentTypesOpsAndCollectives) {
  struct Case {
    const char* name;
    std::function<hocclResult_t(hocclComm_t, int, void*)> call;
    const char* expect;
  };
  std::vector<Case> cases = {
      {"type", [](hocclComm_t c, int r, void* b) {
         return hocclAllReduce(b, b, 64, r == 0 ? hocclFloat : hocclInt32, hocclSum, c, nullptr); }, "int32"},
      {"op", [](hocclComm_t c, int r, void* b) {
         return hocclAllReduce(b, b, 64, hocclFloat, r == 0 ? hocclSum : hocclMax, c, nullptr); }, "max"},
      {"collective", [](hocclComm_t c, int r, void* b) {
         return r == 0 ? hocclAllReduce(b, b, 64, hocclFloat, hocclSum, c, nullptr)
                       : hocclBroadcast(b, b, 64, hocclFloat, 0, c, nullptr); }, "Broadcast"},
      {"root", [](hocclComm_t c, int r, void* b) {
         return hocclBroadcast(b, b, 64, hocclFloat, r == 0 ? 0 : 1, c, nullptr); }, "root="},
      {"zero count", [](hocclComm_t c, int r, void* b) {
         return hocclAllReduce(b, b, r == 0 ? 0 : 64, hocclFloat, hocclSum, c, nullptr); }, "count=0"},
  };
  for (const Case& k : cases) {
    std::vector<hocclResult_t> rc(2);
    std::vector<std::string> msg(2);
    std::string err;
    ASSERT_TRUE(runThreads(2, [&](hocclComm_t comm, int rank) {
      std::vector<double> buf(64, 1.0);
      rc[rank] = k.call(comm, rank, buf.data());
      msg[rank] = hocclGetLastError(comm);
    }, &err)) << err;
    for (int r = 0; r < 2; ++r) {
      EXPECT_EQ(rc[r], hocclInvalidUsage) << k.name << " rank " << r << ": " << msg[r];
      EXPECT_NE(msg[r].find(k.expect), std::string::npos) << k.name << " rank " << r << ": " << msg[r];
    }
  }
}

// A communicator of one rank, or null if init failed.
hocclComm_t initOneRank() {
  hocclUniqueId id;
  hocclComm_t comm = nullptr;
  if (hocclGetUniqueId(&id) == hocclSuccess) hocclCommInitRank(&comm, 1, id, 0);
  return comm;
}

// Two ranks of one communicator, as two threads of this process; false if
// either failed to initialise.
bool initTwoRanks(hocclComm_t comms[2]) {
  hocclUniqueId id;
  if (hocclGetUniqueId(&id) != hocclSuccess) return false;
  comms[0] = comms[1] = nullptr;
  std::thread init1([&] { hocclCommInitRank(&comms[1], 2, id, 1); });
  const hocclResult_t rc = hocclCommInitRank(&comms[0], 2, id, 0);
  init1.join();
  return rc == hocclSuccess && comms[1] != nullptr;
}

// hocclCommAbort from another thread while a call on that communicator is
// blocked (its peer never joins): the call returns an error, the abort
// returns promptly, and nothing is used after it is freed (ASan/TSan runs).
TEST(Abort, FromAnotherThreadWhileACallIsBlocked) {
  hocclComm_t comms[2];
  ASSERT_TRUE(initTwoRanks(comms)) << lastError();
  std::atomic<int> rc{-1};
  auto start = std::chrono::steady_clock::now();
  std::thread blocked([&] {
    float x[1024] = {0};
    rc = hocclAllReduce(x, x, 1024, hocclFloat, hocclSum, comms[0], nullptr);  // rank 1 never calls
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  auto abortStart = std::chrono::steady_clock::now();
  EXPECT_EQ(hocclCommAbort(comms[0]), hocclSuccess);
  double abortSecs = std::chrono::duration<double>(std::chrono::steady_clock::now() - abortStart).count();
  blocked.join();
  double total = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_NE(rc.load(), hocclSuccess);
  EXPECT_LT(abortSecs, 1.0);
  EXPECT_LT(total, 5.0);
  // Abort is idempotent in effect: the handle is no longer live.
  EXPECT_EQ(hocclCommAbort(comms[0]), hocclInvalidUsage);
  // The peer learns of the abort through its control block.
  hocclResult_t async = hocclSuccess;
  ASSERT_EQ(hocclCommGetAsyncError(comms[1], &async), hocclSuccess);
  EXPECT_EQ(async, hocclRemoteError);
  EXPECT_EQ(hocclCommDestroy(comms[1]), hocclSuccess);
}

// hocclCommAbort from another thread while this one calls in a loop on the
// communicator (each call finishing at once: one rank): the loop's calls
// start to fail with an error, none uses the freed communicator (the
// ASan/TSan runs), and the loop ends.
TEST(Abort, WhileAnotherThreadCallsInALoop) {
  for (int round = 0; round < 20; ++round) {
    hocclComm_t comm = initOneRank();
    ASSERT_NE(comm, nullptr) << lastError();
    std::atomic<long> calls{0};
    std::atomic<int> rc{hocclSuccess};
    std::thread loop([&] {
      float x = 1, y = 0;
      for (;;) {
        hocclResult_t r = hocclAllReduce(&x, &y, 1, hocclFloat, hocclSum, comm, nullptr);
        if (r != hocclSuccess) {
          rc = r;
          return;
        }
        if (++calls % 64 == 0) std::this_thread::yield();  // (valgrind runs one thread at a time)
      }
    });
    while (calls.load() < 100) std::this_thread::yield();
    EXPECT_EQ(hocclCommAbort(comm), hocclSuccess);
    loop.join();
    // Not live any more, or (a call already under way) its abort.
    EXPECT_TRUE(rc.load() == hocclInvalidUsage || rc.load() == hocclRemoteError) << "round " << round << ": " << rc;
  }
}

// ---- Groups -------------------------------------------------------------------

// The two ranks of a new communicator, initialised by two threads with
// `config` (HOCCL_CONFIG_INITIALIZER's when null).
void initPair(hocclComm_t comms[2], const hocclConfig_t* given = nullptr) {
  hocclUniqueId id;
  ASSERT_EQ(hocclGetUniqueId(&id), hocclSuccess);
  hocclConfig_t config = HOCCL_CONFIG_INITIALIZER;
  if (given) config = *given;
  hocclResult_t rc1 = hocclInternalError;
  std::thread init1([&] { rc1 = hocclCommInitRankConfig(&comms[1], 2, id, 1, &config); });
  hocclResult_t rc0 = hocclCommInitRankConfig(&comms[0], 2, id, 0, &config);
  init1.join();
  ASSERT_EQ(rc0, hocclSuccess) << lastError();
  ASSERT_EQ(rc1, hocclSuccess);
}

// Calls queued in a group on communicators that another thread destroys
// before hocclGroupEnd: the group is refused as using communicators that
// are not live, and nothing reads the freed ones on the way (valgrind, and
// ASan in tools/sanitize.sh, report it if anything does).
TEST(Group, CommsDestroyedByAnotherThreadBeforeGroupEnd) {
  hocclComm_t c[2] = {nullptr, nullptr};
  ASSERT_NO_FATAL_FAILURE(initPair(c));
  float b[8] = {0};
  ASSERT_EQ(hocclGroupStart(), hocclSuccess);
  EXPECT_EQ(hocclSend(b, 8, hocclFloat, 1, c[0], nullptr), hocclSuccess);
  EXPECT_EQ(hocclRecv(b, 8, hocclFloat, 0, c[1], nullptr), hocclSuccess);
  std::thread destroyer([&] {
    EXPECT_EQ(hocclCommDestroy(c[0]), hocclSuccess);
    EXPECT_EQ(hocclCommDestroy(c[1]), hocclSuccess);
  });
  destroyer.join();
  EXPECT_EQ(hocclGroupEnd(), hocclInvalidUsage);
  EXPECT_NE(lastError().find("not a live communicator"), std::string::npos) << lastError();
}

// A call queued on a communicator that is destroyed before hocclGroupEnd,
// when a new communicator takes its address: the group must not run the
// old call on the new communicator.
TEST(Group, ACallQueuedOnADestroyedCommIsNotRunOnItsSuccessor) {
  int reused = 0;
  for (int round = 0; round < 10 && !reused; ++round) {
    hocclUniqueId id;
    ASSERT_EQ(hocclGetUniqueId(&id), hocclSuccess);
    hocclComm_t old = nullptr, fresh = nullptr;
    ASSERT_EQ(hocclCommInitRank(&old, 1, id, 0), hocclSuccess);
    float x = 1, y = 0;
    ASSERT_EQ(hocclGroupStart(), hocclSuccess);
    EXPECT_EQ(hocclAllReduce(&x, &y, 1, hocclFloat, hocclSum, old, nullptr), hocclSuccess);
    EXPECT_EQ(hocclCommDestroy(old), hocclSuccess);
    ASSERT_EQ(hocclGetUniqueId(&id), hocclSuccess);
    ASSERT_EQ(hocclCommInitRank(&fresh, 1, id, 0), hocclSuccess);
    reused += fresh == old;
    EXPECT_EQ(hocclGroupEnd(), hocclInvalidUsage);
    EXPECT_NE(lastError().find(fresh == old ? "destroyed after a call of this group was queued" : "not a live"),
              std::string::npos) << lastError();
    EXPECT_EQ(y, 0.0f);
    EXPECT_EQ(hocclCommDestroy(fresh), hocclSuccess);
  }
  if (!reused) std::printf("note: no new communicator took a destroyed one's address in 10 tries\n");
}

// Queries on a communicator that another thread destroys meanwhile: each
// either answers or refuses the handle as not live, and none reads the
// communicator after it is freed (valgrind and the ASan run).
TEST(Group, QueriesRacingADestroyOnAnotherThread) {
  for (int round = 0; round < 20; ++round) {
    hocclComm_t comm = initOneRank();
    ASSERT_NE(comm, nullptr) << lastError();
    std::atomic<long> answered{0};
    std::string refusal;
    std::thread asker([&] {
      for (;;) {
        int v = 0, node = 0, nnodes = 0, local = 0, locals = 0;
        hocclResult_t async = hocclSuccess;
        if (hocclCommCount(comm, &v) != hocclSuccess || hocclCommUserRank(comm, &v) != hocclSuccess ||
            hocclCommGetAsyncError(comm, &async) != hocclSuccess ||
            hocclCommNodeInfo(comm, &node, &nnodes, &local, &locals) != hocclSuccess) {
          refusal = lastError();
          return;
        }
        hocclGetLastError(comm);
        if (++answered % 16 == 0) std::this_thread::yield();
      }
    });
    while (answered.load() < 10) std::this_thread::yield();
    EXPECT_EQ(hocclCommDestroy(comm), hocclSuccess);
    asker.join();
    EXPECT_NE(refusal.find("not a live communicator"), std::string::npos) << refusal;
  }
}

// One thread drives both ranks; one rank's call in the group is refused
// for its arguments. As NCCL, hocclGroupEnd runs none of the group's calls
// and returns that error, at once: running the other rank's all-reduce
// would leave it waiting for a peer that never comes (a timeout, and both
// communicators unusable). Afterwards both work.
TEST(Group, ARefusedCallRunsNothingAndGroupEndReturnsItsError) {
  hocclComm_t c[2] = {nullptr, nullptr};
  hocclConfig_t config = HOCCL_CONFIG_INITIALIZER;
  config.timeoutSec = 5;
  ASSERT_NO_FATAL_FAILURE(initPair(c, &config));
  std::vector<float> b0(256, 1.0f), b1(256, 2.0f);
  auto start = std::chrono::steady_clock::now();
  ASSERT_EQ(hocclGroupStart(), hocclSuccess);
  EXPECT_EQ(hocclAllReduce(b0.data(), b0.data(), 256, static_cast<hocclDataType_t>(99), hocclSum, c[0], nullptr),
            hocclInvalidArgument);
  EXPECT_EQ(hocclAllReduce(b1.data(), b1.data(), 256, hocclFloat, hocclSum, c[1], nullptr), hocclSuccess);
  EXPECT_EQ(hocclGroupEnd(), hocclInvalidArgument);
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(secs, 2.0);
  EXPECT_NE(lastError().find("none of the group's calls ran"), std::string::npos) << lastError();
  EXPECT_NE(lastError().find("datatype 99"), std::string::npos) << lastError();
  EXPECT_EQ(b1[0], 2.0f);
  // A refused send in the next group: the same. Then a good group runs.
  ASSERT_EQ(hocclGroupStart(), hocclSuccess);
  EXPECT_EQ(hocclSend(b0.data(), 8, hocclFloat, 7, c[0], nullptr), hocclInvalidArgument);
  EXPECT_EQ(hocclRecv(b1.data(), 8, hocclFloat, 0, c[1], nullptr), hocclSuccess);
  EXPECT_EQ(hocclGroupEnd(), hocclInvalidArgument);
  EXPECT_NE(lastError().find("peer 7"), std::string::npos) << lastError();
  ASSERT_EQ(hocclGroupStart(), hocclSuccess);
  EXPECT_EQ(hocclAllReduce(b0.data(), b0.data(), 256, hocclFloat, hocclSum, c[0], nullptr), hocclSuccess);
  EXPECT_EQ(hocclAllReduce(b1.data(), b1.data(), 256, hocclFloat, hocclSum, c[1], nullptr), hocclSuccess);
  EXPECT_EQ(hocclGroupEnd(), hocclSuccess) << lastError();
  EXPECT_EQ(b0[255], 3.0f);
  EXPECT_EQ(b1[0], 3.0f);
  EXPECT_EQ(hocclCommDestroy(c[0]), hocclSuccess);
  EXPECT_EQ(hocclCommDestroy(c[1]), hocclSuccess);
}

// Nesting deeper than the cap is refused at hocclGroupStart, with a clear
// error, before the depth could wrap; the group then runs nothing, and the
// thread's groups work again once every start that succeeded has ended.
// NCCL's one-thread multi-rank init: hocclCommInitRank of every rank inside
// one group, finished by hocclGroupEnd. Each init used to block in the
// rendezvous waiting for the next rank, which this thread had not started.
TEST(Group, OneThreadInitialisesEveryRankInsideAGroup) {
  for (int n : {2, 3}) {
    hocclUniqueId id;
    ASSERT_EQ(hocclGetUniqueId(&id), hocclSuccess);
    std::vector<hocclComm_t> comms(n, nullptr);
    auto start = std::chrono::steady_clock::now();
    ASSERT_EQ(hocclGroupStart(), hocclSuccess);
    for (int r = 0; r < n; ++r) ASSERT_EQ(hocclCommInitRank(&comms[r], n, id, r), hocclSuccess) << lastError();
    ASSERT_EQ(hocclGroupEnd(), hocclSuccess) << lastError();
    EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 10.0);
    // The same thread drives all of them in one group.
    std::vector<std::vector<float>> bufs(n, std::vector<float>(1000));
    for (int r = 0; r < n; ++r) std::fill(bufs[r].begin(), bufs[r].end(), static_cast<float>(r + 1));
    ASSERT_EQ(hocclGroupStart(), hocclSuccess);
    for (int r = 0; r < n; ++r)
      ASSERT_EQ(hocclAllReduce(bufs[r].data(), bufs[r].data(), 1000, hocclFloat, hocclSum, comms[r], nullptr),
                hocclSuccess);
    ASSERT_EQ(hocclGroupEnd(), hocclSuccess) << lastError();
    for (int r = 0; r < n; ++r) EXPECT_EQ(bufs[r][999], n * (n + 1) / 2.0f) << "rank " << r;
    for (hocclComm_t c : comms) EXPECT_EQ(hocclCommDestroy(c), hocclSuccess);
  }
}

// A grouped init that fails (the ranks disagree about nranks) makes
// hocclGroupEnd return the error, naming it, without a hang.
TEST(Group, AGroupedInitThatFailsIsGroupEndsError) {
  hocclUniqueId id;
  ASSERT_EQ(hocclGetUniqueId(&id), hocclSuccess);
  hocclComm_t c0 = nullptr, c1 = nullptr;
  // A short timeout: after a refusal a rank waits (at most that long) for
  // the rendezvous of its own process to answer the others.
  hocclConfig_t config = HOCCL_CONFIG_INITIALIZER;
  config.timeoutMs = 500;
  ASSERT_EQ(hocclGroupStart(), hocclSuccess);
  ASSERT_EQ(hocclCommInitRankConfig(&c0, 2, id, 0, &config), hocclSuccess);
  ASSERT_EQ(hocclCommInitRankConfig(&c1, 3, id, 1, &config), hocclSuccess);
  EXPECT_EQ(hocclGroupEnd(), hocclInvalidUsage);
  EXPECT_NE(lastError().find("nranks"), std::string::npos) << lastError();
  hocclCommDestroy(c0);
  hocclCommDestroy(c1);
}

// Two threads on one communicator: the second thread's call is refused at
// once, naming why, while the first runs; nothing is corrupted and the
// communicator keeps working. (It used to interleave the two calls: a
// false mismatch within 0.01 s, or wrong data with HOCCL_CHECK_CALLS=0.)
TEST(Concurrency, ASecondThreadOnACommunicatorIsRefused) {
  hocclComm_t c[2];
  ASSERT_TRUE(initTwoRanks(c)) << lastError();
  std::vector<float> a(4096, 1.0f), b(4096, 5.0f), r1(4096, 2.0f);
  std::atomic<int> first{-1};
  // Thread A: rank 0's all-reduce, which waits for rank 1 (not called yet).
  std::thread threadA([&] { first = hocclAllReduce(a.data(), a.data(), a.size(), hocclFloat, hocclSum, c[0], nullptr); });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  // Thread B (this one) on the same communicator meanwhile.
  EXPECT_EQ(hocclAllReduce(b.data(), b.data(), b.size(), hocclFloat, hocclSum, c[0], nullptr), hocclInvalidUsage);
  EXPECT_NE(lastError().find("another thread"), std::string::npos) << lastError();
  EXPECT_EQ(b[0], 5.0f);  // untouched
  // Rank 1 joins A's call: it completes with the right values.
  std::thread rank1([&] { EXPECT_EQ(hocclAllReduce(r1.data(), r1.data(), r1.size(), hocclFloat, hocclSum, c[1], nullptr), hocclSuccess); });
  threadA.join();
  rank1.join();
  EXPECT_EQ(first.load(), hocclSuccess);
  EXPECT_EQ(a[4095], 3.0f);
  EXPECT_EQ(r1[0], 3.0f);
  // And the communicator goes on, now from thread B.
  std::thread again([&] { EXPECT_EQ(hocclAllReduce(r1.data(), r1.data(), r1.size(), hocclFloat, hocclSum, c[1], nullptr), hocclSuccess); });
  EXPECT_EQ(hocclAllReduce(b.data(), b.data(), b.size(), hocclFloat, hocclSum, c[0], nullptr), hocclSuccess) << lastError();
  again.join();
  EXPECT_EQ(b[0], 8.0f);
  EXPECT_EQ(hocclCommDestroy(c[0]), hocclSuccess);
  EXPECT_EQ(hocclCommDestroy(c[1]), hocclSuccess);
}

TEST(Group, NestingIsCappedBeforeTheDepthWraps) {
  int started = 0;
  hocclResult_t rc = hocclSuccess;
  while (started < (1 << 24) && (rc = hocclGroupStart()) == hocclSuccess) ++started;
  EXPECT_EQ(rc, hocclInvalidUsage);
  EXPECT_NE(lastError().find("groups nest at most"), std::string::npos) << lastError();
  EXPECT_EQ(started, 1 << 16);
  for (int i = 1; i < started; ++i) ASSERT_EQ(hocclGroupEnd(), hocclSuccess);
  EXPECT_EQ(hocclGroupEnd(), hocclInvalidUsage);  // the outermost: the group had a failed call
  EXPECT_NE(lastError().find("none of the group's calls ran"), std::string::npos) << lastError();
  EXPECT_EQ(hocclGroupEnd(), hocclInvalidUsage);  // no group left to end
  EXPECT_EQ(hocclGroupStart(), hocclSuccess);
  EXPECT_EQ(hocclGroupEnd(), hocclSuccess);
}

// A call that waits too long says what set the timeout it ran out of:
// hocclConfig_t.timeoutMs, which wins over timeoutSec, or HOCCL_TIMEOUT (it
// always said HOCCL_TIMEOUT), and the fraction of a second it was.
TEST(Timeout, TheMessageNamesWhatSetTheTimeout) {
  for (bool fromConfig : {true, false}) {
    hocclConfig_t config = HOCCL_CONFIG_INITIALIZER;
    if (fromConfig) {
      config.timeoutSec = 30;  // what an older hoccl would use
      config.timeoutMs = 300;
    } else {
      setenv("HOCCL_TIMEOUT", "0.3", 1);
      hoccl::reloadSettingsForTesting();
    }
    hocclComm_t c[2] = {nullptr, nullptr};
    ASSERT_NO_FATAL_FAILURE(initPair(c, &config));
    std::vector<float> b(64, 1.0f);
    const auto start = std::chrono::steady_clock::now();
    EXPECT_EQ(hocclAllReduce(b.data(), b.data(), 64, hocclFloat, hocclSum, c[0], nullptr), hocclTimeout);
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
    const std::string msg = hocclGetLastError(c[0]);
    EXPECT_NE(msg.find(fromConfig ? "0.3 s (hocclConfig_t.timeoutMs)" : "0.3 s (HOCCL_TIMEOUT)"), std::string::npos)
        << msg;
    EXPECT_EQ(hocclCommDestroy(c[0]), hocclSuccess);
    EXPECT_EQ(hocclCommDestroy(c[1]), hocclSuccess);
  }
  unsetenv("HOCCL_TIMEOUT");
  hoccl::reloadSettingsForTesting();
}

}  // namespace
