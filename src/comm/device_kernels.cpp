#include "comm/device_kernels.h"

#include <algorithm>
#include <memory>
#include <mutex>
#include <vector>

#include "weft_config.h"
#if WEFT_HAVE_CUDA
#include "cuda/reduce_cuda.h"
#endif

namespace weft {
namespace {

// One reduction or division, run on the host by the stand-in driver's stream.
struct HostWork {
  void* dst;
  std::vector<const void*> srcs;  // empty: a division
  size_t count;
  weftDataType_t dtype;
  reduce::Op op;
  int64_t divisor;
};

void run_host_work(const HostWork* w) {
  if (w->srcs.empty()) {
    reduce::divide(w->dst, w->dst, w->count, w->dtype, w->divisor);
  } else {
    // Groups of kMaxSources, the running result first in each later group.
    size_t at = 0;
    std::vector<const void*> group;
    while (at < w->srcs.size()) {
      group.clear();
      if (at > 0) group.push_back(w->dst);
      while (group.size() < static_cast<size_t>(reduce::kMaxSources) && at < w->srcs.size())
        group.push_back(w->srcs[at++]);
      reduce::reduce(w->dst, group.data(), static_cast<int>(group.size()), w->count, w->dtype, w->op);
    }
  }
}

// Work captured into a graph runs at every replay: it is kept for the life of
// the process (reachable, so leak checkers do not report it).
void keep(HostWork* w) {
  static std::mutex mu;
  static auto* kept = new std::vector<std::unique_ptr<HostWork>>;
  std::lock_guard<std::mutex> lock(mu);
  kept->emplace_back(w);
}

Status on_host(const exec::cuda::Api& d, HostWork* w, exec::cuda::Stream stream) {
  bool captured = false;
  exec::cuda::stream_capturing(d, stream, &captured);
  const int rc = captured ? d.launch_host_func(stream, [](void* p) { run_host_work(static_cast<HostWork*>(p)); }, w)
                          : d.launch_host_func(stream, [](void* p) {
                              run_host_work(static_cast<HostWork*>(p));
                              delete static_cast<HostWork*>(p);
                            }, w);
  if (rc == 0 && captured) keep(w);
  if (rc != 0) {
    delete w;
    return Error(weftUnhandledCudaError, "enqueuing a reduction on stream %p: %s", stream,
                 exec::cuda::error_text(rc).c_str());
  }
  return Status::Ok();
}

Status kernel_result(weftResult_t rc, const char* what, exec::cuda::Stream stream) {
  if (rc == weftSuccess) return Status::Ok();
  return Error(rc, "launching the %s kernel on stream %p failed (logged above)", what, stream);
}

}  // namespace

const char* kernels_missing(const exec::cuda::Api& d) {
  if (d.host_memory) return d.launch_host_func == nullptr ? "the stand-in driver lacks cuLaunchHostFunc" : nullptr;
#if WEFT_HAVE_CUDA
  return nullptr;
#else
  return "weft was built without CUDA (-Dcuda=disabled or no nvcc): no reduction kernels";
#endif
}

Status reduce_on_stream(const exec::cuda::Api& d, void* dst, const void* const* srcs, int n, size_t count,
                        weftDataType_t dtype, reduce::Op op, exec::cuda::Stream stream) {
  if (count == 0) return Status::Ok();
  if (d.host_memory)
    return on_host(d, new HostWork{dst, std::vector<const void*>(srcs, srcs + n), count, dtype, op, 1}, stream);
#if WEFT_HAVE_CUDA
  const void* group[reduce::kMaxSources];
  int at = 0;
  while (at < n) {
    int k = 0;
    if (at > 0) group[k++] = dst;
    while (k < reduce::kMaxSources && at < n) group[k++] = srcs[at++];
    WEFT_TRY(kernel_result(weft::cuda::reduce(dst, nullptr, group, k, count, dtype, op,
                                              static_cast<weft::cuda::Stream>(stream)),
                           "reduction", stream));
  }
  return Status::Ok();
#else
  (void)srcs, (void)n, (void)dtype, (void)op, (void)dst;
  return Error(weftInternalError, "%s", kernels_missing(d));
#endif
}

Status divide_on_stream(const exec::cuda::Api& d, void* dst, size_t count, weftDataType_t dtype, int64_t divisor,
                        exec::cuda::Stream stream) {
  if (count == 0) return Status::Ok();
  if (d.host_memory) return on_host(d, new HostWork{dst, {}, count, dtype, reduce::Op::Sum, divisor}, stream);
#if WEFT_HAVE_CUDA
  return kernel_result(weft::cuda::divide(dst, dst, count, dtype, divisor, static_cast<weft::cuda::Stream>(stream)),
                       "division", stream);
#else
  (void)dst, (void)dtype, (void)divisor;
  return Error(weftInternalError, "%s", kernels_missing(d));
#endif
}

}  // namespace weft
