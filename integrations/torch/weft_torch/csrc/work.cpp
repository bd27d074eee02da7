#include "work.h"

#include <ATen/core/grad_mode.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <chrono>

namespace weft_torch {

std::exception_ptr backend_error(const std::string& msg) {
  try {
    C10_THROW_ERROR(DistBackendError, msg);
  } catch (...) {
    return std::current_exception();
  }
}

namespace {

// Runs future callbacks. A callback may block on a later work's future (the
// PowerSGD hook waits on an all-reduce inside its callback), so a task never
// waits for a busy thread: with none idle, another thread starts. Leaked on
// purpose: its threads may outlive static destruction at exit.
class CallbackPool {
 public:
  static CallbackPool& get() {
    static CallbackPool* pool = new CallbackPool;
    return *pool;
  }
  void run(std::function<void()> task) {
    std::lock_guard<std::mutex> lock(mu_);
    tasks_.push_back(std::move(task));
    // idle_ still counts a thread that was notified but has not woken yet, so
    // every queued task needs an idle thread of its own: with fewer, a thread
    // woken for one task could block on a later one nobody else would run.
    if (tasks_.size() <= static_cast<size_t>(idle_)) {
      cv_.notify_one();
    } else {
      std::thread([this] { loop(); }).detach();
    }
  }

 private:
  void loop() {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      while (tasks_.empty()) {
        ++idle_;
        cv_.wait(lock);
        --idle_;
      }
      std::function<void()> task = std::move(tasks_.front());
      tasks_.pop_front();
      lock.unlock();
      task();
      lock.lock();
    }
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> tasks_;
  int idle_ = 0;
};

}  // namespace

WeftWork::WeftWork(int rank, c10d::OpType type, const char* what, std::vector<at::Tensor> outputs)
    : c10d::Work(rank, type),
      what_(what),
      outputs_(std::move(outputs)),
      future_(c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()))) {}

WeftWork::~WeftWork() {
  // Posted works reach here complete (the completer holds them until then);
  // one dropped by an argument check after an earlier post in the same call
  // (a coalesced op) still owns that request, and its tensors must outlive it.
  for (weftRequest_t& r : requests_) weftWait(&r);
}

void WeftWork::drive(bool publish_inline) {
  bool expected = false;
  if (claimed_.compare_exchange_strong(expected, true, std::memory_order_acq_rel)) {
    weftResult_t err = weftSuccess;
    std::string msg;
    for (weftRequest_t& r : requests_) {
      weftResult_t rc = weftWait(&r);
      if (rc != weftSuccess && err == weftSuccess) {
        err = rc;
        msg = weftGetLastError(nullptr);  // this thread's, right after the failed wait
      }
    }
    finish_requests(err, msg, publish_inline);
    return;
  }
  std::unique_lock<std::mutex> lock(mutex_);
  cv_.wait(lock, [this] { return completed_; });
}

void WeftWork::finish_requests(weftResult_t err, const std::string& msg, bool publish_inline) {
  std::exception_ptr ep;
  if (err != weftSuccess) {
    ep = backend_error(std::string("weft ") + what_ + " failed: " + (msg.empty() ? weftGetErrorString(err) : msg));
  } else {
    // Copies into the caller's tensors; they may require grad, and this may be
    // the completer thread, where grad mode is on by default.
    at::NoGradGuard no_grad;
    try {
      for (auto& fn : on_success_) fn();
    } catch (...) {
      ep = std::current_exception();
    }
  }
  for (auto& fn : on_done_) fn();
  on_success_.clear();
  on_done_.clear();
  kept_.clear();
  bool publish;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    completed_ = true;
    exception_ = ep;
    publish = future_requested_;
  }
  cv_.notify_all();
  // Without a getFuture() so far the future stays unmarked and getFuture()
  // marks it before handing it out. Marking it here instead would race with a
  // getFuture().then(cb) on another thread: cb could then run on the
  // completer thread, and a cb that waits for a later work (the PowerSGD hook
  // does) would block the thread that completes that work, for ever.
  if (!publish) return;
  if (publish_inline)
    mark_future();
  else
    CallbackPool::get().run([self = c10::intrusive_ptr<WeftWork>::reclaim_copy(this)] { self->mark_future(); });
}

