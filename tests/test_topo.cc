// Topology: the topology file and Slurm formats, hostlists, overrides and link classes, the dump and wire formats, and
// discovery on this machine.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "base/json.h"
#include "src/topo/topology.h"
#include "tests/support/expect_error.h"

#ifndef HOCCL_TEST_DATA_DIR
#error "build with -DHOCCL_TEST_DATA_DIR=\"<source>/tests/data\""
#endif

using namespace hoccl;
using namespace hoccl::topo;
using testsupport::expectError;

namespace {

std::string dataPath(const std::string& name) { return std::string(HOCCL_TEST_DATA_DIR) + "/topo/" + name; }

std::string readData(const std::string& name) {
  std::ifstream f(dataPath(name), std::ios::binary);
  EXPECT_TRUE(f.good()) << dataPath(name);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}


// ---- hostlists ----------------------------------------------------------------

std::vector<std::string> expand(const std::string& e) {
  std::vector<std::string> out;
  Status st = expandHostlist(e, &out);
  EXPECT_TRUE(st.ok()) << e << ": " << st.message();
  return out;
}

using Names = std::vector<std::string>;

TEST(Hostlist, Expands) {
  EXPECT_EQ(expand("node1"), Names({"node1"}));
  EXPECT_EQ(expand(""), Names());
  EXPECT_EQ(expand("node[01-04]"), Names({"node01", "node02", "node03", "node04"}));
  EXPECT_EQ(expand("n[1,3,5-7]"), Names({"n1", "n3", "n5", "n6", "n7"}));
  EXPECT_EQ(expand("a,b[1-2],c"), Names({"a", "b1", "b2", "c"}));
  EXPECT_EQ(expand("rack[1-2]-node[1-2]"), Names({"rack1-node1", "rack1-node2", "rack2-node1", "rack2-node2"}));
  EXPECT_EQ(expand("n[8-11]"), Names({"n8", "n9", "n10", "n11"}));
  EXPECT_EQ(expand("n[098-101]"), Names({"n098", "n099", "n100", "n101"}));
  EXPECT_EQ(expand("gpu[1-2].cluster"), Names({"gpu1.cluster", "gpu2.cluster"}));
  EXPECT_EQ(expand("[1-2]x"), Names({"1x", "2x"}));
  EXPECT_EQ(expand("host:boot-id"), Names({"host:boot-id"}));
  EXPECT_EQ(expand("n[5-5]"), Names({"n5"}));
  EXPECT_EQ(expand("n[0-999999]").size(), 1000000u);
}

TEST(Hostlist, RejectsMalformed) {
  std::vector<std::string> out;
  expectError(expandHostlist("node[1-4", &out), {"hostlist \"node[1-4\"", "unbalanced '['"});
  expectError(expandHostlist("node1-4]", &out), {"unbalanced ']'"});
  expectError(expandHostlist("node[4-1]", &out), {"reversed range"});
  expectError(expandHostlist("node[]", &out), {"expected a number"});
  expectError(expandHostlist("node[a-b]", &out), {"expected a number"});
  expectError(expandHostlist("node[1-]", &out), {"expected a number"});
  expectError(expandHostlist("node[1[2]]", &out), {"expected ',', '-' or ']'"});
  expectError(expandHostlist("a,,b", &out), {"empty name"});
  expectError(expandHostlist("a,", &out), {"empty name"});
  expectError(expandHostlist(",a", &out), {"empty name"});
  expectError(expandHostlist("a b", &out), {"whitespace"});
  expectError(expandHostlist("n[0-1000000]", &out), {"more than 1000000 names"});
  expectError(expandHostlist("a[0-999]b[0-999]c[0-9]", &out), {"more than 1000000 names"});
  expectError(expandHostlist("n[0-999999],m1", &out), {"more than 1000000 names"});
  expectError(expandHostlist("n[1-99999999999999999999]", &out), {"too long"});
}

// ---- topology file --------------------------------------------------------------

TEST(TopoFile, ParsesTheSample) {
  TopoOverrides o;
  Status st = parseTopoFile(readData("cluster.json"), dataPath("cluster.json"), &o);
  ASSERT_TRUE(st.ok()) << st.message();
  ASSERT_EQ(o.switches.size(), 3u);
  EXPECT_EQ(o.switches[0].name, "spine");
  EXPECT_EQ(o.switches[1].parent, "spine");
  EXPECT_EQ(o.switches[1].nodes, Names({"node01", "node02"}));
  EXPECT_EQ(o.switches[2].nodes, Names({"node03", "node04"}));
  EXPECT_EQ(o.switches[1].linkGbps, 200);
  EXPECT_EQ(o.switches[1].uplinkGbps, 400);
  ASSERT_EQ(o.nodes.size(), 2u);
  ASSERT_EQ(o.nodeFieldsSet.size(), 2u);
  EXPECT_EQ(o.nodes[0].hostId, "node01");
  EXPECT_EQ(o.nodeFieldsSet[0], Names({"nics", "numa", "cores"}));
  ASSERT_EQ(o.nodes[0].nics.size(), 2u);
  EXPECT_EQ(o.nodes[0].nics[0].kind, "infiniband");
  EXPECT_EQ(o.nodes[0].nics[0].speedGbps, 200);
  EXPECT_EQ(o.nodes[0].nics[0].port, 1);
  EXPECT_EQ(o.nodes[0].nics[1].address, "10.0.0.1");
  EXPECT_EQ(o.nodes[0].numa[1].cpus, "16-31");
  EXPECT_EQ(o.nodes[0].numa[1].memBytes, 68719476736ull);
  EXPECT_EQ(o.nodes[0].cores, 32);
  EXPECT_EQ(o.nodeFieldsSet[1], Names({"switch", "gpus"}));
  EXPECT_EQ(o.nodes[1].gpus.at(0).name, "H100");
}

TEST(TopoFile, UnknownKeyIsNamedWithItsLine) {
  TopoOverrides o;
  expectError(parseTopoFile(readData("bad_key.json"), dataPath("bad_key.json"), &o),
              {"bad_key.json: line 8, column 24: ", "unknown key \"swich\"", "node entry", "switch"});
}

// A file that is not JSON at all: the file, then the line and column.
TEST(TopoFile, SyntaxErrorsNameTheFileLineAndColumn) {
  TopoOverrides o;
  std::string text = readData("cluster.json");
  size_t at = text.find("\"spine\"");
  ASSERT_NE(at, std::string::npos);
  text.insert(at, ",");  // {"name": ,"spine"
  int line = 1 + static_cast<int>(std::count(text.begin(), text.begin() + at, '\n'));
  int column = static_cast<int>(at - text.rfind('\n', at));
  std::string where = "cluster.json: line " + std::to_string(line) + ", column " + std::to_string(column) + ": ";
  expectError(parseTopoFile(text, "conf/cluster.json", &o), {"topology file conf/cluster.json", where.c_str(), "','"});
  expectError(parseTopoFile("{\"version\": 1,\n\"nodes\": [\n{\"host\": \"a\",}]}", "t.json", &o),
              {"topology file t.json: line 3, column 14: ", "trailing commas are not allowed"});
  expectError(parseTopoFile("{\"version\": 1,\n \"version\": 1}", "t.json", &o),
              {"topology file t.json: line 2, column 2: ", "duplicate key \"version\""});
}

Status slurm(const std::string& text);

Status topo(const std::string& text) {
  TopoOverrides o;
  return parseTopoFile(text, "t.json", &o);
}

TEST(TopoFile, EveryErrorNamesTheFileAndLine) {
  expectError(topo("{\"version\": 1,\n\"nodes\": [\n{\"host\": \"a\",}]}"), {"topology file t.json", "line 3", "trailing"});
  expectError(topo("{\"switches\": []}"), {"t.json", "line 1", "missing \"version\""});
  expectError(topo("{\"version\": 2}"), {"line 1", "version 2 is not supported"});
  expectError(topo("{\"version\": 1,\n \"swiches\": []}"), {"line 2", "unknown key \"swiches\"", "the document"});
  expectError(topo("[1]"), {"line 1", "must be an object"});
  expectError(topo("{\"version\": 1,\n\"switches\": [\n {\"name\": \"s\", \"link_gbs\": 1}]}"),
              {"line 3", "unknown key \"link_gbs\"", "switch entry"});
  expectError(topo("{\"version\": 1,\n\"switches\": [\n {\"nodes\": \"a\"}]}"), {"line 3", "switch entry without \"name\""});
  expectError(topo("{\"version\": 1, \"nodes\": [\n{\"host\": \"a\",\n \"nics\": [{\"name\": \"e\", \"sped_gbps\": 1}]}]}"),
              {"line 3", "unknown key \"sped_gbps\"", "NIC entry"});
  expectError(topo("{\"version\": 1, \"nodes\": [\n{\"host\": \"a\",\n \"nics\": [{\"name\": \"e\", \"kind\": \"wifi\"}]}]}"),
              {"line 3", "\"kind\" must be"});
  expectError(topo("{\"version\": 1, \"nodes\": [\n{\"host\": \"a\",\n \"numa\": [{\"id\": 0, \"memory\": 1}]}]}"),
              {"line 3", "unknown key \"memory\"", "NUMA entry"});
  expectError(topo("{\"version\": 1, \"nodes\": [\n{\"host\": \"a\",\n \"gpus\": [{\"index\": 0, \"nvlink\": []}]}]}"),
              {"line 3", "unknown key \"nvlink\"", "GPU entry"});
  expectError(topo("{\"version\": 1, \"nodes\": [\n{\"host\": \"a\",\n \"gpus\": [{\"index\": 0, \"nvlink_peers\": [7]}]}]}"),
              {"line 3", "GPU 0's nvlink_peers names GPU 7, which is not a GPU entry of this node"});
  expectError(topo("{\"version\": 1, \"nodes\": [\n{\"host\": \"a\",\n \"gpus\": [{\"index\": 0}, {\"index\": 1, "
                   "\"p2p_peers\": [0, 1]}]}]}"),
              {"line 3", "GPU 1's p2p_peers names GPU 1, itself"});
  expectError(topo("{\"version\": 1, \"nodes\": [\n{\"cores\": 4}]}"), {"line 2", "without \"host\""});
  expectError(topo("{\"version\": 1, \"nodes\": [\n{\"host\": \"a\",\n  \"cores\": \"four\"}]}"),
              {"line 3", "\"cores\" must be an integer", "not string"});
  expectError(topo("{\"version\": 1, \"nodes\": [\n{\"host\": \"a\",\n  \"cores\": 2.5}]}"), {"line 3", "not 2.5"});
  expectError(topo("{\"version\": 1, \"nodes\": [\n{\"host\": \"a\",\n  \"pus\": -1}]}"), {"line 3", "\"pus\""});
  // Integers are read exactly: 2^53 + 1 is not rounded into the range.
  expectError(topo("{\"version\": 1, \"nodes\": [\n{\"host\": \"a\", \"numa\": [{\"id\": 0,\n \"mem_bytes\": 9007199254740993}]}]}"),
              {"line 3, column 15", "from 0 to 9007199254740992, not 9007199254740993"});
  expectError(topo("{\"version\": 1, \"nodes\": [\n{\"host\": \"a\",\n  \"cores\": 1e20}]}"), {"line 3", "not 1e+20"});
  expectError(topo("{\"version\": 1, \"nodes\": [\n{\"host\": \"\"}]}"), {"line 2", "must not be empty"});
  expectError(topo("{\"version\": 1, \"nodes\": [\n{\"host\": \"a\"},\n{\"host\": \"a\"}]}"),
              {"line 3", "two entries", "line 2"});
  expectError(topo("{\"version\": 1, \"nodes\": [\n\"a\"]}"), {"line 2", "node entry must be an object"});
  expectError(topo("{\"version\": 1, \"switches\": [\n{\"name\": \"s\", \"link_gbps\": -1}]}"), {"line 2", "negative"});
  expectError(topo("{\"version\": 1, \"switches\": [\n{\"name\": \"s\", \"nodes\": \"n[2-1]\"}]}"),
              {"line 2", "reversed range"});
  expectError(topo("{\"version\": 1, \"switches\": [\n{\"name\": \"s\", \"nodes\": 5}]}"), {"line 2", "hostlist"});
  expectError(topo("{\"version\": 1, \"switches\": [\n{\"name\": \"s\"},\n{\"name\": \"s\"}]}"),
              {"line 3", "defined twice", "line 2"});
  expectError(topo("{\"version\": 1, \"switches\": [\n{\"name\": \"s\",\n \"parent\": \"top\"}]}"),
              {"line 3", "parent \"top\" is not a defined switch"});
  expectError(topo("{\"version\": 1, \"switches\": [\n{\"name\": \"s\", \"switches\": \"x\"}]}"),
              {"line 2", "switch \"x\" is not defined"});
  expectError(topo("{\"version\": 1, \"switches\": [\n{\"name\": \"a\", \"parent\": \"b\"},\n{\"name\": \"b\", \"parent\": "
                   "\"a\"}]}"),
              {"line 2", "cycle", "a -> b -> a"});
  expectError(topo("{\"version\": 1, \"switches\": [\n{\"name\": \"l1\", \"nodes\": \"n[1-3]\"},\n{\"name\": \"l2\", "
                   "\"nodes\": \"n3\"}]}"),
              {"line 3", "node \"n3\" is listed under two switches", "\"l1\" (line 2)", "\"l2\""});
  expectError(topo("{\"version\": 1, \"switches\": [{\"name\": \"l1\"}], \"nodes\": [\n{\"host\": \"a\",\n \"switch\": "
                   "\"l9\"}]}"),
              {"line 3", "switch \"l9\" is not defined"});
  expectError(topo("{\"version\": 1, \"switches\": [\n{\"name\": \"top\", \"switches\": \"l1\"},\n{\"name\": \"top2\", "
                   "\"switches\": \"l1\"},\n{\"name\": \"l1\"}]}"),
              {"line 3", "already under \"top\""});
}

TEST(TopoFile, HostlistsAreBoundedInAll) {
  expectError(topo("{\"version\": 1, \"switches\": [{\"name\": \"a\", \"nodes\": \"a[0-999999]\"},\n"
                   "{\"name\": \"b\", \"nodes\": [\"b[0-999999]\",\n \"c[0-9]\"]}]}"),
              {"line 3", "more than 2000000 names in all"});
  expectError(slurm("SwitchName=a Nodes=a[0-999999]\nSwitchName=b Nodes=b[0-999999]\nSwitchName=c Nodes=c1\n"),
              {"line 3", "more than 2000000 names in all"});
}

TEST(TopoFile, OptionalPartsMayBeLeftOut) {
  TopoOverrides o;
  ASSERT_TRUE(parseTopoFile("{\"version\": 1}", "min.json", &o).ok());
  EXPECT_TRUE(o.switches.empty());
  EXPECT_TRUE(o.nodes.empty());
  // A file without switches may still group nodes by a switch name.
  ASSERT_TRUE(parseTopoFile("{\"version\": 1, \"nodes\": [{\"host\": \"a\", \"switch\": \"rack1\"}]}", "g.json", &o).ok());
}

// ---- Slurm topology.conf -----------------------------------------------------------

TEST(Slurm, ParsesTheSample) {
  TopoOverrides o;
  Status st = parseSlurmTopology(readData("topology.conf"), dataPath("topology.conf"), &o);
  ASSERT_TRUE(st.ok()) << st.message();
  ASSERT_EQ(o.switches.size(), 3u);
  EXPECT_EQ(o.switches[0].name, "leaf1");
  EXPECT_EQ(o.switches[0].nodes, Names({"node01", "node02"}));
  EXPECT_EQ(o.switches[0].linkGbps, 100);
  EXPECT_EQ(o.switches[0].parent, "spine");
  EXPECT_EQ(o.switches[0].uplinkGbps, 400);  // the spine's LinkSpeed is the speed of the links below it
  EXPECT_EQ(o.switches[1].name, "leaf2");
  EXPECT_EQ(o.switches[1].nodes, Names({"node03", "node04"}));
  EXPECT_EQ(o.switches[1].parent, "spine");
  EXPECT_EQ(o.switches[2].name, "spine");
  EXPECT_EQ(o.switches[2].children, Names({"leaf1", "leaf2"}));
  EXPECT_TRUE(o.nodes.empty());
}

Status slurm(const std::string& text) {
  TopoOverrides o;
  return parseSlurmTopology(text, "topology.conf", &o);
}

TEST(Slurm, MalformedLinesAreNamed) {
  TopoOverrides o;
  expectError(parseSlurmTopology(readData("bad_line.conf"), dataPath("bad_line.conf"), &o),
              {"bad_line.conf", "line 4", "unknown key \"Speed\""});
  expectError(slurm("SwitchName=a Nodes=n1\n\nNodes=n2\n"), {"topology.conf, line 3", "no SwitchName"});
  expectError(slurm("SwitchName=a Nodes\n"), {"line 1", "expected KEY=VALUE", "\"Nodes\""});
  expectError(slurm("SwitchName=a =x\n"), {"line 1", "expected KEY=VALUE"});
  expectError(slurm("SwitchName=a Nodes=\n"), {"line 1", "Nodes has no value"});
  expectError(slurm("#c\nSwitchName=a Nodes=n[1-\n"), {"line 2", "unbalanced"});
  expectError(slurm("SwitchName=a LinkSpeed=fast\n"), {"line 1", "LinkSpeed"});
  expectError(slurm("SwitchName=a SwitchName=b\n"), {"line 1", "given twice"});
  expectError(slurm("SwitchName=a Nodes=n1\nSwitchName=a Nodes=n2\n"), {"line 2", "defined twice", "line 1"});
  expectError(slurm("SwitchName=top Switches=a,b\nSwitchName=a\n"), {"line 1", "switch \"b\" is not defined"});
  expectError(slurm("SwitchName=a Nodes=n[1-2]\nSwitchName=b \\\n  Nodes=n2\n"),
              {"line 2", "node \"n2\" is listed under two switches", "\"a\" (line 1)", "\"b\""});
  expectError(slurm("SwitchName=a Switches=b\nSwitchName=b Switches=a\n"), {"cycle"});
  expectError(slurm("SwitchName=a Switches=a\n"), {"line 1", "lists itself"});
  expectError(slurm("SwitchName=t1 Switches=a\nSwitchName=t2 Switches=a\nSwitchName=a\n"),
              {"line 2", "already under \"t1\" (line 1)"});
  expectError(slurm("SwitchName=a Nodes=n1 \\\n"), {"line 1", "ends with '\\'"});
  expectError(slurm("BlockName=b1 Nodes=n1\n"), {"line 1", "unknown key \"BlockName\""});
}

TEST(Slurm, CommentsBlankLinesAndCaseAreAccepted) {
  TopoOverrides o;
  ASSERT_TRUE(parseSlurmTopology("\n# only comments\n   \n\t# and blanks\n", "c.conf", &o).ok());
  EXPECT_TRUE(o.switches.empty());
  ASSERT_TRUE(parseSlurmTopology("SWITCHNAME=s1 nodes=a[1-2] # comment\r\n", "c.conf", &o).ok());
  ASSERT_EQ(o.switches.size(), 1u);
  EXPECT_EQ(o.switches[0].nodes, Names({"a1", "a2"}));
}

// ---- overrides and link classes ---------------------------------------------------

// Four nodes, two ranks each: a1 a2 under leaf1, b1 b2 under leaf2.
System fourNodes() {
  System sys;
  for (const char* h : {"a1", "a2", "b1", "b2"}) {
    NodeInfo n;
    n.hostId = std::string(h) + ":boot";
    n.hostname = std::string(h) + ".cluster.example";
    n.source = "sysfs";
    n.pus = 4;
    sys.nodes.push_back(n);
  }
  for (int r = 0; r < 8; ++r) {
    RankPlacement p;
    p.node = r / 2;
    p.localRank = r % 2;
    p.pid = 1000 + r;
    sys.ranks.push_back(p);
  }
  return sys;
}

TEST(Overrides, SwitchMembershipAndLinkClasses) {
  System sys = fourNodes();
  // Before any file: one switch is assumed.
  EXPECT_EQ(sys.link(0, 7), LinkClass::NetLeaf);
  TopoOverrides o;
  // a1 by host id, a2 by host name, b1 and b2 by short host name.
  ASSERT_TRUE(parseTopoFile(R"({"version": 1, "switches": [
      {"name": "spine"},
      {"name": "leaf1", "parent": "spine", "nodes": "a1:boot,a2.cluster.example", "link_gbps": 100},
      {"name": "leaf2", "parent": "spine", "nodes": "b[1-2]"}]})",
                            "x.json", &o)
                  .ok());
  Status st = applyOverrides(o, &sys);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(sys.nodes[0].switchName, "leaf1");
  EXPECT_EQ(sys.nodes[1].switchName, "leaf1");
  EXPECT_EQ(sys.nodes[2].switchName, "leaf2");
  EXPECT_EQ(sys.switchOf(3), "leaf2");
  EXPECT_EQ(sys.link(0, 0), LinkClass::Self);
  EXPECT_EQ(sys.link(0, 1), LinkClass::Shm);
  EXPECT_EQ(sys.link(0, 2), LinkClass::NetLeaf);
  EXPECT_EQ(sys.link(3, 0), LinkClass::NetLeaf);
  EXPECT_EQ(sys.link(0, 4), LinkClass::NetSpine);
  EXPECT_EQ(sys.link(7, 1), LinkClass::NetSpine);
  EXPECT_EQ(sys.link(4, 7), LinkClass::NetLeaf);
  EXPECT_EQ(sys.link(0, 99), LinkClass::NetSpine);
  EXPECT_STREQ(linkClassName(LinkClass::Self), "SELF");
  EXPECT_STREQ(linkClassName(LinkClass::Shm), "SHM");
  EXPECT_STREQ(linkClassName(LinkClass::NetLeaf), "NET");
  EXPECT_STREQ(linkClassName(LinkClass::NetSpine), "SPINE");
  // Parents and children agree.
  ASSERT_EQ(sys.switches.size(), 3u);
  EXPECT_EQ(sys.switches[0].children, Names({"leaf1", "leaf2"}));
  EXPECT_EQ(sys.switches[1].parent, "spine");

  std::string m = linkMatrix(sys);
  EXPECT_NE(m.find("SELF"), std::string::npos);
  EXPECT_NE(m.find("SPINE"), std::string::npos);
  EXPECT_NE(m.find("Legend"), std::string::npos);
  EXPECT_NE(m.find("(leaf2)"), std::string::npos);
  std::string tree = describeSystem(sys);
  EXPECT_NE(tree.find("switch spine"), std::string::npos) << tree;
  EXPECT_NE(tree.find("  switch leaf1  [node links 100 Gb/s]"), std::string::npos) << tree;
  EXPECT_NE(tree.find("    node a1.cluster.example"), std::string::npos) << tree;
  EXPECT_NE(tree.find("ranks  6 (local 0, pid 1006), 7 (local 1, pid 1007)"), std::string::npos) << tree;
}

