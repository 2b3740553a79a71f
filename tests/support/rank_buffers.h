// Each rank's memory for one collective call in the interpreter tests
// (test_cuda_interp.cc on host threads, test_cuda_gpu_interp.cc on a GPU):
// in place one buffer holding both input and output at the offsets NCCL
// gives them, else input then output; one spare byte after either, which
// no run may touch.
#pragma once

#include <algorithm>
#include <cstddef>
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

// Moves each rank's input to inShift bytes past a 16-byte boundary of its
// memory and its output to outShift past one (in place: both by inShift),
// for tests of the data loops' alignments; the bytes between them are
// spares no run may touch. Memory from layOutRanks.
inline void shiftBuffers(std::vector<RankBuffers>* bufs, const ScheduleKey& k, size_t inShift, size_t outShift) {
  if (!inShift && !outShift) return;
  for (RankBuffers& b : *bufs) {
    const size_t size = b.mem.size();
    if (k.inPlace) {
      b.inOff += inShift;
      b.outOff += inShift;
      b.mem.resize(size + inShift);
    } else {
      const size_t inBytes = b.outOff;  // input first, then output, then the spare byte
      b.inOff = inShift;
      b.outOff = (inShift + inBytes + 15) / 16 * 16 + outShift;
      b.mem.resize(b.outOff + size - inBytes);
    }
  }
}

}  // namespace hoccl::test_shapes
