// The Work a weft process group returns: one c10d operation, posted to weft's
// queue as one or more requests, completed by whoever gets to it first — the
// caller's wait()/isCompleted(), or the group's completer thread, which
// completes every work in issue order so that futures complete and tensors
// stay alive even if nobody waits. A sync call's work is complete when the
// call returns.
#pragma once

#include <ATen/core/ivalue.h>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <torch/csrc/distributed/c10d/Work.hpp>
#include <vector>

#include "weft/weft.h"

namespace weft_torch {

// A DistBackendError (torch.distributed.DistBackendError in Python) as an
// exception_ptr.
std::exception_ptr backend_error(const std::string& msg);

class WeftWork : public c10d::Work {
 public:
  // what: the c10d name of the operation, for messages. outputs: the future's value.
  WeftWork(int rank, c10d::OpType type, const char* what, std::vector<at::Tensor> outputs);
  ~WeftWork() override;

  // Set-up, before the work is handed out.
  void add(weftRequest_t request) { requests_.push_back(request); }
  // Runs after every request succeeded, before the work counts as complete:
  // copies results from a contiguous staging tensor into the caller's.
  void on_success(std::function<void()> fn) { on_success_.push_back(std::move(fn)); }
  // Runs once the requests are done, success or not (frees a pre-mul op).
  void on_done(std::function<void()> fn) { on_done_.push_back(std::move(fn)); }
  // Keeps a tensor alive while weft reads or writes it.
  void keep(at::Tensor t) { kept_.push_back(std::move(t)); }
  const char* what() const { return what_; }
  // A receive: the rank it came from, written by weft (weftRecvAnyAsync) before
  // the work completes.
  int* source_slot() { return &source_; }
  int sourceRank() const override { return source_; }

  // Completes the work unless another thread already does; returns when it is
  // complete. publish_inline: run the future's callbacks on this thread (a
  // caller's wait); otherwise on the callback pool (the completer thread must
  // not block on a callback that waits for later work).
  void drive(bool publish_inline);

  // Completes the work if its requests are done and nobody else is driving
  // it; true once it is complete (by anyone). Never blocks on weft.
  bool try_complete(bool publish_inline);
  // The sync path: a blocking call of the work failed; the work completes
  // with that error and its later calls are skipped.
  void sync_fail(weftResult_t err, const std::string& msg) {
    sync_err_ = err;
    sync_msg_ = msg;
  }
  bool sync_failed() const { return sync_err_ != weftSuccess; }
  // The sync path: every blocking call returned.
  void complete_sync();

  bool isCompleted() override;
  bool isSuccess() const override;
  std::exception_ptr exception() const override;
  bool wait(std::chrono::milliseconds timeout = kNoTimeout) override;
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;
  std::vector<at::Tensor> result() override { return outputs_; }
  void synchronize() override {}

 private:
  // The requests are done (first error in err, its message in msg); runs the hooks and marks the
  // work and, if asked for, its future complete. Holds claimed_.
  void finish_requests(weftResult_t err, const std::string& msg, bool publish_inline);
  // Marks the future complete with the outputs or the work's error; runs its callbacks.
  void mark_future();

  const char* what_;
  std::vector<at::Tensor> outputs_;
  std::vector<weftRequest_t> requests_;
  std::vector<std::function<void()>> on_success_, on_done_;
  std::vector<at::Tensor> kept_;
  weftResult_t sync_err_ = weftSuccess;
  std::string sync_msg_;
  std::atomic<bool> claimed_{false};  // someone is driving the requests
  bool future_requested_ = false;     // guarded by mutex_ (the base's)
  int source_ = -1;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
};

// Completes a process group's works in issue order on a thread of its own,
// polling with naps of up to kMaxNapUs.
class Completer {
 public:
  static constexpr int kMaxNapUs = 500;
  Completer();
  ~Completer();  // drains: every work handed over completes first
  void push(c10::intrusive_ptr<WeftWork> work);

 private:
  void loop();
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<c10::intrusive_ptr<WeftWork>> works_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace weft_torch