// A file whose switches list none (or only some) of the job's nodes changes
// nothing for those nodes; unplacedNodes says so, for init's warning.
TEST(Overrides, NodesNoSwitchListsAreNamed) {
  auto applied = [](const char* text, System* sys) {
    TopoOverrides o;
    EXPECT_TRUE(parseTopoFile(text, "x.json", &o).ok());
    EXPECT_TRUE(applyOverrides(o, sys).ok());
    return unplacedNodes(o, *sys);
  };
  System all = fourNodes();
  EXPECT_EQ(applied(R"({"version": 1, "switches": [{"name": "l1", "nodes": "a[1-2]"}, {"name": "l2", "nodes": "b[1-2]"}]})",
                    &all),
            "");
  System none = fourNodes();
  const std::string w = applied(R"({"version": 1, "switches": [{"name": "l1", "nodes": "gpu[01-06]"}]})", &none);
  EXPECT_NE(w.find("none of this job's 4 nodes is listed"), std::string::npos) << w;
  EXPECT_NE(w.find("a1:boot (a1.cluster.example), a2:boot"), std::string::npos) << w;
  EXPECT_NE(w.find("it lists gpu01, gpu02, gpu03, gpu04, ..."), std::string::npos) << w;
  System some = fourNodes();
  const std::string w2 = applied(R"({"version": 1, "switches": [{"name": "l1", "nodes": "a1,b2"}]})", &some);
  EXPECT_NE(w2.find("2 of this job's 4 nodes are not listed"), std::string::npos) << w2;
  EXPECT_NE(w2.find("(a2:boot (a2.cluster.example), b1:boot (b1.cluster.example); it lists a1, b2)"),
            std::string::npos)
      << w2;
  // Node entries alone (no switches) place nothing and warn of nothing.
  System fields = fourNodes();
  EXPECT_EQ(applied(R"({"version": 1, "nodes": [{"host": "zz", "cores": 2}]})", &fields), "");
}

