// Google Benchmark: reduction kernels, every type and op, on each ISA this
// CPU has. Bytes processed count the output; a kernel reads twice as much.
//   bench_dataops --benchmark_filter=float/sum
#include <benchmark/benchmark.h>

#include <cstring>
#include <string>
#include <vector>

#include "src/exec/dataops.h"

using namespace hoccl;

namespace {

void reduceKernel(benchmark::State& state, Isa isa, DType t, RedOp op) {
  const DataOps* ops = dataOpsFor(isa);
  if (!ops) {
    state.SkipWithError("ISA not supported on this CPU");
    return;
  }
  size_t n = static_cast<size_t>(state.range(0)) / dtypeSize(t);
  std::vector<char> a(n * dtypeSize(t)), b(a.size()), out(a.size());
  // Small positive values: no NaN/denormal slow paths in floating types.
  for (size_t i = 0; i < a.size(); ++i) a[i] = b[i] = static_cast<char>(0x3c);
  for (auto _ : state) {
    ops->reduce[static_cast<int>(t)][static_cast<int>(op)](out.data(), a.data(), b.data(), n);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(out.size()));
}

void copyKernel(benchmark::State& state) {
  std::vector<char> a(static_cast<size_t>(state.range(0)), 1), out(a.size());
  for (auto _ : state) {
    copyBytes(out.data(), a.data(), a.size());
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(a.size()));
}

// 256 KiB stays in cache; 64 MiB streams from memory.
const int64_t kSizes[] = {256 << 10, 64 << 20};

int registerAll() {
  for (Isa isa : {Isa::Scalar, Isa::Avx2, Isa::Avx512}) {
    if (!dataOpsFor(isa)) continue;
    for (int t = 0; t < kNumDTypes; ++t)
      for (int op = 0; op < kNumRedOps; ++op) {
        std::string name = std::string("reduce/") + isaName(isa) + "/" + dtypeName(static_cast<DType>(t)) + "/" +
                           redOpName(static_cast<RedOp>(op));
        auto* b = benchmark::RegisterBenchmark(name.c_str(), reduceKernel, isa, static_cast<DType>(t),
                                               static_cast<RedOp>(op));
        for (int64_t s : kSizes) b->Arg(s);
      }
  }
  auto* c = benchmark::RegisterBenchmark("copy/memcpy", copyKernel);
  for (int64_t s : kSizes) c->Arg(s);
  return 0;
}

const int registered = registerAll();

}  // namespace

BENCHMARK_MAIN();
