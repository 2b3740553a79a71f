/*
 * hoccl: collective communication for training jobs that cross nodes and
 * switches. The API mirrors NCCL's: every function has the signature of its
 * NCCL counterpart with "nccl" replaced by "hoccl", and every enum carries
 * NCCL's numbering, so switching is a rename.
 *
 * Where NCCL takes a cudaStream_t, hoccl takes a hocclStream_t (void*). With
 * host buffers and a NULL stream a collective returns once it is complete.
 */
#ifndef HOCCL_H_
#define HOCCL_H_

#include <limits.h>
#include <stddef.h>
#include <stdint.h>

#if defined(__GNUC__)
#define HOCCL_API __attribute__((visibility("default")))
#else
#define HOCCL_API
#endif

#define HOCCL_MAJOR 0
#define HOCCL_MINOR 1
#define HOCCL_PATCH 0
#define HOCCL_VERSION(X, Y, Z) ((X) * 10000 + (Y) * 100 + (Z))
#define HOCCL_VERSION_CODE HOCCL_VERSION(HOCCL_MAJOR, HOCCL_MINOR, HOCCL_PATCH)

#ifdef __cplusplus
extern "C" {
#endif

typedef struct hocclComm* hocclComm_t;
typedef void* hocclStream_t;

#define HOCCL_UNIQUE_ID_BYTES 128
typedef struct {
  char internal[HOCCL_UNIQUE_ID_BYTES];
} hocclUniqueId;

typedef enum {
  hocclSuccess = 0,
  hocclUnhandledCudaError = 1,
  hocclSystemError = 2,
  hocclInternalError = 3,
  hocclInvalidArgument = 4,
  hocclInvalidUsage = 5,
  hocclRemoteError = 6, /* a peer died, aborted, or (on another host) answered no
                         * heartbeat for HOCCL_HEARTBEAT_TIMEOUT: the message names it */
  hocclInProgress = 7,
  hocclTimeout = 8,
  hocclNumResults = 9
} hocclResult_t;

typedef enum {
  hocclInt8 = 0,
  hocclChar = 0,
  hocclUint8 = 1,
  hocclInt32 = 2,
  hocclInt = 2,
  hocclUint32 = 3,
  hocclInt64 = 4,
  hocclUint64 = 5,
  hocclFloat16 = 6,
  hocclHalf = 6,
  hocclFloat32 = 7,
  hocclFloat = 7,
  hocclFloat64 = 8,
  hocclDouble = 8,
  hocclBfloat16 = 9,
  hocclFloat8e4m3 = 10, /* OCP E4M3 ("fn": no inf, NaN = S.1111.111, max 448) */
  hocclFloat8e5m2 = 11, /* OCP E5M2 (IEEE-like: inf, NaNs, max 57344) */
  hocclNumTypes = 12
} hocclDataType_t;

typedef enum {
  hocclSum = 0,
  hocclProd = 1,
  hocclMax = 2,
  hocclMin = 3,
  hocclAvg = 4,
  /* Built-in ops end here; hocclRedOpCreatePreMulSum returns values from
   * hocclNumOps up, each valid on its communicator only. */
  hocclNumOps = 5,
  hocclMaxRedOp = 0x7fffffff
} hocclRedOp_t;

/* When the scalar of a PreMulSum op is read (ncclScalarResidence_t). */
typedef enum {
  /* Read when each collective using the op runs (host buffers: when the
   * call, or its group's hocclGroupEnd, runs); must stay valid until then. */
  hocclScalarDevice = 0,
  /* Read once, before hocclRedOpCreatePreMulSum returns. */
  hocclScalarHostImmediate = 1
} hocclScalarResidence_t;

#define HOCCL_CONFIG_UNDEF_INT INT_MIN
#define HOCCL_CONFIG_UNDEF_PTR NULL
#define HOCCL_SPLIT_NOCOLOR -1

/* Communicator configuration. The leading fields follow ncclConfig_t;
 * fields NCCL uses for GPUs are accepted and ignored on host memory. New
 * fields are added at the end only, and a field is read only when `size`
 * covers it, so a program built against an older header keeps working. */
typedef struct hocclConfig_v1 {
  size_t size;
  unsigned int magic;
  unsigned int version;
  int blocking;        /* 0: init and collectives may return hocclInProgress */
  int cgaClusterSize;  /* 0-8 accepted; no effect (no thread-block clusters) */
  int minCTAs;         /* device buffers: fewest CTAs (channels) a call takes, 1-64 */
  int maxCTAs;         /* device buffers: most CTAs a call takes, 1-64 (>= minCTAs) */
  const char* netName; /* network between nodes: "IB", "Socket" or "auto"; overrides HOCCL_NET */
  int splitShare;
  /* hoccl extensions */
  /* Bound on every wait, in whole seconds (> 0); overrides HOCCL_TIMEOUT.
   * Ignored when timeoutMs is set. 0 or less: hocclInvalidArgument. */
  int timeoutSec;
  const char* commName;
  /* Algorithm for this communicator, overriding HOCCL_ALGO: "auto", "ring",
   * "hierarchical", "horing" or "doubling". Every rank of the communicator
   * must pass the same value. */
  const char* algorithm;
  /* Bound on every wait, in milliseconds (> 0), for a timeout that is not a
   * whole number of seconds (500: half a second). Overrides HOCCL_TIMEOUT
   * and, when both are set, timeoutSec, so a caller can set timeoutSec as
   * well for an older hoccl, which does not read this field. 0 or less:
   * hocclInvalidArgument. Read only when `size` covers it. */
  int timeoutMs;
} hocclConfig_t;

#define HOCCL_CONFIG_INITIALIZER                                                        \
  {                                                                                     \
    sizeof(hocclConfig_t),              /* size */                                      \
        0xcafebeef,                     /* magic */                                     \
        HOCCL_VERSION_CODE,             /* version */                                   \
        HOCCL_CONFIG_UNDEF_INT,         /* blocking */                                  \
        HOCCL_CONFIG_UNDEF_INT,         /* cgaClusterSize */                            \
        HOCCL_CONFIG_UNDEF_INT,         /* minCTAs */                                   \
        HOCCL_CONFIG_UNDEF_INT,         /* maxCTAs */                                   \
        HOCCL_CONFIG_UNDEF_PTR,         /* netName */                                   \
        HOCCL_CONFIG_UNDEF_INT,         /* splitShare */                                \
        HOCCL_CONFIG_UNDEF_INT,         /* timeoutSec */                                \
        HOCCL_CONFIG_UNDEF_PTR,         /* commName */                                  \
        HOCCL_CONFIG_UNDEF_PTR,         /* algorithm */                                 \
        HOCCL_CONFIG_UNDEF_INT          /* timeoutMs */                                 \
  }

/* Version as HOCCL_VERSION(major, minor, patch). */
HOCCL_API hocclResult_t hocclGetVersion(int* version);

/* Creates a unique id on one rank; pass it to all others by any means. The
 * calling process serves the rendezvous until all ranks have joined. */
HOCCL_API hocclResult_t hocclGetUniqueId(hocclUniqueId* uniqueId);

HOCCL_API hocclResult_t hocclCommInitRank(hocclComm_t* comm, int nranks, hocclUniqueId commId,
                                          int rank);
HOCCL_API hocclResult_t hocclCommInitRankConfig(hocclComm_t* comm, int nranks,
                                                hocclUniqueId commId, int rank,
                                                hocclConfig_t* config);
/* Ranks with the same color form a new communicator, ordered by key then by
 * rank in comm; color HOCCL_SPLIT_NOCOLOR returns *newcomm = NULL. */
HOCCL_API hocclResult_t hocclCommSplit(hocclComm_t comm, int color, int key, hocclComm_t* newcomm,
                                       hocclConfig_t* config);
/* A communicator of the ranks `ranks[0..nranks)` of comm (distinct, in the
 * new communicator's rank order: ranks[i] becomes rank i), made from comm
 * without a new unique id, as MPI_Comm_create_group: only the listed ranks
 * call it, each with the same list, and the caller must be among them.
 * Ranks of comm that are not listed take no part and may be busy, hung or
 * gone. Ranks that take part in several such calls make them in the same
 * order (else they fail, naming both ranks). config as hocclCommSplit's
 * (NULL: comm's settings). Errors: hocclInvalidArgument for a NULL pointer,
 * nranks < 1 or > comm's size, a rank out of range or listed twice, or a
 * caller not listed; a member that differs in list or order gets
 * hocclInvalidUsage; a member that never calls, comm's timeout. */
HOCCL_API hocclResult_t hocclCommCreateGroup(hocclComm_t comm, const int* ranks, int nranks, hocclComm_t* newcomm,
                                             hocclConfig_t* config);
/* hocclCommShrink (NCCL 2.27's ncclCommShrink): a communicator of comm's
 * ranks minus excludeRanksList[0..excludeRanksCount), made from comm with no
 * new unique id; the survivors keep their order (ranks renumbered 0..). Every
 * rank not excluded calls it with the same list; the excluded ranks do not
 * call it and may be dead, hung or leaving. HOCCL_SHRINK_ABORT first abandons
 * comm's work in flight (a call on another thread returns with an error, a
 * device launch stops): the mode to use after a failure, after which comm is
 * only good for hocclCommAbort / hocclCommDestroy. config as hocclCommSplit's.
 * Errors: hocclInvalidArgument for a NULL pointer, a count out of range, a
 * rank out of range or listed twice, every rank excluded, a caller that is
 * itself excluded, or unknown flags; survivors that pass different lists are
 * told so (hocclInvalidUsage), naming both ranks. */
#define HOCCL_SHRINK_DEFAULT 0x00
#define HOCCL_SHRINK_ABORT 0x01
HOCCL_API hocclResult_t hocclCommShrink(hocclComm_t comm, int* excludeRanksList, int excludeRanksCount,
                                        hocclComm_t* newcomm, hocclConfig_t* config, int shrinkFlags);
HOCCL_API hocclResult_t hocclCommFinalize(hocclComm_t comm);
/* Destroy frees comm once no call on another thread uses it (waiting up to
 * 1 s; a communicator still in use after that is leaked, with a warning).
 * Abort also stops such a call: it returns an error within about 1 s. A
 * handle used after either is refused as "not a live communicator". */
HOCCL_API hocclResult_t hocclCommDestroy(hocclComm_t comm);
HOCCL_API hocclResult_t hocclCommAbort(hocclComm_t comm);
/* Between calls: a peer's abort, a peer that died, or one on another host
 * that answered no heartbeat for HOCCL_HEARTBEAT_TIMEOUT (hocclRemoteError,
 * told to the other ranks as a failed call would). */
HOCCL_API hocclResult_t hocclCommGetAsyncError(hocclComm_t comm, hocclResult_t* asyncError);
HOCCL_API hocclResult_t hocclCommCount(const hocclComm_t comm, int* count);
HOCCL_API hocclResult_t hocclCommCuDevice(const hocclComm_t comm, int* device);
HOCCL_API hocclResult_t hocclCommUserRank(const hocclComm_t comm, int* rank);

HOCCL_API const char* hocclGetErrorString(hocclResult_t result);
/* The message of the last error seen by this thread (or by comm, if given). */
HOCCL_API const char* hocclGetLastError(hocclComm_t comm);

HOCCL_API hocclResult_t hocclAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                                       hocclDataType_t datatype, hocclRedOp_t op,
                                       hocclComm_t comm, hocclStream_t stream);
