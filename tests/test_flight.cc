// The flight recorder (HOCCL_DEBUG_DUMP): the ring of a communicator's last
// calls, the dump's format, and the reader behind `hoccl-info --why`, on
// dumps made up here (a planted mismatch, a planted hang, a missing dump)
// and on dumps written by ranks as threads that hang or disagree for real.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "base/config.h"
#include "base/regular_file.h"
#include "src/exec/flight.h"
#include "src/exec/flight_why.h"
#include "tests/support/harness.h"

using namespace hoccl;

namespace {

CollCall allReduce(uint64_t count) {
  CollCall c;
  c.coll = CollKind::AllReduce;
  c.count = count;
  return c;
}

FlightOwner owner(int rank, int nranks) {
  FlightOwner o;
  o.commHash = 0xabc;
  o.rank = rank;
  o.nranks = nranks;
  o.host = "node" + std::to_string(rank);
  o.pid = 100 + rank;
  return o;
}

TEST(FlightRecorder, KeepsTheLastCallsWithTheirStates) {
  FlightRecorder r(owner(0, 2), 4);
  for (uint64_t seq = 1; seq <= 6; ++seq) {
    uint64_t id = r.begin(allReduce(seq * 10), seq);
    r.running(id, "ring", 2, false);
    if (seq < 6) r.finished(id, Status());
    else r.waiting(id, "channel 0 step 1: waiting to receive from rank 1", {1, 1});
  }
  uint64_t recorded = 0;
  std::vector<FlightCall> calls = r.snapshot(nullptr, &recorded);
  EXPECT_EQ(recorded, 6u);
  ASSERT_EQ(calls.size(), 4u);  // the ring's size: calls 3 to 6
  EXPECT_EQ(calls[0].opSeq, 3u);
  EXPECT_EQ(calls[0].count, 30u);
  EXPECT_EQ(calls[0].state, FlightState::Done);
  EXPECT_EQ(calls[0].algorithm, "ring");
  EXPECT_EQ(calls[0].channels, 2);
  EXPECT_GT(calls[0].ended, 0);
  EXPECT_EQ(calls[3].state, FlightState::Running);
  EXPECT_EQ(calls[3].waitPeers, std::vector<int>{1});
  EXPECT_NE(calls[3].waiting.find("waiting to receive from rank 1"), std::string::npos);
}

TEST(FlightRecorder, AFailureKeepsItsErrorAndTheFirstFatalOne) {
  FlightRecorder r(owner(1, 2), 8);
  uint64_t id = r.begin(allReduce(5), 1);
  r.finished(id, Status(hocclTimeout, std::string(2000, 'x')));  // longer than an entry holds: cut
  r.noteFatal("first");
  r.noteFatal("second");
  std::string fatal;
  std::vector<FlightCall> calls = r.snapshot(&fatal);
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0].state, FlightState::Failed);
  EXPECT_GT(calls[0].error.size(), 100u);
  EXPECT_LT(calls[0].error.size(), 2000u);
  EXPECT_EQ(fatal, "first");
}

TEST(FlightRecorder, PointToPointCountsEveryPart) {
  FlightRecorder r(owner(0, 3), 8);
  CollCall c;
  c.coll = CollKind::SendRecv;
  c.parts.resize(2);
  c.parts[0].peer = 2;
  c.parts[0].count = 7;
  c.parts[1].peer = 1;
  c.parts[1].count = 3;
  r.begin(c, 4);
  std::vector<FlightCall> calls = r.snapshot();
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0].count, 10u);
  EXPECT_EQ(calls[0].parts, 2);
  EXPECT_EQ(calls[0].root, 2);  // the first part's peer
}

