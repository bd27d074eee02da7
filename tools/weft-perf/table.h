// nccl-tests' output: the column header, one row per size (out-of-place then
// in-place), the footer; and the same rows as JSON.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace weftperf {

struct Measurement {
  double time_us = 0;  // per call, max over ranks
  double algbw = 0;    // GB/s: bytes / time
  double busbw = 0;    // GB/s: algbw * the collective's bus factor
  int64_t wrong = -1;  // summed over ranks; -1: not checked (-c 0)
  // Not run: the collective has no such form (in-place all-to-all, send/recv).
  // The table prints N/A in every column, JSON null, CSV empty fields.
  bool skipped = false;
};

struct Row {
  size_t bytes = 0;
  size_t count = 0;
  std::string type;
  std::string redop;
  int root = -1;
  Measurement out_of_place;
  Measurement in_place;
};

void PrintColumnHeader(FILE* out);
void PrintRow(FILE* out, const Row& row);
// "# Out of bounds values : 0 OK" and "# Avg bus bandwidth    : X".
void PrintFooter(FILE* out, int64_t wrong_total, double avg_busbw);

struct JsonRun {
  std::string collective;
  int nranks = 0;
  int iters = 0;
  int warmup = 0;
  bool check = false;
  std::string algo;
  bool memalloc = false;
  int64_t wrong_total = 0;
  double avg_busbw = 0;
};
bool WriteJson(const std::string& path, const JsonRun& run, const std::vector<Row>& rows,
               std::string* error);
// One header line, then one line per row: the table's columns, flat.
bool WriteCsv(const std::string& path, const std::vector<Row>& rows, std::string* error);

}  // namespace weftperf
