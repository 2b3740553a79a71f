#include "plugin/tuner/rules.h"

#include <strings.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <sstream>

#include "hoccl_nccl/tuner.h"

namespace hoccl {
namespace ncclplugin {
namespace {

const char* const kColls[] = {"broadcast", "reduce", "allgather", "reducescatter", "allreduce"};
const char* const kAlgos[] = {"tree", "ring", "collnet_direct", "collnet_chain", "nvls", "nvls_tree", "pat"};
const char* const kProtos[] = {"ll", "ll128", "simple"};

template <size_t N>
int lookup(const char* const (&names)[N], const std::string& s) {
  for (size_t i = 0; i < N; ++i)
    if (strcasecmp(names[i], s.c_str()) == 0) return static_cast<int>(i);
  return -1;
}

std::string trim(const std::string& s) {
  size_t a = s.find_first_not_of(" \t\r"), b = s.find_last_not_of(" \t\r");
  return a == std::string::npos ? "" : s.substr(a, b - a + 1);
}

bool toInt(const std::string& s, long long* out) {
  char* end = nullptr;
  errno = 0;
  long long v = strtoll(s.c_str(), &end, 10);
  if (errno || end == s.c_str() || *end) return false;
  *out = v;
  return true;
}

}  // namespace

std::vector<Rule> parseRules(const std::string& text, const std::string& path, std::vector<std::string>* warnings) {
  std::vector<Rule> rules;
  std::istringstream in(text);
  std::string raw;
  int lineNo = 0;
  while (std::getline(in, raw)) {
    ++lineNo;
    std::string line = trim(raw.substr(0, raw.find('#')));
    if (line.empty()) continue;
    std::vector<std::string> f;
    std::stringstream ss(line);
    std::string item;
    while (std::getline(ss, item, ',')) f.push_back(trim(item));
    if (!line.empty() && line.back() == ',') f.push_back("");
    auto bad = [&](const std::string& why) {
      warnings->push_back(path + ":" + std::to_string(lineNo) + ": " + why + "; line skipped");
    };
    if (f.size() < 8 || f.size() > 10) {
      bad("expected 8 to 10 comma-separated fields, found " + std::to_string(f.size()));
      continue;
    }
    Rule r;
    r.line = lineNo;
    r.coll = lookup(kColls, f[0]);
    r.algo = lookup(kAlgos, f[3]);
    r.proto = lookup(kProtos, f[4]);
    if (r.coll < 0) { bad("unknown collective '" + f[0] + "'"); continue; }
    if (r.algo < 0) { bad("unknown algorithm '" + f[3] + "'"); continue; }
    if (r.proto < 0) { bad("unknown protocol '" + f[4] + "'"); continue; }
    long long v[7] = {0, 0, -1, -1, -1, -1, -1};
    bool ok = true;
    for (size_t i = 0; i < 7 && ok; ++i) {
      size_t field = i < 2 ? i + 1 : i + 3;  // min,max then channels,nNodes,nRanks,numPipeOps,regBuff
      if (field >= f.size()) break;
      if (!toInt(f[field], &v[i])) {
        bad("field " + std::to_string(field + 1) + " '" + f[field] + "' is not an integer");
        ok = false;
      }
    }
    // channels .. regBuff are ints in NCCL's example too: a larger value
    // must not wrap around into a different count.
    for (size_t i = 2; i < 7 && ok; ++i)
      if (v[i] < INT_MIN || v[i] > INT_MAX) {
        bad("field " + std::to_string(i + 4) + " '" + f[i + 3] + "' is out of range");
        ok = false;
      }
    if (!ok) continue;
    if (v[0] < 0 || v[1] < v[0]) { bad("byte range " + f[1] + ".." + f[2] + " is empty or negative"); continue; }
    r.minBytes = static_cast<size_t>(v[0]);
    r.maxBytes = static_cast<size_t>(v[1]);
    r.channels = static_cast<int>(v[2]);
    r.nNodes = static_cast<int>(v[3]);
    r.nRanks = static_cast<int>(v[4]);
    r.numPipeOps = static_cast<int>(v[5]);
    r.regBuff = static_cast<int>(v[6]);
    rules.push_back(r);
  }
  return rules;
}

bool ruleMatches(const Rule& r, int coll, size_t nBytes, int nNodes, int nRanks, int numPipeOps, int regBuff) {
  return r.coll == coll && nBytes >= r.minBytes && nBytes <= r.maxBytes && (r.nNodes == -1 || r.nNodes == nNodes) &&
         (r.nRanks == -1 || r.nRanks == nRanks) && (r.numPipeOps == -1 || r.numPipeOps == numPipeOps) &&
         (r.regBuff == -1 || r.regBuff == regBuff);
}

const char* algoName(int algo) { return algo >= 0 && algo < NCCL_NUM_ALGORITHMS ? kAlgos[algo] : "?"; }
const char* protoName(int proto) { return proto >= 0 && proto < NCCL_NUM_PROTOCOLS ? kProtos[proto] : "?"; }
const char* collName(int coll) { return coll >= 0 && coll < 5 ? kColls[coll] : "other"; }

}  // namespace ncclplugin
}  // namespace hoccl