// A dump reads entries while the calls' thread writes them, without a lock
// on the calls' side: every call it sees is whole (its fields of one call),
// and calls come out in order.
TEST(FlightRecorder, ADumpWhileCallsAreRecordedSeesWholeCalls) {
  FlightRecorder r(owner(0, 2), 8);
  // The writer goes on until the reader has looked enough (or 5 s passed):
  // a fixed number of calls could all be written before the reader's first
  // look on a loaded machine.
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> written{0};
  std::thread writer([&] {
    for (uint64_t seq = 1; !stop.load(std::memory_order_relaxed); ++seq) {
      uint64_t id = r.begin(allReduce(seq * 3), seq);
      r.running(id, "ring", 1, false);
      r.finished(id, Status());
      written.store(seq, std::memory_order_relaxed);
    }
  });
  size_t seen = 0, looks = 0, torn = 0, disordered = 0;
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (looks < 2000 && std::chrono::steady_clock::now() < end) {
    uint64_t last = 0;
    for (const FlightCall& c : r.snapshot()) {
      torn += c.count != c.opSeq * 3;
      disordered += c.opSeq <= last;
      last = c.opSeq;
      ++seen;
    }
    if (written.load(std::memory_order_relaxed) > 0) ++looks;  // looks while calls are being written
  }
  stop = true;
  writer.join();
  EXPECT_EQ(torn, 0u) << "calls whose fields came from two calls, of " << seen;
  EXPECT_EQ(disordered, 0u) << "calls out of order, of " << seen;
  EXPECT_GT(seen, 0u);
  EXPECT_GT(written.load(), 8u) << "the ring of 8 wrapped while the reader looked";
}

TEST(FlightDump, IsReadBackAsWritten) {
  FlightRecorder r(owner(2, 4), 8);
  flightRegister(&r, "", 0);
  uint64_t id = r.begin(allReduce(1024), 1);
  r.running(id, "ring", 1, false);
  r.finished(id, Status());
  id = r.begin(allReduce(1024), 2);
  r.running(id, "ring", 1, false);
  r.waiting(id, "channel 0 \"step\" 0", {3});
  r.finished(id, Status(hocclTimeout, "rank 2 made no progress"));
  r.noteFatal("rank 2 made no progress");
  const std::string text = flightDumpText("test");
  flightUnregister(&r);
  std::vector<DumpedRank> ranks;
  ASSERT_TRUE(readFlightDump(text, "dump.json", &ranks).ok()) << text;
  const DumpedRank* mine = nullptr;
  for (const DumpedRank& d : ranks)
    if (d.comm == "0x0000000000000abc" && d.rank == 2) mine = &d;
  ASSERT_NE(mine, nullptr) << text;
  EXPECT_EQ(mine->nranks, 4);
  EXPECT_EQ(mine->host, "node2");
  EXPECT_EQ(mine->pid, 102);
  EXPECT_EQ(mine->reason, "test");
  EXPECT_EQ(mine->error, "rank 2 made no progress");
  ASSERT_EQ(mine->calls.size(), 2u);
  const DumpedCall& c = mine->calls[1];
  EXPECT_EQ(c.seq, 2u);
  EXPECT_EQ(c.describe(), "AllReduce(count=1024, float, sum)");
  EXPECT_EQ(c.algorithm, "ring");
  EXPECT_EQ(c.state, "failed");
  EXPECT_EQ(c.waiting, "channel 0 \"step\" 0");
  EXPECT_EQ(c.waitPeers, std::vector<int>{3});
  EXPECT_EQ(c.error, "rank 2 made no progress");
}

TEST(FlightDump, SomethingElseIsRefusedSayingWhere) {
  std::vector<DumpedRank> ranks;
  Status st = readFlightDump("{\"nodes\": []}", "topo.json", &ranks);
  EXPECT_EQ(st.code(), hocclInvalidArgument);
  EXPECT_NE(st.message().find("topo.json: line 1: not a hoccl flight recorder dump"), std::string::npos)
      << st.message();
  st = readFlightDump("{\"hoccl_flight_recorder\": 1, \"communicators\": [{\"comm\": \"0x1\"}]}", "d.json", &ranks);
  EXPECT_NE(st.message().find("no \"rank\" member"), std::string::npos) << st.message();
  EXPECT_FALSE(readFlightDump("not json", "x", &ranks).ok());
}

// ---- The reader, on dumps made up here ----------------------------------------