TEST(Overrides, SlurmSwitchesAndNodeFields) {
  System sys = fourNodes();
  sys.nodes[0].hostname = "node01";
  sys.nodes[3].hostname = "node04";
  TopoOverrides slurmConf;
  ASSERT_TRUE(parseSlurmTopology(readData("topology.conf"), "topology.conf", &slurmConf).ok());
  ASSERT_TRUE(applyOverrides(slurmConf, &sys).ok());
  EXPECT_EQ(sys.nodes[0].switchName, "leaf1");
  EXPECT_EQ(sys.nodes[1].switchName, "");  // a2 is not in topology.conf
  EXPECT_EQ(sys.nodes[3].switchName, "leaf2");
  EXPECT_EQ(sys.switches[2].children, Names({"leaf1", "leaf2"}));
  EXPECT_EQ(sys.link(0, 6), LinkClass::NetSpine);

  // The JSON sample: node01 gets its NICs, NUMA and cores; the rest is kept.
  sys = fourNodes();
  sys.nodes[0].hostname = "node01";
  sys.nodes[3].hostname = "node04";
  TopoOverrides file;
  ASSERT_TRUE(parseTopoFile(readData("cluster.json"), "cluster.json", &file).ok());
  ASSERT_TRUE(applyOverrides(file, &sys).ok());
  EXPECT_EQ(sys.nodes[0].cores, 32);
  EXPECT_EQ(sys.nodes[0].pus, 4);
  EXPECT_EQ(sys.nodes[0].nics.size(), 2u);
  EXPECT_EQ(sys.nodes[0].numa.size(), 2u);
  EXPECT_EQ(sys.nodes[0].source, "sysfs+file");
  EXPECT_EQ(sys.nodes[1].source, "sysfs");
  EXPECT_EQ(sys.nodes[3].gpus.size(), 1u);
  EXPECT_EQ(sys.nodes[3].switchName, "leaf2");
}

