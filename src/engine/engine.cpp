#include "engine/engine.h"

#include <algorithm>
#include <utility>

#include "base/log.h"
#include "base/params.h"
#include "base/wait.h"

namespace weft::engine {

void Queue::post(std::unique_ptr<Op> op) {
  {
    std::lock_guard<std::mutex> lock(post_mu_);
    incoming_.push_back(std::move(op));
  }
  pending_.fetch_add(1, std::memory_order_acq_rel);
  engine_->posted();
}

void Queue::post_front(std::unique_ptr<Op> op) {
  ops_.push_front(std::move(op));
  pending_.fetch_add(1, std::memory_order_acq_rel);
  engine_->posted();
}

void Queue::finish(size_t i, Status st) {
  std::unique_ptr<Op> next = ops_[i]->complete(std::move(st));
  if (next != nullptr) {
    // The follow-up takes the finished operation's place (and its count).
    ops_[i] = std::move(next);
    return;
  }
  ops_.erase(ops_.begin() + static_cast<long>(i));
  note_left();
  pending_.fetch_sub(1, std::memory_order_acq_rel);
  engine_->completed();
}

void Queue::drive() {
  {
    std::lock_guard<std::mutex> lock(post_mu_);
    while (!incoming_.empty()) {
      ops_.push_back(std::move(incoming_.front()));
      incoming_.pop_front();
    }
  }
  bool check = (++passes_ & 255u) == 0;
  bool all_concurrent = true;  // every operation before the i-th may run beside others
  for (size_t i = 0; i < ops_.size();) {
    Op* op = ops_[i].get();
    if (i > 0 && !(all_concurrent && op->concurrent())) break;
    bool done = false;
    Status st = op->advance(&done);
    if (st.ok() && !done && check) {
      st = op->check();
      // A peer may write its last message and exit between the poll and the
      // check: look once more before calling the data lost.
      if (!st.ok() && op->advance(&done).ok() && done) st = Status::Ok();
    }
    if (!st.ok() || done) {
      finish(i, std::move(st));
      continue;
    }
    all_concurrent = all_concurrent && op->concurrent();
    ++i;
  }
}

void Queue::drain() {
  SpinWait wait;
  while (pending() > 0) {
    if (drive_mu_.try_lock()) {
      drive();
      drive_mu_.unlock();
    }
    if (pending() > 0) wait.pause();
  }
}

Engine& Engine::get() {
  static Engine engine;
  return engine;
}

Engine::Engine() {
  int n = static_cast<int>(std::clamp<int64_t>(params::PROGRESS_THREADS(), 0, 64));
  for (int i = 0; i < n; ++i) threads_.emplace_back([this] { thread_loop(); });
  WEFT_INFO(INIT, "progress engine: %d thread%s%s", n, n == 1 ? "" : "s",
            n == 0 ? " (operations move in the callers' waits)" : "");
}

Engine::~Engine() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_.store(true);
  }
  cv_.notify_all();
  for (std::thread& t : threads_) t.join();
}

std::shared_ptr<Queue> Engine::add_queue() {
  auto q = std::make_shared<Queue>(this);
  std::lock_guard<std::mutex> lock(mu_);
  queues_.push_back(q);
  version_.fetch_add(1, std::memory_order_release);
  return q;
}

void Engine::remove_queue(const std::shared_ptr<Queue>& q) {
  std::lock_guard<std::mutex> lock(mu_);
  queues_.erase(std::remove(queues_.begin(), queues_.end(), q), queues_.end());
  version_.fetch_add(1, std::memory_order_release);
}

void Engine::snapshot(std::vector<std::shared_ptr<Queue>>* out) {
  std::lock_guard<std::mutex> lock(mu_);
  *out = queues_;
}

void Engine::posted() {
  active_.fetch_add(1, std::memory_order_seq_cst);
  posts_.fetch_add(1, std::memory_order_seq_cst);
  if (sleepers_.load(std::memory_order_seq_cst) > 0) {
    std::lock_guard<std::mutex> lock(mu_);
    cv_.notify_one();
  }
}

void Engine::progress() {
  // Each thread keeps its own copy of the queue list, refreshed when it changes.
  thread_local std::vector<std::shared_ptr<Queue>> queues;
  thread_local uint64_t seen = ~uint64_t{0};
  thread_local const Engine* owner = nullptr;
  uint64_t v = version_.load(std::memory_order_acquire);
  if (v != seen || owner != this) {
    snapshot(&queues);
    seen = v;
    owner = this;
  }
  for (const std::shared_ptr<Queue>& q : queues) {
    if (q->pending() == 0 || !q->drive_mu().try_lock()) continue;
    q->drive();
    q->drive_mu().unlock();
  }
}

void Engine::thread_loop() {
  SpinWait wait;
  Stall stall;
  for (;;) {
    if (active_.load(std::memory_order_acquire) == 0) {
      // Idle: spin as briefly as a waiter would, then sleep until a post.
      for (uint32_t i = 0; i < spin_limit() && active_.load(std::memory_order_acquire) == 0; ++i) cpu_relax();
      std::unique_lock<std::mutex> lock(mu_);
      sleepers_.fetch_add(1, std::memory_order_seq_cst);
      cv_.wait(lock, [this] { return stop_ || active_.load(std::memory_order_seq_cst) > 0; });
      sleepers_.fetch_sub(1, std::memory_order_seq_cst);
      if (stop_) return;
      wait = SpinWait();
      stall = Stall();
    }
    if (stop_.load(std::memory_order_relaxed)) return;
    progress();
    if (active_.load(std::memory_order_acquire) == 0) continue;
    auto nap = stall.after_pass(posts_.load(std::memory_order_acquire));
    if (nap.count() == 0) {
      wait.pause();
      continue;
    }
    // Pending operations wait on peers that are busy elsewhere (a slower rank
    // still in its backward pass): yielding in a loop would take the core from
    // this process's own compute. A new post ends the nap.
    std::unique_lock<std::mutex> lock(mu_);
    sleepers_.fetch_add(1, std::memory_order_seq_cst);
    const uint64_t seen = posts_.load(std::memory_order_seq_cst);
    cv_.wait_for(lock, nap, [&] { return stop_ || posts_.load(std::memory_order_seq_cst) != seen; });
    sleepers_.fetch_sub(1, std::memory_order_seq_cst);
  }
}

std::chrono::microseconds Engine::Stall::after_pass(uint64_t posts) {
  const uint64_t moved = progress_count();
  if (moved != moved_ || posts != posts_) {
    moved_ = moved;
    posts_ = posts;
    since_.reset();
    nap_ = std::chrono::microseconds(0);
    passes_ = 0;
    return nap_;
  }
  // The clock only every 64 still passes: a moving operation never reads it.
  if (nap_.count() == 0 && (++passes_ & 63u) != 0) return nap_;
  const int64_t after = params::ENGINE_NAP_AFTER_US();
  if (after < 0) return std::chrono::microseconds(0);
  if (!since_) since_ = Clock::now();
  if (nap_.count() == 0 && Clock::now() - *since_ < std::chrono::microseconds(after)) return nap_;
  const auto most = std::chrono::microseconds(std::max<int64_t>(params::ENGINE_NAP_MAX_US(), 1));
  nap_ = std::min(nap_.count() == 0 ? std::chrono::microseconds(10) : nap_ * 2, most);
  return nap_;
}

}  // namespace weft::engine
