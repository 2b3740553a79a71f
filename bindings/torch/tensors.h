// The backend's tensor checks and conversions: which hoccl type and op a
// tensor and a torch reduction become, what a method accepts, and dense
// staging for non-contiguous tensors. Included by process_group_hoccl.cc
// only.
#pragma once

#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include <ATen/ATen.h>

#include "torch_compat.h"

#include <hoccl.h>

namespace hoccl_torch {

[[noreturn]] inline void fail(const std::string& msg) { throw std::runtime_error("hoccl: " + msg); }

// The hoccl element type of a tensor, and how many hoccl elements one torch
// element is (complex numbers travel as pairs of reals).
struct Elem {
  hocclDataType_t type;
  int64_t perElement;
};

inline Elem elemOf(const at::Tensor& t, const std::string& method) {
  switch (t.scalar_type()) {
    case at::kFloat: return {hocclFloat32, 1};
    case at::kDouble: return {hocclFloat64, 1};
    case at::kHalf: return {hocclFloat16, 1};
    case at::kBFloat16: return {hocclBfloat16, 1};
    case at::kChar: return {hocclInt8, 1};
    case at::kByte: return {hocclUint8, 1};
    case at::kBool: return {hocclUint8, 1};  // torch stores bool as one byte, 0 or 1
    case at::kInt: return {hocclInt32, 1};
    case at::kLong: return {hocclInt64, 1};
    case at::kComplexFloat: return {hocclFloat32, 2};
    case at::kComplexDouble: return {hocclFloat64, 2};
    default:
      fail(method + ": dtype " + c10::toString(t.scalar_type()) +
           " is not supported (hoccl has float32, float64, float16, bfloat16, int8, uint8, int32, int64; "
           "bool and complex are carried as uint8 and pairs of reals)");
  }
}

inline const char* opName(c10d::ReduceOp::RedOpType op) {
  switch (op) {
    case c10d::ReduceOp::SUM: return "SUM";
    case c10d::ReduceOp::AVG: return "AVG";
    case c10d::ReduceOp::PRODUCT: return "PRODUCT";
    case c10d::ReduceOp::MIN: return "MIN";
    case c10d::ReduceOp::MAX: return "MAX";
    case c10d::ReduceOp::BAND: return "BAND";
    case c10d::ReduceOp::BOR: return "BOR";
    case c10d::ReduceOp::BXOR: return "BXOR";
    case c10d::ReduceOp::PREMUL_SUM: return "PREMUL_SUM";
    default: return "UNUSED";
  }
}

// A reduction for hoccl: a built-in op, or PREMUL_SUM's factor (a 0-d
// tensor of the hoccl element type) from which the worker makes a
// hocclRedOpCreatePreMulSum op for the call.
struct RedOp {
  hocclRedOp_t op = hocclSum;
  at::Tensor factor;
};

// hoccl's op for a torch op on tensor t. On bool (0 or 1 in a byte) SUM is
// a logical or (MAX) and PRODUCT a logical and (MIN), as in ProcessGroupNCCL;
// AVG of bools has no bool result. Complex numbers reduce as pairs of reals,
// which is right for SUM, AVG and PREMUL_SUM with a real factor.
inline RedOp redOpOf(const c10d::ReduceOp& reduceOp, const at::Tensor& t, const std::string& method) {
  auto op = reduceOp.op_;
  bool isBool = t.scalar_type() == at::kBool;
  if (t.is_complex() && op != c10d::ReduceOp::SUM && op != c10d::ReduceOp::AVG &&
      op != c10d::ReduceOp::PREMUL_SUM)
    fail(method + ": reduce op " + opName(op) + " is not defined on complex tensors (SUM and AVG are)");
  switch (op) {
    case c10d::ReduceOp::SUM: return {isBool ? hocclMax : hocclSum, {}};
    case c10d::ReduceOp::PRODUCT: return {isBool ? hocclMin : hocclProd, {}};
    case c10d::ReduceOp::MIN: return {hocclMin, {}};
    case c10d::ReduceOp::MAX: return {hocclMax, {}};
    case c10d::ReduceOp::AVG:
      if (isBool) fail(method + ": reduce op AVG is not supported on bool tensors");
      return {hocclAvg, {}};
    case c10d::ReduceOp::PREMUL_SUM: {
      if (isBool) fail(method + ": reduce op PREMUL_SUM is not supported on bool tensors");
      auto* sup = dynamic_cast<c10d::NCCLPreMulSumSupplement*>(reduceOp.supplement_.get());
      if (!sup)
        fail(method + ": reduce op PREMUL_SUM arrived without its factor "
                      "(make it with torch.distributed._make_nccl_premul_sum)");
      auto real = c10::toRealValueType(t.scalar_type());
      at::Tensor f;
      const at::Tensor given = premulFactorTensor(*sup);
      if (!given.defined()) {
        f = at::scalar_tensor(sup->double_factor, at::TensorOptions().dtype(real));
      } else {
        if (given.numel() != 1 || !given.device().is_cpu() || given.is_complex())
          fail(method + ": PREMUL_SUM's factor must be one real number on the CPU");
        f = given.detach().to(real).reshape({});
      }
      return {hocclSum, f.contiguous()};
    }
    default:
      fail(method + ": reduce op " + opName(op) +
           " is not supported (hoccl reduces with SUM, AVG, PRODUCT, MIN, MAX and PREMUL_SUM)");
  }
}

// The hoccl op of one call: PREMUL_SUM's is made on the communicator for
// the call and freed after it.
class CallOp {
 public:
  CallOp(const RedOp& r, hocclDataType_t type, hocclComm_t comm,
         const std::function<void(hocclResult_t, const char*)>& check)
      : op(r.op), comm_(comm) {
    if (!r.factor.defined()) return;
    check(hocclRedOpCreatePreMulSum(&op, r.factor.data_ptr(), type, hocclScalarHostImmediate, comm),
          "hocclRedOpCreatePreMulSum");
    made_ = true;
  }
  ~CallOp() {
    if (made_) hocclRedOpDestroy(op, comm_);
  }
  CallOp(const CallOp&) = delete;
  CallOp& operator=(const CallOp&) = delete;
  hocclRedOp_t op;

