// Shared by the C API's translation units: handle lookup and error reporting.
#pragma once

#include <atomic>
#include <memory>
#include <thread>

#include "comm/communicator.h"

struct weftComm {
  std::unique_ptr<weft::Communicator> impl;
  // Non-blocking init (weftConfig_t.blocking = 0): the thread that builds impl.
  // init_state is weftInProgress until it ends, then its result (init_error says
  // why it failed); impl is set before init_state leaves weftInProgress.
  std::thread init_thread;
  std::atomic<int> init_state{weftSuccess};
  weft::Status init_error;
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
// The handle found live by the last lookup: a repeated call on one communicator
// skips the registry's lock. Cleared (under that lock) when it is destroyed.
extern std::atomic<const weftComm*> g_last_live;

class Use {
 public:
  Use(weftComm* comm, const char* fn, weftResult_t* rc) {
    if (comm != nullptr && comm == g_last_live.load(std::memory_order_acquire) && enter(comm)) return;
    lookup(comm, fn, rc);
  }
  ~Use() {
    if (comm_ != nullptr) comm_->users.fetch_sub(1, std::memory_order_release);
  }
  Use(const Use&) = delete;
  Use& operator=(const Use&) = delete;
  explicit operator bool() const { return comm_ != nullptr; }
  Communicator* get() const { return comm_->impl.get(); }
  Communicator* operator->() const { return get(); }

 private:
  // Counted before the dead flag is read; destroy sets the flag before it
  // waits for the count: one of the two sees the other.
  bool enter(weftComm* comm) {
    comm->users.fetch_add(1, std::memory_order_seq_cst);
    if (comm->dead.load(std::memory_order_seq_cst)) {
      comm->users.fetch_sub(1, std::memory_order_release);
      return false;
    }
    comm_ = comm;
    return true;
  }
  void lookup(weftComm* comm, const char* fn, weftResult_t* rc);
  weftComm* comm_ = nullptr;
};

}  // namespace weft::api
