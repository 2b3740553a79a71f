// The interpreter's data loops (interp.h) in 16-byte vectors, written once
// for g++ and nvcc. Where every pointer a loop touches sits at the same
// offset from a 16-byte boundary, the elements before the first boundary
// (the head) go one at a time, then each lane moves 16 bytes per iteration
// (a uint4 load and store on the GPU, a 16-byte memcpy on the host) and
// applies the reduction element by element inside it, then the elements
// after the last whole vector (the tail) go one at a time again. Pointers
// at different offsets run element by element throughout. Which element a
// lane takes changes, what is computed for each element does not: results
// are the same bits as the element loop's.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "base/hd.h"

namespace hoccl::cuda {

inline constexpr uint64_t kVecBytes = 16;

// 16 bytes of elements of T.
template <class T>
struct alignas(16) Pack16 {
  static constexpr uint32_t kElems = uint32_t(kVecBytes / sizeof(T));
  T e[kElems];
};

#if !defined(__CUDA_ARCH__)
// The host's check of what a GPU would fault on: a 16-byte access off a
// 16-byte boundary is a bug in the split, so the host interpreter's tests
// stop on it, saying so.
inline void checkVecAligned(const void* p, const char* what) {
  if ((reinterpret_cast<uintptr_t>(p) & (kVecBytes - 1)) == 0) return;
  fprintf(stderr, "hoccl interp_vec.h: 16-byte %s at %p, not 16-byte aligned (a GPU would fault)\n", what, p);
  abort();
}
#endif

// p must be 16-byte aligned (vecSplit's promise).
template <class T>
HOCCL_HD inline Pack16<T> load16(const T* p) {
  Pack16<T> v;
#if defined(__CUDA_ARCH__)
  const uint4 u = *reinterpret_cast<const uint4*>(p);
  memcpy(&v, &u, sizeof v);
#else
  checkVecAligned(p, "load");
  memcpy(&v, p, sizeof v);
#endif
  return v;
}

template <class T>
HOCCL_HD inline void store16(T* p, const Pack16<T>& v) {
#if defined(__CUDA_ARCH__)
  uint4 u;
  memcpy(&u, &v, sizeof u);
  *reinterpret_cast<uint4*>(p) = u;
#else
  checkVecAligned(p, "store");
  memcpy(p, &v, sizeof v);
#endif
}

// How a loop of n elements splits: elements [0, head) one at a time,
// `vecs` vectors from element head, the rest one at a time.
struct VecSplit {
  uint64_t head = 0, vecs = 0;
};

// The split for n elements of T at the given pointers (null ones are not
// touched by the loop and do not count).
template <class T>
HOCCL_HD inline VecSplit vecSplit(uint64_t n, const void* p0, const void* p1 = nullptr, const void* p2 = nullptr,
                                  const void* p3 = nullptr) {
  const void* ps[4] = {p0, p1, p2, p3};
  uintptr_t ref = 0, differ = 0;
  bool first = true;
  for (const void* p : ps) {
    if (!p) continue;
    const uintptr_t a = reinterpret_cast<uintptr_t>(p);
    if (first) ref = a;
    differ |= (a ^ ref) & (kVecBytes - 1);
    first = false;
  }
  const uint64_t mis = ref & (kVecBytes - 1);
  VecSplit s;
  if (differ || mis % sizeof(T)) {
    s.head = n;  // no common boundary: all one at a time
    return s;
  }
  const uint64_t head = ((kVecBytes - mis) & (kVecBytes - 1)) / sizeof(T);
  s.head = head < n ? head : n;
  s.vecs = (n - s.head) / Pack16<T>::kElems;
  return s;
}

// Runs one(j) for the head and tail elements and vec(j) for the vector at
// element j, spread over the lanes of l.
template <class T, class L, class One, class Vec>
HOCCL_HD inline void forEachSplit(L& l, uint64_t n, const VecSplit& s, One&& one, Vec&& vec) {
  constexpr uint64_t K = Pack16<T>::kElems;
  const uint64_t lane = l.lane(), lanes = l.lanes();
  for (uint64_t v = lane; v < s.vecs; v += lanes) vec(s.head + v * K);
  for (uint64_t j = lane; j < s.head; j += lanes) one(j);
  for (uint64_t j = s.head + s.vecs * K + lane; j < n; j += lanes) one(j);
}

// Vectors a lane has in flight at once in forEachSplitBatched. One 16-byte
// load per lane at a time leaves a CTA waiting on memory latency (about
// 8 KiB in flight for 512 lanes: single-digit GB/s per channel on an
// H100); four loads issued before the first store give the memory system
// four times the work to overlap.
// A reduction of 1-byte elements unpacks each vector into 16 registers,
// so it does not batch (four spilled on sm_80/90/100, two on sm_100); 8-byte
// ones batch two (four spilled the avg kernels once steps could reduce locally).
inline constexpr uint32_t kVecBatch = 4;
template <class T>
inline constexpr uint32_t kReduceBatch = sizeof(T) == 1 ? 1 : sizeof(T) == 8 ? 2 : kVecBatch;

// forEachSplit with the vector part in batches: a lane calls load(j, k) for
// up to Batch vectors (k = 0, 1, ...; lanes interleave, so each k is one
// contiguous sweep of the CTA) before it calls store(j, k) for any of them.
// load keeps what it read in its slot k; store computes and writes. Loads of
// a batch run before its stores, so a store may not feed a later load of the
// same batch: the loops here write only the elements they read (in place at
// the same index, or to other buffers).
template <class T, uint32_t Batch, class L, class One, class Load, class Store>
HOCCL_HD inline void forEachSplitBatched(L& l, uint64_t n, const VecSplit& s, One&& one, Load&& load,
                                         Store&& store) {
  constexpr uint64_t K = Pack16<T>::kElems;
  const uint64_t lane = l.lane(), lanes = l.lanes();
  for (uint64_t base = lane; base < s.vecs; base += lanes * Batch) {
    HOCCL_UNROLL
    for (uint32_t k = 0; k < Batch; ++k) {
      const uint64_t v = base + k * lanes;
      if (v < s.vecs) load(s.head + v * K, k);
    }
    HOCCL_UNROLL
    for (uint32_t k = 0; k < Batch; ++k) {
      const uint64_t v = base + k * lanes;
      if (v < s.vecs) store(s.head + v * K, k);
    }
  }
  for (uint64_t j = lane; j < s.head; j += lanes) one(j);
  for (uint64_t j = s.head + s.vecs * K + lane; j < n; j += lanes) one(j);
}

}  // namespace hoccl::cuda
