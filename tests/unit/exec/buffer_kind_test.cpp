// Buffer kinds against a stand-in CUDA driver (fake_cuda_driver.cpp): without
// the driver loaded every buffer is host memory; once the application has loaded
// it, the driver's answer decides, and device memory has no data engine here.
#include <dlfcn.h>

#include <chrono>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "exec/buffer_kind.h"
#include "exec/data_engine.h"

namespace weft::exec {
namespace {

TEST(BufferKind, HostUntilTheDriverIsLoadedThenTheDriverDecides) {
  std::vector<float> dev(1024), host(1024);
  EXPECT_FALSE(buffer_kind(dev.data()).device) << "no driver loaded: host memory";
  EXPECT_EQ(data_engine_for(buffer_kind(dev.data())), &cpu_data_engine());

  void* lib = dlopen(WEFT_FAKE_CUDA_DRIVER, RTLD_NOW | RTLD_GLOBAL);
  ASSERT_NE(lib, nullptr) << dlerror();
  auto mark = reinterpret_cast<void (*)(const void*, size_t, int)>(dlsym(lib, "fake_cuda_mark"));
  ASSERT_NE(mark, nullptr);
  mark(dev.data(), dev.size() * sizeof(float), 3);
  // The driver is looked for again at most once a second.
  BufferKind k;
  for (int i = 0; i < 30 && !k.device; ++i) {
    k = buffer_kind(dev.data() + 10);
    if (!k.device) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_TRUE(k.device) << "the loaded driver was not asked";
  EXPECT_EQ(k.gpu, 3);
  EXPECT_EQ(data_engine_for(k), nullptr) << "no device data engine in this build";
  EXPECT_FALSE(buffer_kind(host.data()).device) << "memory the driver does not know is host memory";
  EXPECT_FALSE(buffer_kind(nullptr).device);
}

}  // namespace
}  // namespace weft::exec
