// libnccl.so.2 on weft: the NCCL C API as the CUDA toolkit's nccl.h declares it,
// each call mapped onto weft's (whose enums, unique id and result codes were made
// NCCL's shape for this). Compiled against that nccl.h, so every signature is
// checked by the compiler; check_symbols.py checks that every function it
// declares is exported, the profiling pnccl* names included.
//
// Symmetric-memory windows are registered and checked as NCCL does, but weft has
// no kernels of its own for them (weftCommWindowRegister).
// ncclGroupSimulateEnd gives weft's own estimate (weftGroupSimulateEnd). The
// datatypes, fp8 included, are numbered as NCCL's.
#include <dlfcn.h>
#include <nccl.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <set>
#include <string>

#include "weft/weft.h"

// ncclResetDebugInit is declared deprecated; it is still part of the ABI.
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

static_assert(sizeof(ncclUniqueId) == sizeof(weftUniqueId), "unique ids must have the same size");
static_assert(static_cast<int>(ncclNumTypes) == static_cast<int>(weftNumTypes) &&
                  static_cast<int>(ncclFloat8e5m2) == static_cast<int>(weftFloat8e5m2),
              "datatypes are numbered as NCCL's");
static_assert(static_cast<int>(ncclNumResults) == 8 && static_cast<int>(weftTimeout) == 8,
              "results 0-7 are shared; weftTimeout is weft's own");

namespace {

// Errors the shim itself raises, for ncclGetLastError (weft keeps its own).
thread_local std::string t_error;
thread_local bool t_error_is_shims = false;

ncclResult_t refuse(ncclResult_t rc, const std::string& why) {
  t_error = why;
  t_error_is_shims = true;
  return rc;
}

ncclResult_t from(weftResult_t rc) {
  t_error_is_shims = false;
  // A deadline passed: NCCL's nearest is a remote failure (a peer that stopped).
  if (rc == weftTimeout) return ncclRemoteError;
  return static_cast<ncclResult_t>(rc);
}

// Communicators this process revoked (NCCL's revoke is local), for the one call
// NCCL forbids after a revoke that weft would allow (finalize); forgotten when
// destroyed.
std::mutex g_revoked_mu;
std::set<ncclComm_t> g_revoked;

bool is_revoked(ncclComm_t c) {
  std::lock_guard<std::mutex> lock(g_revoked_mu);
  return g_revoked.count(c) != 0;
}

void forget(ncclComm_t c) {
  std::lock_guard<std::mutex> lock(g_revoked_mu);
  g_revoked.erase(c);
}

weftComm_t W(ncclComm_t c) { return reinterpret_cast<weftComm_t>(c); }
ncclComm_t N(weftComm_t c) { return reinterpret_cast<ncclComm_t>(c); }

weftUniqueId id_of(const ncclUniqueId& id) {
  weftUniqueId w;
  std::memcpy(&w, &id, sizeof(w));
  return w;
}

bool dtype_of(ncclDataType_t t, weftDataType_t* out) {
  if (static_cast<int>(t) < 0 || static_cast<int>(t) >= static_cast<int>(weftNumTypes)) return false;
  *out = static_cast<weftDataType_t>(t);  // int8 .. fp8 e5m2 share their numbers
  return true;
}

// Built-in ops share 0-4; weft numbers its pre-multiplied sums from weftNumOps,
// past its bitwise ops (5-7), which NCCL does not have.
bool op_of(ncclRedOp_t op, weftRedOp_t* out) {
  const int v = static_cast<int>(op);
  if (v < 0 || (v >= static_cast<int>(ncclNumOps) && v < static_cast<int>(weftNumOps))) return false;
  *out = static_cast<weftRedOp_t>(v);
  return true;
}

#define CHECK_DTYPE(fn, t, w)                                                                                  \
  weftDataType_t w;                                                                                           \
  if (!dtype_of(t, &w))                                                                                       \
    return refuse(ncclInvalidArgument, std::string(fn) + ": datatype " + std::to_string(static_cast<int>(t)) + \
                                           " is not a datatype")
#define CHECK_OP(fn, o, w)                                                                                   \
  weftRedOp_t w;                                                                                            \
  if (!op_of(o, &w))                                                                                        \
    return refuse(ncclInvalidArgument, std::string(fn) + ": invalid reduction op " + std::to_string(static_cast<int>(o)))

// ncclConfig_t, read as far as the caller's struct reaches (its size field):
// older programs pass shorter ones.
ncclResult_t config_of(const char* fn, const ncclConfig_t* c, weftConfig_t* w) {
  *w = WEFT_CONFIG_INITIALIZER;
  if (c == nullptr) return ncclSuccess;
  if (c->magic != 0xcafebeef)
    return refuse(ncclInvalidArgument, std::string(fn) + ": config was not initialized with NCCL_CONFIG_INITIALIZER");
  auto has = [&](size_t offset, size_t bytes) { return c->size >= offset + bytes; };
  if (has(offsetof(ncclConfig_t, blocking), sizeof(int)) && c->blocking != NCCL_CONFIG_UNDEF_INT)
    w->blocking = c->blocking;
  if (has(offsetof(ncclConfig_t, commName), sizeof(const char*)) && c->commName != nullptr)
    w->commName = c->commName;
  return ncclSuccess;
}

// ncclMemAlloc returns device memory where the calling thread has a CUDA
// context (through the driver the application loaded), else weft's host memory.
struct Driver {
  int (*ctx_get_device)(int*) = nullptr;
  int (*mem_alloc)(unsigned long long*, size_t) = nullptr;
  int (*mem_free)(unsigned long long) = nullptr;
  int (*attributes)(unsigned, const int*, void**, unsigned long long) = nullptr;
};
const Driver* driver() {
  static const Driver d = [] {
    Driver x;
    void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (lib == nullptr) return x;
    x.ctx_get_device = reinterpret_cast<int (*)(int*)>(dlsym(lib, "cuCtxGetDevice"));
    x.mem_alloc = reinterpret_cast<int (*)(unsigned long long*, size_t)>(dlsym(lib, "cuMemAlloc_v2"));
    x.mem_free = reinterpret_cast<int (*)(unsigned long long)>(dlsym(lib, "cuMemFree_v2"));
    x.attributes =
        reinterpret_cast<int (*)(unsigned, const int*, void**, unsigned long long)>(dlsym(lib, "cuPointerGetAttributes"));
    return x;
  }();
  return d.mem_alloc != nullptr && d.mem_free != nullptr && d.ctx_get_device != nullptr && d.attributes != nullptr
             ? &d
             : nullptr;
}
bool is_device_memory(const void* p) {
  const Driver* d = driver();
  if (d == nullptr) return false;
  const int attribute = 2;  // CU_POINTER_ATTRIBUTE_MEMORY_TYPE
  unsigned type = 0;
  void* data = &type;
  return d->attributes(1, &attribute, &data, reinterpret_cast<unsigned long long>(p)) == 0 && type == 2;
}

}  // namespace

