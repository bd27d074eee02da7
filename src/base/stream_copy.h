// A copy whose stores bypass the cache (non-temporal): the lines go to memory
// without first being taken from another core's cache (transports/shm/slot_copy.h
// says when that pays).
#pragma once

#include <cstddef>

namespace weft {

// dst = src for bytes bytes, as memcpy (no overlap); the stores are complete and
// ordered before any later store of this thread (it ends with a store fence).
void stream_copy(void* dst, const void* src, size_t bytes);

}  // namespace weft
