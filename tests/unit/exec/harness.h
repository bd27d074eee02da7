// Ranks as threads for the executor tests: one exec::Executor per rank over a
// FakeNet, hand-written plans, and a watchdog so that a hung executor fails the
// test binary with a message instead of hanging it.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "base/status.h"
#include "exec/executor.h"
#include "fake_link.h"
#include "sched/schedule.h"

namespace weft::testing {

// Aborts the process if not destroyed within `seconds` (every call below also
// has a deadline of its own, far shorter: this catches an executor that ignores it).
class Watchdog {
 public:
  explicit Watchdog(double seconds, std::string what) : what_(std::move(what)) {
    thread_ = std::thread([this, seconds] {
      std::unique_lock<std::mutex> lock(mu_);
      if (!cv_.wait_for(lock, std::chrono::duration<double>(seconds), [this] { return done_; })) {
        std::fprintf(stderr, "watchdog: %s still running after %.0f s: the executor hangs\n", what_.c_str(),
                     seconds);
        std::abort();
      }
    });
  }
  ~Watchdog() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      done_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

 private:
  std::string what_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread thread_;
};

// Runs fn(rank) on one thread per rank and returns each rank's status.
inline std::vector<Status> run_ranks(int nranks, const std::function<Status(int)>& fn, double watchdog_s = 60) {
  const ::testing::TestInfo* info = ::testing::UnitTest::GetInstance()->current_test_info();
  Watchdog dog(watchdog_s, info != nullptr ? std::string(info->test_suite_name()) + "." + info->name() : "ranks");
  std::vector<Status> out(static_cast<size_t>(nranks));
  std::vector<std::thread> threads;
  for (int r = 0; r < nranks; ++r) threads.emplace_back([&, r] { out[static_cast<size_t>(r)] = fn(r); });
  for (std::thread& t : threads) t.join();
  return out;
}

inline double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Plan steps.
inline sched::Range send_buf(uint64_t offset, uint64_t count) { return {sched::Buf::Send, offset, count}; }
inline sched::Range recv_buf(uint64_t offset, uint64_t count) { return {sched::Buf::Recv, offset, count}; }
inline sched::Range scratch_buf(uint64_t offset, uint64_t count) { return {sched::Buf::Scratch, offset, count}; }
inline sched::Step send_step(int peer, sched::Range src) { return {sched::Kind::Send, peer, {}, src}; }
inline sched::Step recv_step(int peer, sched::Range dst) { return {sched::Kind::Recv, peer, dst, {}}; }
inline sched::Step recv_reduce_step(int peer, sched::Range dst, sched::Range src) {
  return {sched::Kind::RecvReduce, peer, dst, src};
}
inline sched::Step copy_step(sched::Range dst, sched::Range src) { return {sched::Kind::Copy, -1, dst, src}; }
inline sched::Step reduce_step(sched::Range dst, sched::Range src) { return {sched::Kind::Reduce, -1, dst, src}; }

// An int32 sum call over `plan` with a deadline of `timeout_ms`.
inline exec::Call int_sum_call(const sched::RankPlan& plan, const void* send, void* recv, uint64_t seq,
                               int64_t timeout_ms) {
  return exec::Call{&plan, send, recv, weftInt32, reduce::Op::Sum, seq, LazyDeadline(timeout_ms),
                    &exec::cpu_data_engine()};
}

inline bool contains(const std::string& s, const std::string& what) { return s.find(what) != std::string::npos; }

}  // namespace weft::testing
