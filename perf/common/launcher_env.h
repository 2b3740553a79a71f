// Where a process sits in a job whose launcher puts rank and size in the
// environment: torchrun-style RANK/WORLD_SIZE, Slurm SLURM_PROCID/
// SLURM_NTASKS, Open MPI OMPI_COMM_WORLD_RANK/SIZE; the rendezvous is
// HOCCL_COMM_ID, or MASTER_ADDR and MASTER_PORT. Shared by the benchmarks
// and `hoccl-topo probe`; it reads the environment and nothing else.
#pragma once

#include <string>

namespace hoccl_launch {

// The first of the variables that is set and not empty, else nullptr.
const char* envOr(const char* a, const char* b = nullptr, const char* c = nullptr);

struct Placement {
  int rank = 0;
  int size = 1;
  const char* rankVar = "";  // the variables they came from, for messages
  const char* sizeVar = "";
};

enum class Launch {
  None,   // no launcher set rank and size
  Found,  // *p filled in; HOCCL_COMM_ID is set when the job has a rendezvous
  Error,  // *error says what is wrong
};

// Reads rank and size. When HOCCL_COMM_ID is unset and MASTER_ADDR and
// MASTER_PORT are set, sets HOCCL_COMM_ID=addr:port (call it before any
// hoccl call: the library reads its settings once). Errors: a rank or size
// that is not a whole number, a rank outside [0, size), a job of several
// processes with no rendezvous.
Launch placementFromEnv(Placement* p, std::string* error);

// Started by an MPI launcher (Open MPI, PMI, PMIx).
bool underMpiLauncher();

}  // namespace hoccl_launch
