/* weft: collective communication for distributed training.
 *
 * The C API is shaped like nccl.h so that porting is a rename (nccl -> weft).
 * Every function returns a weftResult_t; nothing throws across this boundary.
 * After a failure, weftGetLastError() returns a message naming the rank, the peer
 * and the operation. */
#ifndef WEFT_WEFT_H_
#define WEFT_WEFT_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define WEFT_MAJOR 0
#define WEFT_MINOR 1
#define WEFT_PATCH 0
#define WEFT_VERSION_CODE (WEFT_MAJOR * 10000 + WEFT_MINOR * 100 + WEFT_PATCH)

/* Result codes: the first eight match ncclResult_t. */
typedef enum {
  weftSuccess = 0,
  weftUnhandledCudaError = 1,
  weftSystemError = 2,
  weftInternalError = 3,
  weftInvalidArgument = 4,
  weftInvalidUsage = 5,
  weftRemoteError = 6, /* a peer died, disconnected or reported an error */
  weftInProgress = 7,  /* weftTest: the request has not completed yet */
  weftTimeout = 8,     /* a wait passed its deadline (WEFT_TIMEOUT_MS) */
  weftNumResults = 9
} weftResult_t;

/* Datatypes, numbered as ncclDataType_t. */
typedef enum {
  weftInt8 = 0,
  weftChar = 0,
  weftUint8 = 1,
  weftInt32 = 2,
  weftInt = 2,
  weftUint32 = 3,
  weftInt64 = 4,
  weftUint64 = 5,
  weftFloat16 = 6,
  weftHalf = 6,
  weftFloat32 = 7,
  weftFloat = 7,
  weftFloat64 = 8,
  weftDouble = 8,
  weftBfloat16 = 9,
  /* 8-bit floats (OCP FP8): E4M3 with no infinities, largest finite 448, as
   * CUDA's __nv_fp8_e4m3 and torch.float8_e4m3fn; E5M2, largest finite 57344, as
   * __nv_fp8_e5m2 and torch.float8_e5m2. Reductions accumulate in fp32 and round
   * once to nearest even, saturating to the largest finite value (Inf included),
   * as CUDA's __NV_SATFINITE conversion NCCL uses does; NaN stays NaN. */
  weftFloat8e4m3 = 10,
  weftFloat8e5m2 = 11,
  weftNumTypes = 12,
  /* Makes every int a value of the type, so that a bad datatype reaches
   * validation (weftInvalidArgument) as a value, not as undefined behaviour. */
  weftMaxDataType = 0x7fffffff
} weftDataType_t;

/* Reduction operations, numbered as ncclRedOp_t up to weftAvg. weftAvg is sum
 * then divide by the number of ranks (integers divide with truncation toward
 * zero). weftBand, weftBor and weftBxor are bitwise and, or and xor, for the
 * integer datatypes only (a floating-point datatype is weftInvalidArgument).
 * Pre-multiplied sum ops (weftRedOpCreatePreMulSum) are numbered from weftNumOps. */
typedef enum {
  weftSum = 0,
  weftProd = 1,
  weftMax = 2,
  weftMin = 3,
  weftAvg = 4,
  weftBand = 5,
  weftBor = 6,
  weftBxor = 7,
  weftNumOps = 8,
  weftMaxRedOp = 0x7fffffff
} weftRedOp_t;

#define WEFT_UNIQUE_ID_BYTES 128
typedef struct {
  char internal[WEFT_UNIQUE_ID_BYTES];
} weftUniqueId;

typedef struct weftComm* weftComm_t;
typedef struct weftRequestImpl* weftRequest_t;

