// Hand-computed cases, independent of any reference code: each states one rule of
// reduce.h and checks it on every kernel set, at every position of a 100-element
// buffer so both the full-register loop and the edge handling are covered.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "kernel_path_fixture.h"
#include "reduce/reduce.h"

namespace weft::reduce::test {
namespace {

constexpr size_t kCount = 100;

// Reduces sources, each holding one value repeated kCount times; expects every
// output element to have the bits of `want`.
template <class T>
::testing::AssertionResult reduces_to(weftDataType_t dtype, Op op, std::vector<T> values, T want) {
  std::vector<std::vector<T>> bufs;
  const void* srcs[kMaxSources];
  for (size_t s = 0; s < values.size(); ++s) {
    bufs.emplace_back(kCount, values[s]);
    srcs[s] = bufs.back().data();
  }
  std::vector<T> out(kCount);
  reduce(out.data(), srcs, static_cast<int>(values.size()), kCount, dtype, op);
  for (size_t i = 0; i < kCount; ++i)
    if (std::memcmp(&out[i], &want, sizeof(T)) != 0) {
      uint64_t got_bits = 0, want_bits = 0;
      std::memcpy(&got_bits, &out[i], sizeof(T));
      std::memcpy(&want_bits, &want, sizeof(T));
      return ::testing::AssertionFailure()
             << kernel_name() << " " << dtype_name(dtype) << ": element " << i << " is 0x"
             << std::hex << got_bits << ", want 0x" << want_bits;
    }
  return ::testing::AssertionSuccess();
}

using Semantics = KernelPath;

TEST_P(Semantics, HalfAccumulatesInFp32AndRoundsOnce) {
  // 2048 + 1 + 1: rounding after each add would give 2048 twice (2049 ties to even);
  // fp32 accumulation gives 2050, which fp16 holds exactly (0x6801).
  EXPECT_TRUE(reduces_to<uint16_t>(weftFloat16, Op::Sum, {0x6800, 0x3c00, 0x3c00}, 0x6801));
  // Same for bf16 at 256 (spacing 2): 256 + 1 + 1 = 258 = 0x4381.
  EXPECT_TRUE(reduces_to<uint16_t>(weftBfloat16, Op::Sum, {0x4380, 0x3f80, 0x3f80}, 0x4381));
}

TEST_P(Semantics, HalfRoundsToNearestEven) {
  // 1 + 2^-11 is halfway between 1 and 1 + 2^-10: ties to the even 1.0.
  EXPECT_TRUE(reduces_to<uint16_t>(weftFloat16, Op::Sum, {0x3c00, 0x1000}, 0x3c00));
  // (1 + 2^-10) + 2^-11 is halfway between codes 0x3c01 and 0x3c02: to 0x3c02.
  EXPECT_TRUE(reduces_to<uint16_t>(weftFloat16, Op::Sum, {0x3c01, 0x1000}, 0x3c02));
  // bf16: 1 + 2^-8 is halfway between 1 and 1 + 2^-7: to 1.0 (0x3f80).
  EXPECT_TRUE(reduces_to<uint16_t>(weftBfloat16, Op::Sum, {0x3f80, 0x3b80}, 0x3f80));
  EXPECT_TRUE(reduces_to<uint16_t>(weftBfloat16, Op::Sum, {0x3f81, 0x3b80}, 0x3f82));
}

TEST_P(Semantics, HalfOverflowsToInfinity) {
  EXPECT_TRUE(reduces_to<uint16_t>(weftFloat16, Op::Sum, {0x7bff, 0x7bff}, 0x7c00));
  // 65504 + 8 = 65512 < 65520 stays finite; 65504 + 16 = 65520 ties to Inf (even).
  EXPECT_TRUE(reduces_to<uint16_t>(weftFloat16, Op::Sum, {0x7bff, 0x4800}, 0x7bff));
  EXPECT_TRUE(reduces_to<uint16_t>(weftFloat16, Op::Sum, {0x7bff, 0x4c00}, 0x7c00));
  EXPECT_TRUE(reduces_to<uint16_t>(weftFloat16, Op::Sum, {0xfbff, 0xfbff}, 0xfc00));
}

TEST_P(Semantics, DenormalsAreKept) {
  EXPECT_TRUE(reduces_to<uint16_t>(weftFloat16, Op::Sum, {0x0001, 0x0001}, 0x0002));
  EXPECT_TRUE(reduces_to<uint16_t>(weftFloat16, Op::Sum, {0x03ff, 0x0001}, 0x0400));
  // bf16 min subnormal doubled: AVX512_BF16's vcvtneps2bf16 would flush this to 0.
  EXPECT_TRUE(reduces_to<uint16_t>(weftBfloat16, Op::Sum, {0x0001, 0x0001}, 0x0002));
  EXPECT_TRUE(reduces_to<uint16_t>(weftBfloat16, Op::Sum, {0x8001, 0x8002}, 0x8003));
  const float tiny = std::numeric_limits<float>::denorm_min();
  EXPECT_TRUE(reduces_to<float>(weftFloat32, Op::Sum, {tiny, tiny}, 2 * tiny));
  const double dtiny = std::numeric_limits<double>::denorm_min();
  EXPECT_TRUE(reduces_to<double>(weftFloat64, Op::Prod, {dtiny, 4.0}, 4 * dtiny));
}

TEST_P(Semantics, InfinityAndNanPropagate) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_TRUE(reduces_to<float>(weftFloat32, Op::Sum, {inf, 1.0f}, inf));
  EXPECT_TRUE(reduces_to<float>(weftFloat32, Op::Prod, {inf, -2.0f}, -inf));
  for (Op op : {Op::Sum, Op::Prod, Op::Min, Op::Max}) {
    std::vector<float> a(kCount, nan), b(kCount, 3.0f), out(kCount);
    reduce2(out.data(), a.data(), b.data(), kCount, weftFloat32, op);
    for (float v : out) ASSERT_TRUE(std::isnan(v)) << kernel_name();
    std::vector<float> c(kCount, inf), d(kCount, -inf);
    reduce2(out.data(), c.data(), d.data(), kCount, weftFloat32, Op::Sum);
    for (float v : out) ASSERT_TRUE(std::isnan(v)) << kernel_name() << ": Inf + -Inf";
  }
  // fp16: Inf + -Inf is NaN; NaN + 1 is NaN.
  std::vector<uint16_t> pinf(kCount, 0x7c00), ninf(kCount, 0xfc00), out(kCount);
  reduce2(out.data(), pinf.data(), ninf.data(), kCount, weftFloat16, Op::Sum);
  for (uint16_t h : out) ASSERT_TRUE((h & 0x7c00) == 0x7c00 && (h & 0x3ff) != 0) << kernel_name();
}

TEST_P(Semantics, MinMaxNanWinsAndNegativeZeroIsSmaller) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (Op op : {Op::Min, Op::Max})
    for (int nan_first = 0; nan_first < 2; ++nan_first) {
      std::vector<float> a(kCount, nan_first ? nan : -5.0f), b(kCount, nan_first ? -5.0f : nan);
      std::vector<float> out(kCount);
      reduce2(out.data(), a.data(), b.data(), kCount, weftFloat32, op);
      for (float v : out) ASSERT_TRUE(std::isnan(v)) << kernel_name() << " NaN must win";
      std::vector<double> da(kCount, nan_first ? std::nan("") : 1.0);
      std::vector<double> db(kCount, nan_first ? 1.0 : std::nan(""));
      std::vector<double> dout(kCount);
      reduce2(dout.data(), da.data(), db.data(), kCount, weftFloat64, op);
      for (double v : dout) ASSERT_TRUE(std::isnan(v)) << kernel_name() << " NaN must win";
    }
  // -0 < +0, whatever the order.
  EXPECT_TRUE(reduces_to<float>(weftFloat32, Op::Min, {0.0f, -0.0f}, -0.0f));
  EXPECT_TRUE(reduces_to<float>(weftFloat32, Op::Min, {-0.0f, 0.0f}, -0.0f));
  EXPECT_TRUE(reduces_to<float>(weftFloat32, Op::Max, {-0.0f, 0.0f}, 0.0f));
  EXPECT_TRUE(reduces_to<float>(weftFloat32, Op::Max, {0.0f, -0.0f}, 0.0f));
  EXPECT_TRUE(reduces_to<double>(weftFloat64, Op::Min, {0.0, -0.0}, -0.0));
  EXPECT_TRUE(reduces_to<double>(weftFloat64, Op::Max, {-0.0, 0.0}, 0.0));
  EXPECT_TRUE(reduces_to<uint16_t>(weftFloat16, Op::Min, {0x0000, 0x8000}, 0x8000));
  EXPECT_TRUE(reduces_to<uint16_t>(weftBfloat16, Op::Max, {0x8000, 0x0000}, 0x0000));
  EXPECT_TRUE(reduces_to<float>(weftFloat32, Op::Max, {-1.0f, -3.0f, 2.0f, -7.0f}, 2.0f));
  EXPECT_TRUE(reduces_to<float>(weftFloat32, Op::Min, {-1.0f, -3.0f, 2.0f, -7.0f}, -7.0f));
}

