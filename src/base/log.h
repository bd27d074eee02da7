// Logging: WEFT_DEBUG=NONE|VERSION|WARN|INFO|TRACE, WEFT_DEBUG_SUBSYS=INIT,BOOT,...
// Each line reads "host:pid:tid [rank] WEFT LEVEL SUBSYS message" so it greps well.
#pragma once

#include <string>

namespace weft::log {

enum class Level { None = 0, Version = 1, Warn = 2, Info = 3, Trace = 4 };
enum class Subsys : unsigned {
  INIT = 1u << 0,
  BOOT = 1u << 1,
  TRANSPORT = 1u << 2,
  COLL = 1u << 3,
  TUNE = 1u << 4,
  EXEC = 1u << 5,
  ENV = 1u << 6,
  REDUCE = 1u << 7,
  ALL = ~0u,
};

bool enabled(Level level, Subsys subsys);
void write(Level level, Subsys subsys, const char* fmt, ...) __attribute__((format(printf, 3, 4)));
// The rank shown in log lines of this process (the first communicator's rank).
void set_rank(int rank);
// A file name pattern with %h (short host name), %p (pid) and, for rank >= 0,
// %r (rank) filled in (WEFT_DEBUG_FILE, WEFT_TRACE).
std::string expand_path(const std::string& pattern, int rank);

}  // namespace weft::log

#define WEFT_LOG_(level, subsys, ...)                                                   \
  do {                                                                                 \
    if (::weft::log::enabled(level, ::weft::log::Subsys::subsys))                      \
      ::weft::log::write(level, ::weft::log::Subsys::subsys, __VA_ARGS__);             \
  } while (0)
#define WEFT_WARN(subsys, ...) WEFT_LOG_(::weft::log::Level::Warn, subsys, __VA_ARGS__)
#define WEFT_INFO(subsys, ...) WEFT_LOG_(::weft::log::Level::Info, subsys, __VA_ARGS__)
#define WEFT_TRACE(subsys, ...) WEFT_LOG_(::weft::log::Level::Trace, subsys, __VA_ARGS__)