/* A cudaStream_t. A collective on device memory is enqueued on the stream as
 * NCCL does it: the call returns once the work is ordered on the stream, later
 * work on the stream sees the result, and the thread does not wait for the GPU;
 * NULL is then the legacy default stream. Errors of an enqueued call are
 * reported by weftCommGetAsyncError and by the communicator's next call. On
 * host memory the stream must be NULL and the call blocks. Point-to-point calls
 * and groups on device memory go the same way (a group's point-to-point calls on
 * one stream, all on device memory or all on host memory); the non-blocking
 * (request) forms take host memory only. */
typedef void* weftStream_t;

/* Communicator options. Initialize with WEFT_CONFIG_INITIALIZER; a field left at
 * its initializer value means "use the environment or the default". */
typedef struct {
  size_t size;      /* sizeof(weftConfig_t), set by the initializer */
  unsigned magic;   /* set by the initializer */
  unsigned version; /* WEFT_VERSION_CODE, set by the initializer */
  int blocking;     /* 1: init returns when the communicator is ready. 0: init (and
                     * weftCommSplit) return weftInProgress at once with the handle
                     * set; poll weftCommGetAsyncError until it is no longer
                     * weftInProgress (then weftSuccess, or why init failed); other
                     * calls on the handle meanwhile return weftInvalidUsage. The
                     * config's strings must stay valid until then. */
  int64_t timeoutMs; /* deadline of every wait in this communicator; <= 0: WEFT_TIMEOUT_MS */
  const char* commName; /* shown in log lines; may be NULL */
  const char* algo;     /* algorithm choice in WEFT_ALGO's syntax, for this communicator
                         * only (overrides WEFT_ALGO); NULL: WEFT_ALGO */
} weftConfig_t;

#define WEFT_CONFIG_MAGIC 0x77656674u
#define WEFT_CONFIG_INITIALIZER \
  { sizeof(weftConfig_t), WEFT_CONFIG_MAGIC, WEFT_VERSION_CODE, 1, 0, NULL, NULL }

weftResult_t weftGetVersion(int* version);
const char* weftGetErrorString(weftResult_t result);
/* The message of the last failed call on this thread (or of the communicator's
 * asynchronous error); "" when none. */
const char* weftGetLastError(weftComm_t comm);

/* Called on one rank (the root); the id is then passed to the others by any means
 * (MPI_Bcast, a file, ...). Starts the rendezvous service in this process. */
weftResult_t weftGetUniqueId(weftUniqueId* uniqueId);
weftResult_t weftCommInitRank(weftComm_t* comm, int nranks, weftUniqueId commId, int rank);
weftResult_t weftCommInitRankConfig(weftComm_t* comm, int nranks, weftUniqueId commId,
                                    int rank, weftConfig_t* config);
/* Rank, size and rendezvous from the environment: weft-run (WEFT_RANK, WEFT_NRANKS,
 * WEFT_COMM_ID), torchrun (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT), Open MPI
 * (OMPI_COMM_WORLD_RANK/SIZE) or Slurm (SLURM_PROCID, SLURM_NTASKS). */
weftResult_t weftCommInitFromEnv(weftComm_t* comm, weftConfig_t* config);
/* Collective over comm (every rank calls it, in the same order as its other
 * calls): ranks passing the same color form a new communicator, ranked by key,
 * then by their rank in comm. color WEFT_SPLIT_NOCOLOR: the rank joins none and
 * *newcomm is NULL. config (may be NULL) applies to the new communicator. */
#define WEFT_SPLIT_NOCOLOR (-1)
weftResult_t weftCommSplit(weftComm_t comm, int color, int key, weftComm_t* newcomm, weftConfig_t* config);
/* Recovery after a failure (NCCL 2.27's ncclCommShrink): a communicator of
 * comm's ranks except the n in excludeRanks (those that died, hung or should
 * leave), keeping their order, built without a launcher or the excluded ranks,
 * also when rank 0 and the bootstrap root are gone. Only the ranks that stay
 * call it, each with the same list (in any order); a rank whose list differs
 * cannot join and times out. comm may have failed; its pending operations are
 * left alone: abort or destroy it afterwards. The new communicator's root runs
 * in the process of the lowest rank that stays, on a socket each rank bound at
 * init for this, which serves one shrink: a second shrink in the same family
 * (comm and those split from it) with the same lowest rank fails (that rank
 * gets weftInvalidUsage, the others are refused by the first shrink's root); to
 * lose more ranks later, shrink the new communicator.
 * config as for weftCommSplit. */
