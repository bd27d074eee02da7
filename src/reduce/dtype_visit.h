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

// Floating-point types: the bitwise ops have no meaning there (false, f not called).
template <class E, class F>
inline bool by_float_op(Op op, F& f) {
  switch (op) {
    case Op::Sum: call<E, Op::Sum>(f); return true;
    case Op::Prod: call<E, Op::Prod>(f); return true;
    case Op::Max: call<E, Op::Max>(f); return true;
    case Op::Min: call<E, Op::Min>(f); return true;
    case Op::Band:
    case Op::Bor:
    case Op::Bxor: return false;
  }
  return false;
}

// Integer Sum/Prod run on the unsigned type so they wrap without undefined
// behaviour, and the bitwise ops there too (they ignore signedness); Min/Max
// compare with the dtype's own signedness.
template <template <class> class Plain, class T, class F>
inline bool by_int_op(Op op, F& f) {
  using U = std::make_unsigned_t<T>;
  switch (op) {
    case Op::Sum: call<Plain<U>, Op::Sum>(f); return true;
    case Op::Prod: call<Plain<U>, Op::Prod>(f); return true;
    case Op::Max: call<Plain<T>, Op::Max>(f); return true;
    case Op::Min: call<Plain<T>, Op::Min>(f); return true;
    case Op::Band: call<Plain<U>, Op::Band>(f); return true;
    case Op::Bor: call<Plain<U>, Op::Bor>(f); return true;
    case Op::Bxor: call<Plain<U>, Op::Bxor>(f); return true;
  }
  return false;
}

// Returns false for an invalid dtype, or a bitwise op on a floating-point one
// (f is not called); also for fp8 in a set that gives no wrappers for it (void).
template <template <class> class Plain, class Half, class Bf16, class E4M3 = void, class E5M2 = void, class F>
inline bool dtype_op(weftDataType_t dtype, Op op, F&& f) {
  switch (dtype) {
    case weftInt8: return by_int_op<Plain, int8_t>(op, f);
    case weftUint8: return by_int_op<Plain, uint8_t>(op, f);
    case weftInt32: return by_int_op<Plain, int32_t>(op, f);
    case weftUint32: return by_int_op<Plain, uint32_t>(op, f);
    case weftInt64: return by_int_op<Plain, int64_t>(op, f);
    case weftUint64: return by_int_op<Plain, uint64_t>(op, f);
    case weftFloat16: return by_float_op<Half>(op, f);
    case weftBfloat16: return by_float_op<Bf16>(op, f);
    case weftFloat32: return by_float_op<Plain<float>>(op, f);
    case weftFloat64: return by_float_op<Plain<double>>(op, f);
    case weftFloat8e4m3:
      if constexpr (std::is_void_v<E4M3>) return false;
      else return by_float_op<E4M3>(op, f);
    case weftFloat8e5m2:
      if constexpr (std::is_void_v<E5M2>) return false;
      else return by_float_op<E5M2>(op, f);
    default: return false;
  }
}

}  // namespace weft::reduce::visit
