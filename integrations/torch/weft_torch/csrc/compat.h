// What differs between the torch versions weft_torch builds against (2.6 to
// 2.15 tested): c10d's options carry asyncOp, whether the caller waits at
// once, from torch 2.7 on; before, every call counts as async.
#pragma once

namespace weft_torch {

template <class O>
auto async_field(const O& o, int) -> decltype(o.asyncOp, bool()) {
  return o.asyncOp;
}
template <class O>
bool async_field(const O&, long) {
  return true;
}
template <class O>
bool is_async(const O& o) {
  return async_field(o, 0);
}

// Marks options as a synchronous call where torch has the field.
template <class O>
auto set_sync(O& o, int) -> decltype(o.asyncOp = false, void()) {
  o.asyncOp = false;
}
template <class O>
void set_sync(O&, long) {}

}  // namespace weft_torch
