// HOCCL_TOPO_PROBE=1: communicators over emulated nodes (per-rank host ids
// on this machine) measure the network at set-up, once per job, and use
// the result as a topology and a tune file (src/comm/comm_probe.cc). And
// what else the tuner's machine learns at init.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "base/config.h"
#include "src/comm/comm.h"
#include "tests/support/harness.h"

using namespace hoccl;

namespace {

std::string readFile(const std::string& path) {
  std::ifstream f(path);
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

void writeFile(const std::string& path, const std::string& text) {
  std::ofstream f(path);
  f << text;
}

void setAndReload(const char* name, const std::string* value) {
  if (value) setenv(name, value->c_str(), 1);
  else unsetenv(name);
  reloadSettingsForTesting();
}

// Four ranks on two emulated nodes, over TCP. Each test names its nodes
// anew, so that no result kept by an earlier test covers them.
testutil::Options twoNodes(const std::string& prefix) {
  testutil::Options o;
  o.ranks = 4;
  o.nodeSizes = {2, 2};
  o.net = testutil::Net::Socket;
  o.timeoutSec = 60;
  o.nodePrefix = prefix;
  return o;
}

class ProbeAtInit : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/hoccl-probe-init-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    const std::string one = "1";
    setAndReload("HOCCL_TOPO_PROBE", &one);
    setAndReload("HOCCL_TOPO_PROBE_DIR", &dir_);
  }
  void TearDown() override {
    setAndReload("HOCCL_TOPO_PROBE", nullptr);
    setAndReload("HOCCL_TOPO_PROBE_DIR", nullptr);
    for (const char* f : {"/topology.json", "/tune.conf"}) unlink((dir_ + f).c_str());
    rmdir(dir_.c_str());
  }
  std::string topoPath() const { return dir_ + "/topology.json"; }
  std::string tunePath() const { return dir_ + "/tune.conf"; }
  std::string dir_;
};

// Every rank sees the same nodes under the same measured switch, and a
// collective over them is right.
void expectProbed(hocclComm_t comm, int rank, const std::string& from) {
  ASSERT_NE(comm->probed, nullptr);
  EXPECT_EQ(comm->probed->from, from);
  const topo::System& sys = comm->system;
  ASSERT_EQ(sys.nodes.size(), 2u);
  // Each node under a switch the probe wrote, with the rate it measured.
  // (Loopback is one network, but on a host busy with other tests a pair
  // can run slow and the probe may see two groups: not asserted here.)
  for (const topo::NodeInfo& n : sys.nodes) {
    bool found = false;
    for (const topo::SwitchInfo& sw : sys.switches) {
      if (sw.name != n.switchName) continue;
      found = true;
      EXPECT_GT(sw.linkGbps, 0) << "the probe measured " << n.hostId << "'s link";
    }
    EXPECT_TRUE(found) << n.hostId << " is under no switch of the probe's";
  }
  int v = rank + 1, sum = 0;
  ASSERT_EQ(hocclAllReduce(&v, &sum, 1, hocclInt32, hocclSum, comm, nullptr), hocclSuccess);
  EXPECT_EQ(sum, 10);
}