DumpedCall call(uint64_t seq, uint64_t count, const char* state, const char* coll = "AllReduce") {
  DumpedCall c;
  c.seq = seq;
  c.coll = coll;
  c.dtype = "float";
  c.op = "sum";
  c.count = count;
  c.state = state;
  c.started = 1000.0 + static_cast<double>(seq);
  if (std::string(state) != "running") c.ended = c.started + 0.5;
  return c;
}

DumpedRank rank(int r, int n, std::vector<DumpedCall> calls) {
  DumpedRank d;
  d.comm = "0x00000000000000ab";
  d.rank = r;
  d.nranks = n;
  d.host = "node" + std::to_string(r);
  d.pid = 100 + r;
  d.calls = std::move(calls);
  return d;
}

// Four ranks made calls 1..16 alike; each then gets `last(r)`.
std::vector<DumpedRank> fourRanks(const std::function<std::vector<DumpedCall>(int r)>& last) {
  std::vector<DumpedRank> out;
  for (int r = 0; r < 4; ++r) {
    std::vector<DumpedCall> calls;
    for (uint64_t s = 1; s <= 16; ++s) calls.push_back(call(s, 1024, "done"));
    for (DumpedCall& c : last(r)) calls.push_back(c);
    out.push_back(rank(r, 4, calls));
  }
  return out;
}

TEST(FlightWhy, NamesTheRankThatDisagrees) {
  FlightVerdict v = explainFlight(fourRanks([](int r) {
    DumpedCall c = call(17, r == 3 ? 2048 : 1024, "failed");
    c.error = "collective mismatch";
    return std::vector<DumpedCall>{c};
  }));
  EXPECT_TRUE(v.problem);
  EXPECT_NE(v.text.find("communicator 0x00000000000000ab: call #17 disagrees: ranks 0-2 AllReduce(count=1024, "
                        "float, sum); rank 3 AllReduce(count=2048, float, sum)"),
            std::string::npos)
      << v.text;
  EXPECT_NE(v.text.find("rank 3 (host node3, pid 103) is the odd one out"), std::string::npos) << v.text;
  EXPECT_NE(v.text.find("last call every rank completed: #16 AllReduce(count=1024, float, sum)"), std::string::npos)
      << v.text;
}

TEST(FlightWhy, NamesARootOrAKindThatDiffers) {
  FlightVerdict v = explainFlight(fourRanks([](int r) {
    DumpedCall c = call(17, 64, "failed", "Broadcast");
    c.root = r == 1 ? 1 : 0;
    return std::vector<DumpedCall>{c};
  }));
  EXPECT_NE(v.text.find("rank 1 Broadcast(count=64, float, root=1)"), std::string::npos) << v.text;
  EXPECT_NE(v.text.find("rank 1 (host node1, pid 101) is the odd one out"), std::string::npos) << v.text;
}

TEST(FlightWhy, SaysWhenARankSkippedACall) {
  FlightVerdict v = explainFlight(fourRanks([](int r) {
    if (r == 2) return std::vector<DumpedCall>{call(17, 8, "failed", "AllGather")};
    return std::vector<DumpedCall>{call(17, 1024, "done", "Broadcast"), call(18, 8, "failed", "AllGather")};
  }));
  EXPECT_NE(v.text.find("call #17 disagrees"), std::string::npos) << v.text;
  EXPECT_NE(v.text.find("rank 2 skipped call #17 Broadcast(count=1024, float, root=0)"), std::string::npos) << v.text;
}

