// The Gloo peer of the benchmark driver: one rank of a connected
// gloo::Context, running each collective with one of Gloo's algorithms
// (chosen with --extra), so bench::runBenchmark measures Gloo exactly as it
// measures hoccl.
#pragma once

#include <memory>
#include <string>

#include <gloo/context.h>

#include "perf/common/bench.h"

namespace glooperf {

// Resolves --extra for `coll` ("" picks the default). Returns false and the
// accepted names in *choices if `requested` is not one of them.
bool resolveAlgorithm(bench::Coll coll, const std::string& requested, std::string* algo, std::string* choices);

// The backend for this rank; `algo` must come from resolveAlgorithm.
std::unique_ptr<bench::Backend> makeGlooBackend(std::shared_ptr<gloo::Context> context, bench::Coll coll,
                                                const std::string& algo);

}  // namespace glooperf
