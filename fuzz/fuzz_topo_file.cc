// The topology file (HOCCL_TOPO_FILE, docs/topology-file.md) and the node
// records ranks exchange at init, which use the same format: JSON parser,
// field checks, then the consumers of what they accept.
#include <cstddef>
#include <cstdint>
#include <string>

#include "src/base/json.h"
#include "src/topo/topology.h"

using namespace hoccl;

// Hostlists of a million names are allowed (and tested in test_topo); here
// they would only make each input slow.
const topo::ParseLimits kLimits{1000, 4000};

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  json::Value v;
  if (json::parse(text, &v).ok()) {
    // Whatever parses must write back and parse again to the same text.
    std::string once = json::write(v, 0);
    json::Value again;
    if (!json::parse(once, &again).ok() || json::write(again, 0) != once) __builtin_trap();
  }
  topo::TopoOverrides o;
  if (topo::parseTopoFile(text, "fuzz.json", &o, kLimits).ok()) {
    topo::System sys;
    if (topo::systemFromDump(o, &sys).ok()) {
      topo::describeSystem(sys);
      topo::linkMatrix(sys);
      topo::toTopoFile(sys);
    }
  }
  topo::NodeInfo node;
  if (topo::deserializeNode(text, &node).ok()) topo::serializeNode(node);
  return 0;
}