TEST(FlightWhy, NamesTheRankThatNeverStartedTheCall) {
  FlightVerdict v = explainFlight(fourRanks([](int r) {
    if (r == 3) return std::vector<DumpedCall>{};
    DumpedCall c = call(17, 1048576, "failed");
    c.waiting = "channel 0 step 0 of 6 (recvReduceSend): waiting to receive from rank " + std::to_string((r + 3) % 4);
    c.waitPeers = {(r + 3) % 4};
    c.error = "made no progress";
    return std::vector<DumpedCall>{c};
  }));
  EXPECT_TRUE(v.problem);
  EXPECT_NE(v.text.find("communicator 0x00000000000000ab: rank 3 (host node3, pid 103) never started call #17 "
                        "AllReduce(count=1048576, float, sum); ranks 0-2 are in it"),
            std::string::npos)
      << v.text;
  EXPECT_NE(v.text.find("rank 3 (host node3, pid 103): its last call is #16 AllReduce(count=1024, float, sum), done"),
            std::string::npos)
      << v.text;
  EXPECT_NE(v.text.find("rank 0 (host node0, pid 100) in call #17: failed: channel 0 step 0 of 6 (recvReduceSend): "
                        "waiting to receive from rank 3"),
            std::string::npos)
      << v.text;
}

TEST(FlightWhy, NamesARankWithoutADumpThatOthersWaitFor) {
  std::vector<DumpedRank> ranks = fourRanks([](int r) {
    DumpedCall c = call(17, 1024, "running");
    c.waitPeers = {r == 0 ? 3 : r - 1};
    return std::vector<DumpedCall>{c};
  });
  ranks.pop_back();  // rank 3 wrote nothing
  FlightVerdict v = explainFlight(ranks);
  EXPECT_TRUE(v.problem);
  EXPECT_NE(v.text.find("no dump from rank 3 (of 4); ranks 0-2 wait in call #17 AllReduce(count=1024, float, sum) "
                        "on rank 3"),
            std::string::npos)
      << v.text;
}

TEST(FlightWhy, NamesARankThatArrivedAfterTheOthersGaveUp) {
  FlightVerdict v = explainFlight(fourRanks([](int r) {
    DumpedCall c = call(17, 1024, "failed");
    if (r == 3) c.started += 5;  // after the others' timeout
    return std::vector<DumpedCall>{c};
  }));
  EXPECT_TRUE(v.problem);
  EXPECT_NE(v.text.find("call #17 AllReduce(count=1024, float, sum) did not complete on ranks 0-3"), std::string::npos)
      << v.text;
  EXPECT_NE(v.text.find("rank 3 (host node3, pid 103) started it 4.500 s after rank 0 had failed in it"),
            std::string::npos)
      << v.text;
}

TEST(FlightWhy, AllDoneIsNoProblem) {
  FlightVerdict v = explainFlight(fourRanks([](int) { return std::vector<DumpedCall>{}; }));
  EXPECT_FALSE(v.problem) << v.text;
  EXPECT_NE(v.text.find("every rank completed call #16"), std::string::npos) << v.text;
}

TEST(FlightWhy, RankLists) {
  EXPECT_EQ(rankList({3}), "3");
  EXPECT_EQ(rankList({0, 1}), "0,1");
  EXPECT_EQ(rankList({2, 0, 1, 5, 7, 6, 9}), "0-2,5-7,9");
}

// ---- Dumps written by ranks as threads ---------------------------------------------

// HOCCL_DEBUG_DUMP for the communicators made while it lives.
class DumpTo {
 public:
  DumpTo() {
    char tmpl[] = "/tmp/hoccl-flight-XXXXXX";
    dir_ = mkdtemp(tmpl);
    path_ = dir_ + "/dump-%p.json";
    setenv("HOCCL_DEBUG_DUMP", path_.c_str(), 1);
    reloadSettingsForTesting();
  }
  ~DumpTo() {
    unsetenv("HOCCL_DEBUG_DUMP");
    reloadSettingsForTesting();
    unlink(file().c_str());
    rmdir(dir_.c_str());
  }
  std::string file() const { return dir_ + "/dump-" + std::to_string(getpid()) + ".json"; }
  FlightVerdict why() const {
    std::string text;
    std::vector<DumpedRank> ranks;
    Status st = readRegularFile(file(), 1 << 24, &text);
    if (st.ok()) st = readFlightDump(text, file(), &ranks);
    EXPECT_TRUE(st.ok()) << st.message();
    return explainFlight(ranks);
  }

 private:
  std::string dir_, path_;
};

