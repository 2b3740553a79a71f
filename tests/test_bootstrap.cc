// The rendezvous refuses what does not belong to the job and names what
// differs; every wait ends.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <thread>
#include <vector>

#include "base/config.h"
#include "src/bootstrap/bootstrap.h"
#include "src/comm/comm_settings.h"
#include "tests/support/harness.h"

using namespace hoccl;

namespace {

UniqueIdData loopbackRoot(uint64_t magic, double timeoutSec) {
  UniqueIdData id;
  id.magic = magic;
  SockAddr lo;
  EXPECT_TRUE(parseHostPort("127.0.0.1:0", &lo).ok());
  EXPECT_TRUE(startRoot(lo, magic, timeoutSec, &id.root).ok());
  return id;
}

BootstrapOptions options(int rank, int nranks, const std::string& fingerprint = "A=1\n") {
  BootstrapOptions o;
  o.rank = rank;
  o.nranks = nranks;
  o.timeoutSec = 5;
  o.hostId = "test-host";
  o.fingerprint = fingerprint;
  o.ifnameRule = "lo";
  return o;
}

// Joins nranks ranks on threads; returns each rank's status.
std::vector<Status> joinAll(const UniqueIdData& id, std::vector<BootstrapOptions> opts,
                            std::vector<std::unique_ptr<Bootstrap>>* boots = nullptr) {
  std::vector<Status> st(opts.size());
  std::vector<std::unique_ptr<Bootstrap>> b(opts.size());
  std::vector<std::thread> th;
  for (size_t r = 0; r < opts.size(); ++r)
    th.emplace_back([&, r] { st[r] = Bootstrap::join(id, opts[r], &b[r]); });
  for (auto& t : th) t.join();
  if (boots) *boots = std::move(b);
  return st;
}

TEST(Bootstrap, AllGatherAndBarrierAcrossFiveRanks) {
  UniqueIdData id = loopbackRoot(0x1234, 10);
  std::vector<BootstrapOptions> opts;
  for (int r = 0; r < 5; ++r) opts.push_back(options(r, 5));
  std::vector<std::unique_ptr<Bootstrap>> boots;
  auto st = joinAll(id, opts, &boots);
  for (auto& s : st) ASSERT_TRUE(s.ok()) << s.message();
  std::vector<std::thread> th;
  std::vector<std::vector<int64_t>> got(5, std::vector<int64_t>(5, -1));
  for (int r = 0; r < 5; ++r)
    th.emplace_back([&, r] {
      got[r][r] = 100 + r;
      EXPECT_TRUE(boots[r]->allGather(got[r].data(), sizeof(int64_t)).ok());
      EXPECT_TRUE(boots[r]->barrier().ok());
    });
  for (auto& t : th) t.join();
  for (int r = 0; r < 5; ++r)
    for (int i = 0; i < 5; ++i) EXPECT_EQ(got[r][i], 100 + i);
}

TEST(Bootstrap, ForeignMagicIsRefusedWithAMessage) {
  UniqueIdData id = loopbackRoot(0xaaaa, 5);
  UniqueIdData stale = id;
  stale.magic = 0xbbbb;
  std::unique_ptr<Bootstrap> b;
  Status st = Bootstrap::join(stale, options(0, 1), &b);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("another job"), std::string::npos) << st.message();
  // The rendezvous still serves its own job.
  EXPECT_TRUE(Bootstrap::join(id, options(0, 1), &b).ok());
}

TEST(Bootstrap, ConfigurationMismatchNamesRankAndValue) {
  UniqueIdData id = loopbackRoot(0x77, 5);
  auto st = joinAll(id, {options(0, 3, "HOCCL_SLOTS=8\n"), options(1, 3, "HOCCL_SLOTS=8\n"),
                         options(2, 3, "HOCCL_SLOTS=4\n")});
  for (int r = 0; r < 3; ++r) {
    ASSERT_FALSE(st[r].ok());
    EXPECT_NE(st[r].message().find("rank 2 has HOCCL_SLOTS=4 but rank 0 has HOCCL_SLOTS=8"), std::string::npos)
        << st[r].message();
  }
}

