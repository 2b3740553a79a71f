// The machine a tool should cost, from its command line: a rectangular
// shape (--nodes, --ranks-per-node, --leaves, link rates) or a topology file
// (ours or a Slurm topology.conf; a dump from HOCCL_TOPO_DUMP_FILE carries
// its ranks), and the tune file's links and rules. Shared by hoccl-sim and
// hoccl-info --dump-selection.
#pragma once

#include <string>
#include <vector>

#include "base/error.h"
#include "src/tune/tuner.h"

namespace hoccl {
namespace tune {

struct MachineArgs {
  int nodes = 2, ranksPerNode = 4, leaves = 1;
  int nics = 1;  // network links (rails) per node, each of nodeGbit
  double nodeGbit = -1, uplinkGbit = -1;  // -1: the topology's, else the default
  double netLatencyUs = -1, shmGbps = -1, oversubscription = 1;
  double nodeMemGbps = -1, reduceGbps = -1, reduceMemRatio = -1;  // -1: the tune file's, else the default
  double msgCpuUs = -1, netMsgCpuUs = -1, localMsgCpuUs = -1;  // likewise
  std::string topoFile;  // HOCCL_TOPO_FILE by default
  std::string tuneFile;  // HOCCL_TUNE_FILE by default
  bool shapeGiven = false;
  bool threads = false;  // a node's ranks are threads of one process (--ranks-as-threads)
};

// Consumes the options it knows from argv[*i] (advancing *i past a value);
// returns false when argv[*i] is not one of them. Bad values: *err.
bool parseMachineArg(int argc, char** argv, int* i, MachineArgs* a, std::string* err);
std::string machineArgsHelp();

// Builds the machine and reads the tune file.
Status buildMachine(const MachineArgs& a, Machine* m, TuneFile* tune, std::string* description);

}  // namespace tune
}  // namespace hoccl