TEST(FlightThreads, APlantedHangNamesTheRankThatNeverCalled) {
  DumpTo dump;
  testutil::Options o;
  o.ranks = 4;
  o.timeoutSec = 1;
  std::string error;
  testutil::spawn(o, [](hocclComm_t comm, int r) {
    std::vector<float> buf(4096, 1.0f);
    for (int i = 0; i < 2; ++i)
      ASSERT_EQ(hocclAllReduce(buf.data(), buf.data(), buf.size(), hocclFloat, hocclSum, comm, nullptr), hocclSuccess);
    if (r == 3) {  // never makes call #3: the others time out in it
      std::this_thread::sleep_for(std::chrono::milliseconds(3000));
      return;
    }
    EXPECT_NE(hocclAllReduce(buf.data(), buf.data(), buf.size(), hocclFloat, hocclSum, comm, nullptr), hocclSuccess);
  }, &error);
  FlightVerdict v = dump.why();
  EXPECT_TRUE(v.problem);
  EXPECT_NE(v.text.find("rank 3 (host "), std::string::npos) << v.text;
  EXPECT_NE(v.text.find(") never started call #3 AllReduce(count=4096, float, sum); ranks 0-2 are in it"),
            std::string::npos)
      << v.text;
  EXPECT_NE(v.text.find("last call every rank completed: #2"), std::string::npos) << v.text;
}

TEST(FlightThreads, APlantedMismatchNamesTheOddRank) {
  DumpTo dump;
  testutil::Options o;
  o.ranks = 4;
  o.timeoutSec = 20;  // found by the call check, not the timeout
  std::string error;
  testutil::spawn(o, [](hocclComm_t comm, int r) {
    std::vector<float> buf(2048, 1.0f);
    ASSERT_EQ(hocclAllReduce(buf.data(), buf.data(), 1024, hocclFloat, hocclSum, comm, nullptr), hocclSuccess);
    // The odd rank lets the others finish call #1 first: its mismatch would
    // stop one still setting it up (the reader says so, but not as asserted here).
    if (r == 1) std::this_thread::sleep_for(std::chrono::milliseconds(300));
    EXPECT_NE(hocclAllReduce(buf.data(), buf.data(), r == 1 ? 2048 : 1024, hocclFloat, hocclSum, comm, nullptr),
              hocclSuccess);
  }, &error);
  FlightVerdict v = dump.why();
  EXPECT_TRUE(v.problem);
  EXPECT_NE(v.text.find("call #2 disagrees: ranks 0,2,3 AllReduce(count=1024, float, sum); rank 1 "
                        "AllReduce(count=2048, float, sum)"),
            std::string::npos)
      << v.text;
  EXPECT_NE(v.text.find("rank 1 (host "), std::string::npos) << v.text;
  EXPECT_NE(v.text.find("is the odd one out"), std::string::npos) << v.text;
}

TEST(FlightThreads, ASignalWritesTheDumpWithoutStopping) {
  DumpTo dump;
  const uint64_t before = flightSignalDumps();
  std::string error;
  testutil::Options o;
  o.ranks = 2;
  std::atomic<int> finished{0};
  testutil::spawn(o, [&](hocclComm_t comm, int r) {
    float x = 1;
    EXPECT_EQ(hocclAllReduce(&x, &x, 1, hocclFloat, hocclSum, comm, nullptr), hocclSuccess);
    // Both ranks are done with the call when the signal comes, and still
    // have their communicators when the dump is written.
    finished.fetch_add(1);
    for (int i = 0; i < 500 && finished.load() < 2; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    if (r == 0) kill(getpid(), SIGUSR1);
    for (int i = 0; i < 500 && flightSignalDumps() == before; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }, &error);
  EXPECT_GT(flightSignalDumps(), before);
  FlightVerdict v = dump.why();
  EXPECT_FALSE(v.problem) << v.text;
  EXPECT_NE(v.text.find("every rank completed call #1 AllReduce(count=1, float, sum)"), std::string::npos) << v.text;
}

}  // namespace
