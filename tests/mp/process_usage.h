// What a process holds that a leak would grow, for the multi-process tests that
// check for leaks (tests/engine, tests/soak).
#pragma once

#include <dirent.h>

#include <cstring>

namespace weft_test {

// Open file descriptors of this process (the directory's own entries included:
// compare counts, not absolute values).
inline int count_fds() {
  int n = 0;
  if (DIR* d = opendir("/proc/self/fd")) {
    while (readdir(d) != nullptr) ++n;
    closedir(d);
  }
  return n;
}

// weft's shared-memory segments in /dev/shm, of every job on the machine.
inline int count_shm_segments() {
  int n = 0;
  if (DIR* d = opendir("/dev/shm")) {
    while (dirent* e = readdir(d)) n += std::strncmp(e->d_name, "weft-", 5) == 0 ? 1 : 0;
    closedir(d);
  }
  return n;
}

}  // namespace weft_test
