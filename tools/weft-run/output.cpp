#include "output.h"

#include <unistd.h>

#include <cerrno>

namespace weftrun {
namespace {
// A "line" longer than this is cut and emitted anyway, so a rank that never writes
// a newline cannot make weft-run buffer without bound.
constexpr size_t kMaxLine = 64 * 1024;
}  // namespace

void WriteAll(int fd, const char* data, size_t len) {
  while (len > 0) {
    ssize_t n = ::write(fd, data, len);
    if (n < 0) {
      if (errno == EINTR) continue;
      return;
    }
    data += n;
    len -= static_cast<size_t>(n);
  }
}

LineForwarder::LineForwarder(int rank, int read_fd, int dest_fd)
    : fd_(read_fd), dest_(dest_fd) {
  // Built by appending: GCC 12 raises a false -Wrestrict on "lit" + std::string&&.
  prefix_.append("[").append(std::to_string(rank)).append("] ");
}

LineForwarder::~LineForwarder() {
  if (fd_ >= 0) ::close(fd_);
}

bool LineForwarder::OnReadable() {
  if (fd_ < 0) return false;
  char buf[16384];
  ssize_t n = ::read(fd_, buf, sizeof(buf));
  if (n < 0) {
    if (errno == EINTR || errno == EAGAIN) return true;
    FlushAndClose();
    return false;
  }
  if (n == 0) {
    FlushAndClose();
    return false;
  }
  pending_.append(buf, static_cast<size_t>(n));
  EmitLines(false);
  return true;
}

void LineForwarder::FlushAndClose() {
  EmitLines(true);
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

void LineForwarder::EmitLines(bool flush_partial) {
  std::string out;
  size_t start = 0;
  while (start < pending_.size()) {
    size_t nl = pending_.find('\n', start);
    size_t end;
    if (nl != std::string::npos) {
      end = nl + 1;
    } else if (flush_partial || pending_.size() - start >= kMaxLine) {
      end = pending_.size();
    } else {
      break;
    }
    out += prefix_;
    out.append(pending_, start, end - start);
    if (out.back() != '\n') out += '\n';
    start = end;
  }
  pending_.erase(0, start);
  if (!out.empty()) WriteAll(dest_, out.data(), out.size());
}

}  // namespace weftrun