weftResult_t weftCommShrink(weftComm_t comm, const int* excludeRanks, int n, weftComm_t* newcomm,
                            weftConfig_t* config);
/* The ranks of comm this rank has learnt are gone, ascending: their connection
 * to the bootstrap closed without a goodbye (the process died, exited or was cut
 * off), or the bootstrap root was lost with the process of the rank that ran it.
 * The first min(*n, max) go to ranks; *n gets how many there are. A hung rank is
 * not among them (the stuck-call diagnosis names it). Local and non-blocking:
 * the news may arrive a moment after a call failed on a dead peer, and ranks
 * learn it at different moments; after a single failure every survivor soon
 * sees the same list, which is then weftCommShrink's excludeRanks. */
weftResult_t weftCommGetFailedRanks(weftComm_t comm, int* ranks, int max, int* n);
/* ndev communicators of one job, all ranks in this process (rank i in comms[i]).
 * devlist must be NULL (host memory). Drive them with the *Async calls, or one
 * thread per rank. */
weftResult_t weftCommInitAll(weftComm_t* comms, int ndev, const int* devlist);
/* Waits for the communicator's queued operations and for its calls in progress
 * on other threads, then frees it. */
weftResult_t weftCommDestroy(weftComm_t comm);
/* Fails every pending operation of the communicator, on this rank at once and on
 * the others through the bootstrap (calls blocked on other threads return an
 * error, typically weftRemoteError), waits for those calls to return, then frees
 * it. May be called from any thread. */
weftResult_t weftCommAbort(weftComm_t comm);
/* Stops the communicator without freeing it (NCCL's ncclCommRevoke): every
 * pending operation fails promptly, here and, through the bootstrap, on the other
 * ranks, whose communicators are revoked with it. The ranks can still agree:
 * weftCommSplit works (the new communicator shares no channel or connection with
 * this one) and so does weftCommShrink; then weftCommDestroy or weftCommAbort.
 * Other calls on it fail with weftInvalidUsage. weftCommGetAsyncError reports
 * weftInProgress until none of its calls is queued or running, then weftSuccess.
 * flags must be WEFT_REVOKE_DEFAULT. Any thread; does not wait. A communicator
 * that already failed (a lost rank, a peer's abort) can be revoked, but its
 * bootstrap no longer serves a split: shrink it. */
#define WEFT_REVOKE_DEFAULT 0
weftResult_t weftCommRevoke(weftComm_t comm, int flags);
/* Stuck-call diagnosis on demand (SIGUSR1 does the same for every communicator):
 * every rank of the communicator reports where it is (the call and its sequence
 * number, the schedule step, the peer it waits on, bytes done) through the
 * bootstrap, answering from a background thread even while it computes; the
 * lowest rank that answers prints the table to stderr. Any rank, any thread,
 * also while a call of the communicator is blocked on another thread. The one-line
 * diagnosis ("rank 5 has not entered allreduce #1234 ...") is copied to `line`
 * (up to len - 1 bytes, NUL-terminated) unless it is NULL. Nothing fails. */
weftResult_t weftCommDump(weftComm_t comm, char* line, size_t len);
/* weftSuccess, or the error that broke the communicator, a peer's abort or a lost
 * rank included (read from the bootstrap here, so a communicator whose work is all
 * on streams learns of them too). A revoked communicator: weftInProgress, then
 * weftSuccess once it is quiescent (weftCommRevoke). */
