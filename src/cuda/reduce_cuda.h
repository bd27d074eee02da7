// CUDA reduction kernels: the GPU twin of src/reduce/reduce.h, with the same ops,
// dtypes and semantics (fp16/bf16 accumulate in fp32 and round once to nearest even;
// integers wrap; min/max: NaN wins, -0 < +0). Pointers are device (or managed)
// memory; each call enqueues one kernel on the caller's stream and returns without
// waiting. This header needs no CUDA headers, so host code of any layer can include it.
#pragma once

#include <cstddef>
#include <cstdint>

#include "reduce/reduce.h"
#include "weft/weft.h"

struct CUstream_st;

namespace weft::cuda {

using Stream = CUstream_st*;  // the same type as cudaStream_t; nullptr: legacy default

// dst (and dst2 when not null) = srcs[0] op ... op srcs[nsrcs-1] over count elements;
// 1 <= nsrcs <= reduce::kMaxSources. dst/dst2 may alias a source exactly. Fully
// 16-byte-aligned buffers take the vectorized path (16-byte loads); others work too,
// one element per thread step. Returns weftInvalidArgument for bad arguments (a
// bitwise op on a floating-point dtype among them),
// weftUnhandledCudaError if the launch failed (logged with CUDA's message).
weftResult_t reduce(void* dst, void* dst2, const void* const* srcs, int nsrcs, size_t count,
                    weftDataType_t dtype, reduce::Op op, Stream stream);

// dst[i] = src[i] / divisor, as reduce::divide (weftAvg's last step).
weftResult_t divide(void* dst, const void* src, size_t count, weftDataType_t dtype,
                    int64_t divisor, Stream stream);

// dst[i] = src[i] * *scalar, as reduce::scale; scalar points to one element of dtype
// in host memory (passed by value to the kernel).
weftResult_t scale(void* dst, const void* src, size_t count, weftDataType_t dtype,
                   const void* scalar, Stream stream);

}  // namespace weft::cuda
