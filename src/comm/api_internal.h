// Shared by the C API's translation units: handle lookup and error reporting.
#pragma once

#include <atomic>
#include <memory>

#include "comm/communicator.h"

struct weftComm {
  std::unique_ptr<weft::Communicator> impl;
  // API calls in progress on it: destroy (and abort) free it only once they
  // have returned.
  std::atomic<int> users{0};
  std::atomic<bool> dead{false};
};

namespace weft::api {

// Records a failed status as this thread's last error; returns its code.
weftResult_t report(const Status& st);
// The communicator behind a handle, held for the caller's scope; empty with the
// error recorded in *rc for NULL, destroyed or never-initialized handles.
class Use {
 public:
  Use(weftComm* comm, const char* fn, weftResult_t* rc);
  ~Use() {
    if (comm_ != nullptr) comm_->users.fetch_sub(1, std::memory_order_release);
  }
  Use(const Use&) = delete;
  Use& operator=(const Use&) = delete;
  explicit operator bool() const { return comm_ != nullptr; }
  Communicator* get() const { return comm_->impl.get(); }
  Communicator* operator->() const { return get(); }

 private:
  weftComm* comm_ = nullptr;
};

}  // namespace weft::api