TEST(Overrides, ExplicitSwitchWinsAndErrors) {
  System sys = fourNodes();
  TopoOverrides o;
  ASSERT_TRUE(parseTopoFile(R"({"version": 1,
      "switches": [{"name": "l1", "nodes": "a1,a2,b1"}, {"name": "l2", "nodes": "b2"}],
      "nodes": [{"host": "b1", "switch": "l2"}]})",
                            "x.json", &o)
                  .ok());
  ASSERT_TRUE(applyOverrides(o, &sys).ok());
  EXPECT_EQ(sys.nodes[2].switchName, "l2");
  EXPECT_EQ(sys.switches[0].nodes, Names({"a1", "a2"}));
  EXPECT_EQ(sys.switches[1].nodes, Names({"b2", "b1:boot"}));
  EXPECT_EQ(sys.link(4, 6), LinkClass::NetLeaf);
  EXPECT_EQ(sys.link(4, 0), LinkClass::NetSpine);
  EXPECT_EQ(sys.nodes[2].source, "sysfs");  // only the placement changed

  // Inconsistent overrides built in code are refused with the names.
  TopoOverrides bad;
  SwitchInfo l1, l2;
  l1.name = "l1";
  l1.nodes = {"a1"};
  l2.name = "l2";
  l2.nodes = {"a1"};
  bad.switches = {l1, l2};
  sys = fourNodes();
  expectError(applyOverrides(bad, &sys), {"node \"a1\" is listed under two switches", "\"l1\"", "\"l2\""});
  bad.switches[1].nodes.clear();
  bad.switches[1].parent = "nowhere";
  expectError(applyOverrides(bad, &sys), {"parent \"nowhere\""});
  bad.switches[1].parent = "l1";
  bad.switches[0].parent = "l2";
  expectError(applyOverrides(bad, &sys), {"cycle"});
  bad.switches[0].parent.clear();
  bad.switches[1].parent.clear();
  bad.switches[0].children = {"l2"};
  ASSERT_TRUE(applyOverrides(bad, &sys).ok());
  EXPECT_EQ(sys.switches[1].parent, "l1");
  bad.nodes.push_back(NodeInfo());
  expectError(applyOverrides(bad, &sys), {"1 node entries but 0 field lists"});
  bad.nodeFieldsSet.push_back({"colour"});
  expectError(applyOverrides(bad, &sys), {"unknown field \"colour\""});
  bad.nodeFieldsSet[0] = {"switch"};
  bad.nodes[0].switchName = "l9";
  expectError(applyOverrides(bad, &sys), {"switch \"l9\" is not a defined switch"});
}