TEST(Bootstrap, VersionMismatchNamesRank) {
  UniqueIdData id = loopbackRoot(0x78, 5);
  auto o1 = options(1, 2);
  o1.libVersion = 99999;
  auto st = joinAll(id, {options(0, 2), o1});
  for (int r = 0; r < 2; ++r) {
    ASSERT_FALSE(st[r].ok());
    EXPECT_NE(st[r].message().find("rank 1 runs hoccl version 99999"), std::string::npos) << st[r].message();
  }
}

TEST(Bootstrap, MissingRankTimesOutNamingIt) {
  UniqueIdData id = loopbackRoot(0x79, 0.3);
  auto o0 = options(0, 3), o1 = options(1, 3);
  o0.timeoutSec = o1.timeoutSec = 1.5;
  auto start = std::chrono::steady_clock::now();
  auto st = joinAll(id, {o0, o1});
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(secs, 1.2);  // the ranks' own 1.5 s did not end it
  for (int r = 0; r < 2; ++r) {
    ASSERT_FALSE(st[r].ok());
    EXPECT_NE(st[r].message().find("missing: 2"), std::string::npos) << st[r].message();
    // Whose timeout ended the wait: the rendezvous' own (0.3 s, the ranks' is 1.5 s).
    EXPECT_NE(st[r].message().find("0.3 s (HOCCL_TIMEOUT of the process serving the rendezvous)"), std::string::npos)
        << st[r].message();
  }
}

// The unique id does not expire: the rendezvous waits for its first rank
// however late it comes (hoccl.h), and its timeout runs from there. Its
// timeout is 0.5 s here and the ranks come 1.5 s after it started.
TEST(Bootstrap, TheRendezvousWaitsForALateFirstRank) {
  UniqueIdData id = loopbackRoot(0x7c, 0.5);
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  auto st = joinAll(id, {options(0, 2), options(1, 2)});
  for (int r = 0; r < 2; ++r) EXPECT_TRUE(st[r].ok()) << "rank " << r << ": " << st[r].message();
}

// The rendezvous answers late ranks with its refusal until its timeout, and
// the ranks wait for it to end: a short one keeps the test short.
TEST(Bootstrap, DuplicateRankAndBadNranksAreRefused) {
  UniqueIdData id = loopbackRoot(0x7a, 0.5);
  auto st = joinAll(id, {options(0, 2), options(0, 2)});
  int failed = 0;
  for (auto& s : st) failed += !s.ok() && s.message().find("joined twice") != std::string::npos;
  EXPECT_GE(failed, 1);
  UniqueIdData id2 = loopbackRoot(0x7b, 0.5);
  auto st2 = joinAll(id2, {options(0, 2), options(1, 3)});
  int named = 0;
  for (auto& s : st2) named += !s.ok() && s.message().find("nranks") != std::string::npos;
  EXPECT_GE(named, 1);
}

TEST(Bootstrap, InterfaceRules) {
  EXPECT_TRUE(interfaceMatches("", "eth0"));
  EXPECT_TRUE(interfaceMatches("eth", "eth0"));
  EXPECT_TRUE(interfaceMatches("ib,eth", "eth1"));
  EXPECT_FALSE(interfaceMatches("ib", "eth0"));
  EXPECT_FALSE(interfaceMatches("^eth", "eth0"));
  EXPECT_TRUE(interfaceMatches("^eth", "ib0"));
  EXPECT_TRUE(interfaceMatches("=eth0", "eth0"));
  EXPECT_FALSE(interfaceMatches("=eth0", "eth01"));
  EXPECT_FALSE(interfaceMatches("^=eth0", "eth0"));
  EXPECT_TRUE(interfaceMatches("^=eth0", "eth01"));
  SockAddr a;
  std::string name;
  ASSERT_TRUE(chooseLocalAddress("lo", &a, &name).ok());
  EXPECT_EQ(name, "lo");
  EXPECT_FALSE(chooseLocalAddress("=no-such-interface", &a, &name).ok());
}

