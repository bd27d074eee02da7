// Reductions of device memory, enqueued on a stream: the CUDA kernels of
// src/cuda on a GPU; on the tests' stand-in driver (exec::cuda::Api::host_memory),
// whose "device memory" is host memory, the CPU kernels run as a host function
// on the stream, in the same stream order.
#pragma once

#include <cstddef>
#include <cstdint>

#include "base/status.h"
#include "exec/cuda_driver.h"
#include "reduce/reduce.h"
#include "weft/weft.h"

namespace weft {

// Whether reductions can be enqueued with this driver; else why not.
const char* kernels_missing(const exec::cuda::Api& d);

// dst = srcs[0] op ... op srcs[n-1], any n >= 1 (in groups of
// reduce::kMaxSources); dst may be srcs[0] itself.
Status reduce_on_stream(const exec::cuda::Api& d, void* dst, const void* const* srcs, int n, size_t count,
                        weftDataType_t dtype, reduce::Op op, exec::cuda::Stream stream);

// dst[i] /= divisor (weftAvg's last step).
Status divide_on_stream(const exec::cuda::Api& d, void* dst, size_t count, weftDataType_t dtype, int64_t divisor,
                        exec::cuda::Stream stream);

}  // namespace weft
