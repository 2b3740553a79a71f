// The topology file (HOCCL_TOPO_FILE, docs/topology-file.md) and the node
// records ranks exchange at init, which use the same format: JSON parser,
// field checks, then the consumers of what they accept.
#include <cstddef>
#include <cstdint>
#include <string>

#include "base/json.h"
#include "src/topo/topology.h"

using namespace hoccl;

// Hostlists of a million names are allowed (and tested in test_topo); here
// they would only make each input slow.
const topo::ParseLimits kLimits{1000, 4000};

// The byte at (line, column) of text, or 0 if there is none.
char byteAt(const std::string& text, int line, int column) {
  size_t at = 0;
  for (int l = 1; l < line; ++l) {
    at = text.find('\n', at);
    if (at == std::string::npos) return 0;
    ++at;
  }
  at += static_cast<size_t>(column - 1);
  return line >= 1 && column >= 1 && at < text.size() ? text[at] : 0;
}

// Every value and key must point at its own first byte.
void checkPositions(const std::string& text, const json::Value& v) {
  char c = byteAt(text, v.line, v.column);
  bool ok = false;
  switch (v.type()) {
    case json::Type::Null: ok = c == 'n'; break;
    case json::Type::Bool: ok = c == (v.asBool() ? 't' : 'f'); break;
    case json::Type::Number: ok = c == '-' || (c >= '0' && c <= '9'); break;
    case json::Type::String: ok = c == '"'; break;
    case json::Type::Array: ok = c == '['; break;
    case json::Type::Object: ok = c == '{'; break;
  }
  if (!ok) __builtin_trap();
  for (const json::Value& e : v.items()) checkPositions(text, e);
  for (const json::Member& m : v.members()) {
    if (byteAt(text, m.line, m.column) != '"') __builtin_trap();
    checkPositions(text, m.value);
  }
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  json::Value v;
  if (json::parse(text, &v).ok()) {
    checkPositions(text, v);
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
