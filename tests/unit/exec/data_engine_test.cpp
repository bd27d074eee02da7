// Every byte the executor writes into a call's buffers goes through the call's
// data engine when the buffers are not host memory: an engine that reduces with
// max (whatever the call's op) and counts what it copies shows any bypass. An
// engine that runs its work later (as a CUDA stream does) gets correct results
// only if links keep received pieces and the executor waits for it.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <deque>
#include <functional>
#include <vector>

#include "algorithms/registry.h"
#include "exec/data_engine.h"
#include "tests/unit/exec/harness.h"

namespace weft::testing {
namespace {

// A stand-in for device memory: reduces with max, counts copied bytes.
class MaxEngine final : public exec::DataEngine {
 public:
  MaxEngine() : DataEngine(false) {}
  const char* name() const override { return "test-max"; }
  void copy(void* dst, const void* src, size_t bytes) override {
    copied += bytes;
    std::memmove(dst, src, bytes);
  }
  void reduce2(void* dst, const void* a, const void* b, size_t count, weftDataType_t dtype, reduce::Op) override {
    reduce::reduce2(dst, a, b, count, dtype, reduce::Op::Max);
  }
  void divide(void*, const void*, size_t, weftDataType_t, int) override { ADD_FAILURE() << "the executor divides"; }
  void scale(void*, const void*, size_t, weftDataType_t, const void*) override { ADD_FAILURE() << "the executor scales"; }
  std::atomic<size_t> copied{0};
};

// A stand-in for an asynchronous engine: copies and reductions are queued and
// run only as idle() is polled (one per two polls), reading their sources then.
// A link that let go of a piece, or a send of a buffer the engine writes, before
// the engine is idle shows up as wrong data.
class DeferredEngine final : public exec::DataEngine {
 public:
  DeferredEngine() : DataEngine(false) {}
  const char* name() const override { return "test-deferred"; }
  void copy(void* dst, const void* src, size_t bytes) override {
    queue_.push_back([=] { std::memmove(dst, src, bytes); });
  }
  void reduce2(void* dst, const void* a, const void* b, size_t count, weftDataType_t dtype, reduce::Op op) override {
    queue_.push_back([=] { reduce::reduce2(dst, a, b, count, dtype, op); });
  }
  void divide(void*, const void*, size_t, weftDataType_t, int) override { ADD_FAILURE() << "the executor divides"; }
  void scale(void*, const void*, size_t, weftDataType_t, const void*) override { ADD_FAILURE() << "the executor scales"; }
  bool idle() override {
    if (queue_.empty()) return true;
    if (!armed_) {  // not yet: the work is "on the stream"
      armed_ = true;
      return false;
    }
    armed_ = false;
    queue_.front()();
    queue_.pop_front();
    ++ran;
    return queue_.empty();
  }
  size_t ran = 0;

