// The NCCL tuner plugin's rule file (NCCL_TUNER_CONFIG_FILE,
// HOCCL_TUNER_RULES): parse, check what was accepted, write each rule back
// as a line and parse it again (the same rule must come back), then match
// the rules as getCollInfo does.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "hoccl_nccl/tuner.h"
#include "plugin/tuner/rules.h"

using namespace hoccl::ncclplugin;

namespace {

void check(bool ok) {
  if (!ok) abort();
}

std::string line(const Rule& r) {
  return std::string(collName(r.coll)) + "," + std::to_string(r.minBytes) + "," + std::to_string(r.maxBytes) + "," +
         algoName(r.algo) + "," + protoName(r.proto) + "," + std::to_string(r.channels) + "," +
         std::to_string(r.nNodes) + "," + std::to_string(r.nRanks) + "," + std::to_string(r.numPipeOps) + "," +
         std::to_string(r.regBuff) + "\n";
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 64 * 1024) return 0;
  const std::string text(reinterpret_cast<const char*>(data), size);
  std::vector<std::string> warnings;
  const std::vector<Rule> rules = parseRules(text, "fuzz.rules", &warnings);
  size_t lines = 1;
  for (char c : text) lines += c == '\n';
  check(rules.size() + warnings.size() <= lines);
  for (const Rule& r : rules) {
    check(r.coll >= 0 && r.coll < 5 && r.algo >= 0 && r.algo < NCCL_NUM_ALGORITHMS && r.proto >= 0 &&
          r.proto < NCCL_NUM_PROTOCOLS && r.minBytes <= r.maxBytes && r.line >= 1 &&
          static_cast<size_t>(r.line) <= lines);
    std::vector<std::string> w2;
    const std::vector<Rule> again = parseRules(line(r), "again", &w2);
    check(w2.empty() && again.size() == 1);
    const Rule& a = again[0];
    check(a.coll == r.coll && a.minBytes == r.minBytes && a.maxBytes == r.maxBytes && a.algo == r.algo &&
          a.proto == r.proto && a.channels == r.channels && a.nNodes == r.nNodes && a.nRanks == r.nRanks &&
          a.numPipeOps == r.numPipeOps && a.regBuff == r.regBuff);
    check(ruleMatches(r, r.coll, r.minBytes, r.nNodes, r.nRanks, r.numPipeOps, r.regBuff));
    check(ruleMatches(r, r.coll, r.maxBytes, r.nNodes, r.nRanks, r.numPipeOps, r.regBuff));
    if (r.maxBytes != SIZE_MAX) check(!ruleMatches(r, r.coll, r.maxBytes + 1, r.nNodes, r.nRanks, r.numPipeOps, r.regBuff));
  }
  return 0;
}
