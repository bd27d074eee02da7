// Every kernel set against the independent reference (reference.cpp) for every op
// and dtype: sizes 0..257 and large ones, misaligned pointers, 1..8 sources, dst
// aliasing a source, reduce_copy, streaming stores, divide and scale.
#include <gtest/gtest.h>

#include <vector>

#include "kernel_path_fixture.h"
#include "test_data.h"

namespace weft::reduce::test {
namespace {

struct Layout {
  size_t src_off[kMaxSources] = {};
  size_t dst_off = 0;
  bool copy = false;  // reduce_copy instead of reduce
  size_t dst2_off = 0;
  int dst_alias = -1;  // dst is this source
  int dst2_alias = -1;  // dst2 is this source
};

::testing::AssertionResult check_reduce(weftDataType_t dtype, Op op, int nsrcs, size_t count,
                                        uint64_t seed, const Layout& l) {
  Rng rng(seed);
  std::vector<Buffer> src;
  src.reserve(nsrcs);
  std::vector<const uint8_t*> ptrs;
  for (int s = 0; s < nsrcs; ++s) {
    src.emplace_back(dtype, count, l.src_off[s]);
    fill_random(dtype, rng, src.back().data(), count);
    ptrs.push_back(src.back().data());
  }
  // The reference reads the sources before the kernel may overwrite one.
  const std::vector<uint8_t> want = ref::reduce(dtype, op, ptrs, count);
  Buffer dst(dtype, count, l.dst_off), dst2(dtype, count, l.dst2_off);
  fill_random(dtype, rng, dst.data(), count);  // garbage the kernel must overwrite
  uint8_t* d = l.dst_alias >= 0 ? src[l.dst_alias].data() : dst.data();
  uint8_t* d2 = !l.copy ? nullptr : l.dst2_alias >= 0 ? src[l.dst2_alias].data() : dst2.data();
  const void* srcs[kMaxSources];
  for (int s = 0; s < nsrcs; ++s) srcs[s] = ptrs[s];
  if (l.copy) reduce_copy(d, d2, srcs, nsrcs, count, dtype, op);
  else reduce(d, srcs, nsrcs, count, dtype, op);

  auto where = [&] {
    return std::string(" [") + kernel_name() + " " + dtype_name(dtype) + " " + op_str(op) +
           " nsrcs=" + std::to_string(nsrcs) + " count=" + std::to_string(count) +
           " dst_off=" + std::to_string(l.dst_off) + " alias=" + std::to_string(l.dst_alias) +
           " copy=" + std::to_string(l.copy) + "]";
  };
  if (auto r = same_elements(dtype, d, want.data(), count); !r) return r << where();
  if (d2 != nullptr)
    if (auto r = same_elements(dtype, d2, want.data(), count); !r) return r << " (dst2)" << where();
  for (const Buffer& b : src)
    if (!b.guards_intact()) return ::testing::AssertionFailure() << "wrote outside a source" << where();
  if (!dst.guards_intact() || !dst2.guards_intact())
    return ::testing::AssertionFailure() << "wrote outside dst" << where();
  return ::testing::AssertionSuccess();
}

// Misalignment varies with the size so that every size meets several alignments.
Layout varied_layout(size_t count, int nsrcs) {
  Layout l;
  for (int s = 0; s < nsrcs; ++s) l.src_off[s] = (count * (2 * s + 3) + 7 * s) % 64;
  l.dst_off = (count * 13 + 5) % 64;
  return l;
}

void sweep_small_sizes(uint64_t seed) {
  for (weftDataType_t dtype : kAllDtypes)
    for (Op op : kAllOps)
      for (size_t count = 0; count <= 257; ++count) {
        const int nsrcs = count % 3 == 0 ? 3 : 2;
        ASSERT_TRUE(check_reduce(dtype, op, nsrcs, count, seed + count, varied_layout(count, nsrcs)));
      }
}

using Sweep = KernelPath;

TEST_P(Sweep, EveryDtypeOpAndSizeUpTo257) { sweep_small_sizes(1); }

// Threshold 0 sends every size down the streaming-store path, with its alignment head.
TEST_P(Sweep, EveryDtypeOpAndSizeWithStreamingStores) {
  set_nontemporal_threshold(0);
  sweep_small_sizes(1000);
}

TEST_P(Sweep, LargeSizes) {
  for (weftDataType_t dtype : kAllDtypes)
    for (Op op : kAllOps) ASSERT_TRUE(check_reduce(dtype, op, 2, 100003, 7, varied_layout(3, 2)));
  // Past the default streaming threshold (16 MiB of output for fp32).
  for (weftDataType_t dtype : {weftFloat16, weftFloat32, weftBfloat16})
    ASSERT_TRUE(check_reduce(dtype, Op::Sum, 2, (size_t{1} << 22) + 5, 8, Layout{}));
}

TEST_P(Sweep, OneToEightSources) {
  for (weftDataType_t dtype : kAllDtypes)
    for (Op op : kAllOps)
      for (int nsrcs = 1; nsrcs <= kMaxSources; ++nsrcs)
        for (size_t count : {size_t{1}, size_t{31}, size_t{64}, size_t{200}, size_t{1027}})
          ASSERT_TRUE(check_reduce(dtype, op, nsrcs, count, 31 * nsrcs + count,
                                   varied_layout(count + nsrcs, nsrcs)));
}

TEST_P(Sweep, DstAliasesASource) {
  for (size_t threshold : {nontemporal_threshold(), size_t{0}}) {
    set_nontemporal_threshold(threshold);
    for (weftDataType_t dtype : kAllDtypes)
      for (Op op : kAllOps)
        for (int nsrcs : {1, 2, 3, 8})
          for (size_t count : {size_t{1}, size_t{17}, size_t{130}, size_t{4099}})
            for (int alias : {0, nsrcs - 1}) {
              Layout l = varied_layout(count, nsrcs);
              l.dst_alias = alias;
              ASSERT_TRUE(check_reduce(dtype, op, nsrcs, count, 5 + count, l));
            }
  }
}

TEST_P(Sweep, ReduceCopyWritesBothDestinations) {
  for (size_t threshold : {nontemporal_threshold(), size_t{0}}) {
    set_nontemporal_threshold(threshold);
    for (weftDataType_t dtype : kAllDtypes)
      for (Op op : kAllOps)
        for (size_t count : {size_t{0}, size_t{1}, size_t{33}, size_t{257}, size_t{5001}})
          for (int variant = 0; variant < 4; ++variant) {
            const int nsrcs = variant == 3 ? 1 : 2 + variant;
            Layout l = varied_layout(count, nsrcs);
            l.copy = true;
            // 0: dst2 co-aligned with dst; 1: not; 2: dst aliases a source and dst2
            // another; 3: a single source (a copy to both).
            l.dst2_off = variant == 1 ? (l.dst_off + 8) % 64 : l.dst_off;
            if (variant == 2) {
              l.dst_alias = 0;
              l.dst2_alias = nsrcs - 1;
            }
            ASSERT_TRUE(check_reduce(dtype, op, nsrcs, count, 77 + count, l));
          }
  }
}

TEST_P(Sweep, Divide) {
  for (weftDataType_t dtype : kAllDtypes)
    for (int64_t divisor : {1, 2, 3, 7, 8, 1000})
      for (size_t count : {size_t{0}, size_t{1}, size_t{5}, size_t{16}, size_t{67}, size_t{1000}})
        for (bool in_place : {false, true}) {
          Rng rng(divisor * 1000 + count);
          Buffer src(dtype, count, count % 64), dst(dtype, count, (count * 3 + 1) % 64);
          fill_random(dtype, rng, src.data(), count);
          const std::vector<uint8_t> want = ref::divide(dtype, src.data(), count, divisor);
          uint8_t* d = in_place ? src.data() : dst.data();
          divide(d, src.data(), count, dtype, divisor);
          ASSERT_TRUE(same_elements(dtype, d, want.data(), count))
              << kernel_name() << " divide by " << divisor << " count " << count;
          ASSERT_TRUE(src.guards_intact() && dst.guards_intact());
        }
}

TEST_P(Sweep, Scale) {
  for (weftDataType_t dtype : kAllDtypes)
    for (int trial = 0; trial < 12; ++trial)
      for (size_t count : {size_t{0}, size_t{1}, size_t{7}, size_t{33}, size_t{1000}})
        for (bool in_place : {false, true}) {
          Rng rng(trial * 100 + count);
          Buffer src(dtype, count, (count + trial) % 64), dst(dtype, count, trial);
          fill_random(dtype, rng, src.data(), count);
          uint8_t scalar[8];
          random_element(dtype, rng, scalar);
          const std::vector<uint8_t> want = ref::scale(dtype, src.data(), count, scalar);
          uint8_t* d = in_place ? src.data() : dst.data();
          scale(d, src.data(), count, dtype, scalar);
          ASSERT_TRUE(same_elements(dtype, d, want.data(), count))
              << kernel_name() << " scale by " << ref::show(dtype, scalar) << " count " << count;
          ASSERT_TRUE(src.guards_intact() && dst.guards_intact());
        }
}

WEFT_INSTANTIATE_KERNEL_PATHS(Sweep);

}  // namespace
}  // namespace weft::reduce::test
