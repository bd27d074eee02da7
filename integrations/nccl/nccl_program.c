/* A program written for NCCL, compiled against the CUDA toolkit's nccl.h and
 * linked with the shim: the collectives and send/recv, results checked.
 *
 *   nccl-program host|device ID_FILE       (one process per rank under weft-run)
 *   nccl-program probe                     (exit 0 with a CUDA device, 77 without)
 *
 * host: plain host buffers on stream 0. device: cudaMalloc'd buffers on a
 * stream of the program's own; the results are copied back after a stream
 * synchronize. Rank 0 writes the unique id to ID_FILE; the others read it. */
#include <nccl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int g_rank, g_n, g_device, g_failures;
static int g_cuda_device = -1; /* the device set before init (device mode) */
static cudaStream_t g_stream;

static void fail(const char* what, const char* why) {
  fprintf(stderr, "rank %d: FAIL %s: %s\n", g_rank, what, why);
  ++g_failures;
}

static int ok(ncclResult_t rc, ncclComm_t comm, const char* what) {
  if (rc == ncclSuccess) return 1;
  fail(what, ncclGetLastError(comm));
  return 0;
}

/* A buffer of n ints the collective works on: host memory, or device memory
 * with a host twin. */
typedef struct {
  int32_t* host;
  int32_t* dev;
  size_t n;
} Buf;

static Buf make(size_t n) {
  Buf b = {calloc(n, sizeof(int32_t)), NULL, n};
  if (g_device && cudaMalloc((void**)&b.dev, n * sizeof(int32_t)) != cudaSuccess) fail("cudaMalloc", "failed");
  return b;
}
static int32_t* at(Buf* b) { return g_device ? b->dev : b->host; }
static void put(Buf* b) {
  if (g_device) cudaMemcpyAsync(b->dev, b->host, b->n * sizeof(int32_t), cudaMemcpyHostToDevice, g_stream);
}
static void get(Buf* b) {
  if (!g_device) return;
  cudaMemcpyAsync(b->host, b->dev, b->n * sizeof(int32_t), cudaMemcpyDeviceToHost, g_stream);
  if (cudaStreamSynchronize(g_stream) != cudaSuccess) fail("cudaStreamSynchronize", "failed");
}
static void release(Buf* b) {
  free(b->host);
  if (g_device) cudaFree(b->dev);
}

/* Rank r's value at element i: distinct per rank, exact in int32. */
static int32_t value(int r, size_t i) { return (r + 1) * (int32_t)(i % 13 + 1) + 1000 * r; }

static void expect(const char* what, const int32_t* got, size_t n, int32_t (*want)(size_t)) {
  for (size_t i = 0; i < n; ++i)
    if (got[i] != want(i)) {
      char why[96];
      snprintf(why, sizeof(why), "element %zu is %d, not %d", i, got[i], want(i));
      fail(what, why);
      return;
    }
}

static size_t g_count = 1000003;
static int32_t want_sum(size_t i) {
  int32_t s = 0;
  for (int r = 0; r < g_n; ++r) s += value(r, i);
  return s;
}
static int32_t want_gather(size_t i) { return value((int)(i / g_count), i % g_count); }
static int32_t want_scatter(size_t i) { return want_sum((size_t)g_rank * g_count + i); }
static int g_root;
static int32_t want_root(size_t i) { return value(g_root, i); }
static int32_t want_left(size_t i) { return value((g_rank + g_n - 1) % g_n, i); }

/* fp8 E4M3 (ncclFloat8e4m3): rank r holds ((i + r) % 4 + 1) / 8 at element i. Up to
 * 4 ranks every partial sum is k / 8 with k <= 10, which E4M3's 4-bit significand
 * holds exactly. The code of k / 8 (1 <= k <= 15), worked out from the format: exponent
 * floor(log2 k) - 3 (bias 7), the bits of k below its leading one as the mantissa. */
static uint8_t e4m3_eighths(int k) {
  int top = 0;
  while ((k >> (top + 1)) != 0) ++top;
  return (uint8_t)(((top - 3 + 7) << 3) | ((k << (3 - top)) & 7));
}
static int fp8_eighths(int r, size_t i) { return (int)((i + (size_t)r) % 4) + 1; }

