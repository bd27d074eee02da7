// CUDA reduction kernels (reduce_cuda.h). One grid-stride kernel template per
// (dtype, op): each thread step loads 16 bytes from every source (uint4), widens
// fp16/bf16 pairs with half2/bfloat162 intrinsics, combines in the accumulation
// type, narrows once, and stores 16 bytes to each destination (fp8: one byte at a
// time through fp16 inside the pack). Buffers that are not
// all 16-byte aligned run the same code one element per step.
#include "cuda/reduce_cuda.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <cstring>
#include <type_traits>

#include "base/log.h"

namespace weft::cuda {
namespace {

using reduce::Op;
constexpr int kMaxSources = reduce::kMaxSources;
constexpr int kThreads = 256;
constexpr unsigned kMaxBlocks = 8192;  // grid-stride beyond; plenty to fill any GPU

// --- Element types: storage T, accumulation A, and how a 16-byte pack converts ------

template <class T>
struct Plain {
  using S = T;
  using A = T;
  static constexpr int kPack = 16 / sizeof(T);
  __device__ static void widen(const uint4& raw, A* out) {
    S v[kPack];
    memcpy(v, &raw, 16);
#pragma unroll
    for (int k = 0; k < kPack; ++k) out[k] = v[k];
  }
  __device__ static uint4 narrow(const A* in) {
    uint4 raw;
    memcpy(&raw, in, 16);
    return raw;
  }
  __device__ static A load1(const S* p) { return *p; }
  __device__ static void store1(S* p, A v) { *p = v; }
};

struct Half {
  using S = __half;
  using A = float;
  static constexpr int kPack = 8;
  __device__ static void widen(const uint4& raw, A* out) {
    __half2 h[4];
    memcpy(h, &raw, 16);
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const float2 f = __half22float2(h[k]);
      out[2 * k] = f.x;
      out[2 * k + 1] = f.y;
    }
  }
  __device__ static uint4 narrow(const A* in) {
    __half2 h[4];
#pragma unroll
    for (int k = 0; k < 4; ++k) h[k] = __float22half2_rn(make_float2(in[2 * k], in[2 * k + 1]));
    uint4 raw;
    memcpy(&raw, h, 16);
    return raw;
  }
  __device__ static A load1(const S* p) { return __half2float(*p); }
  __device__ static void store1(S* p, A v) { *p = __float2half_rn(v); }
};

struct Bf16 {
  using S = __nv_bfloat16;
  using A = float;
  static constexpr int kPack = 8;
  __device__ static void widen(const uint4& raw, A* out) {
    __nv_bfloat162 h[4];
    memcpy(h, &raw, 16);
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const float2 f = __bfloat1622float2(h[k]);
      out[2 * k] = f.x;
      out[2 * k + 1] = f.y;
    }
  }
  __device__ static uint4 narrow(const A* in) {
    __nv_bfloat162 h[4];
#pragma unroll
    for (int k = 0; k < 4; ++k) h[k] = __float22bfloat162_rn(make_float2(in[2 * k], in[2 * k + 1]));
    uint4 raw;
    memcpy(&raw, h, 16);
    return raw;
  }
  __device__ static A load1(const S* p) { return __bfloat162float(*p); }
  __device__ static void store1(S* p, A v) { *p = __float2bfloat16_rn(v); }
};

// fp8 stored as raw bytes; widened exactly through fp16, narrowed from fp32 once,
// to nearest even and saturating (__NV_SATFINITE), as reduce.h says and NCCL does.
template <__nv_fp8_interpretation_t kFormat>
struct Fp8 {
  using S = __nv_fp8_storage_t;
  using A = float;
  static constexpr int kPack = 16;
  __device__ static A load1(const S* p) { return __half2float(__half(__nv_cvt_fp8_to_halfraw(*p, kFormat))); }
  __device__ static void store1(S* p, A v) { *p = __nv_cvt_float_to_fp8(v, __NV_SATFINITE, kFormat); }
  __device__ static void widen(const uint4& raw, A* out) {
    S v[kPack];
    memcpy(v, &raw, 16);
#pragma unroll
    for (int k = 0; k < kPack; ++k) out[k] = load1(&v[k]);
  }
  __device__ static uint4 narrow(const A* in) {
    S v[kPack];
#pragma unroll
    for (int k = 0; k < kPack; ++k) store1(&v[k], in[k]);
    uint4 raw;
    memcpy(&raw, v, 16);
    return raw;
  }
};
using E4M3 = Fp8<__NV_E4M3>;
using E5M2 = Fp8<__NV_E5M2>;

