// User-defined reductions: hocclRedOpCreatePreMulSum / hocclRedOpDestroy,
// NCCL's dynamic op values. Each rank multiplies its own input by its own
// scalar, then the ranks sum (src/exec/progress.cc does the multiply).
#include <cstring>

#include "src/api/api_internal.h"

using namespace hoccl;

namespace hoccl {

Status userOpFor(hocclComm* comm, const char* fn, int op, DType dtype, CollCall* call) {
  std::lock_guard<std::mutex> lock(comm->opsMutex);
  size_t i = static_cast<size_t>(op - hocclNumOps);
  if (i >= comm->userOps.size() || !comm->userOps[i].live)
    return errorf(hocclInvalidArgument,
                  "%s: op %d is not a valid hocclRedOp_t: it is no built-in op (0..%d) and no live op made by "
                  "hocclRedOpCreatePreMulSum on this communicator (ops are per communicator; destroyed ops are gone)",
                  fn, op, hocclNumOps - 1);
  const hocclComm::UserOp& u = comm->userOps[i];
  if (u.dtype != dtype)
    return errorf(hocclInvalidArgument, "%s: op %d was created for datatype %s but the call's datatype is %s", fn, op,
                  dtypeName(u.dtype), dtypeName(dtype));
  call->scalarAt = u.scalarAt;
  memcpy(call->scalar, u.scalar, sizeof call->scalar);
  return Status();
}

}  // namespace hoccl

extern "C" {

hocclResult_t hocclRedOpCreatePreMulSum(hocclRedOp_t* op, void* scalar, hocclDataType_t datatype,
                                        hocclScalarResidence_t residence, hocclComm_t comm) {
  const char* fn = "hocclRedOpCreatePreMulSum";
  CommUse use;
  Status st = enterComm(comm, &use, fn);
  if (!st.ok()) return report(nullptr, st);
  if (!op) return report(comm, errorf(hocclInvalidArgument, "%s: op is NULL", fn));
  if (!scalar) return report(comm, errorf(hocclInvalidArgument, "%s: scalar is NULL", fn));
  st = checkDatatype(fn, datatype);
  if (!st.ok()) return report(comm, st);
  if (residence != hocclScalarDevice && residence != hocclScalarHostImmediate)
    return report(comm, errorf(hocclInvalidArgument,
                               "%s: residence %d is neither hocclScalarDevice (0) nor hocclScalarHostImmediate (1)", fn,
                               static_cast<int>(residence)));
  hocclComm::UserOp u;
  u.live = true;
  u.dtype = static_cast<DType>(datatype);
  if (residence == hocclScalarHostImmediate) memcpy(u.scalar, scalar, dtypeSize(u.dtype));
  else u.scalarAt = scalar;
  std::lock_guard<std::mutex> lock(comm->opsMutex);
  size_t i = 0;
  while (i < comm->userOps.size() && comm->userOps[i].live) ++i;
  if (i >= static_cast<size_t>(hocclMaxRedOp - hocclNumOps))
    return report(comm, errorf(hocclInvalidUsage, "%s: too many live ops on this communicator", fn));
  if (i == comm->userOps.size()) comm->userOps.push_back(u);
  else comm->userOps[i] = u;
  *op = static_cast<hocclRedOp_t>(hocclNumOps + static_cast<int>(i));
  return hocclSuccess;
}

hocclResult_t hocclRedOpDestroy(hocclRedOp_t op, hocclComm_t comm) {
  const char* fn = "hocclRedOpDestroy";
  CommUse use;
  Status st = enterComm(comm, &use, fn);
  if (!st.ok()) return report(nullptr, st);
  int value = static_cast<int>(op);
  if (value >= 0 && value < hocclNumOps)
    return report(comm, errorf(hocclInvalidArgument, "%s: op %d is a built-in op; only ops made by "
                               "hocclRedOpCreatePreMulSum can be destroyed", fn, value));
  std::lock_guard<std::mutex> lock(comm->opsMutex);
  size_t i = static_cast<size_t>(value - hocclNumOps);
  if (value < 0 || i >= comm->userOps.size() || !comm->userOps[i].live)
    return report(comm, errorf(hocclInvalidArgument, "%s: op %d was not made by hocclRedOpCreatePreMulSum on this "
                               "communicator, or was destroyed already", fn, value));
  comm->userOps[i].live = false;
  return hocclSuccess;
}

}  // extern "C"
