// Shared by the C API's translation units: handle lookup and error reporting.
#pragma once

#include <memory>

#include "comm/communicator.h"

struct weftComm {
  std::unique_ptr<weft::Communicator> impl;
};

namespace weft::api {

// Records a failed status as this thread's last error; returns its code.
weftResult_t report(const Status& st);
// The communicator behind a handle, or nullptr with the error recorded in *rc
// (NULL, destroyed or never-initialized handles).
Communicator* lookup(const weftComm* comm, const char* fn, weftResult_t* rc);

}  // namespace weft::api