static int exchange_id(const char* path, ncclUniqueId* id) {
  if (g_rank == 0) {
    char tmp[4096];
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    FILE* f = fopen(tmp, "wb");
    if (f == NULL || fwrite(id, sizeof(*id), 1, f) != 1 || fclose(f) != 0 || rename(tmp, path) != 0) return 0;
    return 1;
  }
  for (int tries = 0; tries < 3000; ++tries) { /* 30 s */
    FILE* f = fopen(path, "rb");
    if (f != NULL) {
      size_t got = fread(id, sizeof(*id), 1, f);
      fclose(f);
      if (got == 1) return 1;
    }
    usleep(10000);
  }
  return 0;
}

int main(int argc, char** argv) {
  if (argc == 2 && strcmp(argv[1], "probe") == 0) {
    int devices = 0;
    if (cudaGetDeviceCount(&devices) == cudaSuccess && devices > 0) return 0;
    printf("skipped: no CUDA device\n");
    return 77;
  }
  if (argc != 3 || (strcmp(argv[1], "host") != 0 && strcmp(argv[1], "device") != 0)) {
    fprintf(stderr, "usage: %s host|device ID_FILE | probe\n", argv[0]);
    return 2;
  }
  g_device = strcmp(argv[1], "device") == 0;
  const char* r = getenv("WEFT_RANK");
  const char* n = getenv("WEFT_NRANKS");
  if (r == NULL || n == NULL) {
    fprintf(stderr, "run under weft-run (WEFT_RANK, WEFT_NRANKS)\n");
    return 2;
  }
  g_rank = atoi(r);
  g_n = atoi(n);
  if (g_device) {
    int devices = 1;
    cudaGetDeviceCount(&devices);
    g_cuda_device = g_rank % devices;
    if (cudaSetDevice(g_cuda_device) != cudaSuccess || cudaStreamCreate(&g_stream) != cudaSuccess) {
      fail("CUDA set-up", "cudaSetDevice or cudaStreamCreate failed");
      return 1;
    }
  }
  int version = 0;
  ok(ncclGetVersion(&version), NULL, "ncclGetVersion");
  if (version != NCCL_VERSION_CODE) fail("ncclGetVersion", "not the header's version");

  ncclUniqueId id;
  if (g_rank == 0 && !ok(ncclGetUniqueId(&id), NULL, "ncclGetUniqueId")) return 1;
  if (!exchange_id(argv[2], &id)) {
    fail("unique id exchange", argv[2]);
    return 1;
  }
  ncclComm_t comm;
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.commName = "nccl-program";
  if (!ok(ncclCommInitRankConfig(&comm, g_n, id, g_rank, &config), NULL, "ncclCommInitRankConfig")) return 1;
  int count = -1, me = -1, device = -2;
  ok(ncclCommCount(comm, &count), comm, "ncclCommCount");
  ok(ncclCommUserRank(comm, &me), comm, "ncclCommUserRank");
  ok(ncclCommCuDevice(comm, &device), comm, "ncclCommCuDevice");
  if (count != g_n || me != g_rank) fail("count/rank", "not the launcher's");
  if (device != g_cuda_device) fail("ncclCommCuDevice", "not the device current at init (-1 without CUDA)");

  const size_t c = g_count;
  Buf a = make(c * (size_t)g_n), b = make(c * (size_t)g_n);
  /* All-reduce, out of place and in place. */
  for (int in_place = 0; in_place < 2; ++in_place) {
    for (size_t i = 0; i < c; ++i) a.host[i] = value(g_rank, i);
    put(&a);
    Buf* out = in_place ? &a : &b;
    if (ok(ncclAllReduce(at(&a), at(out), c, ncclInt32, ncclSum, comm, g_stream), comm, "ncclAllReduce")) {
      get(out);
      expect(in_place ? "all-reduce in place" : "all-reduce", out->host, c, want_sum);
    }
  }
  /* All-gather. */
  for (size_t i = 0; i < c; ++i) a.host[i] = value(g_rank, i);
  put(&a);
  if (ok(ncclAllGather(at(&a), at(&b), c, ncclInt32, comm, g_stream), comm, "ncclAllGather")) {
    get(&b);
    expect("all-gather", b.host, c * (size_t)g_n, want_gather);
  }
  /* Reduce-scatter. */
  for (size_t i = 0; i < c * (size_t)g_n; ++i) a.host[i] = value(g_rank, i);
  put(&a);
  if (ok(ncclReduceScatter(at(&a), at(&b), c, ncclInt32, ncclSum, comm, g_stream), comm, "ncclReduceScatter")) {
    get(&b);
    expect("reduce-scatter", b.host, c, want_scatter);
  }
  /* Broadcast from the last rank, and ncclBcast in place from rank 0. */
  for (int k = 0; k < 2; ++k) {
    g_root = k == 0 ? g_n - 1 : 0;
    for (size_t i = 0; i < c; ++i) a.host[i] = g_rank == g_root ? value(g_rank, i) : -1;
    put(&a);
    ncclResult_t rc = k == 0 ? ncclBroadcast(at(&a), at(&b), c, ncclInt32, g_root, comm, g_stream)
                             : ncclBcast(at(&a), c, ncclInt32, g_root, comm, g_stream);
    if (ok(rc, comm, k == 0 ? "ncclBroadcast" : "ncclBcast")) {
      Buf* out = k == 0 ? &b : &a;
      get(out);
      expect(k == 0 ? "broadcast" : "bcast in place", out->host, c, want_root);
    }
  }
  /* Send/recv ring in a group. */
  if (g_n > 1) {
    for (size_t i = 0; i < c; ++i) a.host[i] = value(g_rank, i);
    put(&a);
    ncclGroupStart();
    ncclSend(at(&a), c, ncclInt32, (g_rank + 1) % g_n, comm, g_stream);
    ncclRecv(at(&b), c, ncclInt32, (g_rank + g_n - 1) % g_n, comm, g_stream);
    if (ok(ncclGroupEnd(), comm, "send/recv group")) {
      get(&b);
      expect("send/recv ring", b.host, c, want_left);
    }
  }
  /* fp8 all-reduce (NCCL 2.24+'s ncclFloat8e4m3): the sum of every rank's eighths. */
  if (g_n <= 4) {
    uint8_t* in = (uint8_t*)a.host;
    for (size_t i = 0; i < c; ++i) in[i] = e4m3_eighths(fp8_eighths(g_rank, i));
    put(&a);
    if (ok(ncclAllReduce(at(&a), at(&b), c, ncclFloat8e4m3, ncclSum, comm, g_stream), comm, "ncclAllReduce fp8")) {
      get(&b);
      const uint8_t* out = (const uint8_t*)b.host;
      size_t wrong = 0;
      for (size_t i = 0; i < c; ++i) {
        int k = 0;
        for (int r = 0; r < g_n; ++r) k += fp8_eighths(r, i);
        wrong += out[i] != e4m3_eighths(k);
      }
      if (wrong != 0) fail("fp8 all-reduce", "wrong elements");
    }
  }
  /* ncclGroupSimulateEnd: an estimate, and nothing run (host memory only). */
  if (!g_device) {
    ncclSimInfo_t sim = NCCL_SIM_INFO_INITIALIZER;
    for (size_t i = 0; i < c; ++i) b.host[i] = -5;
    ncclGroupStart();
    ncclAllReduce(at(&a), at(&b), c, ncclInt32, ncclSum, comm, g_stream);
    if (ok(ncclGroupSimulateEnd(&sim), comm, "ncclGroupSimulateEnd")) {
      if (!(sim.estimatedTime > 0 && sim.estimatedTime < 1e7)) fail("ncclGroupSimulateEnd", "no estimate in us");
      if (b.host[0] != -5 || b.host[c - 1] != -5) fail("ncclGroupSimulateEnd", "the all-reduce ran");
    }
    ncclSimInfo_t raw;
    memset(&raw, 0, sizeof raw);
    ncclGroupStart();
    if (ncclGroupSimulateEnd(&raw) != ncclInvalidArgument) fail("ncclGroupSimulateEnd", "uninitialized simInfo taken");
    ncclGroupEnd();
  }
  /* A symmetric window over ncclMemAlloc memory, an all-reduce in place on it. */
  void* mem = NULL;
  const size_t wbytes = (c * sizeof(int32_t) + NCCL_WIN_REQUIRED_ALIGNMENT - 1) / NCCL_WIN_REQUIRED_ALIGNMENT *
                        NCCL_WIN_REQUIRED_ALIGNMENT;
  if (ok(ncclMemAlloc(&mem, wbytes), comm, "ncclMemAlloc")) {
    ncclWindow_t win = NULL;
    if (ok(ncclCommWindowRegister(comm, mem, wbytes, &win, NCCL_WIN_COLL_SYMMETRIC), comm, "ncclCommWindowRegister")) {
      Buf w = {a.host, (int32_t*)mem, c};
      for (size_t i = 0; i < c; ++i) a.host[i] = value(g_rank, i);
      if (g_device) put(&w);
      else memcpy(mem, a.host, c * sizeof(int32_t));
      if (ok(ncclAllReduce(mem, mem, c, ncclInt32, ncclSum, comm, g_stream), comm, "ncclAllReduce on a window")) {
        if (g_device) get(&w);
        else memcpy(a.host, mem, c * sizeof(int32_t));
        expect("all-reduce on a symmetric window", a.host, c, want_sum);
      }
      ok(ncclCommWindowDeregister(comm, win), comm, "ncclCommWindowDeregister");
    }
    ok(ncclMemFree(mem), comm, "ncclMemFree");
  }

  /* ncclCommRevoke of a split communicator on every rank: it settles (ncclInProgress,
   * then ncclSuccess), refuses collectives and finalize, and still splits. */
  ncclComm_t doomed = NULL, again = NULL;
  if (ok(ncclCommSplit(comm, 0, g_rank, &doomed, NULL), comm, "ncclCommSplit")) {
    if (ncclCommRevoke(doomed, 1) != ncclInvalidArgument) fail("ncclCommRevoke", "flags 1 taken");
    ok(ncclCommRevoke(doomed, NCCL_REVOKE_DEFAULT), doomed, "ncclCommRevoke");
    ncclResult_t state = ncclInProgress;
    for (int tries = 0; tries < 1000 && state == ncclInProgress; ++tries) {
      if (!ok(ncclCommGetAsyncError(doomed, &state), doomed, "ncclCommGetAsyncError after revoke")) break;
      if (state == ncclInProgress) usleep(10000);
    }
    if (state != ncclSuccess) fail("ncclCommRevoke", "the communicator did not settle to ncclSuccess");
    if (ncclAllReduce(at(&a), at(&b), c, ncclInt32, ncclSum, doomed, g_stream) != ncclInvalidUsage)
      fail("ncclCommRevoke", "a collective on the revoked communicator was not refused");
    if (ncclCommFinalize(doomed) != ncclInvalidUsage) fail("ncclCommRevoke", "finalize after revoke was not refused");
    if (ok(ncclCommSplit(doomed, 0, g_rank, &again, NULL), doomed, "ncclCommSplit of the revoked communicator")) {
      for (size_t i = 0; i < c; ++i) a.host[i] = value(g_rank, i);
      put(&a);
      if (ok(ncclAllReduce(at(&a), at(&b), c, ncclInt32, ncclSum, again, g_stream), again, "ncclAllReduce after")) {
        get(&b);
        expect("all-reduce on the split of a revoked communicator", b.host, c, want_sum);
      }
      ok(ncclCommDestroy(again), NULL, "ncclCommDestroy of the split");
    }
    ok(ncclCommDestroy(doomed), NULL, "ncclCommDestroy of the revoked communicator");
  }

  ncclResult_t async = ncclSuccess;
  ok(ncclCommGetAsyncError(comm, &async), comm, "ncclCommGetAsyncError");
  if (async != ncclSuccess) fail("async error", ncclGetErrorString(async));
  ok(ncclCommFinalize(comm), comm, "ncclCommFinalize");
  ok(ncclCommDestroy(comm), NULL, "ncclCommDestroy");
  release(&a);
  release(&b);
  printf("rank %d/%d: nccl.h program on %s memory: %s\n", g_rank, g_n, g_device ? "device" : "host",
         g_failures == 0 ? "all results right" : "FAILED");
  return g_failures == 0 ? 0 : 1;
}
