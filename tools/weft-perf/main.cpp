// weft-perf: nccl-tests-style collective benchmark over weft's public C API.
// Run one process per rank under a launcher:
//   weft-run -n 4 weft-perf allreduce -b 8 -e 128M -f 2
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "args.h"
#include "bench.h"
#include "compare.h"
#include "collective.h"
#include "datatype.h"
#include "table.h"
#include "weft/weft.h"

namespace weftperf {
namespace {

// What each rank reports about itself for the header: pid and host name.
struct ProcInfo {
  int64_t pid;
  char host[72];
};

// Gathered through an all-reduce (each rank writes its slot of a zeroed array and MAX
// over bytes leaves every slot filled), so the header never depends on the
// collective under test: a broken all-gather shows in its rows, not as a bad header.
std::vector<ProcInfo> GatherProcInfo(const Job& job) {
  std::vector<ProcInfo> all(static_cast<size_t>(job.nranks));
  std::memset(all.data(), 0, all.size() * sizeof(ProcInfo));
  ProcInfo& mine = all[static_cast<size_t>(job.rank)];
  mine.pid = ::getpid();
  if (::gethostname(mine.host, sizeof(mine.host) - 1) != 0) std::strcpy(mine.host, "?");
  weftResult_t rc = weftAllReduce(all.data(), all.data(), all.size() * sizeof(ProcInfo),
                                  weftUint8, weftMax, job.comm, nullptr);
  if (rc != weftSuccess) DieOnApiError(job, "weftAllReduce (gather pids)", rc);
  return all;
}

// Ranks per host as the communicator derives them: one host -> every rank local;
// equal consecutive blocks per host -> that block size; otherwise unknown (0).
Placement Place(const std::vector<ProcInfo>& procs) {
  Placement p;
  const int n = static_cast<int>(procs.size());
  auto same = [&](int a, int b) { return std::strcmp(procs[a].host, procs[b].host) == 0; };
  p.local_ranks = 0;
  for (int r = 0; r < n; ++r) p.local_ranks += same(r, 0) ? 1 : 0;
  p.local_size = n % p.local_ranks == 0 ? p.local_ranks : 0;
  for (int r = 0; r < n && p.local_size != 0; ++r)
    if (!same(r, r - r % p.local_size)) p.local_size = 0;
  return p;
}

void PrintHeader(const Job& job, const PerfOptions& opt, const Collective& coll,
                 const std::vector<ProcInfo>& procs) {
  // Canonical names (an alias like bf16 prints as bfloat16), or "all".
  const char* type = opt.types.size() == 1 ? Info(opt.types[0]).name : "all";
  const char* op = !coll.HasOp() ? "none" : opt.ops.size() == 1 ? OpName(opt.ops[0]) : "all";
  std::printf("# weft-perf %s: %d ranks, %s, %s, iters %d, warmup %d, check %d",
              opt.collective.c_str(), job.nranks, type, op,
              opt.iters, opt.warmup, opt.check ? 1 : 0);
  if (coll.HasRoot()) std::printf(", root %d", opt.root);
  std::printf("\n");
  if (opt.step_factor > 1)
    std::printf("#  minBytes %zu maxBytes %zu step: %zu(factor)", opt.min_bytes, opt.max_bytes,
                opt.step_factor);
  else
    std::printf("#  minBytes %zu maxBytes %zu step: %zu(bytes)", opt.min_bytes, opt.max_bytes,
                opt.step_bytes);
  const char* device = opt.window ? "device (cuMemAlloc), symmetric windows" : "device (cuMemAlloc)";
  std::printf(" buffers: %s algo: %s\n#\n", !opt.device.empty() ? device : opt.memalloc ? "weftMemAlloc" : "malloc",
              opt.algo.empty() ? "auto" : opt.algo.c_str());
  for (size_t r = 0; r < procs.size(); ++r)
    std::printf("#  Rank %2zu Pid %6lld on %10s\n", r, static_cast<long long>(procs[r].pid),
                procs[r].host);
  std::printf("#\n");
  if (opt.algo != "all") PrintColumnHeader(stdout);
  std::fflush(stdout);
}

void* Allocate(const Job& job, size_t bytes, bool memalloc) {
  // Round up so a zero-byte sweep still gets a valid, distinct buffer.
  size_t size = (bytes + 4095) / 4096 * 4096;
  if (size == 0) size = 4096;
  void* p = nullptr;
  if (memalloc) {
    weftResult_t rc = weftMemAlloc(&p, size);
    if (rc != weftSuccess) DieOnApiError(job, "weftMemAlloc(" + std::to_string(size) + ")", rc);
  } else {
    p = std::aligned_alloc(4096, size);
    if (p == nullptr) {
      std::fprintf(stderr, "weft-perf: rank %d: cannot allocate %zu bytes\n", job.rank, size);
      weftCommAbort(job.comm);
      std::exit(1);
    }
  }
  // Touch every page now, so first-use page faults are not timed.
  std::memset(p, 0, size);
  return p;
}

// --device: what the GPU copies by itself, measured by rank 0 alone while the
// others wait: device-to-device, and pinned host memory to and from the device
// (the ceiling of staging through host memory). GB/s of bytes copied.
void PrintCopyBounds(const Job& job, size_t max_bytes) {
  Barrier(job);
  if (job.rank == 0) {
    weft_tools::DeviceMemory& d = *job.device;
    const size_t bytes = std::max<size_t>(std::min<size_t>(max_bytes, size_t{256} << 20), 1 << 20);
    void* a = d.alloc(bytes);
    void* b = d.alloc(bytes);
    void* pinned = d.alloc_pinned(bytes);
    auto rate = [&](void* dst, const void* src) {
      constexpr int kReps = 10;
      d.copy(dst, src, bytes);  // warm-up
      d.synchronize();
      auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < kReps; ++i) d.copy(dst, src, bytes);
      bool ok = d.synchronize();
      double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      return ok ? static_cast<double>(bytes) * kReps / s / 1e9 : 0.0;
    };
    if (a != nullptr && b != nullptr && pinned != nullptr)
      std::printf("# device: %s (CUDA device %d); copies of %zu bytes: device-to-device %.1f GB/s, pinned "
                  "host-to-device %.1f GB/s, device-to-host %.1f GB/s\n",
                  d.name().c_str(), d.device(), bytes, rate(b, a), rate(a, pinned), rate(pinned, a));
    else
      std::printf("# device: %s (CUDA device %d); copy bounds not measured (allocation failed)\n",
                  d.name().c_str(), d.device());
    std::fflush(stdout);
    if (a != nullptr) d.release(a);
    if (b != nullptr) d.release(b);
    if (pinned != nullptr) d.release_pinned(pinned);
  }
  Barrier(job);
}

// --window: a symmetric window is a multiple of WEFT_WIN_REQUIRED_ALIGNMENT long
// and starts at one.
size_t WindowBytes(size_t bytes) {
  constexpr size_t kAlign = WEFT_WIN_REQUIRED_ALIGNMENT;
  return std::max<size_t>(kAlign, (bytes + kAlign - 1) / kAlign * kAlign);
}

void Release(void* p, bool memalloc) {
  if (memalloc)
    weftMemFree(p);
  else
    std::free(p);
}

// A usage error every rank detects alike: rank 0 says why, and the barrier keeps
// the others from exiting first (weft-run would then stop rank 0 before it prints).
int StopEarly(const Job& job, const std::string& message) {
  if (job.rank == 0) {
    std::fprintf(stderr, "weft-perf: %s\n", message.c_str());
    std::fflush(stderr);
  }
  weftBarrier(job.comm);  // leaving anyway; a failure changes nothing
  weftCommDestroy(job.comm);
  return 2;
}

// The nccl-tests table: the sweep, the footer, and rank 0's --json/--csv files.
// Returns the exit status (1 on wrong elements or a file error).
int RunTable(const Job& job, const Collective& coll, const PerfOptions& opt, const Buffers& buffers) {
  SweepResult result = RunSweep(job, coll, opt, buffers);
  int status = result.wrong_total > 0 ? 1 : 0;
  if (job.rank != 0) return status;
  PrintFooter(stdout, result.wrong_total, result.avg_busbw);
  std::string error;
  if (!opt.json_path.empty()) {
    JsonRun run;
    run.collective = coll.Name();
    run.nranks = job.nranks;
    run.iters = opt.iters;
    run.warmup = opt.warmup;
    run.check = opt.check;
    run.algo = opt.algo;
    run.memalloc = opt.memalloc;
    run.wrong_total = result.wrong_total;
    run.avg_busbw = result.avg_busbw;
    if (!WriteJson(opt.json_path, run, result.rows, &error)) {
      std::fprintf(stderr, "weft-perf: %s\n", error.c_str());
      status = 1;
    }
  }
  if (!opt.csv_path.empty() && !WriteCsv(opt.csv_path, result.rows, &error)) {
    std::fprintf(stderr, "weft-perf: %s\n", error.c_str());
    status = 1;
  }
  return status;
}

int Main(int argc, char** argv) {
  PerfOptions opt;
  bool help = false;
  std::string error;
  if (!ParsePerfArgs(argc, argv, &opt, &help, &error)) {
    std::fprintf(stderr, "weft-perf: %s\n", error.c_str());
    PrintPerfUsage(stderr);
    return 2;
  }
  if (help) {
    PrintPerfUsage(stdout);
    return 0;
  }
  std::unique_ptr<Collective> coll = MakeCollective(opt.collective);
  if (coll == nullptr) {
    std::fprintf(stderr, "weft-perf: unknown collective '%s' (known: %s)\n",
                 opt.collective.c_str(), CollectiveNames());
    return 2;
  }
  // -a only means something if it is in place before the communicator reads it.
  if (!opt.algo.empty() && opt.algo != "all") ::setenv("WEFT_ALGO", opt.algo.c_str(), 1);
  if (opt.explain) ::setenv("WEFT_EXPLAIN", "1", 1);
  // Device calls over cuda_p2p never run online tuning's trials (the cost model
  // picks one- or two-shot per call), so their size classes never settle and the
  // warm-up would queue calls until its cap; staged ones would run trials on
  // their chunks' host calls. Off unless asked for, so a row times one algorithm.
  if (!opt.device.empty()) ::setenv("WEFT_TUNE_ONLINE", "0", 0);

  Job job;
  weft_tools::DeviceMemory device;
  if (!opt.device.empty()) {
    // Before init: weft looks for the application's CUDA driver at most once a second.
    const char* local = std::getenv("WEFT_LOCAL_RANK");
    if (!device.open(opt.device, local != nullptr ? std::atoi(local) : 0)) return 1;
    job.device = &device;
  }
  weftConfig_t config = WEFT_CONFIG_INITIALIZER;
  config.commName = "weft-perf";
  weftResult_t rc = weftCommInitFromEnv(&job.comm, &config);
  if (rc != weftSuccess) {
    std::fprintf(stderr, "weft-perf: weftCommInitFromEnv failed: %s: %s\n",
                 weftGetErrorString(rc), weftGetLastError(nullptr));
    return 1;
  }
  if ((rc = weftCommUserRank(job.comm, &job.rank)) != weftSuccess)
    DieOnApiError(job, "weftCommUserRank", rc);
  if ((rc = weftCommCount(job.comm, &job.nranks)) != weftSuccess)
    DieOnApiError(job, "weftCommCount", rc);

  // Every rank sees the same -r and rank count, so all of them leave here together.
  if (coll->HasRoot() && opt.root >= job.nranks)
    return StopEarly(job, "-r " + std::to_string(opt.root) +
                              ": the root must be below the rank count (" +
                              std::to_string(job.nranks) + ")");
  if (job.nranks < coll->MinRanks())
    return StopEarly(job, std::string(coll->Name()) + " needs at least " +
                              std::to_string(coll->MinRanks()) +
                              " ranks (weft's send/recv take a peer other than the caller)");

  std::vector<ProcInfo> procs = GatherProcInfo(job);
  if (job.device != nullptr) PrintCopyBounds(job, opt.max_bytes);
  if (job.rank == 0) PrintHeader(job, opt, *coll, procs);

  Buffers buffers;
  void* raw[2] = {nullptr, nullptr};  // --device: the allocations of send and recv
  weftWindow_t windows[2] = {nullptr, nullptr};
  buffers.capacity = opt.max_bytes;
  buffers.send_bytes = coll->SendCapacity(opt.max_bytes, job.nranks);
  buffers.recv_bytes = coll->RecvCapacity(opt.max_bytes, job.nranks);
  buffers.send = Allocate(job, buffers.send_bytes, opt.memalloc);
  buffers.recv = Allocate(job, buffers.recv_bytes, opt.memalloc);
  if (job.device != nullptr) {
    buffers.host_send = buffers.send;
    buffers.host_recv = buffers.recv;
    for (int i = 0; i < 2; ++i) {
      const size_t bytes = i == 0 ? buffers.send_bytes : buffers.recv_bytes;
      void* at = opt.window ? device.alloc_aligned(WindowBytes(bytes), WEFT_WIN_REQUIRED_ALIGNMENT, &raw[i])
                            : (raw[i] = device.alloc(bytes));
      if (at == nullptr) DieOnApiError(job, "cuMemAlloc of the device buffers", weftUnhandledCudaError);
      (i == 0 ? buffers.send : buffers.recv) = at;
      if (opt.window && (rc = weftCommWindowRegister(job.comm, at, WindowBytes(bytes), &windows[i],
                                                     WEFT_WIN_COLL_SYMMETRIC)) != weftSuccess)
        DieOnApiError(job, "weftCommWindowRegister", rc);
    }
    buffers.stream = device.stream();
  }

  int status = opt.algo == "all" ? RunAlgoComparison(job, *coll, opt, buffers, Place(procs))
                                  : RunTable(job, *coll, opt, buffers);
  // weft-run stops every rank as soon as one exits non-zero; without this a run with
  // wrong elements could lose rank 0's last row, its footer and --json/--csv files.
  if ((rc = weftBarrier(job.comm)) != weftSuccess) DieOnApiError(job, "weftBarrier", rc);
  if (job.device != nullptr) {
    for (int i = 0; i < 2; ++i) {
      if (windows[i] != nullptr && (rc = weftCommWindowDeregister(job.comm, windows[i])) != weftSuccess)
        DieOnApiError(job, "weftCommWindowDeregister", rc);
      device.release(raw[i]);
    }
    buffers.send = buffers.host_send;
    buffers.recv = buffers.host_recv;
  }
  Release(buffers.send, opt.memalloc);
  Release(buffers.recv, opt.memalloc);
  if ((rc = weftCommDestroy(job.comm)) != weftSuccess) {
    std::fprintf(stderr, "weft-perf: rank %d: weftCommDestroy failed: %s: %s\n", job.rank,
                 weftGetErrorString(rc), weftGetLastError(nullptr));
    status = 1;
  }
  return status;
}

}  // namespace
}  // namespace weftperf

int main(int argc, char** argv) { return weftperf::Main(argc, argv); }
