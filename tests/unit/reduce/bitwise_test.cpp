// The bitwise ops (band, bor, bxor) in every kernel set, against a plain loop
// written here over the raw bits: every integer dtype, 1..8 sources, sizes that
// cross every register width and unroll, misaligned pointers, dst aliasing a
// source, reduce_copy and streaming stores. And floats are refused.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "kernel_path_fixture.h"
#include "test_data.h"

namespace weft::reduce::test {
namespace {

constexpr weftDataType_t kIntDtypes[] = {weftInt8, weftUint8, weftInt32, weftUint32, weftInt64, weftUint64};
constexpr Op kBitwiseOps[] = {Op::Band, Op::Bor, Op::Bxor};

// Element i of count elements of `es` bytes, combined over the sources bit by bit.
std::vector<uint8_t> plain_loop(Op op, const std::vector<std::vector<uint8_t>>& srcs, size_t es, size_t count) {
  std::vector<uint8_t> out(count * es);
  for (size_t i = 0; i < count; ++i) {
    uint64_t acc = 0;
    std::memcpy(&acc, srcs[0].data() + i * es, es);
    for (size_t s = 1; s < srcs.size(); ++s) {
      uint64_t v = 0;
      std::memcpy(&v, srcs[s].data() + i * es, es);
      acc = op == Op::Band ? (acc & v) : op == Op::Bor ? (acc | v) : (acc ^ v);
    }
    std::memcpy(out.data() + i * es, &acc, es);
  }
  return out;
}

// How the result is written: plain, into a source, or also into a second buffer.
enum class Dst { Own, AliasFirst, Copy };

::testing::AssertionResult check(weftDataType_t dtype, Op op, int nsrcs, size_t count, size_t misalign, Dst how) {
  const size_t es = dtype_size(dtype), bytes = count * es;
  Rng rng(count * 977 + static_cast<uint64_t>(nsrcs) * 31 + static_cast<uint64_t>(op));
  // Sources at different misalignments (plus one byte of slack to never be empty).
  std::vector<std::vector<uint8_t>> inputs(static_cast<size_t>(nsrcs));
  std::vector<std::vector<uint8_t>> storage(static_cast<size_t>(nsrcs), std::vector<uint8_t>(bytes + 64 + 1));
  const void* srcs[kMaxSources];
  for (int s = 0; s < nsrcs; ++s) {
    inputs[s].resize(bytes);
    for (uint8_t& b : inputs[s]) b = static_cast<uint8_t>(rng.next());
    uint8_t* p = storage[s].data() + (misalign + static_cast<size_t>(s) * 3) % 64;
    if (bytes > 0) std::memcpy(p, inputs[s].data(), bytes);  // data() of an empty vector may be null
    srcs[s] = p;
  }
  const std::vector<uint8_t> want = plain_loop(op, inputs, es, count);
  std::vector<uint8_t> own(bytes + 64 + 1, 0xA5), second(bytes + 64 + 1, 0x5A);
  uint8_t* dst = how == Dst::AliasFirst ? static_cast<uint8_t*>(const_cast<void*>(srcs[0])) : own.data() + misalign % 64;
  uint8_t* dst2 = how == Dst::Copy ? second.data() + 7 : nullptr;
  reduce_copy(dst, dst2, srcs, nsrcs, count, dtype, op);
  auto where = [&] {
    return std::string(" [") + kernel_name() + " " + dtype_name(dtype) + " " + op_str(op) +
           " nsrcs=" + std::to_string(nsrcs) + " count=" + std::to_string(count) +
           " misalign=" + std::to_string(misalign) + " how=" + std::to_string(static_cast<int>(how)) + "]";
  };
  if (bytes > 0 && std::memcmp(dst, want.data(), bytes) != 0) return ::testing::AssertionFailure() << "dst" << where();
  if (dst2 != nullptr && bytes > 0 && std::memcmp(dst2, want.data(), bytes) != 0)
    return ::testing::AssertionFailure() << "dst2" << where();
  return ::testing::AssertionSuccess();
}

using Bitwise = KernelPath;

TEST_P(Bitwise, EveryIntegerDtypeAndSizeUpTo300) {
  for (weftDataType_t dtype : kIntDtypes)
    for (Op op : kBitwiseOps)
      for (size_t count = 0; count <= 300; ++count) {
        const int nsrcs = 2 + static_cast<int>(count % 3);
        const Dst how = static_cast<Dst>(count % 3);
        ASSERT_TRUE(check(dtype, op, nsrcs, count, count * 5 % 64, how));
      }
}

TEST_P(Bitwise, OneToEightSourcesLargeAndStreaming) {
  set_nontemporal_threshold(4096);  // the larger counts take the streaming-store path
  for (weftDataType_t dtype : kIntDtypes)
    for (Op op : kBitwiseOps)
      for (int nsrcs = 1; nsrcs <= kMaxSources; ++nsrcs)
        for (size_t count : {size_t{1021}, size_t{65537}})
          for (Dst how : {Dst::Own, Dst::AliasFirst, Dst::Copy})
            ASSERT_TRUE(check(dtype, op, nsrcs, count, static_cast<size_t>(nsrcs) * 5, how));
}

// A bitwise op on a floating-point dtype is a caller error: nothing is written.
TEST_P(Bitwise, FloatingPointDtypesAreRefused) {
  for (weftDataType_t dtype : {weftFloat16, weftBfloat16, weftFloat32, weftFloat64})
    for (Op op : kBitwiseOps) {
      std::vector<uint8_t> a(64, 0x0F), b(64, 0xF0), dst(64, 0x77);
      reduce2(dst.data(), a.data(), b.data(), 64 / dtype_size(dtype), dtype, op);
      EXPECT_EQ(dst, std::vector<uint8_t>(64, 0x77)) << dtype_name(dtype) << " " << op_str(op);
    }
}

WEFT_INSTANTIATE_KERNEL_PATHS(Bitwise);

}  // namespace
}  // namespace weft::reduce::test
