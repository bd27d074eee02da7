// One status type for everything below the C API. A Status carries a result code
// and a message that names the rank, the peer and the operation where known.
#pragma once

#include <memory>
#include <string>
#include <utility>

#include "weft/weft.h"

namespace weft {

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(weftResult_t code, std::string message)
      : code_(code), message_(std::make_unique<std::string>(std::move(message))) {}
  Status(const Status& o) : code_(o.code_), message_(o.message_ ? std::make_unique<std::string>(*o.message_) : nullptr) {}
  Status& operator=(const Status& o) {
    if (this != &o) *this = Status(o);
    return *this;
  }
  Status(Status&&) noexcept = default;
  Status& operator=(Status&&) noexcept = default;

  static Status Ok() { return {}; }
  bool ok() const { return code_ == weftSuccess; }
  weftResult_t code() const { return code_; }
  const std::string& message() const { return message_ ? *message_ : kNoMessage; }

  // Prefixes context ("rank 2: allreduce: ") to the message, keeping the code.
  Status& prefix(const std::string& context) {
    if (!message_) message_ = std::make_unique<std::string>();
    message_->insert(0, context);
    return *this;
  }

 private:
  static inline const std::string kNoMessage;
  weftResult_t code_ = weftSuccess;
  // Only failures carry text: a success is a code and a null pointer, cheap to
  // make, move and drop on the per-call fast path.
  std::unique_ptr<std::string> message_;
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
