// What differs between the torch versions the backend builds against, in
// one place: torch 1.13 (Debian 12) and torch 2.x (Debian 13: 2.6).
//
//                        torch 1.13                     torch 2.x
//   base class           c10d::ProcessGroup             c10d::Backend (torch wraps it in a
//                                                       ProcessGroup per device type)
//   PREMUL_SUM factor    tensor_factors (a vector)      tensor_factor (one tensor)
//   coalesced tensor     (none)                         allgather_into_tensor_coalesced,
//   collectives                                         reduce_scatter_tensor_coalesced, and
//                                                       startCoalescing / endCoalescing
//
// Everything else (the methods' signatures, Work, Store, the options
// structs) is the same in both, so the backend is one source.
#pragma once

#include <torch/csrc/api/include/torch/version.h>

#if TORCH_VERSION_MAJOR >= 2
#define HOCCL_TORCH2 1
#include <torch/csrc/distributed/c10d/Backend.hpp>
#else
#define HOCCL_TORCH2 0
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#endif
#include <torch/csrc/distributed/c10d/Types.hpp>

// Marks the methods that torch 2.x declares virtual and 1.13 lacks.
#if HOCCL_TORCH2
#define HOCCL_TORCH2_OVERRIDE override
#else
#define HOCCL_TORCH2_OVERRIDE
#endif

namespace hoccl_torch {

#if HOCCL_TORCH2
using BaseGroup = c10d::Backend;
#else
using BaseGroup = c10d::ProcessGroup;
#endif

// PREMUL_SUM's factor as a tensor, or undefined when it is a double.
inline at::Tensor premulFactorTensor(const c10d::NCCLPreMulSumSupplement& s) {
#if HOCCL_TORCH2
  return s.tensor_factor;
#else
  return s.tensor_factors.empty() ? at::Tensor() : s.tensor_factors[0];
#endif
}

}  // namespace hoccl_torch
