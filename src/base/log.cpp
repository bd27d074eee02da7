#include "base/log.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>
#include <strings.h>

#include "base/params.h"

namespace weft::log {
namespace {

struct Config {
  Level level = Level::Warn;
  unsigned mask = static_cast<unsigned>(Subsys::ALL);
  FILE* out = stderr;
  char host[64] = {};
};

const char* level_name(Level l) {
  switch (l) {
    case Level::Warn: return "WARN";
    case Level::Info: return "INFO";
    case Level::Trace: return "TRACE";
    default: return "VERSION";
  }
}

const char* subsys_name(Subsys s) {
  switch (s) {
    case Subsys::INIT: return "INIT";
    case Subsys::BOOT: return "BOOT";
    case Subsys::TRANSPORT: return "TRANSPORT";
    case Subsys::COLL: return "COLL";
    case Subsys::TUNE: return "TUNE";
    case Subsys::EXEC: return "EXEC";
    case Subsys::ENV: return "ENV";
    case Subsys::REDUCE: return "REDUCE";
    default: return "ALL";
  }
}

unsigned parse_mask(const std::string& text) {
  static const std::pair<const char*, Subsys> names[] = {
      {"INIT", Subsys::INIT}, {"BOOT", Subsys::BOOT}, {"TRANSPORT", Subsys::TRANSPORT},
      {"COLL", Subsys::COLL}, {"TUNE", Subsys::TUNE}, {"EXEC", Subsys::EXEC},
      {"ENV", Subsys::ENV},   {"REDUCE", Subsys::REDUCE}, {"ALL", Subsys::ALL}};
  bool invert = !text.empty() && text[0] == '^';
  unsigned mask = 0;
  size_t pos = invert ? 1 : 0;
  while (pos <= text.size()) {
    size_t end = text.find(',', pos);
    if (end == std::string::npos) end = text.size();
    std::string item = text.substr(pos, end - pos);
    for (const auto& [name, bit] : names)
      if (strcasecmp(item.c_str(), name) == 0) mask |= static_cast<unsigned>(bit);
    pos = end + 1;
  }
  return invert ? ~mask : mask;
}

}  // namespace

std::string expand_path(const std::string& pattern, int rank) {
  char host[256] = {0};
  gethostname(host, sizeof(host) - 1);
  if (char* dot = std::strchr(host, '.')) *dot = '\0';
  std::string path;
  for (size_t i = 0; i < pattern.size(); ++i) {
    const char next = i + 1 < pattern.size() && pattern[i] == '%' ? pattern[i + 1] : 0;
    if (next == 'h') path += host, ++i;
    else if (next == 'p') path += std::to_string(getpid()), ++i;
    else if (next == 'r' && rank >= 0) path += std::to_string(rank), ++i;
    else path += pattern[i];
  }
  return path;
}

namespace {

Config& config() {
  static Config* cfg = [] {
    auto* c = new Config;  // never destroyed: logging stays valid during exit
    const std::string& lv = params::DEBUG();
    if (strcasecmp(lv.c_str(), "NONE") == 0) c->level = Level::None;
    else if (strcasecmp(lv.c_str(), "VERSION") == 0) c->level = Level::Version;
    else if (strcasecmp(lv.c_str(), "INFO") == 0) c->level = Level::Info;
    else if (strcasecmp(lv.c_str(), "TRACE") == 0) c->level = Level::Trace;
    c->mask = parse_mask(params::DEBUG_SUBSYS());
    gethostname(c->host, sizeof(c->host) - 1);
    if (char* dot = std::strchr(c->host, '.')) *dot = '\0';
    const std::string& file = params::DEBUG_FILE();
    if (!file.empty()) {
      if (FILE* f = std::fopen(expand_path(file, -1).c_str(), "a")) c->out = f;
    }
    return c;
  }();
  return *cfg;
}

std::atomic<int> g_rank{-1};
}  // namespace

bool enabled(Level level, Subsys subsys) {
  const Config& c = config();
  return level <= c.level && (c.mask & static_cast<unsigned>(subsys)) != 0;
}

void set_rank(int rank) {
  int expected = -1;
  g_rank.compare_exchange_strong(expected, rank);
}

void write(Level level, Subsys subsys, const char* fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  Config& c = config();
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  // The line in one write: stderr is unbuffered, and fprintf to it writes piece
  // by piece, so the lines of ranks sharing a terminal or pipe came out spliced.
  char line[sizeof(msg) + 160];
  int n = std::snprintf(line, sizeof(line), "%s:%d:%ld [%d] WEFT %s %s %s\n", c.host, getpid(),
                        static_cast<long>(syscall(SYS_gettid)), g_rank.load(), level_name(level),
                        subsys_name(subsys), msg);
  if (n < 0) return;
  if (static_cast<size_t>(n) >= sizeof(line)) {
    n = static_cast<int>(sizeof(line) - 1);
    line[n - 1] = '\n';
  }
  std::fwrite(line, 1, static_cast<size_t>(n), c.out);
  std::fflush(c.out);
}

}  // namespace weft::log
