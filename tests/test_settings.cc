// Every setting is checked when settings are loaded, in every build: a bad
// value fails with a message naming the variable and the value, whether or
// not the code that finally uses the value (the IB transport, hwloc) was
// compiled in. Runs in the reduced CI build (no verbs headers) as well as
// in the full one. The environment is read once per process, so each
// change here is followed by reloadSettingsForTesting().
#include <gtest/gtest.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "algorithms/registry.h"
#include "hoccl.h"
#include "base/config.h"
#include "base/name_rule.h"
#include "src/comm/comm_settings.h"
#include "src/topo/topology.h"
#include "src/tune/tuner.h"
#include "transport/net/net.h"

using namespace hoccl;

namespace {

// Sets one variable for the scope of a test, then restores it; the
// process's settings are read again both times.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value) : name_(name) {
    if (const char* old = getenv(name)) old_ = old;
    setenv(name, value.c_str(), 1);
    reloadSettingsForTesting();
  }
  ~ScopedEnv() {
    if (old_) setenv(name_, old_->c_str(), 1);
    else unsetenv(name_);
    reloadSettingsForTesting();
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

// A scratch directory with one readable file in it.
struct Scratch {
  std::string dir, file;
  Scratch() {
    char tmpl[] = "/tmp/hoccl-settings-XXXXXX";
    dir = mkdtemp(tmpl);
    file = dir + "/rules.txt";
    FILE* f = fopen(file.c_str(), "w");
    fputs("# empty\n", f);
    fclose(f);
  }
  ~Scratch() {
    unlink(file.c_str());
    rmdir(dir.c_str());
  }
};

// The settings a communicator would get with no config, or why it fails.
bool load(Settings* s, std::string* why) {
  Status st = commSettings(nullptr, s);
  *why = st.message();
  return st.ok();
}

// For every declared setting, a value its validator must refuse. A new
// setting without an entry here fails BadValuesFailNamingTheVariable, so
// no setting can again accept anything unnoticed.
std::map<std::string, std::string> badValues(const Scratch& s) {
  return {
      {"HOCCL_DEBUG", "LOUD"},
      {"HOCCL_DEBUG_SUBSYS", "INIT,NETWORK"},
      {"HOCCL_DEBUG_FILE", "/tmp/log.%q"},
      {"HOCCL_DEBUG_DUMP", "/tmp/dump.%r"},
      {"HOCCL_DEBUG_DUMP_CALLS", "0"},
      {"HOCCL_DEBUG_DUMP_SIGNAL", "SIGKILL"},
      {"HOCCL_TIMEOUT", "-3"},
      {"HOCCL_HEARTBEAT_TIMEOUT", "0.05"},
      {"HOCCL_HEARTBEAT_INTERVAL", "0"},
      {"HOCCL_COMM_ID", "nohostport"},
      {"HOCCL_HOSTID", std::string(128, 'h')},
      {"HOCCL_SOCKET_IFNAME", "eth0,,ib0"},
      {"HOCCL_TOPO_FILE", s.dir + "/missing.json"},
      {"HOCCL_TOPO_DUMP_FILE", s.dir},
      {"HOCCL_TOPO_PROBE", "yes"},
      {"HOCCL_TOPO_PROBE_DIR", s.file},
      {"HOCCL_SOCKET_NSTREAMS", "17"},
      {"HOCCL_SOCKET_DUPLEX", "2"},
      {"HOCCL_BOARD_BYTES", "513"},
      {"HOCCL_NET_SPIN_BYTES", "-1"},
      {"HOCCL_NET", "rdma"},
      {"HOCCL_IB_HCA", "mlx5_0:zero"},
      {"HOCCL_IB_GID_INDEX", "256"},
      {"HOCCL_IB_QPS_PER_CONN", "0"},
      {"HOCCL_IB_TIMEOUT", "32"},
      {"HOCCL_IB_RETRY_CNT", "8"},
      {"HOCCL_IB_GDR_FLUSH", "2"},
      {"HOCCL_CONNECT_RETRIES", "-1"},
      {"HOCCL_SLICE_BYTES", "1000"},
      {"HOCCL_SLOTS", "1"},
      {"HOCCL_NCHANNELS", "33"},
      {"HOCCL_ALGO", "tree"},
      {"HOCCL_TUNE_FILE", s.dir + "/missing.tune"},
      {"HOCCL_SPIN", "-2"},
      {"HOCCL_CHECK_CALLS", "yes"},
      {"HOCCL_DIRECT_BYTES", "-1"},
      {"HOCCL_CMA", "2"},
      {"HOCCL_DEVICE_CHANNELS", "0"},
      {"HOCCL_DEVICE_THREADS", "100"},
      {"HOCCL_P2P_DISABLE", "yes"},
      {"HOCCL_P2P_CHECK", "2"},
      {"HOCCL_DEVICE_IPC", "cuda"},
      {"HOCCL_NET_DEVICE_PATH", "rdma"},
      {"HOCCL_PROXY_SPIN_US", "-1"},
      {"HOCCL_PROXY_IDLE_US", "1e9"},
      {"HOCCL_ISA", "neon"},
      {"HOCCL_TUNER_RULES", s.dir},
  };
}

TEST(SettingsCheck, BadValuesFailNamingTheVariable) {
  Scratch scratch;
  const auto bad = badValues(scratch);
  for (const SettingDecl& d : allSettings()) {
    auto it = bad.find(d.name);
    ASSERT_NE(it, bad.end()) << d.name << " has no bad value in this test: give it a validator that refuses "
                                          "something, and list that here";
    ScopedEnv env(d.name, it->second);
    Settings s;
    std::string why;
    EXPECT_FALSE(load(&s, &why)) << d.name << "=" << it->second << " was accepted";
    EXPECT_NE(why.find(std::string(d.name) + "=\"" + it->second + "\""), std::string::npos) << why;
    EXPECT_NE(why.find("expected"), std::string::npos) << why;
  }
}

TEST(SettingsCheck, DefaultsAndGoodValuesLoad) {
  Settings s;
  std::string why;
  ASSERT_TRUE(load(&s, &why)) << why;
  Scratch scratch;
  const std::pair<const char*, std::string> good[] = {
      {"HOCCL_IB_HCA", "=^mlx5_0:1,mlx5_1"},
      {"HOCCL_IB_HCA", "mlx5"},
      {"HOCCL_SOCKET_IFNAME", "^docker,lo"},
      {"HOCCL_SOCKET_IFNAME", "=eth0:1"},  // an interface alias: ':' is part of the name
      {"HOCCL_DEBUG_SUBSYS", "^init,Net"},
      {"HOCCL_DEBUG_FILE", scratch.dir + "/log.%h.%p.%%"},
      {"HOCCL_DEBUG_DUMP", scratch.dir + "/flight-%h-%p.json"},
      {"HOCCL_DEBUG_DUMP_SIGNAL", "usr2"},
      {"HOCCL_DEBUG_DUMP_SIGNAL", "0"},
      {"HOCCL_DEBUG_DUMP_SIGNAL", "12"},
      {"HOCCL_HOSTID", "node-07:a1b2"},
      {"HOCCL_TUNER_RULES", scratch.file},
      {"HOCCL_TOPO_DUMP_FILE", scratch.dir + "/dump.json"},
      {"HOCCL_TOPO_PROBE", "1"},
      {"HOCCL_TOPO_PROBE_DIR", scratch.dir},
      {"HOCCL_TOPO_PROBE_DIR", scratch.dir + "/not-yet"},
      {"HOCCL_HEARTBEAT_TIMEOUT", "0"},
      {"HOCCL_HEARTBEAT_TIMEOUT", "2.5"},
      {"HOCCL_HEARTBEAT_INTERVAL", "0.1"},
  };
  for (const auto& [name, value] : good) {
    ScopedEnv env(name, value);
    EXPECT_TRUE(load(&s, &why)) << name << "=" << value << ": " << why;
  }
  ScopedEnv hca("HOCCL_IB_HCA", "=mlx5_1:2");
  ASSERT_TRUE(load(&s, &why)) << why;
  EXPECT_EQ(s.ibHca, "=mlx5_1:2");
}

// Byte counts whose K/M/G multiple does not fit in 64 bits are refused, not
// wrapped into range: 18014398509482112K is 2^64 + 128K, which once
// wrapped to a valid 128 KiB slice. Values at the top of each range pass.
TEST(SettingsCheck, SizesThatOverflowAreRefused) {
  const std::pair<const char*, const char*> overflowing[] = {
      {"HOCCL_SLICE_BYTES", "18014398509482112K"},
      {"HOCCL_SLICE_BYTES", "17592186044416M"},  // 2^64
      {"HOCCL_NET_SPIN_BYTES", "17179869184G"},  // 2^64
      {"HOCCL_NET_SPIN_BYTES", "17179869185G"},  // 2^64 + 1G
      {"HOCCL_DIRECT_BYTES", "17179869184G"},
      {"HOCCL_DIRECT_BYTES", "-17179869184G"},
      {"HOCCL_BOARD_BYTES", "18014398509481984K"},  // 2^64: wrapped to 0
      {"HOCCL_SOCKET_NSTREAMS", "4294967297G"},
  };
  for (const auto& [name, value] : overflowing) {
    ScopedEnv env(name, value);
    Settings s;
    std::string why;
    EXPECT_FALSE(load(&s, &why)) << name << "=" << value << " was accepted";
    EXPECT_NE(why.find(std::string(name) + "=\"" + value + "\""), std::string::npos) << why;
  }
  Settings s;
  EXPECT_EQ(applySetting(&s, "HOCCL_SLICE_BYTES", "64M"), "");
  EXPECT_EQ(s.sliceBytes, uint64_t(64) << 20);
  EXPECT_EQ(applySetting(&s, "HOCCL_NET_SPIN_BYTES", "1024G"), "");
  EXPECT_EQ(s.netSpinBytes, uint64_t(1) << 40);
  EXPECT_EQ(applySetting(&s, "HOCCL_DIRECT_BYTES", "1G"), "");
  EXPECT_EQ(s.directBytes, uint64_t(1) << 30);
}

// ---- Files that settings name --------------------------------------------------

// A scratch directory holding FIFOs named as topology and tune files.
struct Fifos : Scratch {
  std::string json = dir + "/fifo.json", conf = dir + "/fifo.conf", tune = dir + "/fifo.tune";
  Fifos() {
    for (const std::string* p : {&json, &conf, &tune}) EXPECT_EQ(mkfifo(p->c_str(), 0600), 0) << *p;
  }
  ~Fifos() {
    for (const std::string* p : {&json, &conf, &tune}) unlink(p->c_str());
  }
};

// Runs `body`, which may open `fifo`; true if it returned within 3 s. If it
// did not (it sits in open() or read() of the FIFO), a writer opens and
// closes the FIFO until it returns, so that the test fails instead of
// hanging.
bool returnsWithoutBlocking(const std::string& fifo, const std::function<void()>& body) {
  std::atomic<bool> done{false};
  std::thread t([&] {
    body();
    done = true;
  });
  auto end = std::chrono::steady_clock::now() + std::chrono::seconds(3);
  while (!done && std::chrono::steady_clock::now() < end) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  const bool prompt = done;
  while (!done) {
    int fd = open(fifo.c_str(), O_WRONLY | O_NONBLOCK);
    if (fd >= 0) close(fd);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  t.join();
  return prompt;
}

// A FIFO or a device named as a file to read is refused when the settings
// are loaded, naming the setting and what the file is: opening a FIFO
// blocked init forever, and HOCCL_TUNE_FILE=/dev/zero read 4 GiB first.
TEST(SettingFiles, OnlyRegularFilesAreAccepted) {
  Fifos f;
  const std::pair<const char*, std::string> refused[] = {
      {"HOCCL_TOPO_FILE", f.json},          {"HOCCL_TOPO_FILE", f.conf},
      {"HOCCL_TUNE_FILE", f.tune},          {"HOCCL_TUNE_FILE", "/dev/zero"},
      {"HOCCL_TUNER_RULES", f.tune},        {"HOCCL_TOPO_FILE", "/dev/null"},
  };
  for (const auto& [name, value] : refused) {
    ScopedEnv env(name, value);
    Settings s;
    std::string why;
    EXPECT_FALSE(load(&s, &why)) << name << "=" << value << " was accepted";
    EXPECT_NE(why.find(std::string(name) + "=\"" + value + "\""), std::string::npos) << why;
    EXPECT_NE(why.find(value[1] == 'd' ? "a character device" : "a FIFO"), std::string::npos) << why;
  }
}

// The readers check again (the file may have become a FIFO since the
// settings were loaded): a FIFO is refused at once, a device without
// reading it, a file over the limit without reading past it.
TEST(SettingFiles, ReadersRefuseWhatIsNotARegularFileOfBoundedSize) {
  Fifos f;
  Status topo, slurm, tune;
  EXPECT_TRUE(returnsWithoutBlocking(f.json, [&] {
    topo::TopoOverrides o;
    topo = topo::loadOverridesFile(f.json, false, &o);
  }));
  EXPECT_TRUE(returnsWithoutBlocking(f.conf, [&] {
    topo::TopoOverrides o;
    slurm = topo::loadOverridesFile(f.conf, true, &o);
  }));
  EXPECT_TRUE(returnsWithoutBlocking(f.tune, [&] {
    tune::TuneFile t;
    tune = tune::loadTuneFile(f.tune, tune::LinkModel(), &t);
  }));
  for (const Status* st : {&topo, &slurm, &tune}) {
    EXPECT_FALSE(st->ok());
    EXPECT_NE(st->message().find("is a FIFO, not a regular file"), std::string::npos) << st->message();
  }
  tune::TuneFile t;
  Status zero = tune::loadTuneFile("/dev/zero", tune::LinkModel(), &t);
  EXPECT_NE(zero.message().find("/dev/zero is a character device"), std::string::npos) << zero.message();
  // 16 MiB + 1 byte, sparse: refused by its size.
  const std::string big = f.dir + "/big.tune";
  int fd = open(big.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(ftruncate(fd, (off_t(16) << 20) + 1), 0);
  close(fd);
  Status large = tune::loadTuneFile(big, tune::LinkModel(), &t);
  unlink(big.c_str());
  EXPECT_NE(large.message().find("larger than 16777216 bytes"), std::string::npos) << large.message();
}

// A tune file whose content is wrong fails init naming the setting as
// well as the file and line.
TEST(SettingFiles, TuneFileErrorsNameTheSetting) {
  Scratch scratch;
  const std::string path = scratch.dir + "/bad.tune";
  FILE* f = fopen(path.c_str(), "w");
  ASSERT_NE(f, nullptr);
  fputs("# a comment\nlink bogus latency_us=1 gbps=1\n", f);
  fclose(f);
  ScopedEnv env("HOCCL_TUNE_FILE", path);
  hocclUniqueId id;
  ASSERT_EQ(hocclGetUniqueId(&id), hocclSuccess);
  hocclComm_t comm = nullptr;
  EXPECT_EQ(hocclCommInitRank(&comm, 1, id, 0), hocclInvalidArgument);
  std::string msg = hocclGetLastError(nullptr);
  unlink(path.c_str());
  EXPECT_NE(msg.find("HOCCL_TUNE_FILE: " + path + ":2: unknown link class"), std::string::npos) << msg;
}

// Init with a FIFO as HOCCL_TOPO_FILE fails at once, naming the setting;
// both ranks used to sit in open() of the FIFO for ever.
TEST(SettingFiles, AFifoAsTopologyFileFailsInitInsteadOfBlockingIt) {
  Fifos f;
  for (const std::string& fifo : {f.json, f.conf}) {
    ScopedEnv env("HOCCL_TOPO_FILE", fifo);
    hocclUniqueId id;
    hocclResult_t rc = hocclGetUniqueId(&id);
    if (rc != hocclSuccess) {
      EXPECT_EQ(rc, hocclInvalidArgument);
      std::string msg = hocclGetLastError(nullptr);
      EXPECT_NE(msg.find("HOCCL_TOPO_FILE=\"" + fifo + "\" is invalid"), std::string::npos) << msg;
      EXPECT_NE(msg.find("a FIFO"), std::string::npos) << msg;
      continue;
    }
    hocclResult_t rcs[2] = {hocclSuccess, hocclSuccess};
    hocclComm_t comms[2] = {nullptr, nullptr};
    EXPECT_TRUE(returnsWithoutBlocking(fifo, [&] {
      std::thread r1([&] { rcs[1] = hocclCommInitRank(&comms[1], 2, id, 1); });
      rcs[0] = hocclCommInitRank(&comms[0], 2, id, 0);
      r1.join();
    })) << "init blocked on the FIFO " << fifo;
    for (int r = 0; r < 2; ++r) {
      EXPECT_NE(rcs[r], hocclSuccess);
      hocclCommDestroy(comms[r]);
    }
  }
}

// The message says what was wrong with the HCA rule, not only that it was.
TEST(SettingsCheck, HcaRuleMessagesSayWhatIsWrong) {
  const std::pair<const char*, const char*> cases[] = {
      {"mlx5_0:zero", "port"},  {"mlx5_0:0", "port"},     {"mlx5_0:256", "port"},  {"mlx5_0:", "port"},
      {"^", "no name"},         {"=", "no name"},         {"^^mlx5_0", "repeats"}, {"mlx5_0,,mlx5_1", "empty name"},
      {":1", "empty name"},     {"mlx5_0,", "empty name"}, {"mlx5_0, mlx5_1", "space"},
  };
  for (const auto& [value, reason] : cases) {
    ScopedEnv env("HOCCL_IB_HCA", value);
    Settings s;
    std::string why;
    ASSERT_FALSE(load(&s, &why)) << value;
    EXPECT_NE(why.find("HOCCL_IB_HCA"), std::string::npos) << why;
    EXPECT_NE(why.find(reason), std::string::npos) << value << ": " << why;
  }
}

// At the C API: the first call that loads settings fails, and the last
// error names the variable. Nothing here depends on IB being compiled in.
TEST(SettingsCheck, BadHcaRuleFailsAtTheApi) {
  ScopedEnv env("HOCCL_IB_HCA", "mlx5_0:zero");
  hocclUniqueId id;
  EXPECT_EQ(hocclGetUniqueId(&id), hocclInvalidArgument);
  std::string err = hocclGetLastError(nullptr);
  EXPECT_NE(err.find("HOCCL_IB_HCA=\"mlx5_0:zero\""), std::string::npos) << err;
}

TEST(SettingsCheck, BadHcaRuleFailsCommInit) {
  hocclUniqueId id;
  ASSERT_EQ(hocclGetUniqueId(&id), hocclSuccess) << hocclGetLastError(nullptr);
  ScopedEnv env("HOCCL_IB_HCA", "^");
  hocclComm_t comm = nullptr;
  EXPECT_EQ(hocclCommInitRank(&comm, 1, id, 0), hocclInvalidArgument);
  std::string err = hocclGetLastError(nullptr);
  EXPECT_NE(err.find("HOCCL_IB_HCA=\"^\""), std::string::npos) << err;
  EXPECT_NE(err.find("lists no name"), std::string::npos) << err;
}

// HOCCL_NET=auto with a malformed rule is an error, not a quiet fall back to
// TCP, also where the IB transport is compiled out; HOCCL_NET=socket never
// looks at the rule.
TEST(SettingsCheck, NetSelectionRefusesABadHcaRuleInEveryBuild) {
  NetChoice c;
  c.socket.ifnameRule = "lo";
  c.ib.ifnameRule = "lo";
  c.ib.hcaRule = "mlx5_0:zero";
  for (const char* mode : {"auto", "ib"}) {
    c.mode = mode;
    std::unique_ptr<NetTransport> net;
    std::string chosen;
    Status st = createNetTransport(c, &net, &chosen);
    EXPECT_EQ(st.code(), hocclInvalidArgument) << mode << ": " << st.message();
    EXPECT_NE(st.message().find("HOCCL_IB_HCA"), std::string::npos) << st.message();
    EXPECT_EQ(net, nullptr);
  }
  c.mode = "socket";
  std::unique_ptr<NetTransport> net;
  std::string chosen;
  ASSERT_TRUE(createNetTransport(c, &net, &chosen).ok());
  EXPECT_STREQ(net->name(), "Socket");
}

TEST(NameRule, PortsOnlyWhereAllowed) {
  NameRule r;
  std::string why;
  ASSERT_TRUE(parseNameRule("eth0:1", /*withPorts=*/false, &r, &why)) << why;
  ASSERT_EQ(r.entries.size(), 1u);
  EXPECT_EQ(r.entries[0].name, "eth0:1");
  EXPECT_EQ(r.entries[0].port, -1);
  EXPECT_TRUE(nameRuleSelects(r, "eth0:1"));
  EXPECT_FALSE(nameRuleSelects(r, "eth0"));

  ASSERT_TRUE(parseNameRule("mlx5_0:1", /*withPorts=*/true, &r, &why)) << why;
  ASSERT_EQ(r.entries.size(), 1u);
  EXPECT_EQ(r.entries[0].name, "mlx5_0");
  EXPECT_EQ(r.entries[0].port, 1);
  EXPECT_TRUE(nameRuleSelects(r, "mlx5_0", 1));
  EXPECT_FALSE(nameRuleSelects(r, "mlx5_0", 2));
  EXPECT_TRUE(nameRuleSelects(r, "mlx5_0")) << "no port asked: any entry's port";

  ASSERT_TRUE(parseNameRule("^=lo,docker0", false, &r, &why)) << why;
  EXPECT_TRUE(r.exclude);
  EXPECT_TRUE(r.exact);
  EXPECT_FALSE(nameRuleSelects(r, "lo"));
  EXPECT_TRUE(nameRuleSelects(r, "lo2"));
  EXPECT_TRUE(nameRuleSelects(r, "eth0"));

  ASSERT_TRUE(parseNameRule("", true, &r, &why));
  EXPECT_TRUE(nameRuleSelects(r, "anything", 3));
  EXPECT_FALSE(parseNameRule("==x", false, &r, &why));
  EXPECT_FALSE(parseNameRule("x\ty", false, &r, &why));
}

// The environment is read once: a change is not seen until the snapshot is
// read again, and communicators made meanwhile get the first values.
TEST(SettingsSnapshot, ReadOnceUntilReloaded) {
  reloadSettingsForTesting();
  std::shared_ptr<const SettingsSnapshot> first = processSettings();
  ASSERT_EQ(first->values().slots, 8);
  setenv("HOCCL_SLOTS", "4", 1);
  EXPECT_EQ(processSettings().get(), first.get());
  Settings s;
  std::string why;
  ASSERT_TRUE(load(&s, &why)) << why;
  EXPECT_EQ(s.slots, 8) << "the environment was read again";
  reloadSettingsForTesting();
  ASSERT_TRUE(load(&s, &why)) << why;
  EXPECT_EQ(s.slots, 4);
  EXPECT_EQ(first->values().slots, 8) << "a snapshot changed after it was read";
  EXPECT_TRUE(processSettings()->fromEnvironment("HOCCL_SLOTS"));
  EXPECT_EQ(processSettings()->text("HOCCL_SLOTS"), "4");
  unsetenv("HOCCL_SLOTS");
  reloadSettingsForTesting();
  EXPECT_FALSE(processSettings()->fromEnvironment("HOCCL_SLOTS"));
  EXPECT_EQ(processSettings()->text("HOCCL_SLOTS"), "8");
}

TEST(SettingsSnapshot, ThreadsShareTheFirstRead) {
  reloadSettingsForTesting();
  std::vector<const SettingsSnapshot*> seen(8, nullptr);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < seen.size(); ++i) threads.emplace_back([&seen, i] { seen[i] = processSettings().get(); });
  for (auto& t : threads) t.join();
  EXPECT_EQ(std::set<const SettingsSnapshot*>(seen.begin(), seen.end()).size(), 1u);
}

// A bad row keeps its default in values() so tolerant readers (the logger)
// still work, and error() names the first bad row in table order.
TEST(SettingsSnapshot, BadRowKeepsItsDefaultAndIsNamed) {
  ScopedEnv slots("HOCCL_SLOTS", "1");
  ScopedEnv timeout("HOCCL_TIMEOUT", "soon");
  std::shared_ptr<const SettingsSnapshot> snap = processSettings();
  EXPECT_EQ(snap->values().slots, 8);
  EXPECT_EQ(snap->values().timeoutSec, 300);
  EXPECT_EQ(snap->error(), snap->problem("HOCCL_TIMEOUT")) << "HOCCL_TIMEOUT comes first in the table";
  EXPECT_EQ(snap->problem("HOCCL_SLOTS"), "HOCCL_SLOTS=\"1\" is invalid: expected an integer from 2 to 64");
  EXPECT_EQ(snap->problem("HOCCL_NET"), "");
}

// hocclConfig_t fields apply on top of the snapshot, through the same rows,
// without touching the snapshot or reading the environment again.
TEST(SettingsSnapshot, ConfigOverridesTheSnapshot) {
  ScopedEnv algo("HOCCL_ALGO", "Ring");
  ScopedEnv timeout("HOCCL_TIMEOUT", "5");
  hocclConfig_t config = HOCCL_CONFIG_INITIALIZER;
  config.algorithm = "horing";
  config.timeoutSec = 7;
  config.netName = "Socket";  // NCCL's spelling
  Settings s;
  ASSERT_TRUE(commSettings(&config, &s).ok());
  EXPECT_EQ(s.algo, "horing");
  EXPECT_EQ(s.timeoutSec, 7);
  EXPECT_EQ(s.net, "socket");
  const Settings& env = processSettings()->values();
  EXPECT_EQ(env.algo, "ring");
  EXPECT_EQ(env.timeoutSec, 5);
  EXPECT_EQ(env.net, "auto");

  config.netName = "rdma";
  Status st = commSettings(&config, &s);
  EXPECT_EQ(st.code(), hocclInvalidArgument);
  EXPECT_NE(st.message().find("config->netName=\"rdma\""), std::string::npos) << st.message();
  config.netName = nullptr;
  config.algorithm = "tree";
  st = commSettings(&config, &s);
  EXPECT_NE(st.message().find("config->algorithm=\"tree\" names no algorithm"), std::string::npos) << st.message();
  // A former name is taken and spelled as the row's name.
  config.algorithm = "BOARD";
  ASSERT_TRUE(commSettings(&config, &s).ok());
  EXPECT_EQ(s.algo, "oneshot_shm");
}

// hocclConfig_t.timeoutMs gives a bound that is not a whole number of
// seconds; when timeoutSec is set too, timeoutMs wins (a caller sets both so
// that an older hoccl, which reads only timeoutSec, still has a bound).
TEST(SettingsSnapshot, ConfigTimeoutMsIsSubSecondAndWinsOverTimeoutSec) {
  ScopedEnv timeout("HOCCL_TIMEOUT", "5");
  hocclConfig_t config = HOCCL_CONFIG_INITIALIZER;
  EXPECT_EQ(config.timeoutMs, HOCCL_CONFIG_UNDEF_INT);
  Settings s;
  ASSERT_TRUE(commSettings(&config, &s).ok());
  EXPECT_EQ(s.timeoutSec, 5);
  EXPECT_STREQ(s.timeoutFrom, "HOCCL_TIMEOUT");
  config.timeoutMs = 250;
  ASSERT_TRUE(commSettings(&config, &s).ok());
  EXPECT_EQ(s.timeoutSec, 0.25);
  EXPECT_STREQ(s.timeoutFrom, "hocclConfig_t.timeoutMs");
  config.timeoutSec = 7;
  ASSERT_TRUE(commSettings(&config, &s).ok());
  EXPECT_EQ(s.timeoutSec, 0.25);
  EXPECT_STREQ(s.timeoutFrom, "hocclConfig_t.timeoutMs");
  config.timeoutMs = HOCCL_CONFIG_UNDEF_INT;
  ASSERT_TRUE(commSettings(&config, &s).ok());
  EXPECT_EQ(s.timeoutSec, 7);
  EXPECT_STREQ(s.timeoutFrom, "hocclConfig_t.timeoutSec");
  // The smallest: 1 ms, as HOCCL_TIMEOUT's 0.001.
  config.timeoutMs = 1;
  ASSERT_TRUE(commSettings(&config, &s).ok());
  EXPECT_EQ(s.timeoutSec, 0.001);
  // A split applies the config on top of its parent's settings the same way.
  Settings parent = processSettings()->values();
  config.timeoutMs = 1500;
  ASSERT_TRUE(applyConfig(&config, &parent).ok());
  EXPECT_EQ(parent.timeoutSec, 1.5);
}

// 0 or less in either timeout field is refused, naming the field and its
// unit, even when the other field is set and valid.
TEST(SettingsSnapshot, ConfigTimeoutsMustBePositive) {
  struct Bad {
    int sec, ms;
    const char* says;
  };
  const Bad bad[] = {{HOCCL_CONFIG_UNDEF_INT, 0, "config->timeoutMs=0 must be > 0 (milliseconds)"},
                     {HOCCL_CONFIG_UNDEF_INT, -500, "config->timeoutMs=-500 must be > 0 (milliseconds)"},
                     {10, -1, "config->timeoutMs=-1 must be > 0 (milliseconds)"},
                     {0, HOCCL_CONFIG_UNDEF_INT, "config->timeoutSec=0 must be > 0 (seconds)"},
                     {-2, 500, "config->timeoutSec=-2 must be > 0 (seconds)"}};
  for (const Bad& b : bad) {
    hocclConfig_t config = HOCCL_CONFIG_INITIALIZER;
    config.timeoutSec = b.sec;
    config.timeoutMs = b.ms;
    Settings s;
    const Status st = commSettings(&config, &s);
    EXPECT_EQ(st.code(), hocclInvalidArgument) << b.says;
    EXPECT_NE(st.message().find(b.says), std::string::npos) << st.message();
  }
}

// A caller built against a header from before timeoutMs passes a smaller
// size: the field is neither read nor copied, whatever lies past the end of
// the caller's struct, and the struct is otherwise accepted as before.
TEST(SettingsSnapshot, ConfigWithoutTimeoutMsIsStillAccepted) {
  const size_t oldSize = offsetof(hocclConfig_t, timeoutMs);
  hocclConfig_t config = HOCCL_CONFIG_INITIALIZER;
  config.size = oldSize;
  config.timeoutSec = 3;
  config.timeoutMs = -7;  // stands for bytes past an old caller's struct
  Settings s;
  ASSERT_TRUE(commSettings(&config, &s).ok());
  EXPECT_EQ(s.timeoutSec, 3);
  EXPECT_STREQ(s.timeoutFrom, "hocclConfig_t.timeoutSec");

  // A later init (non-blocking or grouped) copies no more than the caller's
  // size: a heap block of exactly that size (ASan reports a read past it).
  std::unique_ptr<char[]> block(new char[oldSize]);
  memcpy(block.get(), &config, oldSize);
  const hocclConfig_t copy = copyConfig(*reinterpret_cast<const hocclConfig_t*>(block.get()));
  EXPECT_EQ(copy.size, oldSize);
  EXPECT_EQ(copy.timeoutSec, 3);
  EXPECT_EQ(copy.timeoutMs, HOCCL_CONFIG_UNDEF_INT);
  ASSERT_TRUE(commSettings(&copy, &s).ok());
  EXPECT_EQ(s.timeoutSec, 3);

  // The copy of a struct too small to be a config is refused as it is.
  config.size = 8;
  const hocclConfig_t tiny = copyConfig(config);
  EXPECT_EQ(tiny.size, 8u);
  EXPECT_EQ(commSettings(&tiny, &s).code(), hocclInvalidArgument);
}

// HOCCL_TIMEOUT takes a decimal number of seconds; a value it refuses is
// named with the variable.
TEST(SettingsSnapshot, TimeoutVariableTakesFractionsOfASecond) {
  Settings s;
  std::string why;
  for (const char* ok : {"0.5", "0.25", ".1", "1e-3", "2"}) {
    ScopedEnv env("HOCCL_TIMEOUT", ok);
    ASSERT_TRUE(load(&s, &why)) << ok << ": " << why;
    EXPECT_EQ(s.timeoutSec, std::stod(ok)) << ok;
  }
  for (const char* bad : {"0", "0.0005", "-0.5", "0,5", "half", "1s", "nan"}) {
    ScopedEnv env("HOCCL_TIMEOUT", bad);
    ASSERT_FALSE(load(&s, &why)) << bad;
    EXPECT_NE(why.find("HOCCL_TIMEOUT=\"" + std::string(bad) + "\" is invalid: expected a number of seconds"),
              std::string::npos)
        << why;
  }
}

// NCCL's CTA fields of the config: in range, min <= max, or refused naming
// the field; cgaClusterSize is accepted in NCCL's range only.
TEST(SettingsSnapshot, ConfigCtaFieldsAreCheckedAndApplied) {
  hocclConfig_t config = HOCCL_CONFIG_INITIALIZER;
  Settings s;
  ASSERT_TRUE(commSettings(&config, &s).ok());
  EXPECT_EQ(s.minCTAs, 0);
  EXPECT_EQ(s.maxCTAs, 0);
  config.minCTAs = 2;
  config.maxCTAs = 6;
  config.cgaClusterSize = 4;
  ASSERT_TRUE(commSettings(&config, &s).ok());
  EXPECT_EQ(s.minCTAs, 2);
  EXPECT_EQ(s.maxCTAs, 6);
  struct Bad {
    int minCTAs, maxCTAs, cga;
    const char* says;
  };
  const Bad bad[] = {{0, HOCCL_CONFIG_UNDEF_INT, 0, "config->minCTAs=0 must be from 1 to 64"},
                     {HOCCL_CONFIG_UNDEF_INT, 65, 0, "config->maxCTAs=65 must be from 1 to 64"},
                     {8, 4, 0, "config->minCTAs=8 is more than config->maxCTAs=4"},
                     {HOCCL_CONFIG_UNDEF_INT, HOCCL_CONFIG_UNDEF_INT, 9,
                      "config->cgaClusterSize=9 must be from 0 to 8"}};
  for (const Bad& b : bad) {
    config.minCTAs = b.minCTAs;
    config.maxCTAs = b.maxCTAs;
    config.cgaClusterSize = b.cga;
    const Status st = commSettings(&config, &s);
    EXPECT_EQ(st.code(), hocclInvalidArgument) << b.says;
    EXPECT_NE(st.message().find(b.says), std::string::npos) << st.message();
  }
}

// HOCCL_ALGO accepts exactly the registry's names (and auto): base checks
// only their form, the communicator checks the list it gets from the
// registry, so a new algorithm needs no edit here.
TEST(SettingsSnapshot, AlgorithmNamesComeFromTheRegistry) {
  std::vector<std::string> want = {"auto"};
  for (const AlgoInfo& a : allAlgorithms()) want.push_back(a.name);
  EXPECT_EQ(algorithmChoices(), want);
  Settings s;
  std::string why;
  for (const std::string& name : want) {
    ScopedEnv env("HOCCL_ALGO", name);
    EXPECT_TRUE(load(&s, &why)) << name << ": " << why;
    EXPECT_EQ(s.algo, name);
  }
  {
    ScopedEnv former("HOCCL_ALGO", "board");  // oneshot_shm's former name
    EXPECT_TRUE(load(&s, &why)) << why;
    EXPECT_EQ(s.algo, "oneshot_shm");
  }
  ScopedEnv env("HOCCL_ALGO", "tree");
  ASSERT_FALSE(load(&s, &why));
  for (const std::string& name : want) EXPECT_NE(why.find(name), std::string::npos) << why;
  EXPECT_EQ(processSettings()->problem("HOCCL_ALGO"), "") << "the form of \"tree\" is fine";
  ScopedEnv badForm("HOCCL_ALGO", "ring;horing");
  EXPECT_NE(processSettings()->problem("HOCCL_ALGO"), "");
}

// The bootstrap's fingerprint: exactly the must-match rows, each as the
// row shows its value, and the shown value parses back to itself.
TEST(SettingsSnapshot, FingerprintHoldsTheMustMatchRows) {
  reloadSettingsForTesting();
  Settings s = processSettings()->values();
  std::string expected;
  for (const SettingDecl& d : allSettings()) {
    if (!d.mustMatchAcrossRanks) continue;
    const std::string shown = d.field.show(s);
    expected += std::string(d.name) + "=" + shown + "\n";
    Settings again = s;
    EXPECT_EQ(applySetting(&again, d.name, shown), "") << d.name << "=" << shown;
    EXPECT_EQ(d.field.show(again), shown) << d.name;
  }
  EXPECT_EQ(s.fingerprint(), expected);
  EXPECT_NE(expected.find("HOCCL_SLOTS=8\n"), std::string::npos) << expected;
  EXPECT_NE(expected.find("HOCCL_NCHANNELS=auto\n"), std::string::npos) << expected;
  Settings other = s;
  other.timeoutSec = 1;  // per rank
  EXPECT_EQ(other.fingerprint(), s.fingerprint());
  other.slots = 4;
  EXPECT_NE(other.fingerprint(), s.fingerprint());
}

// A value applied by name goes through the row's parser: a bad one leaves
// the field alone and says what is expected.
TEST(SettingsSnapshot, ApplySettingUsesTheRow) {
  Settings s = processSettings()->values();
  EXPECT_EQ(applySetting(&s, "HOCCL_SLICE_BYTES", "256K"), "");
  EXPECT_EQ(s.sliceBytes, 256u << 10);
  EXPECT_EQ(applySetting(&s, "HOCCL_SLICE_BYTES", "100"),
            "HOCCL_SLICE_BYTES=\"100\" is invalid: expected auto, or a byte count from 4096 to 64M, a multiple of 64 (K/M "
            "suffixes allowed)");
  EXPECT_EQ(s.sliceBytes, 256u << 10);
  EXPECT_EQ(applySetting(&s, "HOCCL_DEBUG", "info"), "");
  EXPECT_EQ(s.debugLevel, LogLevel::Info);
  EXPECT_EQ(applySetting(&s, "HOCCL_NCHANNELS", "AUTO"), "");
  EXPECT_EQ(s.nchannels, 0);
}

}  // namespace
