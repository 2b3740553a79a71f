#include "plugin/tuner/tuner_plugin.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <tuple>

#include "plugin/common/nccl_log.h"
#include "plugin/tuner/fabric.h"
#include "plugin/tuner/nccl_model.h"
#include "plugin/tuner/rules.h"
#include "base/config.h"
#include "base/regular_file.h"

namespace hoccl {
namespace ncclplugin {
namespace {

constexpr double kMaxFactor = 1e6;

struct TunerContext {
  uint64_t commId = 0;
  int nRanks = 1, nNodes = 1;
  Fabric fabric;
  std::unique_ptr<NcclModel> model;
  std::vector<Rule> rules;
  std::mutex mu;
  std::map<std::tuple<int, int, int, int>, double> factors;  // coll, algo, proto, size bucket
  std::set<std::tuple<int, int, int>> logged;                // coll, size bucket, numPipeOps
  std::set<int> ignoredRulesLogged;
};

int sizeBucket(size_t n) {
  int b = 0;
  while (n > 1) {
    n >>= 1;
    ++b;
  }
  return b;
}


std::string human(size_t n) {
  char buf[32];
  if (n >= (1u << 30) && n % (1u << 30) == 0) snprintf(buf, sizeof buf, "%zu GiB", n >> 30);
  else if (n >= (1u << 20) && n % (1u << 20) == 0) snprintf(buf, sizeof buf, "%zu MiB", n >> 20);
  else if (n >= 1024 && n % 1024 == 0) snprintf(buf, sizeof buf, "%zu KiB", n >> 10);
  else snprintf(buf, sizeof buf, "%zu B", n);
  return buf;
}

// The entry NCCL will take: the lowest cost >= 0, ties to the lowest index.
std::pair<int, int> pick(const float* t, int nA, int nP, int stride) {
  std::pair<int, int> best{-1, -1};
  float bestCost = 0;
  for (int a = 0; a < nA; ++a)
    for (int p = 0; p < nP; ++p) {
      float c = t[a * stride + p];
      if (c < 0) continue;
      if (best.first < 0 || c < bestCost) {
        best = {a, p};
        bestCost = c;
      }
    }
  return best;
}

double factorFor(TunerContext* c, int coll, int algo, int proto, size_t nBytes) {
  int bucket = sizeBucket(nBytes);
  auto key = std::make_tuple(coll, algo, proto, bucket);
  auto it = c->factors.find(key);
  if (it != c->factors.end()) return it->second;
  // One evaluation per power-of-two size range, at its geometric middle.
  size_t mid = nBytes < 2 ? nBytes : static_cast<size_t>(std::ldexp(1.0, bucket) * 1.4142);
  double f = c->model->fabricFactor(coll, algo, proto, mid);
  if (!std::isfinite(f) || f < 1) f = 1;
  f = std::min(f, kMaxFactor);
  c->factors.emplace(key, f);
  return f;
}

}  // namespace

ncclResult_t tunerInit(void** ctxOut, uint64_t commId, size_t nRanks, size_t nNodes, ncclDebugLogger_t log,
                       const ncclNvlDomainInfo_v5_t* nvl, const ncclTunerConstants_v5_t* constants, const char* abi) {
  useNcclLogger(log);
  auto c = std::make_unique<TunerContext>();
  c->commId = commId;
  c->nRanks = static_cast<int>(std::max<size_t>(nRanks, 1));
  c->nNodes = static_cast<int>(std::clamp<size_t>(nNodes, 1, c->nRanks));
  // The settings as the library reads them, once per load of the plugin
  // (NCCL unloads it with its last communicator). A bad file must not fail
  // the user's communicator: NCCL's model still works.
  std::shared_ptr<const SettingsSnapshot> settings = processSettings();
  const std::string& topoProblem = settings->problem("HOCCL_TOPO_FILE");
  const char* nodeList = getenv("SLURM_JOB_NODELIST");
  std::string why;
  if (!topoProblem.empty()) {
    PLOG_WARN("TUNER/hoccl: %s; tuning as if under one switch", topoProblem.c_str());
    loadFabric("", c->nNodes, "", &c->fabric, &why);
  } else if (!loadFabric(settings->values().topoFile, c->nNodes, nodeList ? nodeList : "", &c->fabric, &why)) {
    PLOG_WARN("TUNER/hoccl: HOCCL_TOPO_FILE: %s; tuning as if under one switch", why.c_str());
    loadFabric("", c->nNodes, "", &c->fabric, &why);
  }
  ProtoLatencies lat = constants ? ProtoLatencies::fromNccl(*constants) : ProtoLatencies::defaults();
  c->model = std::make_unique<NcclModel>(c->nRanks, c->nNodes, c->fabric, lat);

  const std::string& rulesProblem = settings->problem("HOCCL_TUNER_RULES");
  std::string rulesPath = settings->values().tunerRules;
  // NCCL_TUNER_CONFIG_FILE is NCCL's own variable, read as NCCL's example tuner reads it.
  if (rulesPath.empty() && rulesProblem.empty() && getenv("NCCL_TUNER_CONFIG_FILE"))
    rulesPath = getenv("NCCL_TUNER_CONFIG_FILE");
  if (!rulesProblem.empty()) {
    PLOG_WARN("TUNER/hoccl: %s; no rules", rulesProblem.c_str());
  } else if (!rulesPath.empty()) {
    // A regular file of at most 16 MiB: a FIFO or a device named here is
    // refused at once rather than blocking or read without end.
    std::string text;
    const hoccl::Status read = hoccl::readRegularFile(rulesPath, size_t(16) << 20, &text);
    if (!read.ok()) {
      PLOG_WARN("TUNER/hoccl: %s: %s; no rules",
                settings->values().tunerRules.empty() ? "NCCL_TUNER_CONFIG_FILE" : "HOCCL_TUNER_RULES",
                read.message().c_str());
    } else {
      std::vector<std::string> warnings;
      c->rules = parseRules(text, rulesPath, &warnings);
      for (const std::string& w : warnings) PLOG_WARN("TUNER/hoccl: %s", w.c_str());
    }
  }
  std::set<int> leavesUsed(c->fabric.leafOf.begin(), c->fabric.leafOf.end());
  PLOG_INFO(NCCL_INIT | NCCL_TUNING,
            "TUNER/hoccl: comm %#llx (%s): %d ranks on %d nodes under %zu switch(es), node links %.0f Gbit/s, "
            "oversubscription %.1f:1 (%s); %zu rule(s)%s%s%s",
            static_cast<unsigned long long>(commId), abi, c->nRanks, c->nNodes, leavesUsed.size(), c->fabric.nodeGbps,
            c->fabric.oversubscription(), c->fabric.how.c_str(), c->rules.size(), rulesPath.empty() ? "" : " from ",
            rulesPath.c_str(), constants ? "; NCCL's latency constants" : "; default latency constants");
  if (nvl)
    PLOG_INFO(NCCL_TUNING, "TUNER/hoccl: %d NVLink domain(s) of %d-%d ranks", nvl->nNvlDomains,
              nvl->minRanksPerNvlDomain, nvl->maxRanksPerNvlDomain);
  *ctxOut = c.release();
  return ncclSuccess;
}

ncclResult_t tunerGetCollInfo(void* ctx, ncclFunc_t collType, size_t nBytes, int numPipeOps, float** collCostTable,
                              int numAlgo, int numProto, int regBuff, int* nChannels) {
  auto* c = static_cast<TunerContext*>(ctx);
  const int coll = static_cast<int>(collType);
  if (!c || !collCostTable || numAlgo <= 0 || numProto <= 0) return ncclSuccess;
  // NCCL passes float[numAlgo][numProto] cast to float**.
  float* t = reinterpret_cast<float*>(collCostTable);
  const int stride = numProto;
  const int nA = std::min(numAlgo, NCCL_NUM_ALGORITHMS), nP = std::min(numProto, NCCL_NUM_PROTOCOLS);
  std::lock_guard<std::mutex> lock(c->mu);
  const std::pair<int, int> before = pick(t, nA, nP, stride);
  double factors[NCCL_NUM_ALGORITHMS][NCCL_NUM_PROTOCOLS];
  for (int a = 0; a < nA; ++a)
    for (int p = 0; p < nP; ++p) {
      factors[a][p] = 1;
      float& cost = t[a * stride + p];
      if (cost < 0 || coll > ncclFuncAllReduce) continue;  // IGNORE stays IGNORE; only the five collectives
      factors[a][p] = factorFor(c, coll, a, p, nBytes);
      cost = static_cast<float>(cost * factors[a][p]);
    }
  int ruleLine = 0;
  for (const Rule& r : c->rules) {
    if (!ruleMatches(r, coll, nBytes, c->nNodes, c->nRanks, numPipeOps, regBuff)) continue;
    if (r.algo >= nA || r.proto >= nP || t[r.algo * stride + r.proto] < 0) {
      if (c->ignoredRulesLogged.insert(r.line).second)
        PLOG_INFO(NCCL_TUNING, "TUNER/hoccl: rule on line %d asks for %s/%s, which NCCL does not offer here; next rule",
                  r.line, algoName(r.algo), protoName(r.proto));
      continue;
    }
    // The rule's entry must be the strict minimum: ties go to lower indices.
    for (int a = 0; a < nA; ++a)
      for (int p = 0; p < nP; ++p)
        if (t[a * stride + p] == 0.0f) t[a * stride + p] = 1e-3f;
    t[r.algo * stride + r.proto] = 0.0f;
    if (r.channels > 0) *nChannels = r.channels;
    ruleLine = r.line;
    break;
  }
  const std::pair<int, int> after = pick(t, nA, nP, stride);
  if (c->logged.insert(std::make_tuple(coll, sizeBucket(nBytes), numPipeOps)).second && after.first >= 0 &&
      coll <= ncclFuncAllReduce) {
    char why[96] = "";
    if (ruleLine) snprintf(why, sizeof why, "rule on line %d", ruleLine);
    else if (before.first >= 0)
      snprintf(why, sizeof why, "switch penalty x%.2f on NCCL's pick, x%.2f on ours",
               factors[before.first][before.second], factors[after.first][after.second]);
    PLOG_INFO(NCCL_TUNING, "TUNER/hoccl: %s %s (%d op(s)): NCCL %s/%s -> %s/%s (%s)", collName(coll),
              human(nBytes).c_str(), numPipeOps, before.first >= 0 ? algoName(before.first) : "none",
              before.first >= 0 ? protoName(before.second) : "none", algoName(after.first), protoName(after.second),
              why);
  }
  return ncclSuccess;
}

ncclResult_t tunerFinalize(void* ctx) {
  delete static_cast<TunerContext*>(ctx);
  return ncclSuccess;
}

}  // namespace ncclplugin
}  // namespace hoccl