TEST_P(Semantics, IntegersWrapAndCompareWithTheirSignedness) {
  EXPECT_TRUE(reduces_to<int8_t>(weftInt8, Op::Sum, {127, 1}, -128));
  EXPECT_TRUE(reduces_to<int8_t>(weftInt8, Op::Prod, {-128, -1}, -128));
  EXPECT_TRUE(reduces_to<int8_t>(weftInt8, Op::Prod, {16, 16, 3}, 0));
  EXPECT_TRUE(reduces_to<uint8_t>(weftUint8, Op::Sum, {255, 2}, 1));
  EXPECT_TRUE(reduces_to<uint8_t>(weftUint8, Op::Prod, {200, 2}, 144));
  EXPECT_TRUE(reduces_to<int32_t>(weftInt32, Op::Sum, {INT32_MAX, 1}, INT32_MIN));
  EXPECT_TRUE(reduces_to<int32_t>(weftInt32, Op::Prod, {65536, 65536}, 0));
  EXPECT_TRUE(reduces_to<uint32_t>(weftUint32, Op::Prod, {0x80000001u, 2u}, 2u));
  EXPECT_TRUE(reduces_to<int64_t>(weftInt64, Op::Sum, {INT64_MAX, 1}, INT64_MIN));
  EXPECT_TRUE(reduces_to<int64_t>(weftInt64, Op::Prod, {int64_t{1} << 62, 4}, 0));
  EXPECT_TRUE(reduces_to<int64_t>(weftInt64, Op::Prod, {-3, 5, -7}, 105));
  EXPECT_TRUE(reduces_to<uint64_t>(weftUint64, Op::Sum, {UINT64_MAX, 2}, 1));
  EXPECT_TRUE(reduces_to<uint64_t>(weftUint64, Op::Prod, {0x100000001ull, 0x100000001ull},
                                   0x200000001ull));

  EXPECT_TRUE(reduces_to<int8_t>(weftInt8, Op::Min, {-1, 1}, -1));
  EXPECT_TRUE(reduces_to<uint8_t>(weftUint8, Op::Min, {0xff, 1}, 1));
  EXPECT_TRUE(reduces_to<int32_t>(weftInt32, Op::Max, {-1, INT32_MIN}, -1));
  EXPECT_TRUE(reduces_to<uint32_t>(weftUint32, Op::Max, {0xffffffffu, 1u}, 0xffffffffu));
  EXPECT_TRUE(reduces_to<int64_t>(weftInt64, Op::Min, {-1, 1, INT64_MIN, 0}, INT64_MIN));
  EXPECT_TRUE(reduces_to<uint64_t>(weftUint64, Op::Max, {1, UINT64_MAX, 0}, UINT64_MAX));
  EXPECT_TRUE(reduces_to<uint64_t>(weftUint64, Op::Min, {0x8000000000000000ull, 5}, 5));
}

