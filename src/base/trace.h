// WEFT_TRACE=FILE: a Chrome / Perfetto trace (a JSON array of trace events, open it
// in ui.perfetto.dev or chrome://tracing) of this process's collectives,
// point-to-point groups and schedule steps, and online tuning's agreements,
// written as each call ends (a process killed by a signal leaves its trace up to
// its last finished call, without the closing bracket, which the viewers do not
// need) and closed at exit. In FILE, %r is the rank of the first communicator made
// here, %p the pid and %h the host. Events carry pid = rank and tid = the
// communicator, so per-rank files merge by concatenation (tools/weft-trace/merge.py).
//
// Off (the default), the only cost is on(): one relaxed load of a flag, tested
// before any event is built.
#pragma once

#include <atomic>
#include <string>

namespace weft::trace {

namespace detail {
extern std::atomic<bool> g_on;
}

inline bool on() { return detail::g_on.load(std::memory_order_relaxed); }

// Reads WEFT_TRACE (once per process); `rank` names the file (%r). Every
// communicator calls it at init; the first one with WEFT_TRACE set decides.
void init(int rank);

// Microseconds on the trace's clock (steady, from the process's first call).
double now_us();

// A span [begin_us, end_us) named `name` in category `cat` on (pid, tid), with
// `args` a JSON object's members ("\"bytes\": 64, \"peer\": 3") or empty.
void span(const char* cat, const std::string& name, double begin_us, double end_us, int pid, int tid,
          const std::string& args);
// A moment: the same without a duration.
void instant(const char* cat, const std::string& name, double at_us, int pid, int tid, const std::string& args);
// Names a (pid, tid) row: "comm 1a2b rank 3 of 8".
void name_row(int pid, int tid, const std::string& name);

// A JSON string literal of s (quotes and escapes).
std::string quote(const std::string& s);

}  // namespace weft::trace