 private:
  std::deque<std::function<void()>> queue_;
  bool armed_ = false;
};

// Rank r's element i: distinct per rank, so sum and max differ everywhere.
int32_t value(int r, size_t i) { return static_cast<int32_t>((r + 1) * 10 + i % 5); }

void run(const char* coll_name, sched::Coll coll, const char* algo_name, int n, uint64_t count, FakeOptions link,
         std::vector<std::vector<int32_t>>* out, std::vector<size_t>* copied) {
  const algo::Algorithm* a = algo::find_algorithm(coll, algo_name);
  ASSERT_NE(a, nullptr) << coll_name << " " << algo_name;
  FakeNet net(n, link);
  std::vector<sched::RankPlan> plans;
  for (int r = 0; r < n; ++r) plans.push_back(a->build({coll, n, count, 0, 0}, r));
  out->assign(static_cast<size_t>(n), {});
  copied->assign(static_cast<size_t>(n), 0);
  std::vector<Status> st = run_ranks(n, [&](int r) {
    sched::BuildArgs b{coll, n, count, 0, 0};
    std::vector<int32_t> send(sched::send_count(b)), recv(sched::recv_count(b), -1);
    for (size_t i = 0; i < send.size(); ++i) send[i] = value(r, i);
    MaxEngine engine;
    exec::Executor ex(r, net.links_of(r), nullptr);
    exec::Call call{&plans[static_cast<size_t>(r)], send.data(), recv.data(), weftInt32, reduce::Op::Sum, 1,
                    LazyDeadline(5000), &engine};
    Status s = ex.run(call);
    (*out)[static_cast<size_t>(r)] = recv;
    (*copied)[static_cast<size_t>(r)] = engine.copied;
    return s;
  });
  for (int r = 0; r < n; ++r) ASSERT_TRUE(st[static_cast<size_t>(r)].ok()) << st[static_cast<size_t>(r)].message();
}

TEST(DataEngine, EveryReductionOfAnAllReduceGoesThroughIt) {
  // With the call's op (sum) the result would be the sum; the engine's max shows
  // that every combining step, piece by piece, went through it.
  for (const char* algo : {"ring", "tree", "butterfly", "rabenseifner", "direct", "naive"})
    for (FakeOptions link : {FakeOptions{false, 0}, FakeOptions{false, 12}, FakeOptions{true, 8}}) {
      const int n = 4;
      const uint64_t count = 37;
      std::vector<std::vector<int32_t>> out;
      std::vector<size_t> copied;
      run("allreduce", sched::Coll::AllReduce, algo, n, count, link, &out, &copied);
      for (int r = 0; r < n; ++r)
        for (size_t i = 0; i < count; ++i)
          ASSERT_EQ(out[static_cast<size_t>(r)][i], value(n - 1, i)) << algo << " rank " << r << " element " << i;
    }
}

TEST(DataEngine, EveryReceivedByteOfAnAllGatherIsCopiedThroughIt) {
  // Ring all-gather, n ranks, c elements each, out of place: each rank copies
  // its own block (c) and receives the other n - 1 blocks: n * c * 4 bytes, and
  // none may land in the buffer behind the engine's back.
  const int n = 5;
  const uint64_t count = 11;
  for (FakeOptions link : {FakeOptions{false, 0}, FakeOptions{false, 12}, FakeOptions{true, 8}}) {
    std::vector<std::vector<int32_t>> out;
    std::vector<size_t> copied;
    run("allgather", sched::Coll::AllGather, "ring", n, count, link, &out, &copied);
    for (int r = 0; r < n; ++r) {
      EXPECT_EQ(copied[static_cast<size_t>(r)], static_cast<size_t>(n) * count * sizeof(int32_t)) << "rank " << r;
      for (int b = 0; b < n; ++b)
        for (size_t i = 0; i < count; ++i)
          ASSERT_EQ(out[static_cast<size_t>(r)][static_cast<size_t>(b) * count + i], value(b, i));
    }
  }
}

TEST(DataEngine, AnEngineThatRunsLaterGetsEveryPieceIntact) {
  for (const char* algo : {"ring", "tree", "butterfly", "rabenseifner", "direct", "naive"})
    for (FakeOptions link : {FakeOptions{false, 0}, FakeOptions{false, 12}, FakeOptions{true, 8}}) {
      const int n = 4;
      const uint64_t count = 37;
      const algo::Algorithm* a = algo::find_algorithm(sched::Coll::AllReduce, algo);
      ASSERT_NE(a, nullptr) << algo;
      FakeNet net(n, link);
      std::vector<sched::RankPlan> plans;
      for (int r = 0; r < n; ++r) plans.push_back(a->build({sched::Coll::AllReduce, n, count, 0, 0}, r));
      std::vector<std::vector<int32_t>> out(static_cast<size_t>(n));
      std::vector<size_t> ran(static_cast<size_t>(n));
      std::vector<Status> st = run_ranks(n, [&](int r) {
        std::vector<int32_t> send(count), recv(count, -1);
        for (size_t i = 0; i < count; ++i) send[i] = value(r, i);
        DeferredEngine engine;
        exec::Executor ex(r, net.links_of(r), nullptr);
        exec::Call call{&plans[static_cast<size_t>(r)], send.data(), recv.data(), weftInt32, reduce::Op::Sum, 1,
                        LazyDeadline(5000), &engine};
        Status s = ex.run(call);
        out[static_cast<size_t>(r)] = recv;
        ran[static_cast<size_t>(r)] = engine.ran;
        return s;
      });
      for (int r = 0; r < n; ++r) {
        ASSERT_TRUE(st[static_cast<size_t>(r)].ok()) << algo << ": " << st[static_cast<size_t>(r)].message();
        EXPECT_GT(ran[static_cast<size_t>(r)], 0u) << algo << ": nothing went through the engine";
        // The sum over ranks of (r + 1) * 10 + i % 5: 100 + 4 (i % 5) at 4 ranks.
        for (size_t i = 0; i < count; ++i)
          ASSERT_EQ(out[static_cast<size_t>(r)][i], static_cast<int32_t>(100 + 4 * (i % 5)))
              << algo << (link.rendezvous ? " rendezvous" : " eager") << " piece " << link.piece << " rank " << r
              << " element " << i;
      }
    }
}

}  // namespace
}  // namespace weft::testing