weftResult_t weftCommGetAsyncError(weftComm_t comm, weftResult_t* asyncError);
weftResult_t weftCommCount(const weftComm_t comm, int* count);
weftResult_t weftCommUserRank(const weftComm_t comm, int* rank);
/* The CUDA device current on the thread that created the communicator (NCCL's
 * ncclCommCuDevice), or -1 when that thread had no CUDA context. */
weftResult_t weftCommCuDevice(const weftComm_t comm, int* device);
/* The algorithm this communicator runs a collective of this shape with, e.g.
 * "ring": what WEFT_ALGO or weftConfig_t.algo force, else the automatic choice.
 * collective: "allreduce", "broadcast", "reduce", "allgather", "reducescatter" or
 * "alltoall"; count as the collective takes it; root only matters for rooted ones.
 * With online tuning (WEFT_TUNE_ONLINE=1, the default) the first calls of each size
 * class time a few candidates: until they are done *settled is 0 (may be NULL) and
 * *algorithm is the cost model's pick; afterwards the measured winner. Local: no
 * communication, no effect on the next calls. */
weftResult_t weftCommGetAlgorithm(weftComm_t comm, const char* collective, size_t count,
                                  weftDataType_t datatype, int root, const char** algorithm,
                                  int* settled);

/* weftCommGetAlgorithm's answer with its reasons, as WEFT_EXPLAIN prints them:
 * every candidate the tuner weighs for this call with its predicted seconds split
 * into latency (alpha), bandwidth (beta) and reduction (gamma) terms, and online
 * tuning's measured time once its size class has one. On one link level the terms
 * add up to the prediction; where the communicator spans hosts the prediction is
 * the schedule simulated on the ranks' layout (simulated = 1; per candidate, as
 * schedules of more than 500,000 steps fall back to the formula with the
 * network's constants) and each term is the simulated time with only its
 * constants. Names are static strings. Local. */
#define WEFT_MAX_CANDIDATES 16
typedef struct {
  const char* algorithm;
  double predicted;  /* seconds; < 0: no model (forced) */
  double latency, bandwidth, reduction;
  double measured;   /* seconds per call agreed by online tuning; < 0: not measured */
  int simulated;     /* 1: predicted by simulating the schedule (else its formula) */
  char choices[48];  /* what the tuner chose inside it for this call, "" if nothing:
                        hierarchical's algorithm per level (NUMA domain / across a
                        host's domains / across hosts), e.g. "ring / - / recdoubling" */
} weftAlgoCandidate_t;
typedef struct {
  const char* algorithm;   /* what the call runs now (weftCommGetAlgorithm's answer) */
  int settled;             /* as weftCommGetAlgorithm's */
  const char* model_pick;  /* the lowest prediction */
  int simulated;
  int ncandidates;         /* at most WEFT_MAX_CANDIDATES, in registry order */
  weftAlgoCandidate_t candidates[WEFT_MAX_CANDIDATES];
} weftAlgoExplanation_t;
weftResult_t weftCommExplainAlgorithm(weftComm_t comm, const char* collective, size_t count,
                                      weftDataType_t datatype, int root, weftAlgoExplanation_t* out);

/* Online tuning's settled picks as text, one line per (collective, size class):
 * "<ranks> <link class> <collective> <size class> <algorithm>". Store it with a
 * checkpoint; a run started with WEFT_TUNE_STATE_FILE pointing at it settles
 * those classes on the same algorithms at once, so it reduces in the same order.
 * Copies at most size bytes, NUL-terminated, into buf (may be NULL with size 0);
 * *needed = the text's length + 1. Local, after the communicator's queued work. */
weftResult_t weftCommGetTuning(weftComm_t comm, char* buf, size_t size, size_t* needed);

/* Memory backed by shared memory that peers on the host map directly, so
 * collectives on it need no copies. Usable like malloc'ed memory. */
weftResult_t weftMemAlloc(void** ptr, size_t size);
weftResult_t weftMemFree(void* ptr);

