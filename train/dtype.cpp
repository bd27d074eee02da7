#include "train/dtype.h"

namespace weft::train {

const char* dtypeName(DType d) {
  switch (d) {
    case DType::f32: return "fp32";
    case DType::bf16: return "bf16";
    case DType::f16: return "fp16";
    case DType::f64: return "fp64";
  }
  return "?";
}

bool parseDType(std::string_view s, DType* out) {
  if (s == "fp32" || s == "f32" || s == "float32") { *out = DType::f32; return true; }
  if (s == "bf16" || s == "bfloat16") { *out = DType::bf16; return true; }
  if (s == "fp16" || s == "f16" || s == "float16") { *out = DType::f16; return true; }
  if (s == "fp64" || s == "f64" || s == "float64") { *out = DType::f64; return true; }
  return false;
}

size_t dtypeSize(DType d) {
  switch (d) {
    case DType::f32: return 4;
    case DType::bf16: return 2;
    case DType::f16: return 2;
    case DType::f64: return 8;
  }
  return 0;
}

template <class T> void toAcc(const T* src, Acc<T>* dst, size_t n) {
  long long nn = (long long)n;
#pragma omp parallel for schedule(static) if (nn > 65536)
  for (long long i = 0; i < nn; i++) dst[i] = ld(src[i]);
}

template <class T> void fromAcc(const Acc<T>* src, T* dst, size_t n) {
  long long nn = (long long)n;
#pragma omp parallel for schedule(static) if (nn > 65536)
  for (long long i = 0; i < nn; i++) dst[i] = st<T>(src[i]);
}

#define WEFT_INST(T)                                    \
  template void toAcc<T>(const T*, Acc<T>*, size_t);    \
  template void fromAcc<T>(const Acc<T>*, T*, size_t);
WEFT_INST(float)
WEFT_INST(double)
WEFT_INST(bf16)
WEFT_INST(f16)
#undef WEFT_INST

}  // namespace weft::train
