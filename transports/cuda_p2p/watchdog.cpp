#include "transports/cuda_p2p/watchdog.h"

#include "transports/cuda_p2p/flag_page.h"

namespace weft::transport::cuda_p2p {

Watchdog::Watchdog(const uint32_t* done_word, int64_t timeout_ms, std::function<void(const Status&)> on_timeout)
    : done_word_(done_word), timeout_ms_(timeout_ms), on_timeout_(std::move(on_timeout)) {}

void Watchdog::add(const char* what, void* stream, uint32_t done, Explain why) {
  std::lock_guard<std::mutex> lock(mu_);
  if (stop_) return;
  pending_.push_back({what, stream, done, std::move(why), std::chrono::steady_clock::now()});
  if (!thread_.joinable()) thread_ = std::thread([this] { watch(); });
}

void Watchdog::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Watchdog::watch() {
  auto done = [&] { return load_flag(done_word_); };
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    while (!pending_.empty() && static_cast<int32_t>(done() - pending_.front().done) >= 0) pending_.pop_front();
    if (!pending_.empty() &&
        std::chrono::steady_clock::now() - pending_.front().enqueued > std::chrono::milliseconds(timeout_ms_)) {
      const Pending p = pending_.front();
      pending_.clear();
      lock.unlock();
      Status st = Error(weftTimeout, "cuda_p2p %s on stream %p not finished %lld ms after it was enqueued "
                        "(WEFT_TIMEOUT_MS): %s", p.what, p.stream, static_cast<long long>(timeout_ms_), p.why().c_str());
      if (on_timeout_) on_timeout_(st);
      lock.lock();
      continue;
    }
    cv_.wait_for(lock, std::chrono::milliseconds(10));
  }
}

}  // namespace weft::transport::cuda_p2p
