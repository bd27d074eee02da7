// Throughput of the CUDA reduction kernels (src/cuda), with a device-to-device copy
// as the bound to compare with.
//
//   BM_CudaMemcpy/<bytes>                   cudaMemcpyAsync of one <bytes> buffer
//   BM_CudaReduce/<dtype>/<op>/<bytes>      dst = a op b, each buffer <bytes> long
//   BM_CudaReduce8/<dtype>/sum/<bytes>      dst = 8-source sum (direct algorithms)
//
// bytes_per_second counts bytes read plus bytes written, as weft-bench-reduce does,
// so a kernel at memory speed shows the copy's figure. Times are GPU times from CUDA
// events around a batch of launches (manual time), not host wall time. Without a GPU
// the program says so and exits 0: there is nothing to measure.
#include <benchmark/benchmark.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "cuda/reduce_cuda.h"
#include "reduce/reduce.h"

namespace weft::cuda {
namespace {

constexpr size_t kKiB = 1024, kMiB = 1024 * 1024;
constexpr int kBatch = 20;  // launches per timed batch: one launch of 256 KiB is ~2 us

void check(cudaError_t err, const char* what) {
  if (err != cudaSuccess) {
    std::fprintf(stderr, "weft-bench-reduce-cuda: %s: %s\n", what, cudaGetErrorString(err));
    std::exit(1);
  }
}

// A device buffer of ordinary values (small positive integers in dtype), so no
// denormals or NaNs are timed. The values repeat every 13 elements: a host block of
// whole periods is copied over the buffer.
struct DeviceBuffer {
  DeviceBuffer(weftDataType_t dtype, size_t bytes, int seed) {
    check(cudaMalloc(&ptr, bytes), "cudaMalloc");
    const size_t es = reduce::dtype_size(dtype), block = 13 * 4096 * es;
    std::vector<uint8_t> host(block);
    const uint16_t one16 = dtype == weftFloat16 ? 0x3c00 : 0x3f80;
    for (size_t i = 0; i < block / es; ++i) {
      const int v = static_cast<int>((i * 7 + seed) % 13) + 1;
      uint8_t* p = host.data() + i * es;
      switch (dtype) {
        case weftFloat16:
        case weftBfloat16: { const uint16_t h = static_cast<uint16_t>(one16 + v); std::memcpy(p, &h, 2); break; }
        case weftFloat32: { const float f = static_cast<float>(v); std::memcpy(p, &f, 4); break; }
        case weftFloat64: { const double d = v; std::memcpy(p, &d, 8); break; }
        default: { const uint64_t u = static_cast<uint64_t>(v); std::memcpy(p, &u, es); break; }
      }
    }
    for (size_t off = 0; off < bytes; off += block)
      check(cudaMemcpy(static_cast<uint8_t*>(ptr) + off, host.data(), std::min(block, bytes - off),
                       cudaMemcpyHostToDevice), "cudaMemcpy");
  }
  ~DeviceBuffer() { cudaFree(ptr); }
  void* ptr = nullptr;
};

// Runs body() kBatch times per iteration and reports GPU time per launch.
template <class Body>
void timed(benchmark::State& state, cudaStream_t stream, Body&& body) {
  cudaEvent_t start, stop;
  check(cudaEventCreate(&start), "cudaEventCreate");
  check(cudaEventCreate(&stop), "cudaEventCreate");
  body();  // warm-up: module load, first-touch of the pages
  check(cudaStreamSynchronize(stream), "warm-up");
  for (auto _ : state) {
    check(cudaEventRecord(start, stream), "cudaEventRecord");
    for (int k = 0; k < kBatch; ++k) body();
    check(cudaEventRecord(stop, stream), "cudaEventRecord");
    check(cudaEventSynchronize(stop), "cudaEventSynchronize");
    float ms = 0;
    check(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
    state.SetIterationTime(ms / 1e3 / kBatch);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
}

void BM_CudaMemcpy(benchmark::State& state, size_t bytes) {
  DeviceBuffer src(weftUint8, bytes, 1), dst(weftUint8, bytes, 2);
  cudaStream_t stream;
  check(cudaStreamCreate(&stream), "cudaStreamCreate");
  timed(state, stream, [&] {
    check(cudaMemcpyAsync(dst.ptr, src.ptr, bytes, cudaMemcpyDeviceToDevice, stream), "cudaMemcpyAsync");
  });
  cudaStreamDestroy(stream);
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * 2 * bytes));
}

void BM_CudaReduce(benchmark::State& state, weftDataType_t dtype, reduce::Op op, int nsrcs,
                   size_t bytes) {
  std::vector<std::unique_ptr<DeviceBuffer>> bufs;
  const void* srcs[reduce::kMaxSources];
  for (int s = 0; s < nsrcs; ++s) {
    bufs.push_back(std::make_unique<DeviceBuffer>(dtype, bytes, s + 1));
    srcs[s] = bufs.back()->ptr;
  }
  DeviceBuffer dst(dtype, bytes, 0);
  const size_t count = bytes / reduce::dtype_size(dtype);
  cudaStream_t stream;
  check(cudaStreamCreate(&stream), "cudaStreamCreate");
  timed(state, stream, [&] {
    if (reduce(dst.ptr, nullptr, srcs, nsrcs, count, dtype, op, stream) != weftSuccess) {
      std::fprintf(stderr, "weft-bench-reduce-cuda: cuda::reduce failed\n");
      std::exit(1);
    }
  });
  cudaStreamDestroy(stream);
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * (nsrcs + 1) * bytes));
}

