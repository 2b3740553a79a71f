// Every setting is checked when settings are loaded, in every build: a bad
// value fails with a message naming the variable and the value, whether or
// not the code that finally uses the value (the IB transport, hwloc) was
// compiled in. Runs in the reduced CI build (no verbs headers) as well as
// in the full one.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "hoccl.h"
#include "src/base/config.h"
#include "src/base/name_rule.h"
#include "transport/net/net.h"

using namespace hoccl;

namespace {

// Sets one variable for the scope of a test, then restores it.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value) : name_(name) {
    if (const char* old = getenv(name)) old_ = old;
    setenv(name, value.c_str(), 1);
  }
  ~ScopedEnv() {
    if (old_) setenv(name_, old_->c_str(), 1);
    else unsetenv(name_);
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

// For every declared setting, a value its validator must refuse. A new
// setting without an entry here fails BadValuesFailNamingTheVariable, so
// no setting can again accept anything unnoticed.
std::map<std::string, std::string> badValues(const Scratch& s) {
  return {
      {"HOCCL_DEBUG", "LOUD"},
      {"HOCCL_DEBUG_SUBSYS", "INIT,NETWORK"},
      {"HOCCL_DEBUG_FILE", "/tmp/log.%q"},
      {"HOCCL_TIMEOUT", "-3"},
      {"HOCCL_COMM_ID", "nohostport"},
      {"HOCCL_HOSTID", std::string(128, 'h')},
      {"HOCCL_SOCKET_IFNAME", "eth0,,ib0"},
      {"HOCCL_TOPO_FILE", s.dir + "/missing.json"},
      {"HOCCL_TOPO_DUMP_FILE", s.dir},
      {"HOCCL_SOCKET_NSTREAMS", "17"},
      {"HOCCL_NET", "rdma"},
      {"HOCCL_IB_HCA", "mlx5_0:zero"},
      {"HOCCL_IB_GID_INDEX", "256"},
      {"HOCCL_IB_QPS_PER_CONN", "0"},
      {"HOCCL_IB_TIMEOUT", "32"},
      {"HOCCL_IB_RETRY_CNT", "8"},
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
    EXPECT_FALSE(loadSettings(&s, &why)) << d.name << "=" << it->second << " was accepted";
    EXPECT_NE(why.find(std::string(d.name) + "=\"" + it->second + "\""), std::string::npos) << why;
    EXPECT_NE(why.find("expected"), std::string::npos) << why;
  }
}

TEST(SettingsCheck, DefaultsAndGoodValuesLoad) {
  Settings s;
  std::string why;
  ASSERT_TRUE(loadSettings(&s, &why)) << why;
  Scratch scratch;
  const std::pair<const char*, std::string> good[] = {
      {"HOCCL_IB_HCA", "=^mlx5_0:1,mlx5_1"},
      {"HOCCL_IB_HCA", "mlx5"},
      {"HOCCL_SOCKET_IFNAME", "^docker,lo"},
      {"HOCCL_SOCKET_IFNAME", "=eth0:1"},  // an interface alias: ':' is part of the name
      {"HOCCL_DEBUG_SUBSYS", "^init,Net"},
      {"HOCCL_DEBUG_FILE", scratch.dir + "/log.%h.%p.%%"},
      {"HOCCL_HOSTID", "node-07:a1b2"},
      {"HOCCL_TUNER_RULES", scratch.file},
      {"HOCCL_TOPO_DUMP_FILE", scratch.dir + "/dump.json"},
  };
  for (const auto& [name, value] : good) {
    ScopedEnv env(name, value);
    EXPECT_TRUE(loadSettings(&s, &why)) << name << "=" << value << ": " << why;
  }
  ScopedEnv hca("HOCCL_IB_HCA", "=mlx5_1:2");
  ASSERT_TRUE(loadSettings(&s, &why)) << why;
  EXPECT_EQ(s.ibHca, "=mlx5_1:2");
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
    ASSERT_FALSE(loadSettings(&s, &why)) << value;
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

}  // namespace
