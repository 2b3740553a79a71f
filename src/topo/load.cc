// Reading topology files from disk (the parsers take text).
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "src/topo/topology.h"

namespace hoccl {
namespace topo {

bool isSlurmTopologyPath(const std::string& path) {
  return path.size() >= 5 && path.compare(path.size() - 5, 5, ".conf") == 0;
}

Status loadOverridesFile(const std::string& path, bool slurm, TopoOverrides* out) {
  FILE* f = fopen(path.c_str(), "rb");
  if (!f) return errorf(hocclInvalidArgument, "cannot open topology file %s: %s", path.c_str(), strerror(errno));
  std::string text;
  char buf[65536];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, f)) > 0) {
    text.append(buf, n);
    if (text.size() > (256u << 20)) {
      fclose(f);
      return errorf(hocclInvalidArgument, "topology file %s is larger than 256 MiB", path.c_str());
    }
  }
  bool failed = ferror(f);
  int err = errno;
  fclose(f);
  if (failed) return errorf(hocclInvalidArgument, "cannot read topology file %s: %s", path.c_str(), strerror(err));
  return slurm ? parseSlurmTopology(text, path, out) : parseTopoFile(text, path, out);
}

}  // namespace topo
}  // namespace hoccl
