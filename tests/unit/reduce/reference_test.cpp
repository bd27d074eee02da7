// The reference must itself be right, or the sweeps prove nothing: known fp16/bf16
// encodings, round-to-nearest-even ties, and agreement with the hardware's F16C
// conversion where this CPU has it.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>

#include "reference.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace weft::reduce::ref {
namespace {

TEST(Reference, HalfKnownValues) {
  EXPECT_EQ(round_to_half(1.0), 0x3c00);
  EXPECT_EQ(round_to_half(-2.0), 0xc000);
  EXPECT_EQ(round_to_half(65504.0), 0x7bff);
  EXPECT_EQ(round_to_half(65519.99), 0x7bff);
  EXPECT_EQ(round_to_half(65520.0), 0x7c00);  // tie goes to the even code: Inf
  EXPECT_EQ(round_to_half(INFINITY), 0x7c00);
  EXPECT_EQ(round_to_half(-INFINITY), 0xfc00);
  EXPECT_EQ(round_to_half(std::ldexp(1.0, -24)), 0x0001);  // min subnormal
  EXPECT_EQ(round_to_half(std::ldexp(1.0, -25)), 0x0000);  // tie to even: 0
  EXPECT_EQ(round_to_half(std::ldexp(3.0, -25)), 0x0002);  // 1.5 ulp: tie to even 2
  EXPECT_EQ(round_to_half(-0.0), 0x8000);
  EXPECT_EQ(round_to_half(1.0 + std::ldexp(1.0, -11)), 0x3c00);
  EXPECT_EQ(round_to_half(1.0 + std::ldexp(3.0, -11)), 0x3c02);
  EXPECT_TRUE(std::isnan(half_to_float(round_to_half(NAN))));
  EXPECT_EQ(half_to_float(0x3555), 0.333251953125f);
  EXPECT_EQ(half_to_float(0x0001), std::ldexp(1.0f, -24));
  EXPECT_TRUE(std::isinf(half_to_float(0x7c00)));
  EXPECT_TRUE(std::isnan(half_to_float(0x7c01)));
}

TEST(Reference, Bf16KnownValues) {
  EXPECT_EQ(round_to_bf16(1.0), 0x3f80);
  EXPECT_EQ(round_to_bf16(1.0 + std::ldexp(1.0, -8)), 0x3f80);  // tie to even
  EXPECT_EQ(round_to_bf16(1.0 + std::ldexp(3.0, -8)), 0x3f82);
  EXPECT_EQ(round_to_bf16(std::ldexp(1.0, -133)), 0x0001);  // min subnormal
  EXPECT_EQ(round_to_bf16(3.4028234663852886e+38), 0x7f80);  // fp32 max rounds up
  EXPECT_EQ(round_to_bf16(-256.0), 0xc380);
  EXPECT_EQ(bf16_to_float(0x4381), 258.0f);
}

TEST(Reference, EveryHalfRoundTrips) {
  for (uint32_t c = 0; c < 0x10000; ++c) {
    const uint16_t h = static_cast<uint16_t>(c);
    const float f = half_to_float(h);
    if (std::isnan(f)) continue;
    ASSERT_EQ(round_to_half(f), h) << std::hex << c;
  }
}

#if defined(__x86_64__)
// An outside opinion: the CPU's own fp16 conversion (F16C), where it exists.
__attribute__((target("f16c"))) uint16_t hw_half(float f) {
  return static_cast<uint16_t>(_cvtss_sh(f, 0));
}
__attribute__((target("f16c"))) float hw_float(uint16_t h) { return _cvtsh_ss(h); }

TEST(Reference, AgreesWithF16c) {
  if (!__builtin_cpu_supports("f16c")) GTEST_SKIP() << "no F16C on this CPU";
  for (uint32_t c = 0; c < 0x10000; ++c) {
    const float f = half_to_float(static_cast<uint16_t>(c));
    const float h = hw_float(static_cast<uint16_t>(c));
    if (std::isnan(f)) {
      ASSERT_TRUE(std::isnan(h));
      continue;
    }
    ASSERT_EQ(std::memcmp(&f, &h, 4), 0) << std::hex << c;
  }
  // Every 4097th float bit pattern, plus the neighbourhood of each half tie.
  for (uint64_t u = 0; u < 0x100000000ull; u += 4097) {
    const uint32_t bits = static_cast<uint32_t>(u);
    float f;
    std::memcpy(&f, &bits, 4);
    if (std::isnan(f)) continue;
    ASSERT_EQ(round_to_half(f), hw_half(f)) << std::hex << bits;
  }
  for (uint32_t c = 0; c < 0x7c00; ++c) {
    const double mid = (static_cast<double>(half_to_float(static_cast<uint16_t>(c))) +
                        static_cast<double>(half_to_float(static_cast<uint16_t>(c + 1)))) /
                       2;
    const float f = static_cast<float>(mid);  // exact: a half midpoint has 12 bits
    ASSERT_EQ(round_to_half(f), hw_half(f)) << std::hex << c;
    ASSERT_EQ(round_to_half(std::nextafter(f, 0.0f)), hw_half(std::nextafter(f, 0.0f)));
    ASSERT_EQ(round_to_half(std::nextafter(f, INFINITY)), hw_half(std::nextafter(f, INFINITY)));
  }
}
#endif

}  // namespace
}  // namespace weft::reduce::ref
