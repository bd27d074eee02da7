// What the multi-process checks share: a tally of weft calls that failed
// (printed as they fail, with weft's message), and their --counts argument.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "weft/weft.h"

namespace weft_test {

struct CallLog {
  weftComm_t comm = nullptr;
  int rank = 0, n = 1;
  int64_t calls = 0, wrong = 0, failures = 0;

  bool ok(weftResult_t rc, const std::string& what) {
    ++calls;
    if (rc == weftSuccess) return true;
    std::fprintf(stderr, "rank %d: %s failed: %s\n", rank, what.c_str(), weftGetLastError(comm));
    ++failures;
    return false;
  }
};

// weftCommInitFromEnv into log->comm, with its rank and size; false (printed) on failure.
inline bool init_from_env(CallLog* log) {
  if (weftCommInitFromEnv(&log->comm, nullptr) != weftSuccess) {
    std::fprintf(stderr, "init failed: %s\n", weftGetLastError(nullptr));
    return false;
  }
  weftCommUserRank(log->comm, &log->rank);
  weftCommCount(log->comm, &log->n);
  return true;
}

// "--counts a,b,..." replaces *counts; anything else prints the usage and
// returns false.
inline bool parse_counts(int argc, char** argv, std::vector<size_t>* counts) {
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--counts") == 0 && i + 1 < argc) {
      counts->clear();
      for (char* p = argv[++i]; *p != '\0';) {
        counts->push_back(std::strtoull(p, &p, 0));
        if (*p == ',') ++p;
      }
    } else {
      std::fprintf(stderr, "usage: %s [--counts a,b,...]\n", argv[0]);
      return false;
    }
  }
  return true;
}

}  // namespace weft_test