void WeftWork::mark_future() {
  std::exception_ptr ep;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    ep = exception_;
  }
  if (ep)
    future_->setError(ep);
  else
    future_->markCompleted(c10::IValue(outputs_));
}

bool WeftWork::try_complete(bool publish_inline) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (completed_) return true;
  }
  bool expected = false;
  if (!claimed_.compare_exchange_strong(expected, true, std::memory_order_acq_rel)) return false;
  weftResult_t err = weftSuccess;
  std::string msg;
  bool all = true;
  for (weftRequest_t& r : requests_) {
    if (r == nullptr) continue;
    int done = 0;
    weftResult_t rc = weftTest(&r, &done);
    if (!done) {
      all = false;
      break;
    }
    if (rc != weftSuccess && err == weftSuccess) {
      err = rc;
      msg = weftGetLastError(nullptr);
    }
  }
  // A request that completed with an error is already freed: finish now, the
  // error would be lost otherwise.
  if (all || err != weftSuccess) {
    for (weftRequest_t& r : requests_) weftWait(&r);
    finish_requests(err, msg, publish_inline);
    return true;
  }
  claimed_.store(false, std::memory_order_release);
  return false;
}

void WeftWork::complete_sync() {
  claimed_.store(true, std::memory_order_release);
  finish_requests(sync_err_, sync_msg_, true);
}

bool WeftWork::isCompleted() { return try_complete(true); }

bool WeftWork::isSuccess() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return completed_ && !exception_;
}

std::exception_ptr WeftWork::exception() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return exception_;
}

bool WeftWork::wait(std::chrono::milliseconds timeout) {
  if (timeout == kNoTimeout) {
    drive(true);
  } else {
    // Bounded: the completer drives; this thread only waits.
    std::unique_lock<std::mutex> lock(mutex_);
    if (!cv_.wait_for(lock, timeout, [this] { return completed_; }))
      std::rethrow_exception(backend_error(std::string("weft ") + what_ + ": Work::wait timed out after " +
                                           std::to_string(timeout.count()) + " ms"));
  }
  std::lock_guard<std::mutex> lock(mutex_);
  if (exception_) std::rethrow_exception(exception_);
  return true;
}

c10::intrusive_ptr<c10::ivalue::Future> WeftWork::getFuture() {
  bool completed;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    completed = completed_;
    if (future_requested_) return future_;
    future_requested_ = true;
  }
  // Completed before anyone asked for the future: the finisher left it to
  // this first call to mark, on this thread, before anyone can hold it.
  if (completed) mark_future();
  return future_;
}

Completer::Completer() : thread_([this] { loop(); }) {}

Completer::~Completer() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_one();
  thread_.join();
}

void Completer::push(c10::intrusive_ptr<WeftWork> work) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    works_.push_back(std::move(work));
  }
  cv_.notify_one();
}

void Completer::loop() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [this] { return stop_ || !works_.empty(); });
    if (works_.empty()) return;  // stop_ and drained
    c10::intrusive_ptr<WeftWork> work = works_.front();
    lock.unlock();
    // weft's progress thread moves the operation; this thread only looks, and
    // sleeps in between: a waiter that spun here would take the core from the
    // caller's compute (2 ranks on 2 cores: DDP ran 7% slower than gloo).
    // A caller's wait() drives the work itself meanwhile.
    auto nap = std::chrono::microseconds(20);
    while (!work->try_complete(false)) {
      std::this_thread::sleep_for(nap);
      nap = std::min(nap * 2, std::chrono::microseconds(kMaxNapUs));
    }
    work.reset();
    lock.lock();
    works_.pop_front();
  }
}

}  // namespace weft_torch
