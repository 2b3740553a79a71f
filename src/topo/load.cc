// Reading topology files from disk (the parsers take text).
#include "base/regular_file.h"
#include "src/topo/topology.h"

namespace hoccl {
namespace topo {

bool isSlurmTopologyPath(const std::string& path) {
  return path.size() >= 5 && path.compare(path.size() - 5, 5, ".conf") == 0;
}

Status loadOverridesFile(const std::string& path, bool slurm, TopoOverrides* out) {
  std::string text;
  HOCCL_TRY(readRegularFile(path, size_t(256) << 20, &text).context("topology file"));
  return slurm ? parseSlurmTopology(text, path, out) : parseTopoFile(text, path, out);
}

}  // namespace topo
}  // namespace hoccl
