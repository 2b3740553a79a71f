// Point-to-point entry points: hocclSend, hocclRecv, hocclAlltoAllv and
// the node query callers build intra-node and rail groups from. A group's
// sends and receives on one communicator become one call (group.cc), whose
// schedule gives every peer and direction a channel of its own
// (algorithms/pairwise.h): no order of posting can deadlock.
#include <cstring>

#include "hoccl.h"
#include "src/api/api_internal.h"
#include "base/log.h"

using namespace hoccl;

namespace hoccl {

CommCall peerCall(hocclComm* comm, const PeerPart& first) {
  CommCall c;
  c.comm = comm;
  c.call.coll = CollKind::SendRecv;
  c.call.dtype = DType::Uint8;  // its schedule counts bytes
  c.call.parts.push_back(first);
  c.key.coll = CollKind::SendRecv;
  c.key.nranks = comm->nranks;
  c.key.rank = comm->rank;
  c.commSerial = comm->serial;
  return c;
}

Status checkSelfPairs(const CollCall& call, int rank) {
  std::vector<const PeerPart*> sends, recvs;
  for (const PeerPart& p : call.parts) {
    if (p.peer == rank) (p.send ? sends : recvs).push_back(&p);
  }
  for (size_t i = 0; i < sends.size() || i < recvs.size(); ++i) {
    if (i >= sends.size() || i >= recvs.size()) {
      const PeerPart& lone = i < sends.size() ? *sends[i] : *recvs[i];
      return errorf(hocclInvalidUsage, "rank %d: %s(count=%llu, %s) to itself has no matching %s from itself in the "
                    "same group; a rank's sends to itself pair in order with its receives from itself, and both must "
                    "be inside one hocclGroupStart/hocclGroupEnd",
                    rank, lone.send ? "hocclSend" : "hocclRecv", static_cast<unsigned long long>(lone.count),
                    dtypeName(lone.dtype), lone.send ? "hocclRecv" : "hocclSend");
    }
    const PeerPart &s = *sends[i], &r = *recvs[i];
    if (s.count != r.count || s.dtype != r.dtype)
      return errorf(hocclInvalidUsage, "rank %d: its send #%zu to itself is hocclSend(count=%llu, %s) but its receive "
                    "#%zu from itself is hocclRecv(count=%llu, %s); they must agree", rank, i + 1,
                    static_cast<unsigned long long>(s.count), dtypeName(s.dtype), i + 1,
                    static_cast<unsigned long long>(r.count), dtypeName(r.dtype));
  }
  return Status();
}

}  // namespace hoccl

namespace {

hocclResult_t pointToPoint(const char* fn, bool send, void* buff, size_t count, int dtype, int peer,
                           hocclComm_t comm) {
  CommUse use;
  Status st = enterComm(comm, &use, fn);
  if (st.ok()) st = checkUsable(comm, fn);
  if (st.ok()) st = checkDatatype(fn, dtype);
  if (st.ok() && (peer < 0 || peer >= comm->nranks))
    st = errorf(hocclInvalidArgument, "%s: peer %d is out of range [0, %d)", fn, peer, comm->nranks);
  if (st.ok() && count > (static_cast<size_t>(1) << 62) / dtypeSize(static_cast<DType>(dtype)))
    st = errorf(hocclInvalidArgument, "%s: count %zu is too large", fn, count);
  if (st.ok() && count > 0 && !buff)
    st = errorf(hocclInvalidArgument, "%s: %s is NULL", fn, send ? "sendbuff" : "recvbuff");
  if (st.ok() && count > 0)
    st = checkHostBuffers(fn, "a point-to-point call", send ? buff : nullptr, send ? nullptr : buff);
  if (!st.ok()) return refuseCall(use.comm, st);
  setLogRank(comm->rank);
  PeerPart part;
  part.ptr = buff;
  part.count = count;
  part.dtype = static_cast<DType>(dtype);
  part.peer = peer;
  part.send = send;
  if (groupActive()) {
    groupEnqueuePeer(comm, part);
    return hocclSuccess;
  }
  CommCall c = peerCall(comm, part);
  st = checkSelfPairs(c.call, comm->rank);
  if (!st.ok()) return report(use.comm, st);
  return report(comm, runCalls(&c, 1));
}

}  // namespace

