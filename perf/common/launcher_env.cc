#include "perf/common/launcher_env.h"

#include <cerrno>
#include <climits>
#include <cstdlib>

namespace hoccl_launch {

namespace {

// The name of the first of the variables that is set and not empty.
const char* firstSet(const char* a, const char* b, const char* c) {
  for (const char* name : {a, b, c}) {
    const char* v = name ? getenv(name) : nullptr;
    if (v && *v) return name;
  }
  return nullptr;
}

bool wholeNumber(const char* s, int* out) {
  char* end = nullptr;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (errno != 0 || end == s || *end != '\0' || v < INT_MIN || v > INT_MAX) return false;
  *out = static_cast<int>(v);
  return true;
}

}  // namespace

Launch placementFromEnv(Placement* p, std::string* error) {
  const char* rankVar = firstSet("RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK");
  const char* sizeVar = firstSet("WORLD_SIZE", "SLURM_NTASKS", "OMPI_COMM_WORLD_SIZE");
  if (!rankVar || !sizeVar) return Launch::None;
  const char* rankS = getenv(rankVar);
  const char* sizeS = getenv(sizeVar);
  p->rankVar = rankVar;
  p->sizeVar = sizeVar;
  if (!wholeNumber(sizeS, &p->size) || p->size < 1) {
    *error = std::string(sizeVar) + "=\"" + sizeS + "\" is not a process count (a whole number, at least 1)";
    return Launch::Error;
  }
  if (!wholeNumber(rankS, &p->rank) || p->rank < 0 || p->rank >= p->size) {
    *error = std::string(rankVar) + "=\"" + rankS + "\" is not a rank of a job of " + std::to_string(p->size) +
             " processes (" + sizeVar + "): it must be 0 to " + std::to_string(p->size - 1);
    return Launch::Error;
  }
  if (!envOr("HOCCL_COMM_ID")) {
    const char* addr = envOr("MASTER_ADDR");
    const char* port = envOr("MASTER_PORT");
    if (addr && port) {
      std::string id = std::string(addr) + ":" + port;
      setenv("HOCCL_COMM_ID", id.c_str(), 1);
    } else if (p->size > 1) {
      *error = "rank " + std::to_string(p->rank) + " of " + std::to_string(p->size) + " (" + rankVar + ", " +
               sizeVar + ") has no rendezvous: set MASTER_ADDR and MASTER_PORT, or HOCCL_COMM_ID=host:port";
      return Launch::Error;
    }
  }
  return Launch::Found;
}

const char* envOr(const char* a, const char* b, const char* c) {
  const char* name = firstSet(a, b, c);
  return name ? getenv(name) : nullptr;
}

bool underMpiLauncher() { return envOr("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK") != nullptr; }

}  // namespace hoccl_launch
