// Entry points of reduce.h: argument checks, the choice of kernel set, names.
#include "reduce/reduce.h"

#include <atomic>
#include <cstring>

#include "base/log.h"
#include "base/params.h"
#include "reduce/kernel_set.h"

namespace weft::reduce {
namespace {

// Streaming (non-temporal) stores skip the read-for-ownership of the destination
// lines, so a reduction with a big output moves a quarter less memory traffic (3 x
// bytes instead of 4 x for two sources); but its result then lands in DRAM, not in
// the cache, and the executor usually sends what it just reduced. So stream only where
// the output could not have stayed cached anyway. bench/reduce's BM_ReduceStore on an
// AMD EPYC (Zen 5, 32 MiB L3, 1 MiB L2/core), avx512 set, two sources, median of 3,
// GiB/s of bytes read + written (regular -> streaming):
//   per-buffer bytes   256 KiB    1 MiB    4 MiB    8 MiB   16 MiB   64 MiB   256 MiB
//   fp16 sum           123->105   94->105  99->102  56->93   43->58   34->48   35->46
//   fp32 sum           188->106   94->108  95->97   61->80   45->50   37->43   35->37
// In cache streaming loses outright; 1-4 MiB is a wash in isolation and a loss once
// the consumer's re-read from DRAM is counted; from 8 MiB (a working set of 24 MiB and
// more, near the L3 size) it wins clearly.
constexpr size_t kDefaultNontemporalThreshold = size_t{8} << 20;

// Up to this many elements the scalar set reduces: a padded register costs ~300
// instructions of setup (callgrind, 2 fp32 elements), the scalar loop a few per
// element (fp16/bf16: ~60, software conversions).
constexpr size_t kScalarMaxCount = 4;

std::atomic<size_t> g_nontemporal_threshold{kDefaultNontemporalThreshold};
std::atomic<const KernelSet*> g_kernels{nullptr};

const KernelSet& startup_kernels() {
  static const KernelSet* chosen = [] {
    const std::string& forced = params::CPU_KERNEL();
    bool fallback = false;
    const KernelSet& k = choose_kernels(forced.c_str(), &fallback);
    if (fallback)
      WEFT_WARN(REDUCE, "WEFT_CPU_KERNEL=%s is unknown or unsupported by this CPU; using %s",
                forced.c_str(), k.name);
    WEFT_INFO(REDUCE, "CPU reduction kernels: %s (%s; avx512 %s, avx2 %s)", k.name,
              forced.empty() ? "best supported" : "WEFT_CPU_KERNEL",
              avx512_kernels().supported() ? "yes" : "no",
              avx2_kernels().supported() ? "yes" : "no");
    return &k;
  }();
  return *chosen;
}

const KernelSet& kernels() {
  const KernelSet* k = g_kernels.load(std::memory_order_acquire);
  if (k != nullptr) return *k;
  const KernelSet* expected = nullptr;
  g_kernels.compare_exchange_strong(expected, &startup_kernels(), std::memory_order_acq_rel);
  return *g_kernels.load(std::memory_order_acquire);
}

bool valid_dtype(weftDataType_t dtype) { return dtype >= 0 && dtype < weftNumTypes; }

bool valid_op(Op op, weftDataType_t dtype) {
  if (is_bitwise(op)) return !is_float_dtype(dtype);
  return op == Op::Sum || op == Op::Prod || op == Op::Max || op == Op::Min;
}

}  // namespace

const KernelSet& choose_kernels(const char* forced, bool* fallback) {
  const KernelSet* const by_preference[] = {&avx512_kernels(), &avx2_kernels(),
                                            &scalar_kernels()};
  *fallback = false;
  if (forced != nullptr && *forced != '\0') {
    for (const KernelSet* k : by_preference)
      if (std::strcmp(forced, k->name) == 0 && k->supported()) return *k;
    *fallback = true;
  }
  for (const KernelSet* k : by_preference)
    if (k->supported()) return *k;
  return scalar_kernels();
}

size_t nontemporal_threshold() { return g_nontemporal_threshold.load(std::memory_order_relaxed); }

void set_nontemporal_threshold(size_t bytes) {
  g_nontemporal_threshold.store(bytes, std::memory_order_relaxed);
}

// nccl-tests' spellings, so weft-perf's tables read the same.
const char* dtype_name(weftDataType_t dtype) {
  switch (dtype) {
    case weftInt8: return "int8";
    case weftUint8: return "uint8";
    case weftInt32: return "int32";
    case weftUint32: return "uint32";
    case weftInt64: return "int64";
    case weftUint64: return "uint64";
    case weftFloat16: return "half";
    case weftFloat32: return "float";
    case weftFloat64: return "double";
    case weftBfloat16: return "bfloat16";
    case weftFloat8e4m3: return "f8e4m3";
    case weftFloat8e5m2: return "f8e5m2";
    default: return "invalid";
  }
}

const char* op_name(weftRedOp_t op) {
  switch (op) {
    case weftSum: return "sum";
    case weftProd: return "prod";
    case weftMax: return "max";
    case weftMin: return "min";
    case weftAvg: return "avg";
    case weftBand: return "band";
    case weftBor: return "bor";
    case weftBxor: return "bxor";
    default: return "invalid";
  }
}

void reduce_copy(void* dst, void* dst2, const void* const* srcs, int nsrcs, size_t count,
                 weftDataType_t dtype, Op op) {
  if (count == 0) return;
  if (nsrcs < 1 || nsrcs > kMaxSources || !valid_dtype(dtype) || !valid_op(op, dtype)) {
    // A caller bug; there is no status to return, so say so loudly and do nothing.
    WEFT_WARN(REDUCE, "reduce: invalid arguments (nsrcs=%d dtype=%d op=%d); nothing done",
              nsrcs, static_cast<int>(dtype), static_cast<int>(op));
    return;
  }
  const size_t bytes = count * dtype_size(dtype);
  if (nsrcs == 1) {  // op over one source is the identity: copy the bits
    if (dst != srcs[0]) std::memcpy(dst, srcs[0], bytes);
    if (dst2 != nullptr && dst2 != srcs[0]) std::memcpy(dst2, srcs[0], bytes);
    return;
  }
  // A few elements (the 8-byte all-reduces of a latency-bound loop) cost less one
  // at a time than through a zero-padded register; the sets agree bit for bit.
  const KernelSet& k = count <= kScalarMaxCount ? scalar_kernels() : kernels();
  k.reduce(dst, dst2, srcs, nsrcs, count, dtype, op, bytes >= nontemporal_threshold());
}

void reduce(void* dst, const void* const* srcs, int nsrcs, size_t count, weftDataType_t dtype,
            Op op) {
  reduce_copy(dst, nullptr, srcs, nsrcs, count, dtype, op);
}

void divide(void* dst, const void* src, size_t count, weftDataType_t dtype, int64_t divisor) {
  if (count == 0 || !valid_dtype(dtype)) return;
  kernels().divide(dst, src, count, dtype, divisor);
}

void scale(void* dst, const void* src, size_t count, weftDataType_t dtype, const void* scalar) {
  if (count == 0 || !valid_dtype(dtype)) return;
  kernels().scale(dst, src, count, dtype, scalar);
}

const char* kernel_name() { return kernels().name; }

bool use_kernel(const char* name) {
  if (name == nullptr) return false;
  for (const KernelSet* k : {&avx512_kernels(), &avx2_kernels(), &scalar_kernels()}) {
    if (std::strcmp(name, k->name) == 0) {
      if (!k->supported()) return false;
      g_kernels.store(k, std::memory_order_release);
      return true;
    }
  }
  return false;
}

}  // namespace weft::reduce