// ---- dump and wire formats -------------------------------------------------------

NodeInfo richNode(const std::string& id) {
  NodeInfo n;
  n.hostId = id;
  n.hostname = "host-" + id;
  n.source = "hwloc";
  n.packages = 2;
  n.cores = 64;
  n.pus = 128;
  n.numa = {{0, "0-31,64-95", 1ull << 37}, {1, "32-63,96-127", (1ull << 37) + 4096}};
  NicInfo ib;
  ib.name = "mlx5_0";
  ib.kind = "infiniband";
  ib.address = "fe80:0000:0000:0000:0002:c903:0001:0002";
  ib.pciPath = "/sys/devices/pci0000:00/0000:3b:00.0";
  ib.numaNode = 0;
  ib.port = 1;
  ib.speedGbps = 200;
  NicInfo eth;
  eth.name = "eth0";
  eth.kind = "ethernet";
  eth.address = "10.1.2.3";
  eth.speedGbps = 2.5;
  eth.up = false;
  n.nics = {ib, eth};
  GpuInfo g0, g1;
  g0.index = 0;
  g0.name = "NVIDIA H100 \"SXM\"";
  g0.pciBusId = "0000:18:00.0";
  g0.numaNode = 0;
  g0.nvlinkPeers = {1};
  g0.p2pPeers = {1};  // NVML answered for GPU 0, not for GPU 1
  g0.p2pProbed = true;
  g1.index = 1;
  g1.nvlinkPeers = {0};
  n.gpus = {g0, g1};
  n.gpuStatus = "2 GPUs, 36 active NVLinks";
  n.verbsStatus = "1 HCA, 1 port";
  return n;
}