// hoccl reads the environment once per process; these tests change it, so
// they read it again (reloadSettingsForTesting) after each change.
void setAndReload(const char* name, const char* value) {
  if (value) setenv(name, value, 1);
  else unsetenv(name);
  reloadSettingsForTesting();
}

class CommIdEnv : public ::testing::Test {
 protected:
  void TearDown() override { setAndReload("HOCCL_COMM_ID", nullptr); }
};

TEST_F(CommIdEnv, RanksMeetAtHocclCommId) {
  // Find a free port, then let rank 0 listen there.
  Socket probe;
  SockAddr lo, bound;
  ASSERT_TRUE(parseHostPort("127.0.0.1:0", &lo).ok());
  ASSERT_TRUE(Socket::listen(lo, &probe, &bound).ok());
  probe.close();
  setAndReload("HOCCL_COMM_ID", bound.toString().c_str());
  std::string err;
  ASSERT_TRUE(testutil::runThreads(3, [&](hocclComm_t comm, int rank) {
    int v = rank + 1, sum = 0;
    ASSERT_EQ(hocclAllReduce(&v, &sum, 1, hocclInt32, hocclSum, comm, nullptr), hocclSuccess);
    EXPECT_EQ(sum, 6);
  }, &err)) << err;
}

TEST_F(CommIdEnv, PortInUseIsNamed) {
  Socket busy;
  SockAddr lo, bound;
  ASSERT_TRUE(parseHostPort("127.0.0.1:0", &lo).ok());
  ASSERT_TRUE(Socket::listen(lo, &busy, &bound).ok());
  setAndReload("HOCCL_COMM_ID", bound.toString().c_str());
  hocclUniqueId id;
  ASSERT_EQ(hocclGetUniqueId(&id), hocclSuccess);
  hocclComm_t comm = nullptr;
  EXPECT_EQ(hocclCommInitRank(&comm, 2, id, 0), hocclSystemError);
  std::string msg = hocclGetLastError(nullptr);
  EXPECT_NE(msg.find("already in use"), std::string::npos) << msg;
  EXPECT_NE(msg.find(std::to_string(bound.port())), std::string::npos) << msg;
}

TEST(Settings, BadValueFailsInitNamingTheVariable) {
  setAndReload("HOCCL_SLOTS", "zero");
  hocclUniqueId id;
  hocclComm_t comm = nullptr;
  EXPECT_EQ(hocclGetUniqueId(&id), hocclInvalidArgument);
  std::string msg = hocclGetLastError(nullptr);
  EXPECT_NE(msg.find("HOCCL_SLOTS=\"zero\""), std::string::npos) << msg;
  setAndReload("HOCCL_SLOTS", nullptr);
  ASSERT_EQ(hocclGetUniqueId(&id), hocclSuccess);
  // Nonsense timeouts: none, negative, too small to wait at all, not a number.
  for (const char* bad : {"-3", "0", "1e-300", "0.0009", "nan", "inf", "1e8"}) {
    setAndReload("HOCCL_TIMEOUT", bad);
    EXPECT_EQ(hocclCommInitRank(&comm, 1, id, 0), hocclInvalidArgument) << bad;
    msg = hocclGetLastError(nullptr);
    EXPECT_NE(msg.find("HOCCL_TIMEOUT=\"" + std::string(bad) + "\" is invalid"), std::string::npos) << msg;
  }
  setAndReload("HOCCL_TIMEOUT", "0.001");
  Settings s;
  EXPECT_TRUE(commSettings(nullptr, &s).ok());
  EXPECT_EQ(s.timeoutSec, 0.001);
  setAndReload("HOCCL_TIMEOUT", nullptr);
}

}  // namespace
