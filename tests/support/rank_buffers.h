// Each rank's memory for one collective call in the interpreter tests
// (test_cuda_interp.cc on host threads, test_cuda_gpu_interp.cc on a GPU):
// in place one buffer holding both input and output at the offsets NCCL
// gives them, else input then output; one spare byte after either, which
// no run may touch.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "algorithms/schedule.h"

namespace hoccl::test_shapes {

struct RankBuffers {
  std::vector<uint8_t> mem;
  uint64_t inOff = 0, outOff = 0;  // bytes
  const void* in() const { return mem.data() + inOff; }
  void* out() { return mem.data() + outOff; }
};

// Zeroed memory for every rank of the call `k` describes (k.rank ignored),
// elements of `esize` bytes.
inline std::vector<RankBuffers> layOutRanks(ScheduleKey k, size_t esize) {
  std::vector<RankBuffers> out(k.nranks);
  for (int r = 0; r < k.nranks; ++r) {
    k.rank = r;
    const uint64_t in = inputCount(k), outc = outputCount(k);
    RankBuffers& b = out[r];
    if (k.inPlace) {
      b.mem.resize(std::max(in, outc) * esize + 1);
      const uint64_t off = inPlaceOffset(k) * esize;
      if (k.coll == CollKind::AllGather) b.inOff = off;
      if (k.coll == CollKind::ReduceScatter) b.outOff = off;
    } else {
      b.mem.resize((in + outc) * esize + 1);
      b.outOff = in * esize;
    }
  }
  return out;
}

}  // namespace hoccl::test_shapes
