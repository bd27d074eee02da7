// Reduction kernels: the only place that knows how to combine elements. The
// executor calls these; they do no I/O. A kernel set is chosen once at start-up
// from cpuid (WEFT_CPU_KERNEL=scalar|avx2|avx512 forces one).
#pragma once

#include <cstddef>
#include <cstdint>

#include "weft/weft.h"

namespace weft::reduce {

// Elementwise operations. Avg is Sum followed by divide(); PreMulSum is scale()
// of the local input followed by Sum.
enum class Op : uint8_t { Sum, Prod, Max, Min };

constexpr int kMaxSources = 8;

size_t dtype_size(weftDataType_t dtype);  // 0 for an invalid dtype
const char* dtype_name(weftDataType_t dtype);
const char* op_name(weftRedOp_t op);

// dst[i] = srcs[0][i] op srcs[1][i] op ... op srcs[nsrcs-1][i], for i < count.
// 1 <= nsrcs <= kMaxSources. dst may alias any source exactly (same pointer);
// partial overlap is not allowed. Pointers need no particular alignment.
// fp16/bf16 are converted to fp32, combined in fp32 across all sources, and
// rounded once (round to nearest even).
void reduce(void* dst, const void* const* srcs, int nsrcs, size_t count,
            weftDataType_t dtype, Op op);

// Fused reduce-and-copy: as reduce(), writing the result to dst and dst2.
void reduce_copy(void* dst, void* dst2, const void* const* srcs, int nsrcs, size_t count,
                 weftDataType_t dtype, Op op);

// Two-source convenience form: dst = a op b.
inline void reduce2(void* dst, const void* a, const void* b, size_t count,
                    weftDataType_t dtype, Op op) {
  const void* srcs[2] = {a, b};
  reduce(dst, srcs, 2, count, dtype, op);
}

// dst[i] = src[i] / divisor (integers truncate toward zero; floats divide in the
// type's accumulation precision and round once). Used for weftAvg.
void divide(void* dst, const void* src, size_t count, weftDataType_t dtype, int64_t divisor);

// dst[i] = src[i] * scalar, where scalar points to one element of dtype.
void scale(void* dst, const void* src, size_t count, weftDataType_t dtype, const void* scalar);

// Name of the kernel set in use ("scalar", "avx2", "avx512").
const char* kernel_name();

}  // namespace weft::reduce
