#include "train/dist/trace.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "weft/weft.hpp"

namespace weft::train {

namespace {

std::string serialize(const std::vector<TraceEvent>& events) {
  std::string s;
  char line[64];
  for (const TraceEvent& e : events) {
    std::snprintf(line, sizeof line, "%d\t%.9f\t%.9f\t", e.track, e.begin, e.end);
    s += line + e.name + "\n";
  }
  return s;
}

std::string jsonString(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) >= 0x20) out += c;
  }
  return out + "\"";
}

}  // namespace

std::vector<std::vector<TraceEvent>> gatherTraceEvents(weftComm_t comm, const std::vector<TraceEvent>& events) {
  int rank = 0, size = 1;
  if (comm) {
    weft::check(weftCommUserRank(comm, &rank), comm);
    weft::check(weftCommCount(comm, &size), comm);
  }
  // Every rank's text, padded to the longest, gathered to all (weft has no gatherv).
  std::string mine = serialize(events);
  std::vector<uint64_t> lengths(size_t(size), 0);
  lengths[size_t(rank)] = mine.size();
  if (comm) weft::check(weftAllReduce(lengths.data(), lengths.data(), lengths.size(), weftUint64, weftSum, comm, nullptr), comm);
  const size_t longest = std::max<size_t>(1, *std::max_element(lengths.begin(), lengths.end()));
  mine.resize(longest, '\0');
  std::string all(longest * size_t(size), '\0');
  if (comm) weft::check(weftAllGather(mine.data(), all.data(), longest, weftUint8, comm, nullptr), comm);
  else all = mine;
  std::vector<std::vector<TraceEvent>> out;
  if (rank != 0) return out;
  out.resize(size_t(size));
  for (int r = 0; r < size; r++) {
    std::istringstream in(all.substr(size_t(r) * longest, lengths[size_t(r)]));
    std::string line;
    while (std::getline(in, line)) {
      TraceEvent e;
      std::istringstream f(line);
      std::string cell;
      std::getline(f, cell, '\t'); e.track = std::stoi(cell);
      std::getline(f, cell, '\t'); e.begin = std::stod(cell);
      std::getline(f, cell, '\t'); e.end = std::stod(cell);
      std::getline(f, e.name);
      out[size_t(r)].push_back(e);
    }
  }
  return out;
}

void writeChromeTrace(weftComm_t comm, const std::vector<TraceEvent>& events, const std::string& path,
                      const std::vector<std::string>& tracks) {
  const std::vector<std::vector<TraceEvent>> all = gatherTraceEvents(comm, events);
  if (all.empty()) return;  // not rank 0
  const int size = int(all.size());
  struct Row {
    int rank, track;
    double begin, end;
    std::string name;
  };
  std::vector<Row> rows;
  for (int r = 0; r < size; r++)
    for (const TraceEvent& e : all[size_t(r)]) rows.push_back({r, e.track, e.begin, e.end, e.name});
  double t0 = 0;
  for (size_t i = 0; i < rows.size(); i++) t0 = i == 0 ? rows[i].begin : std::min(t0, rows[i].begin);
  std::ofstream out(path, std::ios::trunc);
  if (!out) throw std::runtime_error("cannot write " + path);
  out << "{\"displayTimeUnit\": \"ms\", \"traceEvents\": [\n";
  bool first = true;
  auto sep = [&] { out << (first ? "" : ",\n"); first = false; };
  for (int r = 0; r < size; r++) {
    sep();
    out << "{\"ph\": \"M\", \"name\": \"process_name\", \"pid\": " << r << ", \"args\": {\"name\": \"rank " << r
        << "\"}}";
    for (size_t t = 0; t < tracks.size(); t++) {
      sep();
      out << "{\"ph\": \"M\", \"name\": \"thread_name\", \"pid\": " << r << ", \"tid\": " << t
          << ", \"args\": {\"name\": " << jsonString(tracks[t]) << "}}";
    }
  }
  char num[64];
  for (const Row& row : rows) {
    sep();
    std::snprintf(num, sizeof num, "%.1f, \"dur\": %.1f", (row.begin - t0) * 1e6, (row.end - row.begin) * 1e6);
    out << "{\"ph\": \"X\", \"name\": " << jsonString(row.name) << ", \"pid\": " << row.rank << ", \"tid\": "
        << row.track << ", \"ts\": " << num << "}";
  }
  out << "\n]}\n";
  if (!out) throw std::runtime_error("cannot write " + path);
}

}  // namespace weft::train
