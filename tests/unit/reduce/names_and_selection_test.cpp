// Names (nccl-tests spellings), sizes, and the choice of kernel set.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include "reduce/kernel_set.h"
#include "reduce/reduce.h"

namespace weft::reduce {
namespace {

TEST(ReduceNames, DtypeSizeAndName) {
  struct Row {
    weftDataType_t dtype;
    size_t size;
    const char* name;
  };
  const Row rows[] = {{weftInt8, 1, "int8"},       {weftUint8, 1, "uint8"},
                      {weftInt32, 4, "int32"},     {weftUint32, 4, "uint32"},
                      {weftInt64, 8, "int64"},     {weftUint64, 8, "uint64"},
                      {weftFloat16, 2, "half"},    {weftFloat32, 4, "float"},
                      {weftFloat64, 8, "double"},  {weftBfloat16, 2, "bfloat16"}};
  for (const Row& r : rows) {
    EXPECT_EQ(dtype_size(r.dtype), r.size) << r.name;
    EXPECT_STREQ(dtype_name(r.dtype), r.name);
  }
  EXPECT_EQ(dtype_size(weftNumTypes), 0u);
  EXPECT_EQ(dtype_size(static_cast<weftDataType_t>(-1)), 0u);
  EXPECT_STREQ(dtype_name(weftNumTypes), "invalid");
}

TEST(ReduceNames, OpName) {
  EXPECT_STREQ(op_name(weftSum), "sum");
  EXPECT_STREQ(op_name(weftProd), "prod");
  EXPECT_STREQ(op_name(weftMax), "max");
  EXPECT_STREQ(op_name(weftMin), "min");
  EXPECT_STREQ(op_name(weftAvg), "avg");
  EXPECT_STREQ(op_name(weftBand), "band");
  EXPECT_STREQ(op_name(weftBor), "bor");
  EXPECT_STREQ(op_name(weftBxor), "bxor");
  EXPECT_STREQ(op_name(weftNumOps), "invalid");
}

TEST(KernelChoice, BestSupportedByDefault) {
  bool fallback = true;
  const KernelSet& k = choose_kernels("", &fallback);
  EXPECT_FALSE(fallback);
  const char* best = avx512_kernels().supported() ? "avx512"
                     : avx2_kernels().supported() ? "avx2"
                                                  : "scalar";
  EXPECT_STREQ(k.name, best);
  EXPECT_STREQ(choose_kernels(nullptr, &fallback).name, best);
}

TEST(KernelChoice, ForcedAndUnknownNames) {
  bool fallback = true;
  EXPECT_STREQ(choose_kernels("scalar", &fallback).name, "scalar");
  EXPECT_FALSE(fallback);
  const KernelSet& k = choose_kernels("sse9", &fallback);
  EXPECT_TRUE(fallback);
  EXPECT_TRUE(k.supported());
  if (avx2_kernels().supported()) {
    EXPECT_STREQ(choose_kernels("avx2", &fallback).name, "avx2");
    EXPECT_FALSE(fallback);
  }
  if (!avx512_kernels().supported()) {
    EXPECT_STRNE(choose_kernels("avx512", &fallback).name, "avx512");
    EXPECT_TRUE(fallback);
  }
}

TEST(KernelChoice, UseKernelSwitchesAndRefusesWhatCannotRun) {
  const std::string before = kernel_name();
  EXPECT_TRUE(use_kernel("scalar"));
  EXPECT_STREQ(kernel_name(), "scalar");
  EXPECT_FALSE(use_kernel("sse9"));
  EXPECT_FALSE(use_kernel(nullptr));
  EXPECT_STREQ(kernel_name(), "scalar");
  EXPECT_EQ(use_kernel("avx512"), avx512_kernels().supported());
  EXPECT_TRUE(use_kernel(before.c_str()));
}

// WEFT_CPU_KERNEL is read once per process, so this runs in a fresh one (the
// "threadsafe" death-test style re-executes the test binary), which also shows the
// INFO line naming the kernel set.
TEST(KernelChoiceDeathTest, EnvironmentForcesAKernelSetAndItIsLogged) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  setenv("WEFT_CPU_KERNEL", "scalar", 1);
  setenv("WEFT_DEBUG", "INFO", 1);
  setenv("WEFT_DEBUG_SUBSYS", "ALL", 1);
  EXPECT_EXIT(std::exit(std::strcmp(kernel_name(), "scalar") == 0 ? 0 : 1),
              ::testing::ExitedWithCode(0), "CPU reduction kernels: scalar");
  unsetenv("WEFT_CPU_KERNEL");
  unsetenv("WEFT_DEBUG");
  unsetenv("WEFT_DEBUG_SUBSYS");
}

}  // namespace
}  // namespace weft::reduce