HOCCL_API hocclResult_t hocclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                                           hocclDataType_t datatype, hocclRedOp_t op,
                                           hocclComm_t comm, hocclStream_t stream);
HOCCL_API hocclResult_t hocclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                                       hocclDataType_t datatype, hocclComm_t comm,
                                       hocclStream_t stream);
HOCCL_API hocclResult_t hocclBroadcast(const void* sendbuff, void* recvbuff, size_t count,
                                       hocclDataType_t datatype, int root, hocclComm_t comm,
                                       hocclStream_t stream);
HOCCL_API hocclResult_t hocclReduce(const void* sendbuff, void* recvbuff, size_t count,
                                    hocclDataType_t datatype, hocclRedOp_t op, int root,
                                    hocclComm_t comm, hocclStream_t stream);

/* Each rank sends count elements to every rank: the block for rank j is
 * taken from sendbuff + j*count, and the block from rank i lands at
 * recvbuff + i*count. In place when sendbuff == recvbuff. */
HOCCL_API hocclResult_t hocclAlltoAll(const void* sendbuff, void* recvbuff, size_t count,
                                      hocclDataType_t datatype, hocclComm_t comm, hocclStream_t stream);

/* hoccl extension, MPI_Alltoallv's shape: sendcounts[j] elements from
 * sendbuff + sdispls[j] go to rank j, and recvcounts[i] elements from rank
 * i land at recvbuff + rdispls[i] (counts and displacements in elements,
 * nranks entries each). recvcounts[i] must equal rank i's sendcounts[this
 * rank]. Out of place only. */
