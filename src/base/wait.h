// Deadlines and the one wait policy of weft: spin briefly, then yield the core, so
// that 8 ranks on 2 cores still make progress. Every blocking wait goes through
// SpinWait and checks a Deadline.
#pragma once

#include <sched.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <optional>

#include "base/params.h"

namespace weft {

using Clock = std::chrono::steady_clock;

class Deadline {
 public:
  static Deadline after_ms(int64_t ms) { return Deadline(Clock::now() + std::chrono::milliseconds(ms)); }
  static Deadline from_params() { return after_ms(params::TIMEOUT_MS()); }
  bool expired() const { return Clock::now() >= at_; }
  Clock::time_point at() const { return at_; }
  int64_t remaining_ms() const {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(at_ - Clock::now()).count();
    return left > 0 ? left : 0;
  }

 private:
  explicit Deadline(Clock::time_point at) : at_(at) {}
  Clock::time_point at_;
};

// A deadline whose clock starts at its first check, for waits that usually end
// before anyone looks: a call that never waits long never reads the clock
// (clock_gettime was a sixth of an 8-byte all-reduce's own cost). Checked only
// after a few hundred polls, so it ends at most that much later than one
// started up front.
class LazyDeadline {
 public:
  explicit LazyDeadline(int64_t ms) : ms_(ms) {}
  bool expired() {
    if (!at_) at_ = Deadline::after_ms(ms_);
    return at_->expired();
  }
  int64_t ms() const { return ms_; }

 private:
  int64_t ms_;
  std::optional<Deadline> at_;
};

// A timestamp cheap enough to take on every call: the CPU's time-stamp counter
// (a few instructions; a vDSO clock call added 28 to an 8-byte all-reduce's 490),
// CLOCK_MONOTONIC_COARSE's nanoseconds where there is none. ms_since() converts,
// measuring the counter's rate against steady_clock once (5 ms) on first use.
uint64_t ticks();
double ms_since(uint64_t earlier);

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// How many polls busy-wait before a waiter starts yielding. Spinning (about
// 1.5 us of pauses) pays when every rank has a core; when ranks outnumber cores
// the rank we wait for may need our core, so the limit drops to 5 (measured,
// 8 B all-reduce on 2 cores: 4 ranks 5 us at 20 polls, 40 us at 200, 200 us at
// 2,000 on one VM; on another 4 ranks 2.7 us at 5 polls, 3.2 at 0, 3.9 at 20,
// and 8 ranks 9.1 us at 5, 12.8 at 20, larger messages no slower at 5).
uint32_t spin_limit();
// Called by a communicator once it knows how many of its ranks run on this
// kernel (network namespaces and containers on it share its cores).
void set_machine_ranks(int ranks);

// A count of steps that moved data (a step of a collective's plan, a
// point-to-point operation started or received), any communicator: the
// progress engine naps while it stands still and operations are pending.
void note_progress();
uint64_t progress_count();

// Call pause() once per failed poll: busy-wait for spin_limit() polls, then
// yield on every poll. should_check() turns true every 256 polls so callers
// can run slow checks (deadline, peer liveness) without slowing the fast path.
class SpinWait {
 public:
  SpinWait() : spin_limit_(spin_limit()) {}
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

// A lock for critical sections of a few hundred nanoseconds taken on every
// message (a shared-memory channel's side): one atomic exchange to take it, a
// plain store to give it back, where a mutex costs two atomic operations.
// Waiters spin, then yield (SpinWait). Works with std::lock_guard/unique_lock.
class SpinLock {
 public:
  bool try_lock() { return !taken_.exchange(true, std::memory_order_acquire); }
  void lock() {
    if (try_lock()) return;  // uncontended: no wait state to set up
    SpinWait wait;
    while (taken_.load(std::memory_order_relaxed) || !try_lock()) wait.pause();
  }
  void unlock() { taken_.store(false, std::memory_order_release); }

 private:
  std::atomic<bool> taken_{false};
};

}  // namespace weft
