// Deadlines and the one wait policy of weft: spin briefly, then yield the core, so
// that 8 ranks on 2 cores still make progress. Every blocking wait goes through
// SpinWait and checks a Deadline.
#pragma once

#include <sched.h>

#include <chrono>
#include <cstdint>

#include "base/params.h"

namespace weft {

using Clock = std::chrono::steady_clock;

class Deadline {
 public:
  static Deadline after_ms(int64_t ms) { return Deadline(Clock::now() + std::chrono::milliseconds(ms)); }
  static Deadline from_params() { return after_ms(params::TIMEOUT_MS()); }
  bool expired() const { return Clock::now() >= at_; }
  int64_t remaining_ms() const {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(at_ - Clock::now()).count();
    return left > 0 ? left : 0;
  }

 private:
  explicit Deadline(Clock::time_point at) : at_(at) {}
  Clock::time_point at_;
};

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// Call pause() once per failed poll. The first SPIN_COUNT polls busy-wait; after
// that every poll yields. should_check() turns true every 256 polls so callers
// can run slow checks (deadline, peer liveness) without slowing the fast path.
class SpinWait {
 public:
  SpinWait() : spin_limit_(static_cast<uint32_t>(params::SPIN_COUNT())) {}
  void pause() {
    if (polls_ < spin_limit_) cpu_relax();
    else sched_yield();
    ++polls_;
  }
  bool should_check() const { return (polls_ & 255u) == 255u; }
  uint64_t polls() const { return polls_; }

 private:
  uint32_t spin_limit_;
  uint64_t polls_ = 0;
};

}  // namespace weft