// --- Operations (reduce.h semantics) --------------------------------------------------

template <class F>
__device__ F float_min(F a, F b) {
  if (a != a) return a;
  if (b != b) return b;
  if (a == b) return signbit(a) ? a : b;
  return a < b ? a : b;
}
template <class F>
__device__ F float_max(F a, F b) {
  if (a != a) return a;
  if (b != b) return b;
  if (a == b) return signbit(a) ? b : a;
  return a > b ? a : b;
}

template <Op O, class A>
__device__ __forceinline__ A combine(A a, A b) {
  if constexpr (O == Op::Sum) return static_cast<A>(a + b);  // unsigned for integers
  else if constexpr (O == Op::Prod) return static_cast<A>(a * b);
  else if constexpr (O == Op::Band) return static_cast<A>(a & b);  // integers only (visit)
  else if constexpr (O == Op::Bor) return static_cast<A>(a | b);
  else if constexpr (O == Op::Bxor) return static_cast<A>(a ^ b);
  else if constexpr (std::is_floating_point_v<A>) {
    if constexpr (O == Op::Min) return float_min(a, b);
    else return float_max(a, b);
  } else {
    if constexpr (O == Op::Min) return a < b ? a : b;
    else return a > b ? a : b;
  }
}

struct Args {
  const void* src[kMaxSources];
  void* dst;
  void* dst2;
  int nsrcs;
  size_t count;  // elements
};

// Vectorized: packs of 16 bytes for i < count / kPack, then the leftover elements.
template <class E, Op O>
__global__ void reduce_packs(Args args) {
  using A = typename E::A;
  constexpr int P = E::kPack;
  const size_t packs = args.count / P;
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < packs; i += stride) {
    A acc[P], v[P];
    E::widen(static_cast<const uint4*>(args.src[0])[i], acc);
    for (int s = 1; s < args.nsrcs; ++s) {
      E::widen(static_cast<const uint4*>(args.src[s])[i], v);
#pragma unroll
      for (int k = 0; k < P; ++k) acc[k] = combine<O>(acc[k], v[k]);
    }
    const uint4 out = E::narrow(acc);
    static_cast<uint4*>(args.dst)[i] = out;
    if (args.dst2 != nullptr) static_cast<uint4*>(args.dst2)[i] = out;
  }
  // The tail (< P elements) goes to the first threads.
  const size_t t = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const size_t j = packs * P + t;
  if (t < static_cast<size_t>(P) && j < args.count) {
    using S = typename E::S;
    A acc = E::load1(static_cast<const S*>(args.src[0]) + j);
    for (int s = 1; s < args.nsrcs; ++s) acc = combine<O>(acc, E::load1(static_cast<const S*>(args.src[s]) + j));
    E::store1(static_cast<S*>(args.dst) + j, acc);
    if (args.dst2 != nullptr) E::store1(static_cast<S*>(args.dst2) + j, acc);
  }
}

// Unaligned buffers: one element per step.
template <class E, Op O>
__global__ void reduce_elements(Args args) {
  using S = typename E::S;
  using A = typename E::A;
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t j = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; j < args.count; j += stride) {
    A acc = E::load1(static_cast<const S*>(args.src[0]) + j);
    for (int s = 1; s < args.nsrcs; ++s) acc = combine<O>(acc, E::load1(static_cast<const S*>(args.src[s]) + j));
    E::store1(static_cast<S*>(args.dst) + j, acc);
    if (args.dst2 != nullptr) E::store1(static_cast<S*>(args.dst2) + j, acc);
  }
}

template <class E>
__global__ void scale_elements(typename E::S* dst, const typename E::S* src, size_t count,
                               typename E::A k) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t j = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; j < count; j += stride)
    E::store1(dst + j, combine<Op::Prod>(E::load1(src + j), k));
}

// Integers truncate toward zero (C++ division); floats divide in the accumulation
// type, IEEE-rounded (nvcc's default -prec-div=true).
template <class E, class D>
__global__ void divide_elements(typename E::S* dst, const typename E::S* src, size_t count,
                                D divisor) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t j = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; j < count; j += stride) {
    if constexpr (std::is_integral_v<D>) {
      dst[j] = divisor == 0 ? typename E::S(0) : static_cast<typename E::S>(src[j] / divisor);
    } else {
      E::store1(dst + j, static_cast<typename E::A>(E::load1(src + j) / divisor));
    }
  }
}

