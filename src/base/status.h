// One status type for everything below the C API. A Status carries a result code
// and a message that names the rank, the peer and the operation where known.
#pragma once

#include <string>
#include <utility>

#include "weft/weft.h"

namespace weft {

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(weftResult_t code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return {}; }
  bool ok() const { return code_ == weftSuccess; }
  weftResult_t code() const { return code_; }
  const std::string& message() const { return message_; }

  // Prefixes context ("rank 2: allreduce: ") to the message, keeping the code.
  Status& prefix(const std::string& context) {
    message_ = context + message_;
    return *this;
  }

 private:
  weftResult_t code_ = weftSuccess;
  std::string message_;
};

// printf-style constructors; the message is formatted once, only on error paths.
Status Error(weftResult_t code, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
// Appends ": strerror(errno)" for the given errno value.
Status SysError(int err, const char* fmt, ...) __attribute__((format(printf, 2, 3)));

}  // namespace weft

#define WEFT_TRY(expr)                 \
  do {                                 \
    ::weft::Status weft_st_ = (expr);  \
    if (!weft_st_.ok()) return weft_st_; \
  } while (0)
