// Drives a tuner plugin as NCCL does: init per communicator (with NCCL's
// constants from v5 on), getCollInfo on cost tables filled like NCCL's
// (IGNORE entries included) for every collective, size, pipelined-op count
// and registration, over a range of communicators and topology files, then
// finalize, dlclose and a second load. Checks the tuner's contract and its
// rule file, and that it changes nothing when it knows no topology.
#include "tests/plugin/tuner_check.h"

#include <dlfcn.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "tests/plugin/check.h"
#include "tests/plugin/loader.h"
#include "tests/plugin/nccl_table.h"

namespace pluginharness {
namespace {

class TunerApi {
 public:
  TunerApi(int version, const void* sym) : v_(version), sym_(sym) {}

  const char* name() const { return static_cast<const ncclTuner_v3_t*>(sym_)->name; }

  std::string structProblems() const {
    auto* t = static_cast<const ncclTuner_v3_t*>(sym_);  // name, init, getCollInfo, destroy/finalize: same slots
    std::string bad;
    if (!t->name) bad += "name is NULL ";
    if (!t->init) bad += "init is NULL ";
    if (!t->getCollInfo) bad += "getCollInfo is NULL ";
    if (!t->destroy) bad += "finalize is NULL ";
    return bad;
  }

  ncclResult_t init(void** ctx, size_t nRanks, size_t nNodes, ncclTunerConstants_v5_t* constants) {
    *ctx = nullptr;
    if (v_ <= 4) return static_cast<const ncclTuner_v4_t*>(sym_)->init(nRanks, nNodes, harnessLogger, ctx);
    ncclNvlDomainInfo_v5_t nvl{static_cast<int>(nNodes), 1, static_cast<int>(nRanks / (nNodes ? nNodes : 1))};
    return static_cast<const ncclTuner_v5_t*>(sym_)->init(ctx, 0xc0ffeeull, nRanks, nNodes, harnessLogger, &nvl,
                                                           constants);
  }

  ncclResult_t getCollInfo(void* ctx, int coll, size_t nBytes, int pipeOps, float* table, int regBuff, int* nCh) {
    auto** cast = reinterpret_cast<float**>(table);
    if (v_ == 3)
      return static_cast<const ncclTuner_v3_t*>(sym_)->getCollInfo(ctx, static_cast<ncclFunc_t>(coll), nBytes, pipeOps,
                                                                    cast, NCCL_NUM_ALGORITHMS, NCCL_NUM_PROTOCOLS, nCh);
    return static_cast<const ncclTuner_v4_t*>(sym_)->getCollInfo(ctx, static_cast<ncclFunc_t>(coll), nBytes, pipeOps,
                                                                  cast, NCCL_NUM_ALGORITHMS, NCCL_NUM_PROTOCOLS,
                                                                  regBuff, nCh);
  }

  ncclResult_t finalize(void* ctx) { return static_cast<const ncclTuner_v3_t*>(sym_)->destroy(ctx); }

