// Throughput of the CPU reduction kernels, with memcpy as the bound to compare with.
//
//   BM_Memcpy/<bytes>                   memcpy of one <bytes> buffer
//   BM_Reduce/<dtype>/<op>/<bytes>      dst = a op b, each buffer <bytes> long
//   BM_ReduceCopy/<dtype>/sum/<bytes>   dst, dst2 = a + b (the fused form)
//   BM_ReduceStore/<dtype>/<regular|streaming>/<bytes>
//                                       dst = a + b with streaming stores forced off
//                                       or on: how reduce.cpp's threshold was chosen
//
// bytes_per_second counts bytes read plus bytes written (memcpy: 2 x bytes; a
// two-source reduce: 3 x bytes), so a kernel that runs at memory speed shows the same
// figure as memcpy. The kernel set is the process's: force one with
// WEFT_CPU_KERNEL=scalar|avx2|avx512.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "reduce/kernel_set.h"
#include "reduce/reduce.h"

namespace weft::reduce {
namespace {

constexpr size_t kKiB = 1024, kMiB = 1024 * 1024;

struct FreeDeleter {
  void operator()(void* p) const { std::free(p); }
};
using Bytes = std::unique_ptr<uint8_t, FreeDeleter>;

// A page-aligned buffer of ordinary values of dtype (no denormals or NaNs, which are
// not what a benchmark should measure), touched so page faults happen outside timing.
Bytes make_buffer(weftDataType_t dtype, size_t bytes, int seed) {
  Bytes b(static_cast<uint8_t*>(std::aligned_alloc(4096, (bytes + 4095) / 4096 * 4096)));
  const size_t es = dtype_size(dtype), n = bytes / es;
  uint8_t* p = b.get();
  for (size_t i = 0; i < n; ++i) {
    const int v = static_cast<int>((i * 7 + seed) % 13) + 1;
    switch (dtype) {
      case weftFloat16: { const uint16_t h = static_cast<uint16_t>(0x3c00 + v); std::memcpy(p + i * 2, &h, 2); break; }
      case weftBfloat16: { const uint16_t h = static_cast<uint16_t>(0x3f80 + v); std::memcpy(p + i * 2, &h, 2); break; }
      case weftFloat32: { const float f = static_cast<float>(v); std::memcpy(p + i * 4, &f, 4); break; }
      case weftFloat64: { const double d = v; std::memcpy(p + i * 8, &d, 8); break; }
      case weftFloat8e4m3: p[i] = static_cast<uint8_t>(0x38 + v % 8); break;  // 1.0 .. 1.875
      case weftFloat8e5m2: p[i] = static_cast<uint8_t>(0x3c + v % 4); break;  // 1.0 .. 1.75
      default: { const uint64_t u = static_cast<uint64_t>(v); std::memcpy(p + i * es, &u, es); break; }
    }
  }
  return b;
}

void BM_Memcpy(benchmark::State& state, size_t bytes) {
  Bytes src = make_buffer(weftUint8, bytes, 1), dst = make_buffer(weftUint8, bytes, 2);
  for (auto _ : state) {
    std::memcpy(dst.get(), src.get(), bytes);
    benchmark::DoNotOptimize(dst.get());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * 2 * bytes));
}

void BM_Reduce(benchmark::State& state, weftDataType_t dtype, Op op, size_t bytes, int ndst) {
  Bytes a = make_buffer(dtype, bytes, 1), b = make_buffer(dtype, bytes, 2);
  Bytes d = make_buffer(dtype, bytes, 3), d2 = make_buffer(dtype, ndst == 2 ? bytes : 64, 4);
  const size_t count = bytes / dtype_size(dtype);
  const void* srcs[2] = {a.get(), b.get()};
  for (auto _ : state) {
    if (ndst == 2) reduce_copy(d.get(), d2.get(), srcs, 2, count, dtype, op);
    else reduce(d.get(), srcs, 2, count, dtype, op);
    benchmark::DoNotOptimize(d.get());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * (2 + ndst) * bytes));
  // Input alone (both sources), the figure the in-cache goal is stated in.
  state.counters["input_bytes_per_second"] = benchmark::Counter(
      static_cast<double>(state.iterations() * 2 * bytes), benchmark::Counter::kIsRate);
  state.SetLabel(kernel_name());
}

void BM_ReduceStore(benchmark::State& state, weftDataType_t dtype, bool streaming, size_t bytes) {
  const size_t saved = nontemporal_threshold();
  set_nontemporal_threshold(streaming ? 0 : SIZE_MAX);
  BM_Reduce(state, dtype, Op::Sum, bytes, 1);
  set_nontemporal_threshold(saved);
}

const char* short_op(Op op) {
  switch (op) {
    case Op::Sum: return "sum";
    case Op::Prod: return "prod";
    case Op::Max: return "max";
    default: return "min";
  }
}

void register_all() {
  const weftDataType_t dtypes[] = {weftInt8,  weftUint8,   weftInt32,  weftUint32,  weftInt64,
                                   weftUint64, weftFloat16, weftBfloat16, weftFloat32, weftFloat64,
                                   weftFloat8e4m3, weftFloat8e5m2};
  const size_t sizes[] = {256 * kKiB, 4 * kMiB, 256 * kMiB};
  // Rates use this process's CPU time (Google Benchmark's default), not wall time:
  // the cores are shared, and time spent preempted is not the kernel's. Run with
  // --benchmark_min_time=... for longer runs; setting it here would rename the
  // benchmarks.
  auto big = [](benchmark::internal::Benchmark*, size_t) {};
  for (size_t bytes : sizes) {
    big(benchmark::RegisterBenchmark(("BM_Memcpy/" + std::to_string(bytes)).c_str(), BM_Memcpy, bytes), bytes);
    for (weftDataType_t dt : dtypes) {
      for (Op op : {Op::Sum, Op::Prod, Op::Max, Op::Min}) {
        const std::string name = std::string("BM_Reduce/") + dtype_name(dt) + "/" + short_op(op) +
                                 "/" + std::to_string(bytes);
        big(benchmark::RegisterBenchmark(name.c_str(), BM_Reduce, dt, op, bytes, 1), bytes);
      }
      const std::string name = std::string("BM_ReduceCopy/") + dtype_name(dt) + "/sum/" + std::to_string(bytes);
      big(benchmark::RegisterBenchmark(name.c_str(), BM_Reduce, dt, Op::Sum, bytes, 2), bytes);
    }
  }
  for (size_t bytes : {256 * kKiB, 1 * kMiB, 4 * kMiB, 8 * kMiB, 16 * kMiB, 32 * kMiB, 64 * kMiB, 256 * kMiB})
    for (weftDataType_t dt : {weftFloat16, weftFloat32})
      for (bool streaming : {false, true}) {
        const std::string name = std::string("BM_ReduceStore/") + dtype_name(dt) + "/" +
                                 (streaming ? "streaming/" : "regular/") + std::to_string(bytes);
        big(benchmark::RegisterBenchmark(name.c_str(), BM_ReduceStore, dt, streaming, bytes), bytes);
      }
}

}  // namespace
}  // namespace weft::reduce

int main(int argc, char** argv) {
  weft::reduce::register_all();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::AddCustomContext("weft_cpu_kernel", weft::reduce::kernel_name());
  benchmark::AddCustomContext("weft_nontemporal_threshold",
                              std::to_string(weft::reduce::nontemporal_threshold()));
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