TEST_P(Semantics, DivideTruncatesIntegersAndRoundsFloatsOnce) {
  std::vector<int32_t> i32 = {-7, 7, -1, INT32_MIN};
  divide(i32.data(), i32.data(), i32.size(), weftInt32, 2);
  EXPECT_EQ(i32, (std::vector<int32_t>{-3, 3, 0, INT32_MIN / 2}));
  std::vector<uint8_t> u8 = {255, 7};
  divide(u8.data(), u8.data(), u8.size(), weftUint8, 4);
  EXPECT_EQ(u8, (std::vector<uint8_t>{63, 1}));
  std::vector<int64_t> i64 = {INT64_MIN, -9};
  divide(i64.data(), i64.data(), i64.size(), weftInt64, 3);
  EXPECT_EQ(i64, (std::vector<int64_t>{INT64_MIN / 3, -3}));
  // fp16 1/3 rounds to 0x3555; 0x0001 / 2 (2^-25) ties to even: 0.
  std::vector<uint16_t> h(kCount, 0x3c00), h2(kCount, 0x0001), ho(kCount);
  divide(ho.data(), h.data(), kCount, weftFloat16, 3);
  for (uint16_t v : ho) ASSERT_EQ(v, 0x3555) << kernel_name();
  divide(ho.data(), h2.data(), kCount, weftFloat16, 2);
  for (uint16_t v : ho) ASSERT_EQ(v, 0x0000) << kernel_name();
  std::vector<float> f(kCount, 10.0f);
  divide(f.data(), f.data(), kCount, weftFloat32, 4);
  for (float v : f) ASSERT_EQ(v, 2.5f) << kernel_name();
}

TEST_P(Semantics, ScaleMultipliesInTheAccumulationType) {
  std::vector<uint16_t> h(kCount, 0x3e00), ho(kCount);  // 1.5
  const uint16_t third = 0x3555;  // 0.333251953125
  scale(ho.data(), h.data(), kCount, weftFloat16, &third);
  // 1.5 * 1365/4096 = 2047.5/4096: halfway between 0x37ff and 0x3800, so the even
  // 0x3800 (0.5).
  for (uint16_t v : ho) ASSERT_EQ(v, 0x3800) << kernel_name();
  std::vector<int8_t> i8(kCount, 100);
  const int8_t k = 3;
  scale(i8.data(), i8.data(), kCount, weftInt8, &k);
  for (int8_t v : i8) ASSERT_EQ(v, static_cast<int8_t>(44)) << kernel_name();  // 300 mod 256
  std::vector<double> d(kCount, 3.0);
  const double half = 0.5;
  scale(d.data(), d.data(), kCount, weftFloat64, &half);
  for (double v : d) ASSERT_EQ(v, 1.5) << kernel_name();
}

TEST_P(Semantics, ZeroCountTouchesNothing) {
  float a = 1.0f, b = 2.0f, out = 42.0f;
  reduce2(&out, &a, &b, 0, weftFloat32, Op::Sum);
  EXPECT_EQ(out, 42.0f);
  reduce2(nullptr, nullptr, nullptr, 0, weftFloat32, Op::Sum);  // no access at all
}

WEFT_INSTANTIATE_KERNEL_PATHS(Semantics);

}  // namespace
}  // namespace weft::reduce::test
