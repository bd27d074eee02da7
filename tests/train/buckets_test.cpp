// Gradient buckets on the tiny preset's layout (V 256, context 64, 4 layers, width
// 128). Per layer, in elements: ln_1 2 x 128, c_attn 128 x 384 + 384, attn c_proj
// 128 x 128 + 128, ln_2 2 x 128, c_fc 128 x 512 + 512, mlp c_proj 512 x 128 + 128:
// 198,272 in all. ln_f: 2 x 128. The expected boundaries below are summed by hand
// from these sizes, in reverse parameter order, closing a bucket at its cap.
#include <gtest/gtest.h>

#include "train/dist/buckets.h"
#include "train/dist/data_parallel.h"

namespace weft::train {
namespace {

const GPT2Config kTiny{256, 64, 4, 4, 128};

std::string firstName(const std::vector<ParamTensor>& t, const Bucket& b) { return t[size_t(b.firstTensor)].name; }

TEST(Buckets, FirstBucketOneMiBThenCap) {
  const auto t = gpt2ParamLayout(kTiny);
  // fp32, first cap 1 MiB = 262,144 elements: ln_f (256) + layer 3 (198,272) +
  // h.2.mlp.c_proj bias and weight (128 + 65,536) = 264,192 >= 262,144.
  // Then cap 0.5 MiB = 131,072: h.2 c_fc (66,048) + ln_2 (256) + attn c_proj
  // (16,512) + c_attn (49,536) = 132,352; then h.2 ln_1 (256) + h.1 mlp c_proj
  // (65,664) + c_fc (66,048) = 131,968.
  const auto b = assignBuckets(t, 4, 512 * 1024, 1024 * 1024);
  ASSERT_GE(b.size(), 3u);
  EXPECT_EQ(firstName(t, b[0]), "transformer.h.2.mlp.c_proj.weight");
  EXPECT_EQ(b[0].numel(), 264192u);
  EXPECT_EQ(firstName(t, b[1]), "transformer.h.2.attn.c_attn.weight");
  EXPECT_EQ(b[1].numel(), 132352u);
  EXPECT_EQ(firstName(t, b[2]), "transformer.h.1.mlp.c_fc.weight");
  EXPECT_EQ(b[2].numel(), 131968u);
  // Contiguous, in backward order, covering every element once; wte last.
  size_t hi = t.back().offset + t.back().numel;
  for (const Bucket& k : b) {
    EXPECT_EQ(k.hi, hi);
    hi = k.lo;
  }
  EXPECT_EQ(hi, 0u);
  EXPECT_EQ(b.back().firstTensor, 0);
}

TEST(Buckets, CapsAreBytesSoBf16BucketsHoldTwiceTheElements) {
  const auto t = gpt2ParamLayout(kTiny);
  // bf16, first cap 1 MiB = 524,288 elements: 264,192 (as above) + the rest of h.2
  // (132,608) + h.1 mlp c_proj (65,664) + c_fc (66,048) = 528,512.
  const auto b = assignBuckets(t, 2, 25u << 20, 1024 * 1024);
  ASSERT_EQ(b.size(), 2u);
  EXPECT_EQ(firstName(t, b[0]), "transformer.h.1.mlp.c_fc.weight");
  EXPECT_EQ(b[0].numel(), 528512u);
  EXPECT_EQ(b[1].lo, 0u);  // everything else fits under 25 MiB
}

TEST(Buckets, ZeroShardsSplitEachBucketIntoPaddedParts) {
  // Buckets of 10 and 7 elements over 3 ranks: parts of 4 and 3 (padded to 12 and 9).
  const std::vector<Bucket> b{{7, 17, 1, 1}, {0, 7, 0, 1}};
  auto r0 = ownedSegments(b, 17, 1, 0, 3), r2 = ownedSegments(b, 17, 1, 2, 3);
  ASSERT_EQ(r0.size(), 2u);
  EXPECT_EQ(r0[0].offset, 7u);
  EXPECT_EQ(r0[0].count, 4u);
  EXPECT_EQ(r0[1].offset, 0u);
  EXPECT_EQ(r0[1].count, 3u);
  ASSERT_EQ(r2.size(), 2u);
  EXPECT_EQ(r2[0].offset, 15u);  // 7 + 2 x 4, the last 2 of the bucket's 10
  EXPECT_EQ(r2[0].count, 2u);
  EXPECT_EQ(r2[1].offset, 6u);
  EXPECT_EQ(r2[1].count, 1u);
  EXPECT_EQ(ownedSegments(b, 17, 0, 1, 3).size(), 1u);  // no ZeRO: everything
}

}  // namespace
}  // namespace weft::train
