// Shared between the C entry points: argument checks, last-error records
// and the handle table of live communicators (handles.cc).
#pragma once

#include "src/comm/comm.h"

namespace hoccl {

// Records `st` as this thread's (and comm's) last error, logs it once at
// WARN, and returns its code.
hocclResult_t report(hocclComm* comm, const Status& st);
// comm must be a live communicator: not NULL, not destroyed.
Status checkComm(hocclComm* comm, const char* fn);
void registerComm(hocclComm* comm);
// One API call's use of a communicator (handles.cc), released when it
// goes out of scope.
struct CommUse;
void leaveComm(CommUse* use);
struct CommUse {
  CommUse() = default;
  CommUse(const CommUse&) = delete;
  CommUse& operator=(const CommUse&) = delete;
  ~CommUse() { leaveComm(this); }
  hocclComm* comm = nullptr;
  int slot = -1;  // this thread's hazard slot holding comm; -1: counted in comm->inFlight
};
// Checks that comm is live and marks it used by this call (atomically), so
// that hocclCommAbort from another thread waits for the call before freeing.
Status enterComm(hocclComm* comm, CommUse* use, const char* fn);
// Removes comm from the handle table: no call can enter it from now on. False
// if it was not there (another thread destroyed it first): the caller must
// not touch it.
bool unregisterComm(hocclComm* comm);
// Waits up to `seconds` for the calls using an unregistered comm to
// return; false if one has not.
bool waitUnused(hocclComm* comm, double seconds);

// comm has finished a non-blocking init and has no fatal error.
Status checkUsable(hocclComm* comm, const char* fn);
// Point-to-point and all-to-all-v buffers must be host memory (asks the
// CUDA driver only when one is usable; null buffers are not checked);
// `what` names the kind of call in the error.
Status checkHostBuffers(const char* fn, const char* what, const void* sendbuff, const void* recvbuff);
// The datatype is one of hocclDataType_t, or an error naming it and fn.
Status checkDatatype(const char* fn, int dtype);

// Validates a collective's arguments and fills `call` and `key`; comm must
// already be entered (enterComm), which checked that it is live.
Status checkCollective(hocclComm* comm, CollKind coll, const void* sendbuff, void* recvbuff,
                       size_t count, int dtype, int op, int root, CollCall* call, ScheduleKey* key);

// The op made by hocclRedOpCreatePreMulSum with value `op` on comm, for a
// call of `dtype`: fills the call's scalar (redop.cc).
Status userOpFor(hocclComm* comm, const char* fn, int op, DType dtype, CollCall* call);

// Group support (group.cc): true if the call was queued for hocclGroupEnd.
bool groupActive();
// A call refused for its arguments: report(comm, st), and inside a group
// also recorded, so that hocclGroupEnd runs nothing and returns it.
hocclResult_t refuseCall(hocclComm* comm, const Status& st);
void groupEnqueue(CommCall&& call);
// A new, empty entry at the end of the group's queue, for a call to be
// checked in place; groupDropSlot removes it again (the call failed).
CommCall& groupSlot();
void groupDropSlot();
// Queues a hocclSend/hocclRecv: at hocclGroupEnd a communicator's sends and
// receives run as one call, after its collectives of the group.
void groupEnqueuePeer(hocclComm* comm, const PeerPart& part);
// hocclCommInitRank inside a group (NCCL's way for one thread to start
// several ranks): the init runs on a thread of its own (as a non-blocking
// init does), so ranks waiting for each other at the rendezvous do not
// block the caller; hocclGroupEnd waits for every one (api.cc: finishInit).
void groupEnqueueInit(hocclComm* comm);
// Waits for a grouped init to end; its error, or Status().
Status finishGroupedInit(hocclComm* comm);

// Point-to-point calls (p2p.cc): a communicator's SendRecv call holding
// `first`, and the check that its sends to itself pair with its receives.
CommCall peerCall(hocclComm* comm, const PeerPart& first);
Status checkSelfPairs(const CollCall& call, int rank);
// (Calls run through runCalls, src/comm/comm.h.)

}  // namespace hoccl