TEST_F(ProbeAtInit, MeasuresOnceAndLaterCommunicatorsReuseIt) {
  const testutil::Options o = twoNodes("once");
  const int before = probesMeasuredForTesting();
  std::string err;
  ASSERT_TRUE(testutil::spawn(o, [&](hocclComm_t comm, int rank) { expectProbed(comm, rank, dir_); }, &err))
      << err;
  EXPECT_EQ(probesMeasuredForTesting(), before + o.ranks) << "every rank takes part in one measurement";
  // The files, as `hoccl-topo probe` writes them, naming both nodes.
  const std::string topo = readFile(topoPath());
  EXPECT_NE(topo.find("\"once-0\""), std::string::npos) << topo;
  EXPECT_NE(topo.find("\"once-1\""), std::string::npos) << topo;
  EXPECT_NE(readFile(tunePath()).find("hoccl-topo probe"), std::string::npos);

  // A second communicator over the same nodes, and splits of it, measure
  // nothing: the process keeps the result, a split inherits its parent's.
  ASSERT_TRUE(testutil::spawn(o, [&](hocclComm_t comm, int rank) {
    expectProbed(comm, rank, dir_);
    hocclComm_t half = nullptr;
    ASSERT_EQ(hocclCommSplit(comm, rank % 2, rank, &half, nullptr), hocclSuccess);
    ASSERT_NE(half, nullptr);
    EXPECT_EQ(half->probed, comm->probed);
    ASSERT_EQ(half->system.nodes.size(), 2u);
    EXPECT_EQ(half->system.nodes[0].switchName, comm->system.nodes[0].switchName);
    EXPECT_EQ(half->system.nodes[1].switchName, comm->system.nodes[1].switchName);
    hocclCommDestroy(half);
  }, &err)) << err;
  EXPECT_EQ(probesMeasuredForTesting(), before + o.ranks);
}

TEST_F(ProbeAtInit, ReusesTheFilesInItsDirectory) {
  // Files for these nodes, as a run of an earlier process left them (here
  // hand-written, with a switch name no measurement gives).
  writeFile(topoPath(), "{\"version\":1,\"switches\":[{\"name\":\"from-the-cache\",\"nodes\":[\"kept-0\",\"kept-1\"],"
                        "\"link_gbps\":25}]}\n");
  writeFile(tunePath(), "# hand-written\nlink net buffer_kb=512\n");
  const int before = probesMeasuredForTesting();
  std::string err;
  ASSERT_TRUE(testutil::spawn(twoNodes("kept"), [&](hocclComm_t comm, int) {
    ASSERT_NE(comm->probed, nullptr);
    EXPECT_EQ(comm->system.nodes[0].switchName, "from-the-cache");
    EXPECT_EQ(comm->system.nodes[1].switchName, "from-the-cache");
    EXPECT_EQ(comm->tuner->machine().links.net.bufferKB, 512);
  }, &err)) << err;
  EXPECT_EQ(probesMeasuredForTesting(), before);
}

TEST_F(ProbeAtInit, FilesOfOtherNodesAreMeasuredAgainAndReplaced) {
  writeFile(topoPath(), "{\"version\":1,\"switches\":[{\"name\":\"old\",\"nodes\":[\"gone-0\",\"gone-1\"]}]}\n");
  writeFile(tunePath(), "# old\n");
  const testutil::Options o = twoNodes("fresh");
  const int before = probesMeasuredForTesting();
  std::string err;
  ASSERT_TRUE(testutil::spawn(o, [&](hocclComm_t comm, int rank) { expectProbed(comm, rank, dir_); }, &err))
      << err;
  EXPECT_EQ(probesMeasuredForTesting(), before + o.ranks);
  const std::string topo = readFile(topoPath());
  EXPECT_EQ(topo.find("gone-0"), std::string::npos) << topo;
  EXPECT_NE(topo.find("\"fresh-1\""), std::string::npos) << topo;
}

TEST_F(ProbeAtInit, AMalformedCachedFileFailsInitNamingIt) {
  writeFile(topoPath(), "{\"version\":1,\"switches\":[{\"name\":\"leaf\",\"nodes\":[\"bad-0\",");  // cut short
  writeFile(tunePath(), "# fine\n");
  std::string err;
  EXPECT_FALSE(testutil::spawn(twoNodes("bad"), [&](hocclComm_t, int) {}, &err));
  EXPECT_NE(err.find("HOCCL_TOPO_PROBE"), std::string::npos) << err;
  EXPECT_NE(err.find(topoPath()), std::string::npos) << err;
}