extern "C" {

ncclResult_t ncclGetVersion(int* version) {
  if (version == nullptr) return refuse(ncclInvalidArgument, "ncclGetVersion: version is NULL");
  *version = NCCL_VERSION_CODE;  // the API this shim implements
  return ncclSuccess;
}

ncclResult_t ncclGetUniqueId(ncclUniqueId* uniqueId) {
  if (uniqueId == nullptr) return refuse(ncclInvalidArgument, "ncclGetUniqueId: uniqueId is NULL");
  weftUniqueId w;
  ncclResult_t rc = from(weftGetUniqueId(&w));
  if (rc == ncclSuccess) std::memcpy(uniqueId, &w, sizeof(w));
  return rc;
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank, ncclConfig_t* config) {
  weftConfig_t w;
  if (ncclResult_t rc = config_of("ncclCommInitRankConfig", config, &w); rc != ncclSuccess) return rc;
  weftComm_t c = nullptr;
  ncclResult_t rc = from(weftCommInitRankConfig(&c, nranks, id_of(commId), rank, &w));
  if (comm != nullptr) *comm = N(c);
  return rc;
}

ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank) {
  return ncclCommInitRankConfig(comm, nranks, commId, rank, nullptr);
}

// Every rank passes the same ids; weft's bootstrap needs one root.
ncclResult_t ncclCommInitRankScalable(ncclComm_t* newcomm, int nranks, int myrank, int nId, ncclUniqueId* commIds,
                                      ncclConfig_t* config) {
  if (nId < 1 || commIds == nullptr)
    return refuse(ncclInvalidArgument, "ncclCommInitRankScalable: needs at least one unique id");
  return ncclCommInitRankConfig(newcomm, nranks, commIds[0], myrank, config);
}