 private:
  int v_;
  const void* sym_;
};

// The cost table with guard values on both sides: a tuner that indexes the
// table as float** or out of bounds writes over them.
struct GuardedTable {
  static constexpr int kGuard = 16;
  static constexpr float kCanary = 12345.5f;
  float cells[kGuard + NCCL_NUM_ALGORITHMS * NCCL_NUM_PROTOCOLS + kGuard];
  explicit GuardedTable(const CostTable& t) {
    for (float& c : cells) c = kCanary;
    memcpy(cells + kGuard, t.cost, sizeof t.cost);
  }
  float* table() { return cells + kGuard; }
  float at(int a, int p) const { return cells[kGuard + a * NCCL_NUM_PROTOCOLS + p]; }
  bool guardsIntact() const {
    for (int i = 0; i < kGuard; ++i)
      if (cells[i] != kCanary || cells[kGuard + NCCL_NUM_ALGORITHMS * NCCL_NUM_PROTOCOLS + i] != kCanary) return false;
    return true;
  }
};

std::string tempPath(const std::string& name) {
  const char* dir = getenv("TMPDIR");
  return std::string(dir && *dir ? dir : "/tmp") + "/hoccl-plugin-" + std::to_string(getpid()) + "-" + name;
}

void writeFile(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

// `nodes` nodes named node00.. under `leaves` leaf switches, node links of
// `nodeGbps` and uplinks of `uplinkGbps`: hoccl's topology file format.
std::string fabricJson(int nodes, int leaves, double nodeGbps, double uplinkGbps) {
  std::string s = "{\"version\":1,\"switches\":[\n";
  for (int l = 0; l < leaves; ++l) {
    s += " {\"name\":\"leaf" + std::to_string(l) + "\",\"parent\":\"spine\",\"nodes\":[";
    bool first = true;
    for (int n = 0; n < nodes; ++n) {
      if (n * leaves / nodes != l) continue;
      char name[16];
      snprintf(name, sizeof name, "node%02d", n);
      s += std::string(first ? "" : ",") + "\"" + name + "\"";
      first = false;
    }
    s += "],\"link_gbps\":" + std::to_string(static_cast<int>(nodeGbps)) +
         ",\"uplink_gbps\":" + std::to_string(static_cast<int>(uplinkGbps)) + "},\n";
  }
  s += " {\"name\":\"spine\"}\n]}\n";
  return s;
}

std::string slurmConf(int nodes) {
  char buf[256];
  snprintf(buf, sizeof buf,
           "# two leaves under a spine\nSwitchName=leaf1 Nodes=node[00-%02d] LinkSpeed=400\n"
           "SwitchName=leaf2 Nodes=node[%02d-%02d] LinkSpeed=400\nSwitchName=spine Switches=leaf[1-2]\n",
           nodes / 2 - 1, nodes / 2, nodes - 1);
  return buf;
}

struct Shape {
  int nRanks, nNodes;
};

const std::vector<size_t>& sizes() {
  static const std::vector<size_t> s = [] {
    std::vector<size_t> v = {0, 1, 3};
    for (size_t b = 4; b <= (size_t(4) << 30); b *= 4) v.push_back(b);
    v.push_back((size_t(64) << 20) + 4);  // not a power of two
    return v;
  }();
  return s;
}

const int kColls[] = {ncclFuncBroadcast, ncclFuncReduce, ncclFuncAllGather, ncclFuncReduceScatter, ncclFuncAllReduce,
                      ncclFuncSendRecv, ncclFuncSend, ncclFuncRecv, 8, 11};

// The contract on one call. Returns false on the first broken rule.
bool oneCall(TunerApi& api, void* ctx, int coll, size_t bytes, int pipeOps, int regBuff, const Shape& sh,
             const TableScenario& sc, bool expectUnchanged, int* nChOut, GuardedTable* out) {
  CostTable before = fillLikeNccl(coll, bytes, sh.nRanks, sh.nNodes, sc);
  GuardedTable g(before);
  int nCh = 0;
  ncclResult_t r = api.getCollInfo(ctx, coll, bytes, pipeOps, g.table(), regBuff, &nCh);
  const char* what = sc.name;
  if (!EXPECT(r == ncclSuccess, "getCollInfo(coll %d, %zu B, %s) returned %s: NCCL would fail the collective", coll,
              bytes, what, resultName(r)) ||
      !EXPECT(g.guardsIntact(), "getCollInfo wrote outside the 7x3 table (coll %d, %zu B)", coll, bytes))
    return false;
  bool anyValid = false;
  for (int a = 0; a < NCCL_NUM_ALGORITHMS; ++a)
    for (int p = 0; p < NCCL_NUM_PROTOCOLS; ++p) {
      float was = before.cost[a][p], now = g.at(a, p);
      if (was < 0) {
        if (!EXPECT(now == was, "coll %d %zu B %s: IGNORE entry %s/%s became %g", coll, bytes, what, algoLabel(a),
                    protoLabel(p), now))
          return false;
        continue;
      }
      anyValid = true;
      if (!EXPECT(std::isfinite(now) && now >= 0, "coll %d %zu B %s: %s/%s went from %g to %g", coll, bytes, what,
                  algoLabel(a), protoLabel(p), was, now))
        return false;
      if (expectUnchanged && !EXPECT(now == was, "coll %d %zu B (%d ranks, %d nodes, %s): %s/%s changed %g -> %g "
                                                 "though the tuner knows no topology",
                                     coll, bytes, sh.nRanks, sh.nNodes, what, algoLabel(a), protoLabel(p), was, now))
        return false;
      if (a == NCCL_ALGO_NVLS && !EXPECT(now == was, "NVLS estimate changed %g -> %g (not modelled)", was, now))
        return false;
    }
  (void)anyValid;
  if (nChOut) *nChOut = nCh;
  if (out) *out = g;
  return true;
}

// Every collective x size x pipeOps x regBuff x scenario on one communicator.
bool sweep(TunerApi& api, int version, const Shape& sh, bool expectUnchanged, ncclTunerConstants_v5_t* constants) {
  void* ctx = nullptr;
  if (!EXPECT_OK(api.init(&ctx, sh.nRanks, sh.nNodes, constants))) return false;
  TableScenario scenarios[4];
  scenarios[1].name = "NCCL_PROTO=^LL128";
  scenarios[1].noLL128 = true;
  scenarios[2].name = "NCCL_ALGO=ring";
  scenarios[2].ringOnly = true;
  scenarios[3].name = "NVLS offered";
  scenarios[3].nvls = true;
  int calls = 0;
  for (const TableScenario& sc : scenarios)
    for (int coll : kColls)
      for (size_t b : sizes())
        for (int pipeOps : {1, 4})
          for (int regBuff : {0, 1}) {
            if (version == 3 && regBuff) continue;
            int nCh = -1;
            if (!oneCall(api, ctx, coll, b, pipeOps, regBuff, sh, sc, expectUnchanged, &nCh, nullptr)) {
              api.finalize(ctx);
              return false;
            }
            if (!EXPECT(nCh == 0, "nChannels set to %d without a rule (coll %d, %zu B)", nCh, coll, b)) return false;
            ++calls;
          }
  notef("%d ranks on %d nodes: %d tables, contract holds%s", sh.nRanks, sh.nNodes, calls,
        expectUnchanged ? ", NCCL's estimates untouched" : "");
  return EXPECT_OK(api.finalize(ctx));
}

// Cost after / cost before for one entry, on a table filled for `sh`.
double scaling(TunerApi& api, void* ctx, int coll, size_t bytes, int algo, int proto, const Shape& sh) {
  CostTable t = fillLikeNccl(coll, bytes, sh.nRanks, sh.nNodes, TableScenario());
  GuardedTable g(t);
  int nCh = 0;
  if (api.getCollInfo(ctx, coll, bytes, 1, g.table(), 0, &nCh) != ncclSuccess || t.cost[algo][proto] <= 0) return -1;
  return g.at(algo, proto) / t.cost[algo][proto];
}

struct LoadedTuner {
  Opened lib;
  std::unique_ptr<TunerApi> api;
};

bool loadTuner(const std::string& plugin, int version, LoadedTuner* out) {
  out->lib = openPluginLib(PluginType::Tuner, plugin);
  if (!EXPECT(out->lib.handle, "could not open tuner plugin '%s' (%s)", plugin.c_str(), out->lib.error.c_str()))
    return false;
  std::string sym = "ncclTunerPlugin_v" + std::to_string(version);
  void* p = dlsym(out->lib.handle, sym.c_str());
  if (!EXPECT(p, "%s not exported by %s", sym.c_str(), out->lib.openedName.c_str())) return false;
  out->api = std::make_unique<TunerApi>(version, p);
  std::string bad = out->api->structProblems();
  return EXPECT(bad.empty(), "%s: %s", sym.c_str(), bad.c_str()) &&
         EXPECT(strcmp(out->api->name(), "hoccl") == 0, "%s.name '%s'", sym.c_str(), out->api->name());
}

// The plugin reads the environment once per load, as the library does
// (NCCL loads it again after its last communicator): a test that changes a
// variable loads it again.
bool reloadTuner(const std::string& plugin, int version, LoadedTuner* t) {
  t->api.reset();
  if (!EXPECT(dlclose(t->lib.handle) == 0, "dlclose")) return false;
  return loadTuner(plugin, version, t);
}

bool rules(LoadedTuner& t, const std::string& plugin, int version, ncclTunerConstants_v5_t* constants,
           const char* envVar) {
  std::string path = tempPath("rules.conf");
  writeFile(path,
            "# collective,min,max,algorithm,protocol,channels,nNodes,nRanks[,numPipeOps[,regBuff]]\n"
            "allgather, 0, 65536, ring, ll, 4, -1, -1\n"
            "allreduce, 0, 4294967295, nvls, simple, -1, -1, -1   # not offered: skipped\n"
            "allreduce, 0, 4294967295, tree, ll128, -1, 16, -1\n"
            "reducescatter, 1048576, 1073741824, pat, simple, 2, -1, -1, 1\n"
            "bogus, 0, 1, ring, simple, -1, -1, -1\n");
  setenv(envVar, path.c_str(), 1);
  if (!reloadTuner(plugin, version, &t)) return false;
  TunerApi& api = *t.api;
  Shape sh{16, 16};
  void* ctx = nullptr;
  int warningsBefore = pluginWarnings;
  bool ok = EXPECT_OK(api.init(&ctx, sh.nRanks, sh.nNodes, constants));
  ok = ok && EXPECT(pluginWarnings == warningsBefore + 1, "the bad rule line gave %d warnings, expected 1",
                    pluginWarnings - warningsBefore);
  auto expectPick = [&](int coll, size_t bytes, int pipeOps, const TableScenario& sc, int algo, int proto, int ch) {
    GuardedTable g(CostTable{});
    int nCh = 0;
    if (!oneCall(api, ctx, coll, bytes, pipeOps, 0, sh, sc, false, &nCh, &g)) return false;
    CostTable after;
    memcpy(after.cost, g.table(), sizeof after.cost);
    int a = -1, p = -1;
    pickLikeNccl(after, &a, &p);
    return EXPECT(a == algo && p == proto, "%s: coll %d %zu B: NCCL would take %s/%s, the rule says %s/%s",
                  envVar, coll, bytes, algoLabel(a), protoLabel(p), algoLabel(algo), protoLabel(proto)) &&
           EXPECT(nCh == ch, "coll %d %zu B: nChannels %d, expected %d", coll, bytes, nCh, ch);
  };
  TableScenario def, ringOnly;
  ringOnly.name = "NCCL_ALGO=ring";
  ringOnly.ringOnly = true;
  ok = ok && expectPick(ncclFuncAllGather, 4096, 1, def, NCCL_ALGO_RING, NCCL_PROTO_LL, 4);
  // The NVLS rule names an IGNORE entry: skipped, the tree rule applies.
  ok = ok && expectPick(ncclFuncAllReduce, 1 << 20, 1, def, NCCL_ALGO_TREE, NCCL_PROTO_LL128, 0);
  ok = ok && expectPick(ncclFuncReduceScatter, 64 << 20, 1, def, NCCL_ALGO_PAT, NCCL_PROTO_SIMPLE, 2);
  // The tree rule names an entry NCCL_ALGO=ring removed: it stays IGNORE.
  if (ok) {
    GuardedTable g(CostTable{});
    int nCh = 0;
    ok = oneCall(api, ctx, ncclFuncAllReduce, 1 << 20, 1, 0, sh, ringOnly, false, &nCh, &g) &&
         EXPECT(g.at(NCCL_ALGO_TREE, NCCL_PROTO_LL128) == NCCL_ALGO_PROTO_IGNORE, "rule revived an IGNORE entry");
  }
  // numPipeOps 4 does not match the reduce-scatter rule: no channel count.
  if (ok) {
    int nCh = -1;
    ok = oneCall(api, ctx, ncclFuncReduceScatter, 64 << 20, 4, 0, sh, def, false, &nCh, nullptr) &&
         EXPECT(nCh == 0, "unmatched rule set nChannels %d", nCh);
  }
  ok &= EXPECT_OK(api.finalize(ctx));
  unsetenv(envVar);
  unlink(path.c_str());
  if (ok) notef("rule file through %s: rules win, IGNORE entries skipped, bad line reported", envVar);
  return ok;
}

// A FIFO as the rule file (NCCL_TUNER_CONFIG_FILE, which no settings check
// sees): init warns and goes on without rules instead of blocking in open()
// for ever. An alarm ends the process if it blocks.
bool fifoRules(LoadedTuner& t, const std::string& plugin, int version, ncclTunerConstants_v5_t* constants) {
  const std::string fifo = tempPath("rules.fifo");
  unlink(fifo.c_str());
  if (!EXPECT(mkfifo(fifo.c_str(), 0600) == 0, "mkfifo %s", fifo.c_str())) return false;
  setenv("NCCL_TUNER_CONFIG_FILE", fifo.c_str(), 1);
  bool ok = reloadTuner(plugin, version, &t);
  void* ctx = nullptr;
  const int warningsBefore = pluginWarnings;
  alarm(30);
  ok = ok && EXPECT_OK(t.api->init(&ctx, 16, 16, constants));
  alarm(0);
  ok = ok && EXPECT(pluginWarnings == warningsBefore + 1, "a FIFO as the rule file gave %d warnings, expected 1",
                    pluginWarnings - warningsBefore);
  if (ctx) ok &= EXPECT_OK(t.api->finalize(ctx));
  unsetenv("NCCL_TUNER_CONFIG_FILE");
  unlink(fifo.c_str());
  if (ok) notef("a FIFO as NCCL_TUNER_CONFIG_FILE: refused with a warning, init did not block");
  return ok;
}

}  // namespace

int runTunerCheck(const std::string& plugin, int version) {
  logPrefix = "[tuner v" + std::to_string(version) + "] ";
  if (!EXPECT(version >= 3 && version <= 6, "tuner version %d not driven by this harness", version)) return 1;
  unsetenv("HOCCL_TUNER_RULES");
  unsetenv("NCCL_TUNER_CONFIG_FILE");
  unsetenv("HOCCL_TOPO_FILE");
  LoadedTuner t;
  if (!loadTuner(plugin, version, &t)) return 1;
  notef("loaded ncclTunerPlugin_v%d from '%s'", version, t.lib.openedName.c_str());
  ncclTunerConstants_v5_t constants = defaultConstants();
  ncclTunerConstants_v5_t* cp = version >= 5 ? &constants : nullptr;
  const std::vector<Shape> shapes = {{1, 1}, {8, 1}, {2, 2}, {16, 16}, {128, 16}, {48, 6}, {7, 7}};

  // No topology: the tuner must leave NCCL's estimates as they are.
  for (const Shape& sh : shapes)
    if (!sweep(*t.api, version, sh, true, cp)) return 1;

  // 16 nodes under 2 leaves, 400 Gbit/s links, 800 Gbit/s uplinks (4:1).
  std::string json = tempPath("fabric.json"), conf = tempPath("topology.conf"), small = tempPath("small.json");
  writeFile(json, fabricJson(16, 2, 400, 800));
  writeFile(conf, slurmConf(16));
  writeFile(small, fabricJson(4, 2, 400, 400));
  struct TopoCase {
    std::string path;
    const char* what;
    int warnings;  // the plugin's expected WARN lines per init
  };
  const TopoCase topos[] = {{json, "oversubscribed JSON", 0},
                            {conf, "Slurm topology.conf", 0},
                            {small, "a file with fewer nodes than the communicator", 0},
                            {tempPath("missing.json"), "a missing file", 1}};
  for (const TopoCase& tc : topos) {
    setenv("HOCCL_TOPO_FILE", tc.path.c_str(), 1);
    if (!reloadTuner(plugin, version, &t)) return 1;
    int before = pluginWarnings;
    for (const Shape& sh : shapes)
      if (!sweep(*t.api, version, sh, sh.nNodes <= 1, cp)) return 1;
    EXPECT(pluginWarnings - before == tc.warnings * static_cast<int>(shapes.size()), "%s: %d warnings", tc.what,
           pluginWarnings - before);
    notef("HOCCL_TOPO_FILE = %s: ok", tc.what);
  }

  // What the oversubscribed fabric does to the estimates: PAT's far steps
  // cross the spine all at once, a ring ordered by switch crosses it twice.
  setenv("HOCCL_TOPO_FILE", json.c_str(), 1);
  if (!reloadTuner(plugin, version, &t)) return 1;
  void* ctx = nullptr;
  Shape sh{16, 16};
  if (!EXPECT_OK(t.api->init(&ctx, sh.nRanks, sh.nNodes, cp))) return 1;
  double pat = scaling(*t.api, ctx, ncclFuncAllGather, size_t(1) << 30, NCCL_ALGO_PAT, NCCL_PROTO_SIMPLE, sh);
  double ring = scaling(*t.api, ctx, ncclFuncAllGather, size_t(1) << 30, NCCL_ALGO_RING, NCCL_PROTO_SIMPLE, sh);
  double small1 = scaling(*t.api, ctx, ncclFuncAllGather, 4096, NCCL_ALGO_RING, NCCL_PROTO_LL, sh);
  EXPECT(pat > 1.5, "1 GiB all-gather: PAT scaled x%.2f, expected a large penalty on 4:1 uplinks", pat);
  EXPECT(ring >= 1 && ring < 1.2, "1 GiB all-gather: ring scaled x%.2f, expected little change", ring);
  EXPECT(small1 >= 1 && small1 < 1.2, "4 KiB all-gather: ring/LL scaled x%.2f, expected latency-bound", small1);
  notef("4:1 oversubscribed, 1 GiB all-gather: PAT x%.2f, ring x%.2f; 4 KiB ring/LL x%.2f", pat, ring, small1);
  EXPECT_OK(t.api->finalize(ctx));
  unsetenv("HOCCL_TOPO_FILE");

  if (!rules(t, plugin, version, cp, "HOCCL_TUNER_RULES") || !rules(t, plugin, version, cp, "NCCL_TUNER_CONFIG_FILE") ||
      !fifoRules(t, plugin, version, cp))
    return 1;
  for (const std::string& p : {json, conf, small}) unlink(p.c_str());

  // NCCL dlcloses the tuner with its last communicator.
  std::string name = t.lib.openedName;
  t.api.reset();
  EXPECT(dlclose(t.lib.handle) == 0, "dlclose");
  EXPECT(!stillLoaded(name), "%s still mapped after dlclose", name.c_str());
  if (!loadTuner(plugin, version, &t)) return 1;
  ctx = nullptr;
  if (EXPECT_OK(t.api->init(&ctx, 16, 2, cp)) && oneCall(*t.api, ctx, ncclFuncAllReduce, 1 << 20, 1, 0, {16, 2},
                                                          TableScenario(), true, nullptr, nullptr))
    EXPECT_OK(t.api->finalize(ctx));
  dlclose(t.lib.handle);
  notef("%s", failures == 0 ? "dlclose, reload: ok" : "FAILED");
  return failures == 0 ? 0 : 1;
}

int printDecisionTable(const std::string& plugin, int version, int nodes, int ranks, const std::string& topoFile) {
  logPrefix = "";
  std::string topo = topoFile;
  if (topo.empty()) {
    topo = tempPath("decision.json");
    writeFile(topo, fabricJson(nodes, 2, 400, 800 * nodes / 16));
  }
  setenv("HOCCL_TOPO_FILE", topo.c_str(), 1);
  LoadedTuner t;
  if (!loadTuner(plugin, version, &t)) return 1;
  ncclTunerConstants_v5_t constants = defaultConstants();
  void* ctx = nullptr;
  if (!EXPECT_OK(t.api->init(&ctx, ranks, nodes, version >= 5 ? &constants : nullptr))) return 1;
  printf("# hoccl tuner decisions: %d ranks on %d nodes, HOCCL_TOPO_FILE=%s%s\n", ranks, nodes, topo.c_str(),
         topoFile.empty() ? " (2 leaf switches, 400 Gbit/s node links, uplinks 4:1 oversubscribed)" : "");
  printf("# NCCL column: the harness's stand-in for NCCL's default model (tests/plugin/nccl_table.h)\n");
  printf("# 'repriced': NCCL's pick with the tuner's switch penalty applied\n");
  printf("# %-14s %10s  %-12s %9s %9s  %-12s %9s  %s\n", "collective", "bytes", "NCCL default", "us", "repriced",
         "hoccl tuner", "us", "");
  const int colls[] = {ncclFuncReduceScatter, ncclFuncAllGather, ncclFuncAllReduce};
  int rows = 0, differing = 0;
  for (int coll : colls)
    for (size_t b = 1024; b <= (size_t(4) << 30); b *= 4) {
      CostTable before = fillLikeNccl(coll, b, ranks, nodes, TableScenario());
      // The call's contract as in the tuner tests: success, nothing written
      // outside the table (guard cells), IGNORE entries kept, estimates finite.
      GuardedTable g{CostTable{}};
      int nCh = 0;
      if (!oneCall(*t.api, ctx, coll, b, 1, 0, Shape{ranks, nodes}, TableScenario(), false, &nCh, &g)) break;
      CostTable after;
      memcpy(after.cost, g.table(), sizeof after.cost);
      int a0 = -1, p0 = -1, a1 = -1, p1 = -1;
      if (!EXPECT(pickLikeNccl(before, &a0, &p0) && pickLikeNccl(after, &a1, &p1),
                  "coll %d %zu B: no algorithm/protocol left to pick", coll, b))
        break;
      ++rows;
      if (a0 != a1 || p0 != p1) ++differing;
      std::string d0 = std::string(algoLabel(a0)) + "/" + protoLabel(p0);
      std::string d1 = std::string(algoLabel(a1)) + "/" + protoLabel(p1);
      const char* name = coll == ncclFuncReduceScatter ? "reduce_scatter" : coll == ncclFuncAllGather ? "all_gather"
                                                                                                      : "all_reduce";
      printf("  %-14s %10zu  %-12s %9.1f %9.1f  %-12s %9.1f  %s\n", name, b, d0.c_str(), before.cost[a0][p0],
             after.cost[a0][p0], d1.c_str(), after.cost[a1][p1], (a0 != a1 || p0 != p1) ? "<- differs" : "");
    }
  EXPECT_OK(t.api->finalize(ctx));
  if (topoFile.empty()) unlink(topo.c_str());
  // 3 collectives x 1 KiB .. 4 GiB in steps of 4.
  EXPECT(rows == 3 * 12, "%d of %d table rows printed", rows, 3 * 12);
  // On the default fabric (4:1 uplinks) the tuner must move some decisions:
  // that is what the table shows (docs/nccl-plugins.md).
  if (topoFile.empty())
    EXPECT(differing > 0, "the tuner changed no decision on an oversubscribed fabric (%d rows)", rows);
  printf("# %d rows, %d decisions changed by the tuner, %d failure(s)\n", rows, differing, failures.load());
  return failures == 0 ? 0 : 1;
}

}  // namespace pluginharness
