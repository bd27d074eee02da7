#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "train/dtype.h"

namespace weft::train {
namespace {

TEST(DType, Bf16RoundsToNearestEven) {
  EXPECT_EQ(toBf16(1.0f).bits, 0x3f80);
  EXPECT_EQ(toFloat(toBf16(1.0f + 1.0f / 256)), 1.0f);            // tie -> even (down)
  EXPECT_EQ(toFloat(toBf16(1.0f + 3.0f / 256)), 1.0f + 4.0f / 256);  // tie -> even (up)
  EXPECT_TRUE(std::isnan(toFloat(toBf16(std::numeric_limits<float>::quiet_NaN()))));
  EXPECT_TRUE(std::isinf(toFloat(toBf16(std::numeric_limits<float>::infinity()))));
}

TEST(DType, Fp16ExhaustiveRoundTrip) {
  // Every finite half converts to float and back unchanged.
  for (uint32_t b = 0; b < 0x10000; b++) {
    f16 h{uint16_t(b)};
    float f = toFloat(h);
    if (std::isnan(f)) continue;
    EXPECT_EQ(toF16(f).bits, h.bits) << std::hex << b;
  }
  EXPECT_EQ(toFloat(toF16(65504.0f)), 65504.0f);
  EXPECT_TRUE(std::isinf(toFloat(toF16(65520.0f))));              // rounds to inf
  EXPECT_EQ(toFloat(toF16(65519.0f)), 65504.0f);
  EXPECT_EQ(toFloat(toF16(5.9604645e-8f)), 5.9604645e-8f);         // smallest subnormal
  EXPECT_EQ(toFloat(toF16(2.9802322e-8f)), 0.0f);                  // half of it: tie -> 0
  EXPECT_EQ(toFloat(toF16(1.0f + 1.0f / 2048)), 1.0f);            // tie -> even
  EXPECT_EQ(toFloat(toF16(1.0f + 3.0f / 2048)), 1.0f + 2.0f / 1024);
}

// Bulk (F16C where available) and scalar conversions agree bit for bit.
TEST(DType, BulkConversionsMatchScalar) {
  std::vector<f16> h(0x10000);
  for (uint32_t b = 0; b < 0x10000; b++) h[b].bits = uint16_t(b);
  std::vector<float> f(h.size());
  toAcc(h.data(), f.data(), h.size());
  for (uint32_t b = 0; b < 0x10000; b++) {
    const float s = toFloat(h[b]);
    if (std::isnan(s)) EXPECT_TRUE(std::isnan(f[b]));
    else EXPECT_EQ(floatToBits(f[b]), floatToBits(s)) << std::hex << b;
  }
  // Floats around every half boundary: exact halves, midpoints, and neighbours.
  std::vector<float> in;
  for (uint32_t b = 0; b < 0x7c00; b += 3) {
    const float a = toFloat(f16{uint16_t(b)}), c = toFloat(f16{uint16_t(b + 1)});
    const float mid = a + (c - a) / 2;
    for (float x : {a, mid, std::nextafter(mid, 0.0f), std::nextafter(mid, 1e9f)}) {
      in.push_back(x);
      in.push_back(-x);
    }
  }
  in.push_back(70000.0f);
  in.push_back(std::numeric_limits<float>::infinity());
  std::vector<f16> out(in.size());
  fromAcc(in.data(), out.data(), in.size());
  for (size_t i = 0; i < in.size(); i++) EXPECT_EQ(out[i].bits, toF16(in[i]).bits) << in[i];
  std::vector<bf16> ob(in.size());
  fromAcc(in.data(), ob.data(), in.size());
  for (size_t i = 0; i < in.size(); i++) EXPECT_EQ(ob[i].bits, toBf16(in[i]).bits) << in[i];
}

}  // namespace
}  // namespace weft::train