HOCCL_API hocclResult_t hocclAlltoAllv(const void* sendbuff, const size_t sendcounts[], const size_t sdispls[],
                                       void* recvbuff, const size_t recvcounts[], const size_t rdispls[],
                                       hocclDataType_t datatype, hocclComm_t comm, hocclStream_t stream);

/* Point-to-point. Rank peer must post the matching hocclRecv (hocclSend)
 * with the same count and datatype; the k-th send from a to b is received
 * by b's k-th receive from a. Outside a group a receive returns once its
 * message has arrived; a send returns once its message is handed over: a
 * small one (up to a connection's slot, HOCCL_SLICE_BYTES) may return
 * before the receiver posts its receive (eager, as NCCL's small sends),
 * a larger one waits for the receiver. A send nobody ever receives is
 * reported (HOCCL_DEBUG=WARN) when its communicator is destroyed. Inside
 * hocclGroupStart/End, a communicator's sends and receives run together,
 * after its collectives of that group, in any order without deadlock; a
 * rank may send to itself there (paired in order with its receives from
 * itself). */
HOCCL_API hocclResult_t hocclSend(const void* sendbuff, size_t count, hocclDataType_t datatype, int peer,
                                  hocclComm_t comm, hocclStream_t stream);
HOCCL_API hocclResult_t hocclRecv(void* recvbuff, size_t count, hocclDataType_t datatype, int peer,
                                  hocclComm_t comm, hocclStream_t stream);

