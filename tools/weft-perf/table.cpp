#include "table.h"

#include <cerrno>
#include <cmath>
#include <cstring>

namespace weftperf {
namespace {

// Column widths shared by the header and the rows, so they line up.
constexpr const char* kLeftFmt = "%12s  %12s  %8s  %6s  %6s";
constexpr const char* kLeftHeaderFmt = "#%11s  %12s  %8s  %6s  %6s";  // '#' takes a column
constexpr int kLeftWidth = 12 + 2 + 12 + 2 + 8 + 2 + 6 + 2 + 6;
constexpr const char* kSideFmt = "  %7s  %6s  %6s  %6s";
constexpr int kSideWidth = 2 + 7 + 2 + 6 + 2 + 6 + 2 + 6;

// nccl-tests keeps the time column 7 wide by dropping decimals as it grows.
std::string FormatTime(double us) {
  char buf[32];
  if (us < 10000.0)
    std::snprintf(buf, sizeof(buf), "%7.2f", us);
  else if (us < 100000.0)
    std::snprintf(buf, sizeof(buf), "%7.1f", us);
  else
    std::snprintf(buf, sizeof(buf), "%7.0f", us);
  return buf;
}

std::string FormatBw(double gbs) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%6.2f", gbs);
  return buf;
}

std::string Centered(const char* text, int width) {
  int len = static_cast<int>(std::strlen(text));
  int left = (width - len) / 2;
  return std::string(static_cast<size_t>(left > 0 ? left : 0), ' ') + text +
         std::string(static_cast<size_t>(width - len - left > 0 ? width - len - left : 0), ' ');
}

void PrintSide(FILE* out, const Measurement& m) {
  if (m.skipped) {
    std::fprintf(out, kSideFmt, "N/A", "N/A", "N/A", "N/A");
    return;
  }
  std::string wrong = m.wrong < 0 ? "N/A" : std::to_string(m.wrong);
  std::fprintf(out, kSideFmt, FormatTime(m.time_us).c_str(), FormatBw(m.algbw).c_str(),
               FormatBw(m.busbw).c_str(), wrong.c_str());
}

// JSON numbers: finite values only (a zero-time row must not print "inf").
std::string Num(double v) {
  if (!std::isfinite(v)) return "null";
  char buf[40];
  std::snprintf(buf, sizeof(buf), "%.6g", v);
  return buf;
}

std::string Str(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\u%04x", c);
      out += buf;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

std::string JsonSide(const Measurement& m) {
  if (m.skipped) return "null";
  return "{\"time_us\": " + Num(m.time_us) + ", \"algbw_gbs\": " + Num(m.algbw) +
         ", \"busbw_gbs\": " + Num(m.busbw) +
         ", \"wrong\": " + (m.wrong < 0 ? std::string("null") : std::to_string(m.wrong)) + "}";
}

}  // namespace

void PrintColumnHeader(FILE* out) {
  std::string left(kLeftWidth - 1, ' ');
  std::fprintf(out, "#%s%s%s\n", left.c_str(),
               Centered("out-of-place", kSideWidth).c_str(),
               Centered("in-place", kSideWidth).c_str());
  std::fprintf(out, kLeftHeaderFmt, "size", "count", "type", "redop", "root");
  for (int side = 0; side < 2; ++side) std::fprintf(out, kSideFmt, "time", "algbw", "busbw", "#wrong");
  std::fputc('\n', out);
  std::fprintf(out, kLeftHeaderFmt, "(B)", "(elements)", "", "", "");
  for (int side = 0; side < 2; ++side) std::fprintf(out, kSideFmt, "(us)", "(GB/s)", "(GB/s)", "");
  std::fputc('\n', out);
}

void PrintRow(FILE* out, const Row& row) {
  std::string bytes = std::to_string(row.bytes), count = std::to_string(row.count),
              root = std::to_string(row.root);
  std::fprintf(out, kLeftFmt, bytes.c_str(), count.c_str(), row.type.c_str(),
               row.redop.c_str(), root.c_str());
  PrintSide(out, row.out_of_place);
  PrintSide(out, row.in_place);
  std::fputc('\n', out);
  std::fflush(out);
}

void PrintFooter(FILE* out, int64_t wrong_total, double avg_busbw) {
  std::fprintf(out, "# Out of bounds values : %lld %s\n", static_cast<long long>(wrong_total),
               wrong_total == 0 ? "OK" : "FAILED");
  std::fprintf(out, "# Avg bus bandwidth    : %g \n", avg_busbw);
  std::fprintf(out, "#\n");
  std::fflush(out);
}

bool WriteJson(const std::string& path, const JsonRun& run, const std::vector<Row>& rows,
               std::string* error) {
  FILE* f = std::fopen(path.c_str(), "w");
  if (f == nullptr) {
    *error = "cannot write " + path + ": " + std::strerror(errno);
    return false;
  }
  std::string s = "{\n";
  s += "  \"tool\": \"weft-perf\",\n";
  s += "  \"collective\": " + Str(run.collective) + ",\n";
  s += "  \"nranks\": " + std::to_string(run.nranks) + ",\n";
  s += "  \"iters\": " + std::to_string(run.iters) + ",\n";
  s += "  \"warmup_iters\": " + std::to_string(run.warmup) + ",\n";
  s += std::string("  \"check\": ") + (run.check ? "true" : "false") + ",\n";
  s += "  \"algo\": " + Str(run.algo) + ",\n";
  s += std::string("  \"memalloc\": ") + (run.memalloc ? "true" : "false") + ",\n";
  s += "  \"rows\": [";
  for (size_t i = 0; i < rows.size(); ++i) {
    const Row& r = rows[i];
    s += i == 0 ? "\n" : ",\n";
    s += "    {\"size\": " + std::to_string(r.bytes) + ", \"count\": " + std::to_string(r.count) +
         ", \"type\": " + Str(r.type) + ", \"redop\": " + Str(r.redop) +
         ", \"root\": " + std::to_string(r.root) +
         ",\n     \"out_of_place\": " + JsonSide(r.out_of_place) +
         ",\n     \"in_place\": " + JsonSide(r.in_place) + "}";
  }
  s += "\n  ],\n";
  s += "  \"wrong_total\": " + std::to_string(run.wrong_total) + ",\n";
  s += "  \"avg_busbw_gbs\": " + Num(run.avg_busbw) + "\n}\n";
  bool ok = std::fwrite(s.data(), 1, s.size(), f) == s.size();
  ok = (std::fclose(f) == 0) && ok;
  if (!ok) *error = "writing " + path + " failed";
  return ok;
}

bool WriteCsv(const std::string& path, const std::vector<Row>& rows, std::string* error) {
  FILE* f = std::fopen(path.c_str(), "w");
  if (f == nullptr) {
    *error = "cannot write " + path + ": " + std::strerror(errno);
    return false;
  }
  std::fprintf(f,
               "size,count,type,redop,root,oop_time_us,oop_algbw_gbs,oop_busbw_gbs,oop_wrong,"
               "ip_time_us,ip_algbw_gbs,ip_busbw_gbs,ip_wrong\n");
  for (const Row& r : rows) {
    std::fprintf(f, "%zu,%zu,%s,%s,%d", r.bytes, r.count, r.type.c_str(), r.redop.c_str(),
                 r.root);
    for (const Measurement* m : {&r.out_of_place, &r.in_place}) {
      if (m->skipped) {
        std::fputs(",,,,", f);
        continue;
      }
      std::string wrong = m->wrong < 0 ? "" : std::to_string(m->wrong);
      std::fprintf(f, ",%.6g,%.6g,%.6g,%s", m->time_us, m->algbw, m->busbw, wrong.c_str());
    }
    std::fputc('\n', f);
  }
  bool ok = std::ferror(f) == 0;
  ok = (std::fclose(f) == 0) && ok;
  if (!ok) *error = "writing " + path + " failed";
  return ok;
}

}  // namespace weftperf
