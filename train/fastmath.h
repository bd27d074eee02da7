// Vectorizable exp and tanh for fp32 kernels (softmax, GELU). fp64 (the gradient
// check) uses the C library. expFast: Cody-Waite range reduction and a degree-6
// polynomial (coefficients: the classic Cephes expf minimax fit), max relative error
// ~2 ulp over [-87, 88]; inputs are clamped there. tanhFast = 1 - 2/(1+exp(2x)):
// absolute error ~1e-7, which is what GELU's 0.5 x (1 + tanh) needs.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

namespace weft::train {

inline float expFast(float x) {
  x = x < -87.0f ? -87.0f : (x > 88.0f ? 88.0f : x);
  const float fx = x * 1.44269504088896341f;
  const int32_t i = int32_t(fx + (fx >= 0.0f ? 0.5f : -0.5f));  // round to nearest
  const float n = float(i);
  float r = x - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const float y = p * r * r + r + 1.0f;
  const int32_t bits = (i + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, 4);
  return y * scale;
}
inline double expFast(double x) { return std::exp(x); }

inline float tanhFast(float x) { return 1.0f - 2.0f / (1.0f + expFast(2.0f * x)); }
inline double tanhFast(double x) { return std::tanh(x); }

}  // namespace weft::train