ncclResult_t ncclCommInitAll(ncclComm_t* comm, int ndev, const int* devlist) {
  return from(weftCommInitAll(reinterpret_cast<weftComm_t*>(comm), ndev, devlist));
}

// weftCommDestroy waits for the queued work; here only its error is reported.
ncclResult_t ncclCommFinalize(ncclComm_t comm) {
  if (is_revoked(comm)) return refuse(ncclInvalidUsage, "ncclCommFinalize: the communicator was revoked; destroy it");
  weftResult_t async = weftSuccess;
  ncclResult_t rc = from(weftCommGetAsyncError(W(comm), &async));
  return rc != ncclSuccess ? rc : from(async);
}

ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  forget(comm);
  return from(weftCommDestroy(W(comm)));
}
ncclResult_t ncclCommAbort(ncclComm_t comm) {
  forget(comm);
  return from(weftCommAbort(W(comm)));
}

ncclResult_t ncclCommRevoke(ncclComm_t comm, int revokeFlags) {
  static_assert(NCCL_REVOKE_DEFAULT == WEFT_REVOKE_DEFAULT, "revoke flags are NCCL's");
  ncclResult_t rc = from(weftCommRevoke(W(comm), revokeFlags));
  if (rc == ncclSuccess) {
    std::lock_guard<std::mutex> lock(g_revoked_mu);
    g_revoked.insert(comm);
  }
  return rc;
}

ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm, ncclConfig_t* config) {
  weftConfig_t w;
  if (ncclResult_t rc = config_of("ncclCommSplit", config, &w); rc != ncclSuccess) return rc;
  weftComm_t c = nullptr;
  ncclResult_t rc = from(weftCommSplit(W(comm), color, key, &c, config != nullptr ? &w : nullptr));
  if (newcomm != nullptr) *newcomm = N(c);
  return rc;
}

// weft's shrink never waits for the old communicator's queue, so
// NCCL_SHRINK_ABORT and the default behave alike.
ncclResult_t ncclCommShrink(ncclComm_t comm, int* excludeRanksList, int excludeRanksCount, ncclComm_t* newcomm,
                            ncclConfig_t* config, int) {
  weftConfig_t w;
  if (ncclResult_t rc = config_of("ncclCommShrink", config, &w); rc != ncclSuccess) return rc;
  weftComm_t c = nullptr;
  ncclResult_t rc =
      from(weftCommShrink(W(comm), excludeRanksList, excludeRanksCount, &c, config != nullptr ? &w : nullptr));
  if (newcomm != nullptr) *newcomm = N(c);
  return rc;
}

const char* ncclGetErrorString(ncclResult_t result) {
  return weftGetErrorString(static_cast<weftResult_t>(result));
}

const char* ncclGetLastError(ncclComm_t comm) {
  return t_error_is_shims ? t_error.c_str() : weftGetLastError(W(comm));
}

void ncclResetDebugInit() {}

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* asyncError) {
  if (asyncError == nullptr) return refuse(ncclInvalidArgument, "ncclCommGetAsyncError: asyncError is NULL");
  weftResult_t w = weftSuccess;
  ncclResult_t rc = from(weftCommGetAsyncError(W(comm), &w));
  *asyncError = from(w);
  return rc;
}

ncclResult_t ncclCommCount(const ncclComm_t comm, int* count) { return from(weftCommCount(W(comm), count)); }
ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int* device) { return from(weftCommCuDevice(W(comm), device)); }
ncclResult_t ncclCommUserRank(const ncclComm_t comm, int* rank) { return from(weftCommUserRank(W(comm), rank)); }

// Registration is a hint weft does not need: the handle is the buffer.
ncclResult_t ncclCommRegister(const ncclComm_t, void* buff, size_t, void** handle) {
  if (handle == nullptr) return refuse(ncclInvalidArgument, "ncclCommRegister: handle is NULL");
  *handle = buff;
  return ncclSuccess;
}
ncclResult_t ncclCommDeregister(const ncclComm_t, void*) { return ncclSuccess; }

