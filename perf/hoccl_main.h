// Entry point of hoccl's perf programs: picks the launch mode (threads,
// --np processes, mpirun, or a launcher's environment), creates the
// communicators and runs the shared benchmark driver.
#pragma once

#include "perf/common/bench.h"

int hocclPerfMain(int argc, char** argv, bench::Coll coll);
