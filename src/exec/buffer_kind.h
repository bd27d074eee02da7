// What memory a call's buffer is; the kind picks the data engine that touches
// it (data_engine_for). Host memory (malloc'ed, weftMemAlloc'ed, registered)
// has the CPU kernels. Device memory needs a CUDA data engine, which is not
// built yet: a call with a device buffer is refused, naming the buffer and the
// GPU, instead of crashing in a memcpy.
//
// Only a process that has loaded the CUDA driver (libcuda.so.1) can hold a
// device pointer, so only there is the driver asked (cuPointerGetAttributes);
// weft never loads it itself. Elsewhere every buffer is host memory, and the
// driver is looked for again at most once a second (an application may load
// CUDA after its first call).
#pragma once

namespace weft::exec {

struct BufferKind {
  bool device = false;
  int gpu = -1;  // device memory: the GPU's ordinal
};

BufferKind buffer_kind(const void* p);

}  // namespace weft::exec