/* Memory windows (NCCL 2.27's ncclCommWindowRegister). Collective over comm:
 * every rank calls it, in the same order as its other calls, with a buffer of its
 * own. WEFT_WIN_COLL_SYMMETRIC asks for NCCL's symmetric conditions: every rank's
 * size equal and buff aligned to WEFT_WIN_REQUIRED_ALIGNMENT. A rank whose own
 * arguments are wrong gets weftInvalidArgument and the others weftInvalidUsage
 * naming it, as every rank does when the ranks disagree (flags, or sizes of a
 * symmetric window); nobody waits for a deadline. A symmetric window of device
 * memory is mapped by every rank where the device collectives go GPU to GPU
 * (cuda_p2p): collectives whose buffers lie in windows then read the peers'
 * windows in place, which needs NCCL's promise that every rank passes the same
 * offsets into its windows. Other windows run as any buffer (weftMemAlloc memory
 * is read in place by peers with or without a window). Deregistering is
 * collective too, and waits until the streams have finished the calls on the
 * window; destroy frees the windows left. */
typedef struct weftWindow* weftWindow_t;
#define WEFT_WIN_DEFAULT 0x00
#define WEFT_WIN_COLL_SYMMETRIC 0x01
#define WEFT_WIN_REQUIRED_ALIGNMENT 4096
weftResult_t weftCommWindowRegister(weftComm_t comm, void* buff, size_t size, weftWindow_t* win, int flags);
weftResult_t weftCommWindowDeregister(weftComm_t comm, weftWindow_t win);

/* Host memory: blocking, returns when recvbuff holds the result. Device memory:
 * enqueued on the stream (weftStream_t). sendbuff == recvbuff is an in-place
 * all-reduce. */
weftResult_t weftAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                           weftDataType_t datatype, weftRedOp_t op, weftComm_t comm,
                           weftStream_t stream);

/* Non-blocking: posts the operation to the communicator's queue on the progress
 * engine and returns a request. A communicator's collectives run one at a time in
 * the order posted; neighbouring point-to-point operations run beside each other;
 * different communicators progress concurrently. The buffers must stay valid and
 * untouched until the request completes. */
weftResult_t weftAllReduceAsync(const void* sendbuff, void* recvbuff, size_t count,
                                weftDataType_t datatype, weftRedOp_t op, weftComm_t comm,
                                weftRequest_t* request);
/* Complete: *done = 1, the request is freed, *request set to NULL and the
 * operation's result returned. Pending: *done = 0 and weftInProgress. A NULL
 * *request (freed earlier) is complete: *done = 1, weftSuccess. */
weftResult_t weftTest(weftRequest_t* request, int* done);
/* Waits for completion, frees the request, sets *request to NULL and returns the
 * operation's result. A NULL *request returns weftSuccess at once. */
weftResult_t weftWait(weftRequest_t* request);

/* The other collectives, with NCCL's signatures. Host memory: stream must be NULL
 * and the call returns when the result is in place; device memory: on the stream. In-place forms follow NCCL:
 * all-gather sendbuff == recvbuff + rank * sendcount; reduce-scatter
 * recvbuff == sendbuff + rank * recvcount; otherwise sendbuff == recvbuff. */
weftResult_t weftBroadcast(const void* sendbuff, void* recvbuff, size_t count,
                           weftDataType_t datatype, int root, weftComm_t comm, weftStream_t stream);
weftResult_t weftReduce(const void* sendbuff, void* recvbuff, size_t count, weftDataType_t datatype,
                        weftRedOp_t op, int root, weftComm_t comm, weftStream_t stream);
weftResult_t weftAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                           weftDataType_t datatype, weftComm_t comm, weftStream_t stream);
weftResult_t weftReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                               weftDataType_t datatype, weftRedOp_t op, weftComm_t comm,
                               weftStream_t stream);
