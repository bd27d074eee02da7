// Runs a test once per CPU kernel set, forced with use_kernel(); a set this CPU
// cannot run is skipped, saying so.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "reduce/kernel_set.h"
#include "reduce/reduce.h"

namespace weft::reduce::test {

class KernelPath : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    saved_kernel_ = kernel_name();
    saved_threshold_ = nontemporal_threshold();
    if (!use_kernel(GetParam()))
      GTEST_SKIP() << "this CPU cannot run the '" << GetParam() << "' kernel set";
    ASSERT_STREQ(kernel_name(), GetParam());
  }
  void TearDown() override {
    use_kernel(saved_kernel_.c_str());
    set_nontemporal_threshold(saved_threshold_);
  }

 private:
  std::string saved_kernel_;
  size_t saved_threshold_ = 0;
};

#define WEFT_INSTANTIATE_KERNEL_PATHS(Suite)                                              \
  INSTANTIATE_TEST_SUITE_P(Cpu, Suite, ::testing::Values("scalar", "avx2", "avx512"),     \
                           [](const ::testing::TestParamInfo<const char*>& info) {        \
                             return std::string(info.param);                              \
                           })

}  // namespace weft::reduce::test
