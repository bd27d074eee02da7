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
//
// Semantics, identical in every kernel set (scalar, avx2, avx512) and deterministic:
// - Sources combine left to right: ((s0 op s1) op s2) ... in the accumulation type.
// - Integers: Sum and Prod wrap modulo 2^bits (two's complement); Min/Max compare
//   as the dtype's signedness says.
// - fp16/bf16 accumulate in fp32 across all sources of one call, then round once to
//   nearest even. fp32/fp64 accumulate in their own type. Denormals are kept (no
//   flush to zero).
// - fp8 (E4M3, E5M2) likewise accumulate in fp32 and round once to nearest even, but
//   saturate: a result beyond the largest finite value, Inf included, becomes it
//   (CUDA's __NV_SATFINITE, as NCCL's fp8 reductions).
// - One source is copied bit for bit: no op is applied (an fp8 Inf stays Inf).
// - NaN and Inf propagate as IEEE arithmetic says (Inf + -Inf = NaN, ...), but fp8
//   results saturate (above).
// - Min/Max: NaN wins. If either operand is NaN the result is NaN (as
//   PyTorch's and NCCL's min/max do), which NaN's payload is unspecified. -0.0 is
//   smaller than +0.0 (IEEE 754-2019 minimum/maximum), so min/max are commutative
//   and every rank gets the same bits whatever order it combined sources in.
// - Band/Bor/Bxor: bitwise and/or/xor, integer dtypes only; a floating-point dtype
//   is a caller error (reduce() does nothing, and says so).
enum class Op : uint8_t { Sum, Prod, Max, Min, Band, Bor, Bxor };

inline bool is_bitwise(Op op) { return op == Op::Band || op == Op::Bor || op == Op::Bxor; }
inline bool is_float_dtype(weftDataType_t dtype) {
  return dtype == weftFloat16 || dtype == weftFloat32 || dtype == weftFloat64 || dtype == weftBfloat16 ||
         dtype == weftFloat8e4m3 || dtype == weftFloat8e5m2;
}

constexpr int kMaxSources = 8;

// 0 for an invalid dtype. Inline: every call asks it several times.
inline size_t dtype_size(weftDataType_t dtype) {
  switch (dtype) {
    case weftInt8:
    case weftUint8:
    case weftFloat8e4m3:
    case weftFloat8e5m2: return 1;
    case weftFloat16:
    case weftBfloat16: return 2;
    case weftInt32:
    case weftUint32:
    case weftFloat32: return 4;
    case weftInt64:
    case weftUint64:
    case weftFloat64: return 8;
    default: return 0;
  }
}
const char* dtype_name(weftDataType_t dtype);

// The elementwise op of an API op: avg is a sum divided afterwards, a
// pre-multiplied sum a sum of scaled inputs.
inline Op elementwise_op(weftRedOp_t op) {
  switch (op) {
    case weftProd: return Op::Prod;
    case weftMax: return Op::Max;
    case weftMin: return Op::Min;
    case weftBand: return Op::Band;
    case weftBor: return Op::Bor;
    case weftBxor: return Op::Bxor;
    default: return Op::Sum;
  }
}
const char* op_name(weftRedOp_t op);

// dst[i] = srcs[0][i] op srcs[1][i] op ... op srcs[nsrcs-1][i], for i < count.
// 1 <= nsrcs <= kMaxSources. dst may alias any source exactly (same pointer);
// partial overlap is not allowed. Pointers need no particular alignment.
// fp16/bf16 are converted to fp32, combined in fp32 across all sources, and
// rounded once (round to nearest even).
void reduce(void* dst, const void* const* srcs, int nsrcs, size_t count,
            weftDataType_t dtype, Op op);

// Fused reduce-and-copy: as reduce(), writing the result to dst and dst2. Either
// destination may alias a source exactly, not each other partially.
void reduce_copy(void* dst, void* dst2, const void* const* srcs, int nsrcs, size_t count,
                 weftDataType_t dtype, Op op);

// Two-source convenience form: dst = a op b.
inline void reduce2(void* dst, const void* a, const void* b, size_t count,
                    weftDataType_t dtype, Op op) {
  const void* srcs[2] = {a, b};
  reduce(dst, srcs, 2, count, dtype, op);
}

// dst[i] = src[i] / divisor (integers truncate toward zero; floats divide in the
// type's accumulation precision and round once). Used for weftAvg, so divisor is a
// rank count >= 1; a zero divisor gives 0 for integers and IEEE results for floats.
// dst may alias src exactly.
void divide(void* dst, const void* src, size_t count, weftDataType_t dtype, int64_t divisor);

// dst[i] = src[i] * scalar, where scalar points to one element of dtype (integers
// wrap; fp16/bf16 multiply in fp32 and round once). dst may alias src exactly.
void scale(void* dst, const void* src, size_t count, weftDataType_t dtype, const void* scalar);

// Name of the kernel set in use ("scalar", "avx2", "avx512").
const char* kernel_name();

// Switches the kernel set for the whole process ("scalar", "avx2", "avx512"), for
// tests and benchmarks. Returns false, changing nothing, if the name is unknown or
// this CPU lacks the instructions. Not meant to race with running reductions.
bool use_kernel(const char* name);

}  // namespace weft::reduce