/* Where this rank sits: its node (0..nnodes-1, as hoccl's topology sees
 * it, HOCCL_TOPO_FILE included) and its index among the localRanks ranks
 * of that node. hocclCommSplit(comm, node, rank, ...) gives the intra-node
 * communicator; hocclCommSplit(comm, localRank, node, ...) the rails. */
HOCCL_API hocclResult_t hocclCommNodeInfo(const hocclComm_t comm, int* node, int* nnodes, int* localRank,
                                          int* localRanks);

/* A reduction that multiplies this rank's input by *scalar (of type
 * datatype) before summing with the other ranks' (each rank has its own
 * scalar). The new op is valid for calls on comm with that datatype. */
HOCCL_API hocclResult_t hocclRedOpCreatePreMulSum(hocclRedOp_t* op, void* scalar, hocclDataType_t datatype,
                                                  hocclScalarResidence_t residence, hocclComm_t comm);
/* Frees an op made by hocclRedOpCreatePreMulSum on comm; calls that used it
 * must have returned. */
HOCCL_API hocclResult_t hocclRedOpDestroy(hocclRedOp_t op, hocclComm_t comm);

/* Between GroupStart and GroupEnd collectives are queued, not run; GroupEnd
 * runs them all together, so one thread may drive several communicators.
 * If a call between them was refused, GroupEnd runs none and returns that
 * call's error. Groups nest at most 65536 deep. hocclCommInitRank(Config)
 * inside a group (as NCCL allows, for one thread that starts several ranks
 * of a communicator) returns hocclSuccess at once with the handle; the init
 * runs on a thread of its own and GroupEnd waits for every one, returning
 * the first failure. (A config with blocking = 0 keeps its own rule.) */
HOCCL_API hocclResult_t hocclGroupStart(void);
HOCCL_API hocclResult_t hocclGroupEnd(void);

#ifdef __cplusplus
}
#endif

#endif /* HOCCL_H_ */
