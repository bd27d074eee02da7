// The graph barrier kernel (graph_barrier.h): one block; thread 0 publishes
// this rank's arrival, each thread waits for some of the peers.
#include "cuda/graph_barrier.h"

#include <cuda_runtime.h>

#include "base/log.h"

namespace weft::cuda {
namespace {

__device__ uint64_t now_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__global__ void graph_barrier_kernel(GraphBarrier b) {
  volatile uint32_t* own = b.own;
  // Every thread reads the count before thread 0 raises it.
  const uint32_t n = own[kGraphArrived] + 1;
  __syncthreads();
  if (threadIdx.x == 0) {
    // The call's earlier copies and kernels finished before this kernel began;
    // the fence orders them before the arrival for peers on other GPUs too.
    __threadfence_system();
    own[kGraphArrived] = n;
    __threadfence_system();
  }
  const uint64_t start = now_ns();
  for (int p = static_cast<int>(threadIdx.x); p < b.nranks; p += static_cast<int>(blockDim.x)) {
    if (p == b.rank) continue;
    const volatile uint32_t* peer = reinterpret_cast<const volatile uint32_t*>(b.peers[p]);
    while (static_cast<int32_t>(peer[kGraphArrived] - n) < 0 && own[kGraphUnblock] == 0) {
      if (now_ns() - start > b.timeout_ns) {
        // Recorded for weftCommGetAsyncError; the trap fails the stream, so
        // nothing after the barrier reads a peer's memory that is not ready.
        if (atomicCAS(b.own + kGraphStuckRank, 0u, static_cast<unsigned>(p + 1)) == 0u) own[kGraphStuckAt] = n;
        __threadfence_system();
        __trap();
      }
    }
  }
  __syncthreads();
  __threadfence_system();
}

}  // namespace

weftResult_t graph_barrier(const GraphBarrier& b, CUstream_st* stream) {
  const int threads = b.nranks < 32 ? 32 : (b.nranks > 512 ? 512 : (b.nranks + 31) / 32 * 32);
  graph_barrier_kernel<<<1, threads, 0, stream>>>(b);
  const cudaError_t err = cudaGetLastError();
  if (err == cudaSuccess) return weftSuccess;
  WEFT_WARN(TRANSPORT, "CUDA graph barrier launch failed: %s", cudaGetErrorString(err));
  return weftUnhandledCudaError;
}

}  // namespace weft::cuda
