// Slurm topology.conf (HOCCL_TOPO_FILE=*.conf) and the hostlist
// expressions inside it.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "src/topo/topology.h"

using namespace hoccl;

// Hostlists of a million names are allowed (and tested in test_topo); here
// they would only make each input slow.
const topo::ParseLimits kLimits{1000, 4000};

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  topo::TopoOverrides o;
  if (topo::parseSlurmTopology(text, "fuzz.conf", &o, kLimits).ok()) {
    // Place a few nodes under what was parsed, as init does.
    topo::System sys;
    for (int i = 0; i < 3 && i < static_cast<int>(o.nodes.size() + 3); ++i) {
      topo::NodeInfo n;
      n.hostId = n.hostname = "n" + std::to_string(i);
      sys.nodes.push_back(n);
      sys.ranks.push_back({i, 0, 0});
    }
    if (topo::applyOverrides(o, &sys).ok()) topo::describeSystem(sys);
  }
  // Each line's first word alone, as a hostlist.
  std::vector<std::string> names;
  topo::expandHostlist(text.substr(0, text.find_first_of(" \n")), &names, kLimits.namesPerHostlist);
  return 0;
}
