// The CUDA kernels (src/cuda) against the CPU scalar kernel set, which the other
// tests hold to the independent reference. Needs a GPU: without one every test skips,
// saying why (the kernels are then only compiled, not run).
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "cuda/reduce_cuda.h"
#include "reduce/kernel_set.h"
#include "test_data.h"

namespace weft::reduce::test {
namespace {

class CudaReduce : public ::testing::Test {
 protected:
  void SetUp() override {
    int n = 0;
    const cudaError_t err = cudaGetDeviceCount(&n);
    if (err != cudaSuccess || n == 0)
      GTEST_SKIP() << "no CUDA device (cudaGetDeviceCount: "
                   << (err == cudaSuccess ? "0 devices" : cudaGetErrorString(err))
                   << "); CUDA kernels are compiled but not run";
  }
};

// Device buffer holding count elements, with `offset` bytes of misalignment.
struct DeviceBuffer {
  DeviceBuffer(size_t bytes, size_t offset) : bytes(bytes) {
    EXPECT_EQ(cudaMalloc(&base, bytes + 64), cudaSuccess);
    ptr = static_cast<uint8_t*>(base) + offset;
  }
  ~DeviceBuffer() { cudaFree(base); }
  void* base = nullptr;
  uint8_t* ptr = nullptr;
  size_t bytes;
};

void check(weftDataType_t dtype, Op op, int nsrcs, size_t count, size_t offset, bool copy) {
  const size_t es = dtype_size(dtype), bytes = count * es;
  Rng rng(count * 131 + nsrcs);
  std::vector<std::vector<uint8_t>> host(nsrcs, std::vector<uint8_t>(bytes + 1));
  std::vector<std::unique_ptr<DeviceBuffer>> dev;
  const void* hsrc[kMaxSources];
  const void* dsrc[kMaxSources];
  for (int s = 0; s < nsrcs; ++s) {
    fill_random(dtype, rng, host[s].data(), count);
    dev.push_back(std::make_unique<DeviceBuffer>(bytes, s == 0 ? offset : 0));
    ASSERT_EQ(cudaMemcpy(dev.back()->ptr, host[s].data(), bytes, cudaMemcpyHostToDevice), cudaSuccess);
    hsrc[s] = host[s].data();
    dsrc[s] = dev.back()->ptr;
  }
  std::vector<uint8_t> want(bytes + 1), got(bytes + 1), got2(bytes + 1);
  scalar_kernels().reduce(want.data(), nullptr, hsrc, nsrcs, count, dtype, op, false);
  DeviceBuffer d(bytes, offset), d2(bytes, offset);
  ASSERT_EQ(cuda::reduce(d.ptr, copy ? d2.ptr : nullptr, dsrc, nsrcs, count, dtype, op, nullptr),
            weftSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(got.data(), d.ptr, bytes, cudaMemcpyDeviceToHost), cudaSuccess);
  ASSERT_TRUE(same_elements(dtype, got.data(), want.data(), count))
      << "cuda " << dtype_name(dtype) << " nsrcs " << nsrcs << " count " << count << " offset " << offset;
  if (copy) {
    ASSERT_EQ(cudaMemcpy(got2.data(), d2.ptr, bytes, cudaMemcpyDeviceToHost), cudaSuccess);
    ASSERT_TRUE(same_elements(dtype, got2.data(), want.data(), count)) << "dst2";
  }
}

TEST_F(CudaReduce, EveryDtypeAndOpMatchesTheCpu) {
  for (weftDataType_t dtype : kAllDtypes)
    for (Op op : kAllOps)
      for (size_t count : {size_t{1}, size_t{7}, size_t{64}, size_t{1000}, size_t{100003}})
        for (size_t offset : {size_t{0}, dtype_size(dtype)}) {  // vector and element paths
          check(dtype, op, 2, count, offset, false);
          if (HasFatalFailure()) return;
        }
}

TEST_F(CudaReduce, BitwiseOpsOnIntegersMatchTheCpu) {
  for (weftDataType_t dtype : {weftInt8, weftUint8, weftInt32, weftUint32, weftInt64, weftUint64})
    for (Op op : {Op::Band, Op::Bor, Op::Bxor})
      for (size_t count : {size_t{1}, size_t{7}, size_t{1000}, size_t{100003}})
        for (size_t offset : {size_t{0}, dtype_size(dtype)}) {
          check(dtype, op, 3, count, offset, count == 1000);
          if (HasFatalFailure()) return;
        }
}

TEST_F(CudaReduce, OneToEightSourcesAndReduceCopy) {
  for (weftDataType_t dtype : {weftFloat16, weftBfloat16, weftFloat32, weftInt8, weftUint64})
    for (int nsrcs = 1; nsrcs <= kMaxSources; ++nsrcs) {
      check(dtype, Op::Sum, nsrcs, 4099, 0, nsrcs % 2 == 0);
      if (HasFatalFailure()) return;
    }
}

TEST_F(CudaReduce, DivideAndScaleMatchTheCpu) {
  for (weftDataType_t dtype : kAllDtypes) {
    const size_t count = 1001, bytes = count * dtype_size(dtype);
    Rng rng(dtype);
    std::vector<uint8_t> src(bytes), want(bytes), got(bytes);
    fill_random(dtype, rng, src.data(), count);
    DeviceBuffer ds(bytes, 0), dd(bytes, 0);
    ASSERT_EQ(cudaMemcpy(ds.ptr, src.data(), bytes, cudaMemcpyHostToDevice), cudaSuccess);
    scalar_kernels().divide(want.data(), src.data(), count, dtype, 3);
    ASSERT_EQ(cuda::divide(dd.ptr, ds.ptr, count, dtype, 3, nullptr), weftSuccess);
    ASSERT_EQ(cudaMemcpy(got.data(), dd.ptr, bytes, cudaMemcpyDeviceToHost), cudaSuccess);
    ASSERT_TRUE(same_elements(dtype, got.data(), want.data(), count)) << "divide";
    uint8_t k[8];
    random_element(dtype, rng, k);
    scalar_kernels().scale(want.data(), src.data(), count, dtype, k);
    ASSERT_EQ(cuda::scale(dd.ptr, ds.ptr, count, dtype, k, nullptr), weftSuccess);
    ASSERT_EQ(cudaMemcpy(got.data(), dd.ptr, bytes, cudaMemcpyDeviceToHost), cudaSuccess);
    ASSERT_TRUE(same_elements(dtype, got.data(), want.data(), count)) << "scale";
  }
}

TEST(CudaReduceArgs, RejectsBadArgumentsWithoutADevice) {
  const void* srcs[1] = {nullptr};
  EXPECT_EQ(cuda::reduce(nullptr, nullptr, srcs, 1, 10, weftFloat32, Op::Sum, nullptr),
            weftInvalidArgument);
  float x = 0;
  const void* one[1] = {&x};
  EXPECT_EQ(cuda::reduce(&x, nullptr, one, 0, 10, weftFloat32, Op::Sum, nullptr), weftInvalidArgument);
  EXPECT_EQ(cuda::reduce(&x, nullptr, one, 9, 10, weftFloat32, Op::Sum, nullptr), weftInvalidArgument);
  for (Op op : {Op::Band, Op::Bor, Op::Bxor})  // bitwise ops need an integer dtype
    EXPECT_EQ(cuda::reduce(&x, nullptr, one, 1, 10, weftFloat32, op, nullptr), weftInvalidArgument);
}

}  // namespace
}  // namespace weft::reduce::test