ncclResult_t ncclCommWindowRegister(ncclComm_t comm, void* buff, size_t size, ncclWindow_t* win, int winFlags) {
  static_assert(NCCL_WIN_COLL_SYMMETRIC == WEFT_WIN_COLL_SYMMETRIC &&
                    NCCL_WIN_REQUIRED_ALIGNMENT == WEFT_WIN_REQUIRED_ALIGNMENT,
                "window flags are NCCL's");
  return from(weftCommWindowRegister(W(comm), buff, size, reinterpret_cast<weftWindow_t*>(win), winFlags));
}
ncclResult_t ncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win) {
  return from(weftCommWindowDeregister(W(comm), reinterpret_cast<weftWindow_t>(win)));
}

ncclResult_t ncclMemAlloc(void** ptr, size_t size) {
  if (ptr == nullptr) return refuse(ncclInvalidArgument, "ncclMemAlloc: ptr is NULL");
  const Driver* d = driver();
  int device = -1;
  if (d != nullptr && d->ctx_get_device(&device) == 0) {
    unsigned long long p = 0;
    if (d->mem_alloc(&p, size) != 0)
      return refuse(ncclUnhandledCudaError, "ncclMemAlloc: cuMemAlloc of " + std::to_string(size) + " bytes failed");
    *ptr = reinterpret_cast<void*>(p);
    return ncclSuccess;
  }
  return from(weftMemAlloc(ptr, size));
}

ncclResult_t ncclMemFree(void* ptr) {
  if (is_device_memory(ptr))
    return driver()->mem_free(reinterpret_cast<unsigned long long>(ptr)) == 0
               ? ncclSuccess
               : refuse(ncclUnhandledCudaError, "ncclMemFree: cuMemFree failed");
  return from(weftMemFree(ptr));
}

ncclResult_t ncclRedOpCreatePreMulSum(ncclRedOp_t* op, void* scalar, ncclDataType_t datatype,
                                      ncclScalarResidence_t residence, ncclComm_t comm) {
  CHECK_DTYPE("ncclRedOpCreatePreMulSum", datatype, dt);
  if (op == nullptr) return refuse(ncclInvalidArgument, "ncclRedOpCreatePreMulSum: op is NULL");
  weftRedOp_t w = weftSum;
  ncclResult_t rc = from(
      weftRedOpCreatePreMulSum(&w, scalar, dt, static_cast<weftScalarResidence_t>(residence), W(comm)));
  if (rc == ncclSuccess) *op = static_cast<ncclRedOp_t>(w);
  return rc;
}

ncclResult_t ncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm) {
  return from(weftRedOpDestroy(static_cast<weftRedOp_t>(op), W(comm)));
}

ncclResult_t ncclReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,
                        int root, ncclComm_t comm, cudaStream_t stream) {
  CHECK_DTYPE("ncclReduce", datatype, dt);
  CHECK_OP("ncclReduce", op, o);
  return from(weftReduce(sendbuff, recvbuff, count, dt, o, root, W(comm), stream));
}

ncclResult_t ncclBcast(void* buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
                       cudaStream_t stream) {
  CHECK_DTYPE("ncclBcast", datatype, dt);
  return from(weftBroadcast(buff, buff, count, dt, root, W(comm), stream));
}

ncclResult_t ncclBroadcast(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                           ncclComm_t comm, cudaStream_t stream) {
  CHECK_DTYPE("ncclBroadcast", datatype, dt);
  return from(weftBroadcast(sendbuff, recvbuff, count, dt, root, W(comm), stream));
}

ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                           ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  CHECK_DTYPE("ncclAllReduce", datatype, dt);
  CHECK_OP("ncclAllReduce", op, o);
  return from(weftAllReduce(sendbuff, recvbuff, count, dt, o, W(comm), stream));
}

ncclResult_t ncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount, ncclDataType_t datatype,
                               ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  CHECK_DTYPE("ncclReduceScatter", datatype, dt);
  CHECK_OP("ncclReduceScatter", op, o);
  return from(weftReduceScatter(sendbuff, recvbuff, recvcount, dt, o, W(comm), stream));
}

ncclResult_t ncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount, ncclDataType_t datatype,
                           ncclComm_t comm, cudaStream_t stream) {
  CHECK_DTYPE("ncclAllGather", datatype, dt);
  return from(weftAllGather(sendbuff, recvbuff, sendcount, dt, W(comm), stream));
}

ncclResult_t ncclAlltoAll(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                          ncclComm_t comm, cudaStream_t stream) {
  CHECK_DTYPE("ncclAlltoAll", datatype, dt);
  return from(weftAlltoAll(sendbuff, recvbuff, count, dt, W(comm), stream));
}