unsigned blocks_for(size_t work) {
  const size_t b = (work + kThreads - 1) / kThreads;
  return static_cast<unsigned>(b == 0 ? 1 : (b < kMaxBlocks ? b : kMaxBlocks));
}

weftResult_t launched(const char* what) {
  const cudaError_t err = cudaGetLastError();
  if (err == cudaSuccess) return weftSuccess;
  WEFT_WARN(REDUCE, "CUDA %s launch failed: %s", what, cudaGetErrorString(err));
  return weftUnhandledCudaError;
}

// (dtype, op) -> (element type, op), as src/reduce/dtype_visit.h does for the CPU;
// integer Sum/Prod (and the bitwise ops) on the unsigned type so they wrap without
// undefined behaviour. False, f not called: an invalid dtype, or a bitwise op on a
// floating-point one.
template <class F>
bool visit(weftDataType_t dtype, Op op, F&& f) {
  auto by_op = [&]<class E>() {
    switch (op) {
      case Op::Sum: f.template operator()<E, Op::Sum>(); return true;
      case Op::Prod: f.template operator()<E, Op::Prod>(); return true;
      case Op::Max: f.template operator()<E, Op::Max>(); return true;
      case Op::Min: f.template operator()<E, Op::Min>(); return true;
      case Op::Band:
      case Op::Bor:
      case Op::Bxor: return false;
    }
    return false;
  };
  auto by_int = [&]<class T>() {
    using U = std::make_unsigned_t<T>;
    switch (op) {
      case Op::Sum: f.template operator()<Plain<U>, Op::Sum>(); return true;
      case Op::Prod: f.template operator()<Plain<U>, Op::Prod>(); return true;
      case Op::Max: f.template operator()<Plain<T>, Op::Max>(); return true;
      case Op::Min: f.template operator()<Plain<T>, Op::Min>(); return true;
      case Op::Band: f.template operator()<Plain<U>, Op::Band>(); return true;
      case Op::Bor: f.template operator()<Plain<U>, Op::Bor>(); return true;
      case Op::Bxor: f.template operator()<Plain<U>, Op::Bxor>(); return true;
    }
    return false;
  };
  switch (dtype) {
    case weftInt8: return by_int.template operator()<int8_t>();
    case weftUint8: return by_int.template operator()<uint8_t>();
    case weftInt32: return by_int.template operator()<int32_t>();
    case weftUint32: return by_int.template operator()<uint32_t>();
    case weftInt64: return by_int.template operator()<int64_t>();
    case weftUint64: return by_int.template operator()<uint64_t>();
    case weftFloat16: return by_op.template operator()<Half>();
    case weftBfloat16: return by_op.template operator()<Bf16>();
    case weftFloat8e4m3: return by_op.template operator()<E4M3>();
    case weftFloat8e5m2: return by_op.template operator()<E5M2>();
    case weftFloat32: return by_op.template operator()<Plain<float>>();
    case weftFloat64: return by_op.template operator()<Plain<double>>();
    default: return false;
  }
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

}  // namespace

weftResult_t reduce(void* dst, void* dst2, const void* const* srcs, int nsrcs, size_t count,
                    weftDataType_t dtype, reduce::Op op, Stream stream) {
  if (nsrcs < 1 || nsrcs > kMaxSources || dst == nullptr || srcs == nullptr)
    return weftInvalidArgument;
  if (count == 0) return weftSuccess;
  Args args{};
  bool aligned = aligned16(dst) && (dst2 == nullptr || aligned16(dst2));
  for (int s = 0; s < nsrcs; ++s) {
    args.src[s] = srcs[s];
    aligned = aligned && aligned16(srcs[s]);
  }
  args.dst = dst;
  args.dst2 = dst2;
  args.nsrcs = nsrcs;
  args.count = count;
  const bool ok = visit(dtype, op, [&]<class E, Op O>() {
    if (aligned) {
      reduce_packs<E, O><<<blocks_for(count / E::kPack + 1), kThreads, 0, stream>>>(args);
    } else {
      reduce_elements<E, O><<<blocks_for(count), kThreads, 0, stream>>>(args);
    }
  });
  if (!ok) return weftInvalidArgument;
  return launched("reduce");
}

