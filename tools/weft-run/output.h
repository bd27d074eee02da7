// --tag-output: reads one rank's stdout or stderr from a pipe and writes it to
// weft-run's own, each line prefixed with "[rank] ". Lines from different ranks
// never interleave mid-line because each complete line goes out in one write.
#pragma once

#include <string>

namespace weftrun {

class LineForwarder {
 public:
  LineForwarder(int rank, int read_fd, int dest_fd);
  LineForwarder(const LineForwarder&) = delete;
  LineForwarder& operator=(const LineForwarder&) = delete;
  ~LineForwarder();

  int fd() const { return fd_; }
  bool open() const { return fd_ >= 0; }
  // Reads what is available; on EOF flushes a partial line and closes. Returns
  // false once closed.
  bool OnReadable();
  // Emits a pending partial line (with a newline added) and closes the pipe.
  void FlushAndClose();

 private:
  void EmitLines(bool flush_partial);

  std::string prefix_;
  int fd_;
  int dest_;
  std::string pending_;
};

// write(2) until done; gives up silently on EPIPE and other errors (a closed
// terminal must not take the job down).
void WriteAll(int fd, const char* data, size_t len);

}  // namespace weftrun
