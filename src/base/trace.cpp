#include "base/trace.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <vector>

#include "base/log.h"
#include "base/params.h"

namespace weft::trace {

namespace detail {
std::atomic<bool> g_on{false};
}

namespace {

// A long run keeps at most this many events; later ones are counted, not kept.
constexpr size_t kMaxEvents = 2'000'000;

struct Sink {
  std::mutex mu;
  std::string path;
  std::vector<std::string> events;  // each a JSON object
  size_t dropped = 0;
};

Sink& sink() {
  static Sink* s = new Sink;  // never destroyed: written by the exit handler
  return *s;
}

void add(std::string event) {
  Sink& s = sink();
  std::lock_guard<std::mutex> lock(s.mu);
  if (s.events.size() < kMaxEvents) s.events.push_back(std::move(event));
  else ++s.dropped;
}

void write_file() {
  Sink& s = sink();
  std::lock_guard<std::mutex> lock(s.mu);
  FILE* f = std::fopen(s.path.c_str(), "w");
  if (f == nullptr) {
    std::fprintf(stderr, "weft: WEFT_TRACE: cannot write %s\n", s.path.c_str());
    return;
  }
  std::fputs("{\"displayTimeUnit\": \"ns\", \"otherData\": {\"dropped_events\": ", f);
  std::fprintf(f, "%zu}, \"traceEvents\": [\n", s.dropped);
  for (size_t i = 0; i < s.events.size(); ++i) std::fprintf(f, "%s%s\n", s.events[i].c_str(), i + 1 < s.events.size() ? "," : "");
  std::fputs("]}\n", f);
  std::fclose(f);
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
    std::atexit(write_file);
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
  add(common("X", cat, name, begin_us, pid, tid) + dur + ", \"args\": {" + args + "}}");
}

void instant(const char* cat, const std::string& name, double at_us, int pid, int tid, const std::string& args) {
  add(common("i", cat, name, at_us, pid, tid) + ", \"s\": \"t\", \"args\": {" + args + "}}");
}

void name_row(int pid, int tid, const std::string& name) {
  add(common("M", "weft", "thread_name", 0, pid, tid) + ", \"args\": {\"name\": " + quote(name) + "}}");
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