TEST(Dump, RoundTripsThroughTheTopologyFileFormat) {
  System sys;
  for (const char* id : {"node01", "node02", "node03", "node07", "odd[name]", "gpu1"}) sys.nodes.push_back(richNode(id));
  SwitchInfo spine, l1, l2;
  spine.name = "spine";
  l1.name = "leaf1";
  l1.parent = "spine";
  l1.linkGbps = 200;
  l1.uplinkGbps = 800;
  l1.nodes = {"node01", "node02", "node03", "node07"};
  l2.name = "leaf2";
  l2.parent = "spine";
  l2.nodes = {"gpu1", "rack9-n5"};
  sys.switches = {spine, l1, l2};
  for (int i = 0; i < 4; ++i) sys.nodes[i].switchName = "leaf1";
  sys.nodes[5].switchName = "leaf2";
  sys.nodes[4].switchName = "leaf2";  // not expressible in a hostlist: carried by the node's "switch"
  sys.switches[2].nodes.push_back("odd[name]");
  for (int r = 0; r < 6; ++r) sys.ranks.push_back(RankPlacement{r, 0, 100 + r});
  ASSERT_TRUE(applyOverrides(TopoOverrides(), &sys).ok());  // links children

  std::string text = toTopoFile(sys);
  EXPECT_NE(text.find("\"node[01-03,07]\""), std::string::npos) << text;
  EXPECT_NE(text.find("\"ranks\""), std::string::npos);

  TopoOverrides o;
  Status st = parseTopoFile(text, "dump.json", &o);
  ASSERT_TRUE(st.ok()) << st.message() << "\n" << text;
  System back;
  for (const NodeInfo& n : sys.nodes) {
    NodeInfo bare;
    bare.hostId = n.hostId;
    back.nodes.push_back(bare);
  }
  back.ranks = sys.ranks;
  st = applyOverrides(o, &back);
  ASSERT_TRUE(st.ok()) << st.message();
  ASSERT_EQ(back.nodes.size(), sys.nodes.size());
  for (size_t i = 0; i < sys.nodes.size(); ++i) EXPECT_EQ(serializeNode(back.nodes[i]), serializeNode(sys.nodes[i]));
  ASSERT_EQ(back.switches.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(back.switches[i].name, sys.switches[i].name);
    EXPECT_EQ(back.switches[i].parent, sys.switches[i].parent);
    EXPECT_EQ(back.switches[i].children, sys.switches[i].children);
    EXPECT_EQ(back.switches[i].linkGbps, sys.switches[i].linkGbps);
    EXPECT_EQ(back.switches[i].uplinkGbps, sys.switches[i].uplinkGbps);
  }
  EXPECT_EQ(back.switches[1].nodes, sys.switches[1].nodes);
  EXPECT_EQ(toTopoFile(back), text);  // a fixed point
  EXPECT_EQ(back.link(0, 5), LinkClass::NetSpine);
  EXPECT_EQ(back.link(4, 5), LinkClass::NetLeaf);
  const std::string tree = describeSystem(back);
  EXPECT_NE(tree.find("pci 0000:18:00.0  numa 0  nvlink to 1  p2p to 1\n"), std::string::npos) << tree;
  EXPECT_NE(tree.find("gpu    1: ?  numa -  nvlink to 0\n"), std::string::npos) << "GPU 1: no p2p claimed\n" << tree;
}