const char* short_op(reduce::Op op) {
  switch (op) {
    case reduce::Op::Sum: return "sum";
    case reduce::Op::Prod: return "prod";
    case reduce::Op::Max: return "max";
    default: return "min";
  }
}

void register_all() {
  const weftDataType_t dtypes[] = {weftInt8,  weftUint8,   weftInt32,  weftUint32,  weftInt64,
                                   weftUint64, weftFloat16, weftBfloat16, weftFloat32, weftFloat64};
  for (size_t bytes : {256 * kKiB, 4 * kMiB, 256 * kMiB}) {
    benchmark::RegisterBenchmark(("BM_CudaMemcpy/" + std::to_string(bytes)).c_str(), BM_CudaMemcpy, bytes)
        ->UseManualTime();
    for (weftDataType_t dt : dtypes) {
      for (reduce::Op op : {reduce::Op::Sum, reduce::Op::Prod, reduce::Op::Max, reduce::Op::Min}) {
        const std::string name = std::string("BM_CudaReduce/") + reduce::dtype_name(dt) + "/" +
                                 short_op(op) + "/" + std::to_string(bytes);
        benchmark::RegisterBenchmark(name.c_str(), BM_CudaReduce, dt, op, 2, bytes)->UseManualTime();
      }
    }
    for (weftDataType_t dt : {weftFloat16, weftBfloat16, weftFloat32}) {
      const std::string name = std::string("BM_CudaReduce8/") + reduce::dtype_name(dt) + "/sum/" +
                               std::to_string(bytes);
      benchmark::RegisterBenchmark(name.c_str(), BM_CudaReduce, dt, reduce::Op::Sum, 8, bytes)
          ->UseManualTime();
    }
  }
}

}  // namespace
}  // namespace weft::cuda

int main(int argc, char** argv) {
  int devices = 0;
  const cudaError_t err = cudaGetDeviceCount(&devices);
  if (err != cudaSuccess || devices == 0) {
    std::printf("weft-bench-reduce-cuda: skipped: no CUDA device (cudaGetDeviceCount: %s)\n",
                err == cudaSuccess ? "0 devices" : cudaGetErrorString(err));
    return 0;
  }
  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, 0);
  weft::cuda::register_all();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::AddCustomContext("cuda_device", prop.name);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
