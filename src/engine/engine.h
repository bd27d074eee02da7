// The progress engine: every operation of every communicator is posted to its
// communicator's queue and driven to completion here, many at once. Operations
// of one queue start in posting order and run one at a time, except that
// neighbouring point-to-point operations run beside each other; different
// queues (communicators) progress concurrently.
//
// Who drives: WEFT_PROGRESS_THREADS engine threads (1 by default), which spin
// briefly and then sleep on a futex while no operation is pending, and nap
// while pending operations have moved no data for a while; and every
// waiter (weftWait, a blocking call behind queued work), which drives the
// queues itself instead of spinning idle, so with WEFT_PROGRESS_THREADS=0 the
// caller's own waits move everything. A queue is driven by one thread at a
// time (its drive lock, taken with try_lock by the engine).
#pragma once

#include <atomic>
#include <chrono>
#include <optional>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "base/status.h"
#include "base/wait.h"

namespace weft::engine {

// One posted operation. advance() never blocks.
class Op {
 public:
  virtual ~Op() = default;
  // Moves the operation forward as far as its peers allow; *done when finished.
  virtual Status advance(bool* done) = 0;
  // Slow checks while it waits (a dead peer, abort, the deadline), called every
  // few hundred passes that did not finish it.
  virtual Status check() = 0;
  // Point-to-point operations run beside neighbouring point-to-point operations
  // of their queue; any other operation runs alone, after everything before it.
  virtual bool concurrent() const { return false; }
  // Called once, with the result. May return an operation that must run next,
  // before anything posted after this one (online tuning's agreement).
  virtual std::unique_ptr<Op> complete(Status st) = 0;
};

class Engine;

// The operations of one communicator, in posting order.
class Queue {
 public:
  explicit Queue(Engine* engine) : engine_(engine), left_(ticks()) {}
  // Appends an operation and wakes the engine. Any thread.
  void post(std::unique_ptr<Op> op);
  // Puts an operation before everything not yet started. Only while holding
  // drive_mu() (a blocking call run inline that owes its queue a follow-up).
  void post_front(std::unique_ptr<Op> op);
  // Operations posted and not completed.
  int pending() const { return pending_.load(std::memory_order_acquire); }
  // When its last operation, or a call run inline beside it (note_left), ended
  // (ticks()): how long the caller has been outside weft, for the stuck-call
  // diagnosis.
  uint64_t left() const { return left_.load(std::memory_order_relaxed); }
  void note_left() { left_.store(ticks(), std::memory_order_relaxed); }
  // Held by whoever advances this queue's operations, or runs a call inline.
  std::mutex& drive_mu() { return drive_mu_; }
  // One pass over the runnable operations; the caller holds drive_mu().
  void drive();
  // Drives until nothing is pending (waiting for other drivers between passes).
  void drain();

 private:
  void finish(size_t i, Status st);

  Engine* engine_;
  std::mutex drive_mu_;
  std::mutex post_mu_;
  std::deque<std::unique_ptr<Op>> incoming_;  // guarded by post_mu_
  std::deque<std::unique_ptr<Op>> ops_;       // guarded by drive_mu_
  std::atomic<int> pending_{0};
  std::atomic<uint64_t> left_;
  uint32_t passes_ = 0;  // passes that finished nothing, for check()'s cadence
};

class Engine {
 public:
  // The process's engine, started on first use.
  static Engine& get();
  ~Engine();

  std::shared_ptr<Queue> add_queue();
  // After the queue has drained: the engine forgets it.
  void remove_queue(const std::shared_ptr<Queue>& q);
  // One pass over every queue this thread can take (try_lock): what a waiter
  // does between checks of what it waits for.
  void progress();
  int threads() const { return static_cast<int>(threads_.size()); }

 private:
  friend class Queue;
  Engine();
  void posted();
  void completed() { active_.fetch_sub(1, std::memory_order_acq_rel); }
  void thread_loop();
  // How long an engine thread naps after a pass: 0 while operations move data
  // (or were posted) lately, then 10 us doubling to WEFT_ENGINE_NAP_MAX_US once
  // nothing moved for WEFT_ENGINE_NAP_AFTER_US.
  class Stall {
   public:
    std::chrono::microseconds after_pass(uint64_t posts);

   private:
    uint64_t moved_ = 0, posts_ = 0;
    uint32_t passes_ = 0;
    std::optional<Clock::time_point> since_;
    std::chrono::microseconds nap_{0};
  };
  void snapshot(std::vector<std::shared_ptr<Queue>>* out);

  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::shared_ptr<Queue>> queues_;  // guarded by mu_
  std::atomic<uint64_t> version_{0};            // bumped when queues_ changes
  std::atomic<int> active_{0};                  // operations pending in all queues
  std::atomic<uint64_t> posts_{0};              // operations ever posted
  std::atomic<int> sleepers_{0};
  std::atomic<bool> stop_{false};
  std::vector<std::thread> threads_;
};

}  // namespace weft::engine
