// The C API: argument checks that need no communicator, the registry of live
// communicators (so use after destroy is an error, not a crash), and the
// thread's last error message. Nothing throws across this boundary.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <mutex>
#include <new>
#include <set>
#include <string>
#include <thread>
#include <vector>
#include <utility>

#include "base/log.h"
#include "base/params.h"
#include "comm/api_internal.h"
#include "transports/shm/memalloc.h"
#include "weft/weft.h"

namespace {
thread_local std::string t_last_error;
}  // namespace

namespace weft::api {

std::atomic<const weftComm*> g_last_live{nullptr};

weftResult_t report(const Status& st) {
  if (!st.ok()) {
    t_last_error = st.message();
    WEFT_WARN(COLL, "%s", st.message().c_str());
  }
  return st.code();
}

}  // namespace weft::api

namespace {
using weft::api::report;

std::mutex g_comms_mu;
std::set<const weftComm*>& live_comms() {
  static auto* s = new std::set<const weftComm*>;
  return *s;
}

weftResult_t invalid(const char* fmt, const char* what) {
  return report(weft::Error(weftInvalidArgument, fmt, what));
}

// The call shape weftCommGetAlgorithm and weftCommExplainAlgorithm (fn) ask about.
weftResult_t call_shape(const char* fn, const char* collective, size_t count, weftDataType_t datatype, int root,
                        weft::CollArgs* a) {
  if (collective == nullptr || !weft::tune::parse_coll(collective, &a->coll))
    return report(weft::Error(weftInvalidArgument,
                              "%s: unknown collective '%s' (allreduce, broadcast, reduce, allgather, "
                              "reducescatter, alltoall)", fn, collective ? collective : "(null)"));
  a->count = count;
  a->dtype = datatype;
  a->root = root;
  return weftSuccess;
}

}  // namespace

void weft::api::Use::lookup(weftComm* comm, const char* fn, weftResult_t* rc) {
  {
    std::lock_guard<std::mutex> lock(g_comms_mu);
    if (comm == nullptr || live_comms().count(comm) == 0) {
      *rc = report(weft::Error(weftInvalidArgument,
                               "%s: communicator %p is NULL, destroyed or was never initialized", fn,
                               static_cast<const void*>(comm)));
      return;
    }
    int state = comm->init_state.load(std::memory_order_acquire);
    if (state != weftSuccess) {
      *rc = report(state == weftInProgress
                       ? weft::Error(weftInvalidUsage,
                                     "%s: communicator %p is still initializing (weftConfig_t.blocking = 0): poll "
                                     "weftCommGetAsyncError until it is no longer weftInProgress",
                                     fn, static_cast<const void*>(comm))
                       : weft::Status(comm->init_error).prefix(std::string(fn) + ": non-blocking init failed: "));
      return;
    }
    g_last_live.store(comm, std::memory_order_release);
  }
  if (!enter(comm))
    *rc = report(weft::Error(weftInvalidArgument, "%s: communicator %p is being destroyed", fn,
                             static_cast<const void*>(comm)));
}