/* count elements go to each peer: sendbuff and recvbuff hold nranks * count. */
weftResult_t weftAlltoAll(const void* sendbuff, void* recvbuff, size_t count,
                          weftDataType_t datatype, weftComm_t comm, weftStream_t stream);
/* Point to point. A send completes when the buffer may be reused. Post a send
 * and a receive to different peers together inside weftGroupStart/End. A rank
 * may send to itself inside a group: the group's k-th receive from itself gets
 * its k-th send to itself (same size; a local copy); outside a group that is
 * weftInvalidUsage, as it could never complete. */
weftResult_t weftSend(const void* sendbuff, size_t count, weftDataType_t datatype, int peer,
                      weftComm_t comm, weftStream_t stream);
weftResult_t weftRecv(void* recvbuff, size_t count, weftDataType_t datatype, int peer,
                      weftComm_t comm, weftStream_t stream);
/* Non-blocking point to point: posted like the *Async collectives. Sends and
 * receives posted one after another run beside each other, so a rank may post
 * its receive before its send; receives from one peer match its sends in order. */
weftResult_t weftSendAsync(const void* sendbuff, size_t count, weftDataType_t datatype, int peer,
                           weftComm_t comm, weftRequest_t* request);
weftResult_t weftRecvAsync(void* recvbuff, size_t count, weftDataType_t datatype, int peer,
                           weftComm_t comm, weftRequest_t* request);
/* A receive from whichever rank's message comes first (MPI_ANY_SOURCE): posted
 * like weftRecvAsync; when the request completes, *source (which must stay
 * valid until then) holds the sender's rank. Receives match messages in the
 * order they were posted, so later receives wait until this one has matched. The
 * message must hold count elements (another size is an error naming the
 * sender). Host memory. */
weftResult_t weftRecvAnyAsync(void* recvbuff, size_t count, weftDataType_t datatype, int* source,
                              weftComm_t comm, weftRequest_t* request);
weftResult_t weftBarrier(weftComm_t comm);

/* Gather, scatter and all-to-all with per-peer counts, with NCCL 2.28's
 * signatures. They run as point-to-point operations (a rank's own part is a local
 * copy), ordered on the communicator's queue like the other calls; parts of zero
 * elements send nothing. Inside weftGroupStart/End they are recorded with the
 * group's point-to-point operations and run together with them. Host memory:
 * stream must be NULL.
 * Gather: rank r's sendbuff (count elements) lands at recvbuff + r * count on the
 * root, which holds nranks * count; recvbuff is ignored on the other ranks. In
 * place at the root: sendbuff == recvbuff + root * count. */
weftResult_t weftGather(const void* sendbuff, void* recvbuff, size_t count, weftDataType_t datatype, int root,
                        weftComm_t comm, weftStream_t stream);
/* Scatter: block r of the root's sendbuff (nranks * count elements) lands in rank
 * r's recvbuff (count); sendbuff is ignored on the other ranks. In place at the
 * root: recvbuff == sendbuff + root * count. */
weftResult_t weftScatter(const void* sendbuff, void* recvbuff, size_t count, weftDataType_t datatype, int root,
                         weftComm_t comm, weftStream_t stream);
/* sendcounts[p] elements from sendbuff + sdispls[p] go to rank p; recvcounts[p]
 * elements from rank p land at recvbuff + rdispls[p]. Counts and displacements
 * are in elements, arrays of nranks, and must agree between each pair of ranks
 * (sendcounts[p] on rank r == recvcounts[r] on rank p). The arrays are read
 * during the call only (the Async form too); the parts of sendbuff and recvbuff
 * must not overlap. */
weftResult_t weftAlltoAllv(const void* sendbuff, const size_t* sendcounts, const size_t* sdispls, void* recvbuff,
                           const size_t* recvcounts, const size_t* rdispls, weftDataType_t datatype, weftComm_t comm,
                           weftStream_t stream);