// Without HOCCL_TOPO_PROBE_DIR, a job the launcher names gets a directory
// of its own under TMPDIR; "none" (torchrun without --rdzv_id) names none.
TEST_F(ProbeAtInit, ANamedJobCachesUnderTmpdir) {
  setAndReload("HOCCL_TOPO_PROBE_DIR", nullptr);
  const char* oldTmp = getenv("TMPDIR");
  const std::string savedTmp = oldTmp ? oldTmp : "";
  setenv("TMPDIR", dir_.c_str(), 1);
  for (const char* v : {"SLURM_JOB_ID", "TORCHELASTIC_RUN_ID", "OMPI_MCA_ess_base_jobid", "PMIX_NAMESPACE"})
    unsetenv(v);
  setenv("TORCHELASTIC_RUN_ID", "none", 1);
  setenv("SLURM_JOB_ID", "42/x", 1);
  const std::string jobDir = dir_ + "/hoccl-probe-" + std::to_string(getuid()) + "-42_x";
  std::string err;
  const bool ok = testutil::spawn(twoNodes("job"), [&](hocclComm_t comm, int rank) {
    expectProbed(comm, rank, jobDir);
  }, &err);
  unsetenv("SLURM_JOB_ID");
  unsetenv("TORCHELASTIC_RUN_ID");
  if (oldTmp) setenv("TMPDIR", savedTmp.c_str(), 1);
  else unsetenv("TMPDIR");
  ASSERT_TRUE(ok) << err;
  const std::string topo = readFile(jobDir + "/topology.json");
  EXPECT_NE(topo.find("\"job-1\""), std::string::npos) << topo;
  for (const char* f : {"/topology.json", "/tune.conf"}) EXPECT_EQ(unlink((jobDir + f).c_str()), 0) << f;
  EXPECT_EQ(rmdir(jobDir.c_str()), 0);
}

TEST_F(ProbeAtInit, GivenFilesOrOneNodeMeasureNothing) {
  const int before = probesMeasuredForTesting();
  std::string err;
  testutil::Options one;
  one.ranks = 2;
  ASSERT_TRUE(testutil::spawn(one, [&](hocclComm_t comm, int) { EXPECT_EQ(comm->probed, nullptr); }, &err)) << err;
  writeFile(topoPath(), "{\"version\":1,\"switches\":[{\"name\":\"given\",\"nodes\":[\"given-0\",\"given-1\"]}]}\n");
  writeFile(tunePath(), "link net buffer_kb=300\n");
  const std::string topo = topoPath(), tune = tunePath();
  setAndReload("HOCCL_TOPO_FILE", &topo);
  setAndReload("HOCCL_TUNE_FILE", &tune);
  ASSERT_TRUE(testutil::spawn(twoNodes("given"), [&](hocclComm_t comm, int) {
    EXPECT_EQ(comm->probed, nullptr);
    EXPECT_EQ(comm->system.nodes[0].switchName, "given");
  }, &err)) << err;
  setAndReload("HOCCL_TOPO_FILE", nullptr);
  setAndReload("HOCCL_TUNE_FILE", nullptr);
  EXPECT_EQ(probesMeasuredForTesting(), before);
}

// The tuner's machine knows whether a node's ranks share one process (then
// slices go by reference and no sender stages a copy): threads on one
// node or on emulated nodes do; processes do not, and every rank agrees.
TEST(CommTuner, KnowsWhetherANodesRanksShareAProcess) {
  std::string err;
  testutil::Options threads;
  threads.ranks = 3;
  ASSERT_TRUE(testutil::spawn(threads, [&](hocclComm_t comm, int) {
    EXPECT_TRUE(comm->tuner->machine().links.shmByReference);
  }, &err)) << err;
  testutil::Options nodes = threads;
  nodes.nodeSizes = {2, 1};
  nodes.net = testutil::Net::Socket;
  ASSERT_TRUE(testutil::spawn(nodes, [&](hocclComm_t comm, int) {
    EXPECT_TRUE(comm->tuner->machine().links.shmByReference);
  }, &err)) << err;
  ASSERT_TRUE(testutil::spawn(testutil::inProcesses(3), [&](hocclComm_t comm, int) {
    EXPECT_FALSE(comm->tuner->machine().links.shmByReference);
  }, &err)) << err;
}

}  // namespace
