// The rule file of NCCL's example tuner (plugins/tuner/example), read the
// same way: one CSV rule a line, '#' comments, fields
//   collective,min_bytes,max_bytes,algorithm,protocol,channels,nNodes,nRanks[,numPipeOps[,regBuff]]
// with -1 for "any" (channels: -1 keeps NCCL's count). Unlike the example,
// an unknown collective, algorithm or protocol name is reported and the
// line skipped instead of silently becoming allreduce/ring/simple.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace hoccl {
namespace ncclplugin {

struct Rule {
  int coll = 0;             // ncclFunc_t
  size_t minBytes = 0, maxBytes = 0;
  int algo = 0, proto = 0;  // NCCL_ALGO_* / NCCL_PROTO_*
  int channels = -1;
  int nNodes = -1, nRanks = -1, numPipeOps = -1, regBuff = -1;
  int line = 0;
};

// Parses `text`; problems (one line each, naming file and line) go to
// `warnings`, and those lines are skipped.
std::vector<Rule> parseRules(const std::string& text, const std::string& path, std::vector<std::string>* warnings);

bool ruleMatches(const Rule& r, int coll, size_t nBytes, int nNodes, int nRanks, int numPipeOps, int regBuff);

const char* algoName(int algo);    // "tree", "ring", ... as in the rule file
const char* protoName(int proto);  // "ll", "ll128", "simple"
const char* collName(int coll);    // "allreduce", ...; "other" beyond them

}  // namespace ncclplugin
}  // namespace hoccl