ncclResult_t ncclGather(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                        ncclComm_t comm, cudaStream_t stream) {
  CHECK_DTYPE("ncclGather", datatype, dt);
  return from(weftGather(sendbuff, recvbuff, count, dt, root, W(comm), stream));
}

ncclResult_t ncclScatter(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                         ncclComm_t comm, cudaStream_t stream) {
  CHECK_DTYPE("ncclScatter", datatype, dt);
  return from(weftScatter(sendbuff, recvbuff, count, dt, root, W(comm), stream));
}

ncclResult_t ncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                      cudaStream_t stream) {
  CHECK_DTYPE("ncclSend", datatype, dt);
  return from(weftSend(sendbuff, count, dt, peer, W(comm), stream));
}

ncclResult_t ncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                      cudaStream_t stream) {
  CHECK_DTYPE("ncclRecv", datatype, dt);
  return from(weftRecv(recvbuff, count, dt, peer, W(comm), stream));
}

ncclResult_t ncclGroupStart() { return from(weftGroupStart()); }
ncclResult_t ncclGroupEnd() { return from(weftGroupEnd()); }

// NCCL's estimate is in microseconds (its tuning model's unit).
ncclResult_t ncclGroupSimulateEnd(ncclSimInfo_t* info) {
  if (info == nullptr || info->magic != 0x74685283u ||
      info->size < offsetof(ncclSimInfo_t, estimatedTime) + sizeof(info->estimatedTime))
    return refuse(ncclInvalidArgument,
                  "ncclGroupSimulateEnd: simInfo is NULL or was not initialized with NCCL_SIM_INFO_INITIALIZER");
  double seconds = 0;
  const ncclResult_t rc = from(weftGroupSimulateEnd(&seconds));
  if (rc == ncclSuccess) info->estimatedTime = static_cast<float>(seconds * 1e6);
  return rc;
}

// The profiling interface's names: the same functions.
#define WEFT_PNCCL(name) __typeof__(name) p##name __attribute__((alias(#name)));
WEFT_PNCCL(ncclGetVersion)
WEFT_PNCCL(ncclGetUniqueId)
WEFT_PNCCL(ncclCommInitRankConfig)
WEFT_PNCCL(ncclCommInitRank)
WEFT_PNCCL(ncclCommInitRankScalable)
WEFT_PNCCL(ncclCommInitAll)
WEFT_PNCCL(ncclCommFinalize)
WEFT_PNCCL(ncclCommDestroy)
WEFT_PNCCL(ncclCommAbort)
WEFT_PNCCL(ncclCommRevoke)
WEFT_PNCCL(ncclCommSplit)
WEFT_PNCCL(ncclCommShrink)
WEFT_PNCCL(ncclGetErrorString)
WEFT_PNCCL(ncclGetLastError)
WEFT_PNCCL(ncclResetDebugInit)
WEFT_PNCCL(ncclCommGetAsyncError)
WEFT_PNCCL(ncclCommCount)
WEFT_PNCCL(ncclCommCuDevice)
WEFT_PNCCL(ncclCommUserRank)
WEFT_PNCCL(ncclCommRegister)
WEFT_PNCCL(ncclCommDeregister)
WEFT_PNCCL(ncclCommWindowRegister)
WEFT_PNCCL(ncclCommWindowDeregister)
WEFT_PNCCL(ncclMemAlloc)
WEFT_PNCCL(ncclMemFree)
WEFT_PNCCL(ncclRedOpCreatePreMulSum)
WEFT_PNCCL(ncclRedOpDestroy)
WEFT_PNCCL(ncclReduce)
WEFT_PNCCL(ncclBcast)
WEFT_PNCCL(ncclBroadcast)
WEFT_PNCCL(ncclAllReduce)
WEFT_PNCCL(ncclReduceScatter)
WEFT_PNCCL(ncclAllGather)
WEFT_PNCCL(ncclAlltoAll)
WEFT_PNCCL(ncclGather)
WEFT_PNCCL(ncclScatter)
WEFT_PNCCL(ncclSend)
WEFT_PNCCL(ncclRecv)
WEFT_PNCCL(ncclGroupStart)
WEFT_PNCCL(ncclGroupEnd)
WEFT_PNCCL(ncclGroupSimulateEnd)

}  // extern "C"
