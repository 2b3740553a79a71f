// alltoall_perf: nccl-tests' alltoall_perf for hoccl (same flags, same table).
#include "perf/hoccl_main.h"

int main(int argc, char** argv) { return hocclPerfMain(argc, argv, bench::Coll::AllToAll); }
