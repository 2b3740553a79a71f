// all_gather_perf: nccl-tests' all_gather_perf for hoccl (same flags, same table).
#include "perf/hoccl_main.h"

int main(int argc, char** argv) { return hocclPerfMain(argc, argv, bench::Coll::AllGather); }
