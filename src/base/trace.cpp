#include "base/trace.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

#include "base/log.h"
#include "base/params.h"

namespace weft::trace {

namespace detail {
std::atomic<bool> g_on{false};
}

namespace {

// A long run keeps at most this many events; later ones are counted, not kept.
constexpr size_t kMaxEvents = 2'000'000;

// Events go to the file as they come, a collective or point-to-point group (with
// its steps) at a time, so a process killed by a signal leaves its trace up to its
// last finished call. The file is a JSON array, whose closing bracket Chrome and
// Perfetto do not require (and tools/weft-trace/merge.py supplies).
struct Sink {
  std::mutex mu;
  std::string path;
  int fd = -1;
  std::string pending;  // events not yet written, each preceded by its separator
  size_t kept = 0, dropped = 0;
  bool failed = false;
};

Sink& sink() {
  static Sink* s = new Sink;  // never destroyed: written by the exit handler
  return *s;
}

void write_pending(Sink& s) {
  if (s.fd < 0 && !s.failed) {
    s.fd = ::open(s.path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (s.fd < 0) std::fprintf(stderr, "weft: WEFT_TRACE: cannot write %s\n", s.path.c_str());
    if (s.fd >= 0) s.pending.insert(0, "[\n");
    s.failed = s.fd < 0;
  }
  if (s.failed) {
    s.pending.clear();
    return;
  }
  for (size_t off = 0; off < s.pending.size();) {
    ssize_t n = ::write(s.fd, s.pending.data() + off, s.pending.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    off += static_cast<size_t>(n);
  }
  s.pending.clear();
}

// flush: the event ends a call; what it ran is written out.
void add(const std::string& event, bool flush) {
  Sink& s = sink();
  std::lock_guard<std::mutex> lock(s.mu);
  if (s.kept < kMaxEvents) {
    s.pending += s.kept++ == 0 ? "" : ",\n";
    s.pending += event;
  } else {
    ++s.dropped;
  }
  if (flush) write_pending(s);
}

void finish_file() {
  Sink& s = sink();
  std::lock_guard<std::mutex> lock(s.mu);
  // The count of events left out travels as the last event, and the array closes.
  char dropped[160];
  std::snprintf(dropped, sizeof dropped,
                "%s{\"name\": \"dropped_events\", \"ph\": \"M\", \"pid\": 0, \"tid\": 0, \"args\": {\"count\": %zu}}\n]\n",
                s.kept == 0 ? "" : ",\n", s.dropped);
  s.pending += dropped;
  write_pending(s);
  if (s.fd >= 0) ::close(s.fd);
  s.fd = -1;
  s.failed = true;  // nothing after this
}

std::string common(const char* ph, const char* cat, const std::string& name, double ts, int pid, int tid) {
  char buf[160];
  std::snprintf(buf, sizeof(buf), "\"ph\": \"%s\", \"cat\": \"%s\", \"ts\": %.3f, \"pid\": %d, \"tid\": %d", ph, cat,
                ts, pid, tid);
  return "{\"name\": " + quote(name) + ", " + buf;
}

}  // namespace

void init(int rank) {
  static std::once_flag once;
  std::call_once(once, [rank] {
    const std::string& pattern = params::TRACE();
    if (pattern.empty()) return;
    sink().path = log::expand_path(pattern, rank);
    now_us();  // the clock starts here
    std::atexit(finish_file);
    detail::g_on.store(true, std::memory_order_relaxed);
  });
}

double now_us() {
  static const auto t0 = std::chrono::steady_clock::now();
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
}

void span(const char* cat, const std::string& name, double begin_us, double end_us, int pid, int tid,
          const std::string& args) {
  char dur[48];
  std::snprintf(dur, sizeof(dur), ", \"dur\": %.3f", end_us - begin_us);
  // A step belongs to a call still running; the call's own span ends it.
  add(common("X", cat, name, begin_us, pid, tid) + dur + ", \"args\": {" + args + "}}", std::strcmp(cat, "step") != 0);
}

void instant(const char* cat, const std::string& name, double at_us, int pid, int tid, const std::string& args) {
  add(common("i", cat, name, at_us, pid, tid) + ", \"s\": \"t\", \"args\": {" + args + "}}", true);
}

void name_row(int pid, int tid, const std::string& name) {
  add(common("M", "weft", "thread_name", 0, pid, tid) + ", \"args\": {\"name\": " + quote(name) + "}}", true);
}

std::string quote(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\', out += c;
    else if (static_cast<unsigned char>(c) < 0x20) {
      char esc[8];
      std::snprintf(esc, sizeof(esc), "\\u%04x", c);
      out += esc;
    } else out += c;
  }
  return out + "\"";
}

}  // namespace weft::trace
