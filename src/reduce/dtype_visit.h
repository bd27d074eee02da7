// Maps a runtime (dtype, op) pair to a compile-time (element wrapper, op) pair, so
// each kernel set writes its loops once as templates. The wrapper says how a dtype is
// loaded into its accumulation type and stored back (Plain<T>, Half, Bf16 are the
// kernel set's own types).
//
// Kernel sets compiled for an instruction set must instantiate this only with types
// local to their file (anonymous namespace), so that every instantiation has internal
// linkage and the linker can never pick an AVX-512 copy for the scalar path.
#pragma once

#include <cstdint>
#include <type_traits>

#include "reduce/reduce.h"

namespace weft::reduce::visit {

template <class E, Op O, class F>
inline void call(F& f) {
  f.template operator()<E, O>();
}

template <class E, class F>
inline void by_op(Op op, F& f) {
  switch (op) {
    case Op::Sum: return call<E, Op::Sum>(f);
    case Op::Prod: return call<E, Op::Prod>(f);
    case Op::Max: return call<E, Op::Max>(f);
    case Op::Min: return call<E, Op::Min>(f);
  }
}

// Integer Sum/Prod run on the unsigned type so they wrap without undefined
// behaviour; Min/Max compare with the dtype's own signedness.
template <template <class> class Plain, class T, class F>
inline void by_int_op(Op op, F& f) {
  using U = std::make_unsigned_t<T>;
  switch (op) {
    case Op::Sum: return call<Plain<U>, Op::Sum>(f);
    case Op::Prod: return call<Plain<U>, Op::Prod>(f);
    case Op::Max: return call<Plain<T>, Op::Max>(f);
    case Op::Min: return call<Plain<T>, Op::Min>(f);
  }
}

// Returns false for an invalid dtype (f is not called).
template <template <class> class Plain, class Half, class Bf16, class F>
inline bool dtype_op(weftDataType_t dtype, Op op, F&& f) {
  switch (dtype) {
    case weftInt8: by_int_op<Plain, int8_t>(op, f); return true;
    case weftUint8: by_int_op<Plain, uint8_t>(op, f); return true;
    case weftInt32: by_int_op<Plain, int32_t>(op, f); return true;
    case weftUint32: by_int_op<Plain, uint32_t>(op, f); return true;
    case weftInt64: by_int_op<Plain, int64_t>(op, f); return true;
    case weftUint64: by_int_op<Plain, uint64_t>(op, f); return true;
    case weftFloat16: by_op<Half>(op, f); return true;
    case weftBfloat16: by_op<Bf16>(op, f); return true;
    case weftFloat32: by_op<Plain<float>>(op, f); return true;
    case weftFloat64: by_op<Plain<double>>(op, f); return true;
    default: return false;
  }
}

}  // namespace weft::reduce::visit