/* Calls between weftGroupStart and weftGroupEnd are recorded, not run; weftGroupEnd
 * runs them (all point-to-point operations of a communicator together, so sends
 * and receives in any order cannot deadlock; then its collectives in order) and
 * returns the first error. Groups nest; only the outermost End runs. */
weftResult_t weftGroupStart(void);
weftResult_t weftGroupEnd(void);
/* Ends the outermost group as weftGroupEnd would, but runs nothing: the recorded
 * calls are dropped (their buffers untouched) and *seconds gets this rank's
 * estimate of the group, per communicator its point-to-point operations (the
 * busiest peer: alpha + beta x its bytes both ways, with the generic constants of
 * the link's class) plus each collective as weftCommExplainAlgorithm prices the
 * algorithm it would run (online tuning's measured time once settled, else the
 * prediction), summed. On device memory, from the communicator's first device
 * collective on (it chooses their path; refused before): a collective over cuda_p2p
 * by its alpha-beta-gamma formula with the device link class's constants, a staged
 * one as on host memory plus the copies through pinned memory. NCCL's
 * ncclGroupSimulateEnd. Local: every rank of a job should end the same group so,
 * as none of them communicates. Refused while inner groups are open. */
weftResult_t weftGroupSimulateEnd(double* seconds);

/* Pre-multiplied sum: every rank's input is multiplied by *scalar before the sum
 * (the scalar may differ per rank). Valid for this communicator and datatype.
 * weftScalarHostImmediate: *scalar (host memory) is read now. weftScalarDevice:
 * *scalar is read as each call with the op runs (it must stay valid until
 * weftRedOpDestroy): host memory then, or CUDA device memory, which only calls on
 * device buffers with a stream take, read in that stream's order. */
typedef enum { weftScalarDevice = 0, weftScalarHostImmediate = 1 } weftScalarResidence_t;
weftResult_t weftRedOpCreatePreMulSum(weftRedOp_t* op, void* scalar, weftDataType_t datatype,
                                      weftScalarResidence_t residence, weftComm_t comm);
weftResult_t weftRedOpDestroy(weftRedOp_t op, weftComm_t comm);

/* Non-blocking forms of the collectives, queued in order with weftAllReduceAsync. */
weftResult_t weftBroadcastAsync(const void* sendbuff, void* recvbuff, size_t count,
                                weftDataType_t datatype, int root, weftComm_t comm,
                                weftRequest_t* request);
weftResult_t weftReduceAsync(const void* sendbuff, void* recvbuff, size_t count,
                             weftDataType_t datatype, weftRedOp_t op, int root, weftComm_t comm,
                             weftRequest_t* request);
weftResult_t weftAllGatherAsync(const void* sendbuff, void* recvbuff, size_t sendcount,
                                weftDataType_t datatype, weftComm_t comm, weftRequest_t* request);
weftResult_t weftReduceScatterAsync(const void* sendbuff, void* recvbuff, size_t recvcount,
                                    weftDataType_t datatype, weftRedOp_t op, weftComm_t comm,
                                    weftRequest_t* request);
weftResult_t weftAlltoAllAsync(const void* sendbuff, void* recvbuff, size_t count,
                               weftDataType_t datatype, weftComm_t comm, weftRequest_t* request);
weftResult_t weftGatherAsync(const void* sendbuff, void* recvbuff, size_t count, weftDataType_t datatype,
                             int root, weftComm_t comm, weftRequest_t* request);
weftResult_t weftScatterAsync(const void* sendbuff, void* recvbuff, size_t count, weftDataType_t datatype,
                              int root, weftComm_t comm, weftRequest_t* request);
weftResult_t weftAlltoAllvAsync(const void* sendbuff, const size_t* sendcounts, const size_t* sdispls,
                                void* recvbuff, const size_t* recvcounts, const size_t* rdispls,
                                weftDataType_t datatype, weftComm_t comm, weftRequest_t* request);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* WEFT_WEFT_H_ */
