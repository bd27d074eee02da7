// The executor's hands: every copy into a user buffer, reduction, average
// division and pre-multiplication of a call goes through the data engine of the
// call's memory. Host memory (malloc'ed or weftMemAlloc'ed) has the CPU kernels
// of src/reduce; device memory will have CUDA kernels and copies on the caller's
// stream (the GPU work plugs in a second engine here). Staging and scratch that
// the executor owns stay host memory.
#pragma once

#include <cstddef>

#include "exec/buffer_kind.h"
#include "reduce/reduce.h"

namespace weft::exec {

class DataEngine {
 public:
  explicit DataEngine(bool host) : host_memory(host) {}
  virtual ~DataEngine() = default;
  // The buffers are host memory: a link may write a received message straight
  // into them. Otherwise every byte reaches them through copy() or reduce2().
  const bool host_memory;
  virtual const char* name() const = 0;
  virtual void copy(void* dst, const void* src, size_t bytes) = 0;  // ranges may overlap
  // dst = a op b, elementwise (dst may alias a).
  virtual void reduce2(void* dst, const void* a, const void* b, size_t count, weftDataType_t dtype,
                       reduce::Op op) = 0;
  // dst = src / n (weftAvg).
  virtual void divide(void* dst, const void* src, size_t count, weftDataType_t dtype, int n) = 0;
  // dst = src * scalar (a pre-multiplied sum's input).
  virtual void scale(void* dst, const void* src, size_t count, weftDataType_t dtype, const void* scalar) = 0;
  // Whether everything issued so far has run. An engine that works
  // asynchronously (a CUDA stream, completion by event) says false until then:
  // a link keeps a received piece the engine reads until then, and the executor
  // sends nothing the engine writes, and ends no call, before it.
  virtual bool idle() { return true; }
};

// The CPU kernels, for host memory.
DataEngine& cpu_data_engine();
// The engine for memory of this kind, or nullptr where this build has none
// (device memory, until the CUDA engine exists).
DataEngine* data_engine_for(const BufferKind& kind);

}  // namespace weft::exec
