// The kernel sets behind reduce.h: one per instruction set, each a small table of
// entry points. reduce.cpp picks one at start-up; tests and benchmarks may switch.
#pragma once

#include <cstddef>
#include <cstdint>

#include "reduce/reduce.h"

namespace weft::reduce {

struct KernelSet {
  const char* name;
  // True if this CPU (and OS, for the wide registers) can run the set.
  bool (*supported)();
  // dst (and dst2 when not null) = srcs[0] op ... op srcs[nsrcs-1]. nontemporal is a
  // hint that the output is large and will not be read soon: the set may bypass the
  // cache with streaming stores where that is faster. dtype is valid here.
  void (*reduce)(void* dst, void* dst2, const void* const* srcs, int nsrcs, size_t count,
                 weftDataType_t dtype, Op op, bool nontemporal);
  void (*divide)(void* dst, const void* src, size_t count, weftDataType_t dtype,
                 int64_t divisor);
  void (*scale)(void* dst, const void* src, size_t count, weftDataType_t dtype,
                const void* scalar);
};

// Each lives in its own .cpp file; the SIMD ones are compiled for their instruction
// set only, so nothing outside them may run before supported() says yes.
const KernelSet& scalar_kernels();
const KernelSet& avx2_kernels();
const KernelSet& avx512_kernels();

// The set WEFT_CPU_KERNEL-style text `forced` names if this CPU supports it, else the
// best supported one ("" or nullptr: the best). *fallback is set true when `forced`
// was given but could not be honoured.
const KernelSet& choose_kernels(const char* forced, bool* fallback);

// Output size, in bytes, from which reduce() asks for streaming stores. Measured with
// bench/reduce (see reduce.cpp); tests and benchmarks may change it.
size_t nontemporal_threshold();
void set_nontemporal_threshold(size_t bytes);

}  // namespace weft::reduce