TEST(Wire, SerializeRoundTrips) {
  NodeInfo n = richNode("host:1234-abcd");
  n.hostname = "h\xC3\xA9\n\"quoted\"";
  n.switchName = "leaf7";
  std::string bytes = serializeNode(n);
  NodeInfo back;
  Status st = deserializeNode(bytes, &back);
  ASSERT_TRUE(st.ok()) << st.message() << "\n" << bytes;
  EXPECT_EQ(serializeNode(back), bytes);
  EXPECT_EQ(back.hostId, n.hostId);
  EXPECT_EQ(back.hostname, n.hostname);
  EXPECT_EQ(back.nics.at(1).speedGbps, 2.5);
  EXPECT_FALSE(back.nics.at(1).up);
  EXPECT_EQ(back.gpus.at(0).nvlinkPeers, std::vector<int>({1}));
  EXPECT_TRUE(back.gpus.at(0).p2pProbed);
  EXPECT_EQ(back.gpus.at(0).p2pPeers, std::vector<int>({1}));
  EXPECT_FALSE(back.gpus.at(1).p2pProbed);
  EXPECT_EQ(back.numa.at(1).memBytes, (1ull << 37) + 4096);
  EXPECT_EQ(back.switchName, "leaf7");
  NodeInfo empty;
  empty.hostId = "x";
  ASSERT_TRUE(deserializeNode(serializeNode(empty), &back).ok());
  EXPECT_EQ(back.nics.size(), 0u);
}