namespace {
using weft::api::Use;
using weft::api::g_last_live;

weftResult_t init(weftComm_t* out, const weft::boot::UniqueId& id, int nranks, int rank,
                  const weftConfig_t* config, weft::Lineage lineage = {},
                  std::unique_ptr<weft::boot::Bootstrap> boot = nullptr) {
  if (config != nullptr && config->magic == WEFT_CONFIG_MAGIC && config->blocking == 0) {
    // Non-blocking (NCCL's semantics): the handle now, the communicator once
    // weftCommGetAsyncError stops saying weftInProgress. The config's strings
    // must stay valid until then, as with NCCL.
    auto* c = new weftComm{};
    c->init_state.store(weftInProgress);
    weftConfig_t blocking = *config;
    blocking.blocking = 1;
    c->init_thread = std::thread([c, id, nranks, rank, blocking, lineage, boot = std::move(boot)]() mutable {
      std::unique_ptr<weft::Communicator> impl;
      weft::Status st;
      try {
        st = weft::Communicator::create(id, nranks, rank, &blocking, &impl, lineage, std::move(boot));
      } catch (const std::bad_alloc&) {
        st = weft::Error(weftSystemError, "rank %d: out of memory during init", rank);
      }
      if (st.ok()) c->impl = std::move(impl);
      else c->init_error = st;
      c->init_state.store(st.code(), std::memory_order_release);
    });
    std::lock_guard<std::mutex> lock(g_comms_mu);
    live_comms().insert(c);
    *out = c;
    return weftInProgress;
  }
  std::unique_ptr<weft::Communicator> impl;
  weft::Status st;
  try {
    st = weft::Communicator::create(id, nranks, rank, config, &impl, lineage, std::move(boot));
  } catch (const std::bad_alloc&) {
    st = weft::Error(weftSystemError, "rank %d: out of memory during init", rank);
  }
  if (!st.ok()) return report(st);
  auto* c = new weftComm{};
  c->impl = std::move(impl);
  std::lock_guard<std::mutex> lock(g_comms_mu);
  live_comms().insert(c);
  *out = c;
  return weftSuccess;
}

bool init_unfinished(weftComm_t comm) {
  std::lock_guard<std::mutex> lock(g_comms_mu);
  return comm != nullptr && live_comms().count(comm) != 0 && comm->init_state.load() != weftSuccess;
}

weftResult_t unregister(weftComm_t comm, const char* fn) {
  {
    std::lock_guard<std::mutex> lock(g_comms_mu);
    if (comm == g_last_live.load(std::memory_order_relaxed)) g_last_live.store(nullptr, std::memory_order_release);
    if (comm == nullptr || live_comms().erase(comm) == 0)
      return report(weft::Error(weftInvalidArgument,
                                "%s: communicator %p is NULL, destroyed or was never initialized", fn,
                                static_cast<const void*>(comm)));
  }
  // A non-blocking init still running ends first (at its deadline at worst).
  if (comm->init_thread.joinable()) comm->init_thread.join();
  // Calls already inside (another thread blocked in a collective) return first.
  comm->dead.store(true, std::memory_order_seq_cst);
  weft::SpinWait wait;
  while (comm->users.load(std::memory_order_seq_cst) != 0) wait.pause();
  return weftSuccess;
}

}  // namespace

