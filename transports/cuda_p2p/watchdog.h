// The deadline of calls that are only stream work: each call's stream writes
// the call's number into a done word when it finishes, and a thread looks every
// 10 ms at the oldest call not yet done. One that misses the deadline is
// reported through on_timeout (which fails the communicator, and that unblocks
// the stream); the calls still pending are dropped with it.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "base/status.h"

namespace weft::transport::cuda_p2p {

class Watchdog {
 public:
  // Why a call is stuck, asked at its deadline (on the watchdog's thread).
  using Explain = std::function<std::string()>;
  // `done_word`: the host memory the calls' stream writes.
  Watchdog(const uint32_t* done_word, int64_t timeout_ms, std::function<void(const Status&)> on_timeout);
  ~Watchdog() { stop(); }
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  // A call enqueued on `stream` now, finished once the done word reaches `done`
  // (cyclic). Starts the thread at the first call.
  void add(const char* what, void* stream, uint32_t done, Explain why);
  // No more reports: first thing at the owner's destruction, while what
  // on_timeout touches still exists. Any thread; idempotent.
  void stop();

 private:
  void watch();
  struct Pending {
    const char* what;
    void* stream;
    uint32_t done;
    Explain why;
    std::chrono::steady_clock::time_point enqueued;
  };
  const uint32_t* done_word_;
  int64_t timeout_ms_;
  std::function<void(const Status&)> on_timeout_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Pending> pending_;  // guarded by mu_
  bool stop_ = false;            // guarded by mu_
  std::thread thread_;
};

}  // namespace weft::transport::cuda_p2p