TEST(Wire, GarbageIsAnErrorNeverACrash) {
  NodeInfo out;
  expectError(deserializeNode("", &out), {"line 1, column 1", "end of input"});
  expectError(deserializeNode("garbage", &out), {"line 1"});
  expectError(deserializeNode(std::string("\0\0\0\0", 4), &out), {"NUL byte"});
  expectError(deserializeNode("{\"version\": 1}", &out), {"exactly one node"});
  expectError(deserializeNode("{\"version\": 1, \"nodes\": [{\"host\": \"a\"}, {\"host\": \"b\"}]}", &out),
              {"exactly one node"});
  expectError(deserializeNode(std::string(2u << 20, ' '), &out), {"larger than the limit"});
  expectError(deserializeNode(std::string(100000, '['), &out), {"nesting deeper"});
  // Every truncation and many random corruptions of a valid record.
  std::string good = serializeNode(richNode("n1"));
  for (size_t len = 0; len < good.size(); ++len) EXPECT_FALSE(deserializeNode(good.substr(0, len), &out).ok()) << len;
  std::mt19937 rng(42);
  int accepted = 0;
  for (int iter = 0; iter < 3000; ++iter) {
    std::string s = good;
    int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits; ++e) s[rng() % s.size()] = static_cast<char>(rng() % 256);
    accepted += deserializeNode(s, &out).ok();
  }
  EXPECT_LT(accepted, 3000);  // some corruptions (inside strings) stay valid; none may crash
}

// ---- discovery -------------------------------------------------------------------

TEST(Discover, FindsThisMachine) {
  NodeInfo n = discoverLocalNode("test-host-id");
  EXPECT_EQ(n.hostId, "test-host-id");
  EXPECT_FALSE(n.hostname.empty());
  EXPECT_TRUE(n.source == "hwloc" || n.source == "sysfs") << n.source;
  EXPECT_GE(n.pus, 1);
  EXPECT_GE(n.cores, 1);
  EXPECT_GE(n.packages, 1);
  EXPECT_LE(n.cores, n.pus);
  ASSERT_GE(n.numa.size(), 1u);
  bool net = false;
  for (const NicInfo& c : n.nics) net |= c.kind == "loopback" || c.kind == "ethernet";
  EXPECT_TRUE(net) << serializeNode(n);
  EXPECT_FALSE(n.gpuStatus.empty());
  EXPECT_FALSE(n.verbsStatus.empty());
  // The record of a real machine goes through the wire format intact.
  NodeInfo back;
  ASSERT_TRUE(deserializeNode(serializeNode(n), &back).ok());
  EXPECT_EQ(serializeNode(back), serializeNode(n));
  System sys;
  sys.nodes.push_back(n);
  sys.ranks.push_back(RankPlacement());
  std::string tree = describeSystem(sys);
  EXPECT_NE(tree.find(n.hostname), std::string::npos);
  EXPECT_NE(tree.find("verbs  " + n.verbsStatus), std::string::npos) << tree;
  std::printf("%s", tree.c_str());
}

TEST(Discover, EmptyHostIdFallsBackToTheHostName) {
  NodeInfo n = discoverLocalNode("");
  EXPECT_EQ(n.hostId, n.hostname);
}

// Callers (the fuzzers) may bound what a file expands to below the defaults.
TEST(ParseLimits, BoundHostlistsPerExpressionAndPerFile) {
  ParseLimits small{10, 15};
  TopoOverrides o;
  expectError(parseSlurmTopology("SwitchName=s Nodes=n[0-10]\n", "t.conf", &o, small), {"t.conf", "more than 10 names"});
  expectError(parseSlurmTopology("SwitchName=a Nodes=n[0-9]\nSwitchName=b Nodes=m[0-9]\n", "t.conf", &o, small),
              {"line 2", "more than 15 names in all"});
  EXPECT_TRUE(parseSlurmTopology("SwitchName=a Nodes=n[0-9]\n", "t.conf", &o, small).ok());
  expectError(parseTopoFile(R"({"version":1,"switches":[{"name":"s","nodes":"n[0-10]"}]})", "t.json", &o, small),
              {"t.json", "more than 10 names"});
  std::vector<std::string> names;
  expectError(expandHostlist("n[1-3]", &names, 2), {"more than 2 names"});
}

}  // namespace