extern "C" {

weftResult_t weftGetVersion(int* version) {
  if (version == nullptr) return invalid("%s: version is NULL", "weftGetVersion");
  *version = WEFT_VERSION_CODE;
  return weftSuccess;
}

const char* weftGetErrorString(weftResult_t result) {
  switch (result) {
    case weftSuccess: return "no error";
    case weftUnhandledCudaError: return "unhandled cuda error";
    case weftSystemError: return "unhandled system error (run with WEFT_DEBUG=INFO for details)";
    case weftInternalError: return "internal error - please report this issue";
    case weftInvalidArgument: return "invalid argument";
    case weftInvalidUsage: return "invalid usage";
    case weftRemoteError: return "remote process exited or there was a network error";
    case weftInProgress: return "operation in progress";
    case weftTimeout: return "operation timed out (WEFT_TIMEOUT_MS)";
    default: return "unknown result code";
  }
}

const char* weftGetLastError(weftComm_t comm) {
  if (!t_last_error.empty() || comm == nullptr) return t_last_error.c_str();
  weftResult_t rc;
  Use c(comm, "weftGetLastError", &rc);
  if (!c) return t_last_error.c_str();
  t_last_error = c->async_error().message();
  return t_last_error.c_str();
}

weftResult_t weftGetUniqueId(weftUniqueId* uniqueId) {
  if (uniqueId == nullptr) return invalid("%s: uniqueId is NULL", "weftGetUniqueId");
  weft::boot::UniqueId id;
  weft::Status st = weft::boot::create_root(&id);
  if (!st.ok()) return report(st);
  weft::boot::pack(id, uniqueId);
  return weftSuccess;
}

weftResult_t weftCommInitRankConfig(weftComm_t* comm, int nranks, weftUniqueId commId, int rank,
                                    weftConfig_t* config) {
  if (comm == nullptr) return invalid("%s: comm is NULL", "weftCommInitRank");
  *comm = nullptr;
  weft::boot::UniqueId id;
  weft::Status st = weft::boot::unpack(commId, &id);
  if (!st.ok()) return report(st);
  return init(comm, id, nranks, rank, config);
}

weftResult_t weftCommInitRank(weftComm_t* comm, int nranks, weftUniqueId commId, int rank) {
  return weftCommInitRankConfig(comm, nranks, commId, rank, nullptr);
}

weftResult_t weftCommInitFromEnv(weftComm_t* comm, weftConfig_t* config) {
  if (comm == nullptr) return invalid("%s: comm is NULL", "weftCommInitFromEnv");
  *comm = nullptr;
  weft::boot::LaunchEnv env;
  weft::Status st = weft::boot::read_launch_env(&env);
  weft::boot::UniqueId id;
  if (st.ok()) st = weft::boot::unique_id_from_env(env, weft::Deadline::from_params(), &id);
  if (!st.ok()) return report(st);
  weftResult_t rc = init(comm, id, env.nranks, env.rank, config);
  // Every rank has joined once a blocking init returns: nobody needs the file any more,
  // and removing it keeps a later job from waiting on a stale one.
  if (rc == weftSuccess && env.rank == 0 && !env.rendezvous_file.empty()) unlink(env.rendezvous_file.c_str());
  return rc;
}

weftResult_t weftCommSplit(weftComm_t comm, int color, int key, weftComm_t* newcomm, weftConfig_t* config) {
  if (newcomm == nullptr) return invalid("%s: newcomm is NULL", "weftCommSplit");
  *newcomm = nullptr;
  if (color < 0 && color != WEFT_SPLIT_NOCOLOR)
    return report(weft::Error(weftInvalidArgument, "weftCommSplit: color %d is negative (WEFT_SPLIT_NOCOLOR is %d)",
                              color, WEFT_SPLIT_NOCOLOR));
  weft::boot::UniqueId id;
  int nranks = 0, rank = 0;
  weft::Lineage lineage;
  std::unique_ptr<weft::boot::Bootstrap> boot;
  {
    weftResult_t rc;
    Use c(comm, "weftCommSplit", &rc);
    if (!c) return rc;
    weft::Status st = c->split(color, key, &id, &nranks, &rank, &lineage, &boot);
    if (!st.ok()) return report(st.prefix("rank " + std::to_string(c->rank()) + ": weftCommSplit: "));
  }
  if (nranks == 0) return weftSuccess;
  return init(newcomm, id, nranks, rank, config, lineage, std::move(boot));
}

weftResult_t weftCommShrink(weftComm_t comm, const int* excludeRanks, int n, weftComm_t* newcomm,
                            weftConfig_t* config) {
  if (newcomm == nullptr) return invalid("%s: newcomm is NULL", "weftCommShrink");
  *newcomm = nullptr;
  weft::boot::UniqueId id;
  int nranks = 0, rank = 0, old_rank = 0;
  {
    weftResult_t rc;
    Use c(comm, "weftCommShrink", &rc);
    if (!c) return rc;
    old_rank = c->rank();
    weft::Status st = c->shrink(excludeRanks, n, &id, &nranks, &rank);
    if (!st.ok()) return report(st.prefix("rank " + std::to_string(old_rank) + ": weftCommShrink: "));
  }
  weftResult_t rc = init(newcomm, id, nranks, rank, config);
  if (rc != weftSuccess && rc != weftInProgress) {
    // Its errors number ranks as the new communicator does: say how that maps.
    std::string host(id.host, strnlen(id.host, sizeof id.host));
    t_last_error = "rank " + std::to_string(old_rank) + ": weftCommShrink (rank " + std::to_string(rank) + " of " +
                   std::to_string(nranks) + " in the new communicator, whose root is at " + host + ":" +
                   std::to_string(id.port) + "): " + t_last_error +
                   " (every rank that stays must call weftCommShrink, with the same excludeRanks)";
  }
  return rc;
}

weftResult_t weftCommGetFailedRanks(weftComm_t comm, int* ranks, int max, int* n) {
  if (n == nullptr || max < 0 || (max > 0 && ranks == nullptr))
    return invalid("%s: n is NULL, max is negative, or ranks is NULL with max > 0", "weftCommGetFailedRanks");
  weftResult_t rc;
  Use c(comm, "weftCommGetFailedRanks", &rc);
  if (!c) return rc;
  const std::vector<int> lost = c->failed_ranks();
  *n = static_cast<int>(lost.size());
  std::copy_n(lost.begin(), std::min<size_t>(lost.size(), static_cast<size_t>(max)), ranks);
  return weftSuccess;
}

weftResult_t weftCommInitAll(weftComm_t* comms, int ndev, const int* devlist) {
  if (comms == nullptr) return invalid("%s: comms is NULL", "weftCommInitAll");
  if (ndev < 1) return report(weft::Error(weftInvalidArgument, "weftCommInitAll: ndev must be >= 1, got %d", ndev));
  if (devlist != nullptr)
    return invalid("%s: devlist must be NULL (host memory only; no device buffers yet)", "weftCommInitAll");
  weftUniqueId uid;
  weftResult_t rc = weftGetUniqueId(&uid);
  if (rc != weftSuccess) return rc;
  weft::boot::UniqueId id;
  weft::Status st = weft::boot::unpack(uid, &id);
  if (!st.ok()) return report(st);
  for (int r = 0; r < ndev; ++r) comms[r] = nullptr;
  // Init blocks until every rank has joined: one thread per rank.
  std::vector<weftResult_t> rcs(static_cast<size_t>(ndev), weftSuccess);
  std::vector<std::string> errors(static_cast<size_t>(ndev));
  std::vector<std::thread> threads;
  for (int r = 0; r < ndev; ++r)
    threads.emplace_back([&, r] {
      auto i = static_cast<size_t>(r);
      rcs[i] = init(&comms[i], id, ndev, r, nullptr);
      if (rcs[i] != weftSuccess) errors[i] = t_last_error;
    });
  for (std::thread& t : threads) t.join();
  for (int r = 0; r < ndev; ++r)
    if (rcs[static_cast<size_t>(r)] != weftSuccess) {
      for (int q = 0; q < ndev; ++q)
        if (comms[q] != nullptr) weftCommDestroy(comms[q]);
      t_last_error = errors[static_cast<size_t>(r)];
      return rcs[static_cast<size_t>(r)];
    }
  return weftSuccess;
}

weftResult_t weftCommDestroy(weftComm_t comm) {
  weftResult_t rc = unregister(comm, "weftCommDestroy");
  if (rc != weftSuccess) return rc;
  delete comm;
  return weftSuccess;
}

weftResult_t weftCommAbort(weftComm_t comm) {
  // A non-blocking init that has not ended (or failed) has nothing to abort yet:
  // destroy waits for its thread.
  if (!init_unfinished(comm)) {
    weftResult_t rc;
    Use c(comm, "weftCommAbort", &rc);
    if (!c) return rc;
    // Calls of this communicator blocked on other threads fail promptly (and
    // the other ranks' with them); destroy then waits for them to return.
    c->abort("weftCommAbort called");
  }
  return weftCommDestroy(comm);
}

weftResult_t weftCommRevoke(weftComm_t comm, int flags) {
  if (flags != WEFT_REVOKE_DEFAULT)
    return report(weft::Error(weftInvalidArgument, "weftCommRevoke: flags must be WEFT_REVOKE_DEFAULT (0), got %d",
                              flags));
  if (init_unfinished(comm)) return invalid("%s: the communicator's non-blocking init has not finished", "weftCommRevoke");
  weftResult_t rc;
  Use c(comm, "weftCommRevoke", &rc);
  if (!c) return rc;
  c->revoke();
  return weftSuccess;
}

weftResult_t weftCommWindowRegister(weftComm_t comm, void* buff, size_t size, weftWindow_t* win, int flags) {
  weftResult_t rc;
  Use c(comm, "weftCommWindowRegister", &rc);
  if (!c) return rc;
  if (win != nullptr) *win = nullptr;
  weft::Status st = c->register_window(buff, size, flags, win);
  return report(st.ok() ? st : st.prefix("rank " + std::to_string(c->rank()) + ": "));
}

weftResult_t weftCommWindowDeregister(weftComm_t comm, weftWindow_t win) {
  weftResult_t rc;
  Use c(comm, "weftCommWindowDeregister", &rc);
  if (!c) return rc;
  weft::Status st = c->deregister_window(win);
  return report(st.ok() ? st : st.prefix("rank " + std::to_string(c->rank()) + ": "));
}

weftResult_t weftCommGetAsyncError(weftComm_t comm, weftResult_t* asyncError) {
  if (asyncError == nullptr) return invalid("%s: asyncError is NULL", "weftCommGetAsyncError");
  {
    // A non-blocking init: weftInProgress, or how it ended.
    std::lock_guard<std::mutex> lock(g_comms_mu);
    if (comm != nullptr && live_comms().count(comm) != 0) {
      int state = comm->init_state.load(std::memory_order_acquire);
      if (state != weftSuccess) {
        *asyncError = static_cast<weftResult_t>(state);
        if (state != weftInProgress) t_last_error = comm->init_error.message();
        return weftSuccess;
      }
    }
  }
  weftResult_t rc;
  Use c(comm, "weftCommGetAsyncError", &rc);
  if (!c) return rc;
  weft::Status st = c->poll_async_error();
  // Revoked: settled once no other call holds it and nothing is queued or running.
  if (c->revoked()) *asyncError = comm->users.load() == 1 && c->quiescent() ? weftSuccess : weftInProgress;
  else *asyncError = st.code();
  return weftSuccess;
}

weftResult_t weftCommCount(const weftComm_t comm, int* count) {
  weftResult_t rc;
  Use c(comm, "weftCommCount", &rc);
  if (!c) return rc;
  if (count == nullptr) return invalid("%s: count is NULL", "weftCommCount");
  *count = c->nranks();
  return weftSuccess;
}

weftResult_t weftCommDump(weftComm_t comm, char* line, size_t len) {
  weftResult_t rc;
  Use c(comm, "weftCommDump", &rc);
  if (!c) return rc;
  if (line != nullptr && len == 0) return invalid("%s: len is 0", "weftCommDump");
  std::string text = c->dump();
  if (line != nullptr) std::snprintf(line, len, "%s", text.c_str());
  return weftSuccess;
}

weftResult_t weftCommUserRank(const weftComm_t comm, int* rank) {
  weftResult_t rc;
  Use c(comm, "weftCommUserRank", &rc);
  if (!c) return rc;
  if (rank == nullptr) return invalid("%s: rank is NULL", "weftCommUserRank");
  *rank = c->rank();
  return weftSuccess;
}

weftResult_t weftCommCuDevice(const weftComm_t comm, int* device) {
  weftResult_t rc;
  Use c(comm, "weftCommCuDevice", &rc);
  if (!c) return rc;
  if (device == nullptr) return invalid("%s: device is NULL", "weftCommCuDevice");
  *device = c->cu_device();
  return weftSuccess;
}

weftResult_t weftCommGetAlgorithm(weftComm_t comm, const char* collective, size_t count, weftDataType_t datatype,
                                  int root, const char** algorithm, int* settled) {
  weftResult_t rc;
  Use c(comm, "weftCommGetAlgorithm", &rc);
  if (!c) return rc;
  weft::CollArgs a;
  rc = call_shape("weftCommGetAlgorithm", collective, count, datatype, root, &a);
  if (rc != weftSuccess) return rc;
  if (algorithm == nullptr) return invalid("%s: algorithm is NULL", "weftCommGetAlgorithm");
  bool done = true;
  rc = report(c->query_algorithm(a, algorithm, &done));
  if (rc == weftSuccess && settled != nullptr) *settled = done ? 1 : 0;
  return rc;
}

weftResult_t weftCommExplainAlgorithm(weftComm_t comm, const char* collective, size_t count,
                                      weftDataType_t datatype, int root, weftAlgoExplanation_t* out) {
  weftResult_t rc;
  Use c(comm, "weftCommExplainAlgorithm", &rc);
  if (!c) return rc;
  weft::CollArgs a;
  rc = call_shape("weftCommExplainAlgorithm", collective, count, datatype, root, &a);
  if (rc != weftSuccess) return rc;
  if (out == nullptr) return invalid("%s: out is NULL", "weftCommExplainAlgorithm");
  return report(c->explain_algorithm(a, out));
}

weftResult_t weftCommGetTuning(weftComm_t comm, char* buf, size_t size, size_t* needed) {
  weftResult_t rc;
  Use c(comm, "weftCommGetTuning", &rc);
  if (!c) return rc;
  if (needed == nullptr || (buf == nullptr && size > 0))
    return invalid("%s: needed is NULL, or buf is NULL with a size", "weftCommGetTuning");
  std::string text;
  rc = report(c->tuning_state(&text));
  if (rc != weftSuccess) return rc;
  *needed = text.size() + 1;
  if (size > 0) {
    size_t n = std::min(size - 1, text.size());
    std::memcpy(buf, text.data(), n);
    buf[n] = '\0';
  }
  return weftSuccess;
}

weftResult_t weftMemAlloc(void** ptr, size_t size) { return report(weft::shm::mem_alloc(size, ptr)); }

weftResult_t weftMemFree(void* ptr) { return report(weft::shm::mem_free(ptr)); }

weftResult_t weftTest(weftRequest_t* request, int* done) {
  if (request == nullptr || done == nullptr) return invalid("%s: request or done is NULL", "weftTest");
  if (*request == nullptr) {  // completed and freed earlier
    *done = 1;
    return weftSuccess;
  }
  if (!(*request)->done.load(std::memory_order_acquire)) {
    // Nobody else may be driving it (WEFT_PROGRESS_THREADS=0): one pass.
    weft::engine::Engine::get().progress();
    if (!(*request)->done.load(std::memory_order_acquire)) {
      *done = 0;
      return weftInProgress;
    }
  }
  *done = 1;
  weft::Status st = std::move((*request)->result);
  delete std::exchange(*request, nullptr);
  return report(st);
}

weftResult_t weftWait(weftRequest_t* request) {
  if (request == nullptr) return invalid("%s: request is NULL", "weftWait");
  if (*request == nullptr) return weftSuccess;  // completed and freed earlier
  return report(weft::Communicator::wait(std::exchange(*request, nullptr)));
}

}  // extern "C"