weftResult_t scale(void* dst, const void* src, size_t count, weftDataType_t dtype,
                   const void* scalar, Stream stream) {
  if (dst == nullptr || src == nullptr || scalar == nullptr) return weftInvalidArgument;
  if (count == 0) return weftSuccess;
  const bool ok = visit(dtype, Op::Prod, [&]<class E, Op>() {
    using S = typename E::S;
    S raw;
    std::memcpy(&raw, scalar, sizeof raw);
    typename E::A k;
    if constexpr (std::is_same_v<E, Half>) k = __half2float(raw);
    else if constexpr (std::is_same_v<E, Bf16>) k = __bfloat162float(raw);
    else if constexpr (std::is_same_v<E, E4M3> || std::is_same_v<E, E5M2>)
      k = __half2float(__half(__nv_cvt_fp8_to_halfraw(raw, std::is_same_v<E, E4M3> ? __NV_E4M3 : __NV_E5M2)));
    else k = raw;
    scale_elements<E><<<blocks_for(count), kThreads, 0, stream>>>(static_cast<S*>(dst),
                                                                  static_cast<const S*>(src), count, k);
  });
  if (!ok) return weftInvalidArgument;
  return launched("scale");
}

weftResult_t divide(void* dst, const void* src, size_t count, weftDataType_t dtype,
                    int64_t divisor, Stream stream) {
  if (dst == nullptr || src == nullptr) return weftInvalidArgument;
  if (count == 0) return weftSuccess;
  const unsigned blocks = blocks_for(count);
  // Unsigned dtypes divide by the divisor's magnitude, as the CPU kernels do.
  const uint64_t magnitude =
      divisor < 0 ? 0 - static_cast<uint64_t>(divisor) : static_cast<uint64_t>(divisor);
  auto ints = [&]<class T>() {
    // int64 arithmetic: the promoted quotient truncates toward zero like reduce::divide.
    divide_elements<Plain<T>, int64_t><<<blocks, kThreads, 0, stream>>>(
        static_cast<T*>(dst), static_cast<const T*>(src), count, divisor);
  };
  switch (dtype) {
    case weftInt8: ints.template operator()<int8_t>(); break;
    case weftInt32: ints.template operator()<int32_t>(); break;
    case weftInt64: ints.template operator()<int64_t>(); break;
    case weftUint8:
      divide_elements<Plain<uint8_t>, uint64_t><<<blocks, kThreads, 0, stream>>>(
          static_cast<uint8_t*>(dst), static_cast<const uint8_t*>(src), count, magnitude);
      break;
    case weftUint32:
      divide_elements<Plain<uint32_t>, uint64_t><<<blocks, kThreads, 0, stream>>>(
          static_cast<uint32_t*>(dst), static_cast<const uint32_t*>(src), count, magnitude);
      break;
    case weftUint64:
      divide_elements<Plain<uint64_t>, uint64_t><<<blocks, kThreads, 0, stream>>>(
          static_cast<uint64_t*>(dst), static_cast<const uint64_t*>(src), count, magnitude);
      break;
    case weftFloat16:
      divide_elements<Half, float><<<blocks, kThreads, 0, stream>>>(
          static_cast<__half*>(dst), static_cast<const __half*>(src), count, static_cast<float>(divisor));
      break;
    case weftBfloat16:
      divide_elements<Bf16, float><<<blocks, kThreads, 0, stream>>>(
          static_cast<__nv_bfloat16*>(dst), static_cast<const __nv_bfloat16*>(src), count, static_cast<float>(divisor));
      break;
    case weftFloat8e4m3:
      divide_elements<E4M3, float><<<blocks, kThreads, 0, stream>>>(
          static_cast<__nv_fp8_storage_t*>(dst), static_cast<const __nv_fp8_storage_t*>(src), count, static_cast<float>(divisor));
      break;
    case weftFloat8e5m2:
      divide_elements<E5M2, float><<<blocks, kThreads, 0, stream>>>(
          static_cast<__nv_fp8_storage_t*>(dst), static_cast<const __nv_fp8_storage_t*>(src), count, static_cast<float>(divisor));
      break;
    case weftFloat32:
      divide_elements<Plain<float>, float><<<blocks, kThreads, 0, stream>>>(
          static_cast<float*>(dst), static_cast<const float*>(src), count, static_cast<float>(divisor));
      break;
    case weftFloat64:
      divide_elements<Plain<double>, double><<<blocks, kThreads, 0, stream>>>(
          static_cast<double*>(dst), static_cast<const double*>(src), count, static_cast<double>(divisor));
      break;
    default: return weftInvalidArgument;
  }
  return launched("divide");
}

}  // namespace weft::cuda