extern "C" {

hocclResult_t hocclSend(const void* sendbuff, size_t count, hocclDataType_t datatype, int peer, hocclComm_t comm,
                        hocclStream_t stream) {
  (void)stream;
  return pointToPoint("hocclSend", true, const_cast<void*>(sendbuff), count, datatype, peer, comm);
}

hocclResult_t hocclRecv(void* recvbuff, size_t count, hocclDataType_t datatype, int peer, hocclComm_t comm,
                        hocclStream_t stream) {
  (void)stream;
  return pointToPoint("hocclRecv", false, recvbuff, count, datatype, peer, comm);
}

hocclResult_t hocclAlltoAllv(const void* sendbuff, const size_t sendcounts[], const size_t sdispls[], void* recvbuff,
                             const size_t recvcounts[], const size_t rdispls[], hocclDataType_t datatype,
                             hocclComm_t comm, hocclStream_t stream) {
  (void)stream;
  const char* fn = "hocclAlltoAllv";
  CommUse use;
  Status st = enterComm(comm, &use, fn);
  if (st.ok()) st = checkUsable(comm, fn);
  if (st.ok()) st = checkDatatype(fn, datatype);
  if (st.ok() && (!sendcounts || !sdispls || !recvcounts || !rdispls))
    st = errorf(hocclInvalidArgument, "%s: %s is NULL", fn,
                !sendcounts ? "sendcounts" : !sdispls ? "sdispls" : !recvcounts ? "recvcounts" : "rdispls");
  if (!st.ok()) return refuseCall(use.comm, st);
  const int P = comm->nranks, r = comm->rank;
  const size_t esize = dtypeSize(static_cast<DType>(datatype));
  const uint64_t limit = (uint64_t{1} << 62) / esize;
  auto layout = std::make_shared<std::vector<uint64_t>>(4 * static_cast<size_t>(P));
  uint64_t sendEnd = 0, recvEnd = 0;
  for (int p = 0; p < P && st.ok(); ++p) {
    const size_t counts[2] = {sendcounts[p], recvcounts[p]}, displs[2] = {sdispls[p], rdispls[p]};
    for (int half = 0; half < 2 && st.ok(); ++half) {
      if (counts[half] > limit || displs[half] > limit - counts[half])
        st = errorf(hocclInvalidArgument, "%s: %s[%d] + %s[%d] = %zu + %zu overflows", fn,
                    half ? "rdispls" : "sdispls", p, half ? "recvcounts" : "sendcounts", p, displs[half], counts[half]);
      (*layout)[(2 * half) * P + p] = counts[half];
      (*layout)[(2 * half + 1) * P + p] = displs[half];
      if (counts[half]) (half ? recvEnd : sendEnd) = std::max<uint64_t>(half ? recvEnd : sendEnd, displs[half] + counts[half]);
    }
  }
  if (st.ok() && sendcounts[r] != recvcounts[r])
    st = errorf(hocclInvalidArgument, "%s: rank %d sends itself sendcounts[%d] = %zu elements but expects "
                "recvcounts[%d] = %zu", fn, r, r, sendcounts[r], r, recvcounts[r]);
  if (st.ok() && sendEnd && !sendbuff) st = errorf(hocclInvalidArgument, "%s: sendbuff is NULL", fn);
  if (st.ok() && recvEnd && !recvbuff) st = errorf(hocclInvalidArgument, "%s: recvbuff is NULL", fn);
  if (st.ok()) st = checkHostBuffers(fn, "all-to-all-v", sendEnd ? sendbuff : nullptr, recvEnd ? recvbuff : nullptr);
  auto s = reinterpret_cast<uintptr_t>(sendbuff), d = reinterpret_cast<uintptr_t>(recvbuff);
  if (st.ok() && sendEnd && recvEnd && s < d + recvEnd * esize && d < s + sendEnd * esize)
    st = errorf(hocclInvalidArgument, "%s: sendbuff and recvbuff overlap; all-to-all-v runs out of place only", fn);
  if (!st.ok()) return refuseCall(use.comm, st);
  setLogRank(r);
  ScheduleKey key;
  key.coll = CollKind::AllToAllv;
  key.nranks = P;
  key.rank = r;
  key.vlayout = layout;
  CollCall call;
  call.coll = CollKind::AllToAllv;
  call.sendbuff = sendbuff;
  call.recvbuff = recvbuff;
  call.dtype = static_cast<DType>(datatype);
  CommCall one;
  one.comm = comm;
  one.call = std::move(call);
  one.key = std::move(key);
  one.commSerial = comm->serial;
  if (groupActive()) {
    groupEnqueue(std::move(one));
    return hocclSuccess;
  }
  return report(comm, runCalls(&one, 1));
}

hocclResult_t hocclCommNodeInfo(const hocclComm_t comm, int* node, int* nnodes, int* localRank, int* localRanks) {
  const char* fn = "hocclCommNodeInfo";
  CommUse use;
  Status st = enterComm(comm, &use, fn);
  if (st.ok() && (!node || !nnodes || !localRank || !localRanks))
    st = errorf(hocclInvalidArgument, "%s: %s is NULL", fn,
                !node ? "node" : !nnodes ? "nnodes" : !localRank ? "localRank" : "localRanks");
  if (st.ok() && comm->initPending.load(std::memory_order_acquire))
    st = errorf(hocclInvalidUsage, "%s: the communicator's non-blocking init is still in progress", fn);
  if (!st.ok()) return report(use.comm, st);
  // As the tuner and the hierarchical schedules see it (HOCCL_TOPO_FILE
  // may regroup the ranks the machines put together).
  const auto& ranks = comm->system.ranks;
  if (static_cast<int>(ranks.size()) != comm->nranks) {
    *node = 0, *nnodes = 1, *localRank = comm->rank, *localRanks = comm->nranks;
    return hocclSuccess;
  }
  *node = ranks[comm->rank].node;
  *nnodes = static_cast<int>(comm->system.nodes.size());
  *localRank = ranks[comm->rank].localRank;
  *localRanks = 0;
  for (const auto& p : ranks) *localRanks += p.node == *node;
  return hocclSuccess;
}

}  // extern "C"