 private:
  hocclComm_t comm_;
  bool made_ = false;
};

inline void checkTensor(const at::Tensor& t, const std::string& method) {
  if (!t.defined()) fail(method + ": a tensor is undefined");
  if (t.is_sparse()) fail(method + ": sparse tensors are not supported");
  if (!t.device().is_cpu())
    fail(method + ": only CPU tensors are supported so far; got a tensor on " + t.device().str());
  (void)elemOf(t, method);
}

inline void checkOne(const std::vector<at::Tensor>& tensors, const std::string& method) {
  if (tensors.size() != 1)
    fail(method + ": takes one tensor per process (got " + std::to_string(tensors.size()) + ")");
  checkTensor(tensors[0], method);
}

inline void checkSameType(const at::Tensor& a, const at::Tensor& b, const std::string& method) {
  if (a.scalar_type() != b.scalar_type())
    fail(method + ": tensors of different dtypes (" + c10::toString(a.scalar_type()) + " and " +
         c10::toString(b.scalar_type()) + ")");
}

inline void checkRoot(int64_t root, int size, const std::string& method) {
  if (root < 0 || root >= size)
    fail(method + ": root rank " + std::to_string(root) + " is out of range [0, " + std::to_string(size) + ")");
}

// hoccl reads and writes dense memory: a non-contiguous tensor goes through
// a contiguous copy, and results are copied back into it.
inline at::Tensor dense(const at::Tensor& t) { return t.is_contiguous() ? t : t.contiguous(); }
inline void copyBack(at::Tensor& user, const at::Tensor& staged) {
  if (!user.is_same(staged)) user.copy_(staged);
}

inline size_t countOf(const at::Tensor& t) {
  return static_cast<size_t>(t.numel() * elemOf(t, "").perElement);
}

// All tensors of `list` flattened into one new tensor, in order.
inline at::Tensor concat(const std::vector<at::Tensor>& list) {
  std::vector<at::Tensor> flat;
  flat.reserve(list.size());
  for (const auto& t : list) flat.push_back(t.reshape({-1}));
  return at::cat(flat);
}

}  // namespace hoccl_torch
