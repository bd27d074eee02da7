// fp8 (E4M3, E5M2) reductions: hand-computed cases, each stating one rule of
// reduce.h, then every pair of codes against the reference (reference.cpp), on
// every kernel set (they all hand fp8 to the scalar loop).
//
// Codes used below, worked out from the formats (sign | exponent | mantissa):
//   E4M3 (bias 7): 1.0 = 0 0111 000 = 0x38, 1.125 = 0x39, 1.25 = 0x3a, 2^-4 = 0x18,
//     0.5 = 0x30, 256 = 0 1111 000 = 0x78, 448 (largest) = 0x7e, 64 = 0x68,
//     2^-9 (smallest subnormal) = 0x01, NaN = 0x7f.
//   E5M2 (bias 15): 1.0 = 0 01111 00 = 0x3c, 1.25 = 0x3d, 1.5 = 0x3e, 2^-3 = 0x30,
//     57344 (largest) = 0x7b, Inf = 0x7c, NaN = 0x7f.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "kernel_path_fixture.h"
#include "reduce/reduce.h"
#include "test_data.h"

namespace weft::reduce::test {
namespace {

constexpr size_t kCount = 37;  // odd, so no loop length divides it

uint8_t reduce_codes(weftDataType_t dtype, Op op, std::vector<uint8_t> codes) {
  std::vector<std::vector<uint8_t>> bufs;
  const void* srcs[kMaxSources];
  for (size_t s = 0; s < codes.size(); ++s) bufs.emplace_back(kCount, codes[s]);
  for (size_t s = 0; s < codes.size(); ++s) srcs[s] = bufs[s].data();
  std::vector<uint8_t> out(kCount, 0xa5);
  reduce(out.data(), srcs, static_cast<int>(codes.size()), kCount, dtype, op);
  for (size_t i = 1; i < kCount; ++i)
    if (out[i] != out[0]) return 0xa5;  // every element must agree: a value no case expects
  return out[0];
}

using Fp8 = KernelPath;

TEST_P(Fp8, SizesAndNames) {
  EXPECT_EQ(dtype_size(weftFloat8e4m3), 1u);
  EXPECT_EQ(dtype_size(weftFloat8e5m2), 1u);
  EXPECT_STREQ(dtype_name(weftFloat8e4m3), "f8e4m3");
  EXPECT_STREQ(dtype_name(weftFloat8e5m2), "f8e5m2");
  EXPECT_TRUE(is_float_dtype(weftFloat8e4m3));
}

TEST_P(Fp8, RoundsToNearestEven) {
  // 1 + 2^-4 lies halfway between 1.0 (even mantissa) and 1.125: 1.0.
  EXPECT_EQ(reduce_codes(weftFloat8e4m3, Op::Sum, {0x38, 0x18}), 0x38);
  // 1.125 + 2^-4 lies halfway between 1.125 (odd) and 1.25: 1.25.
  EXPECT_EQ(reduce_codes(weftFloat8e4m3, Op::Sum, {0x39, 0x18}), 0x3a);
  // E5M2: 1 + 1/8 between 1.0 and 1.25: 1.0; 1.25 + 1/8 between 1.25 and 1.5: 1.5.
  EXPECT_EQ(reduce_codes(weftFloat8e5m2, Op::Sum, {0x3c, 0x30}), 0x3c);
  EXPECT_EQ(reduce_codes(weftFloat8e5m2, Op::Sum, {0x3d, 0x30}), 0x3e);
}

TEST_P(Fp8, AccumulatesInFp32AndRoundsOnce) {
  // 256 + 256 - 448 = 64: the partial 512 is beyond E4M3's range but never stored.
  EXPECT_EQ(reduce_codes(weftFloat8e4m3, Op::Sum, {0x78, 0x78, 0xfe}), 0x68);
  // 1.0 + 2^-4 + 2^-4 = 1.125 exactly; rounding each partial would give 1.0.
  EXPECT_EQ(reduce_codes(weftFloat8e4m3, Op::Sum, {0x38, 0x18, 0x18}), 0x39);
}

TEST_P(Fp8, SaturatesToTheLargestFiniteValue) {
  EXPECT_EQ(reduce_codes(weftFloat8e4m3, Op::Sum, {0x7e, 0x7e}), 0x7e);  // 896 -> 448
  EXPECT_EQ(reduce_codes(weftFloat8e4m3, Op::Sum, {0xfe, 0xfe}), 0xfe);
  EXPECT_EQ(reduce_codes(weftFloat8e5m2, Op::Prod, {0x7b, 0x3e}), 0x7b);  // 86016 -> 57344
  // E5M2's Inf saturates too, as CUDA's __NV_SATFINITE conversion does.
  EXPECT_EQ(reduce_codes(weftFloat8e5m2, Op::Sum, {0x7c, 0x3c}), 0x7b);
  EXPECT_EQ(reduce_codes(weftFloat8e5m2, Op::Max, {0xfc, 0xfc}), 0xfb);
}

TEST_P(Fp8, NanStaysNan) {
  EXPECT_EQ(reduce_codes(weftFloat8e4m3, Op::Sum, {0x7f, 0x38}), 0x7f);
  EXPECT_EQ(reduce_codes(weftFloat8e4m3, Op::Min, {0x38, 0xff}), 0x7f);
  EXPECT_EQ(reduce_codes(weftFloat8e5m2, Op::Sum, {0x7c, 0xfc}), 0x7f);  // Inf - Inf
}

TEST_P(Fp8, SubnormalsAndSignedZeros) {
  EXPECT_EQ(reduce_codes(weftFloat8e4m3, Op::Sum, {0x01, 0x01}), 0x02);  // 2^-9 + 2^-9
  // 2^-9 * 0.5 = 2^-10, halfway between 0 and 2^-9: 0 (even).
  EXPECT_EQ(reduce_codes(weftFloat8e4m3, Op::Prod, {0x01, 0x30}), 0x00);
  // 3 * 2^-9 * 0.5, halfway between 2^-9 (odd) and 2 * 2^-9: 2 * 2^-9.
  EXPECT_EQ(reduce_codes(weftFloat8e4m3, Op::Prod, {0x03, 0x30}), 0x02);
  EXPECT_EQ(reduce_codes(weftFloat8e5m2, Op::Max, {0x80, 0x00}), 0x00);
  EXPECT_EQ(reduce_codes(weftFloat8e5m2, Op::Min, {0x00, 0x80}), 0x80);
}

TEST_P(Fp8, DivideRoundsTheQuotientOnce) {
  // 1/3: between 0.3125 (0 0101 010 = 0x2a) and 0.34375 (0x2b); 0.34375 is nearer.
  const std::vector<uint8_t> one(kCount, 0x38);
  std::vector<uint8_t> out(kCount);
  divide(out.data(), one.data(), kCount, weftFloat8e4m3, 3);
  EXPECT_EQ(out[0], 0x2b);
  EXPECT_EQ(out[kCount - 1], 0x2b);
}

// Every pair of codes, every op, against the reference's table search.
TEST_P(Fp8, EveryPairOfCodesMatchesTheReference) {
  std::vector<uint8_t> a(256 * 256), b(256 * 256);
  for (size_t i = 0; i < a.size(); ++i) {
    a[i] = static_cast<uint8_t>(i >> 8);
    b[i] = static_cast<uint8_t>(i & 0xff);
  }
  for (weftDataType_t dtype : {weftFloat8e4m3, weftFloat8e5m2}) {
    for (Op op : kAllOps) {
      std::vector<uint8_t> got(a.size());
      const void* srcs[] = {a.data(), b.data()};
      reduce(got.data(), srcs, 2, a.size(), dtype, op);
      const std::vector<uint8_t> want = ref::reduce(dtype, op, {a.data(), b.data()}, a.size());
      EXPECT_TRUE(same_elements(dtype, got.data(), want.data(), a.size())) << op_str(op);
    }
    std::vector<uint8_t> got(256);
    for (int64_t divisor : {2, 3, 7, 8}) {
      divide(got.data(), b.data(), 256, dtype, divisor);
      const std::vector<uint8_t> want = ref::divide(dtype, b.data(), 256, divisor);
      EXPECT_TRUE(same_elements(dtype, got.data(), want.data(), 256)) << "divide by " << divisor;
    }
  }
}

WEFT_INSTANTIATE_KERNEL_PATHS(Fp8);

}  // namespace
}  // namespace weft::reduce::test
