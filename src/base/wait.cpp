#include "base/wait.h"

#include <sched.h>

#include <atomic>

namespace weft {
namespace {
std::atomic<uint32_t> g_spin_limit{1000};

int usable_cpus() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return 1;
  return CPU_COUNT(&set);
}
}  // namespace

uint32_t spin_limit() { return g_spin_limit.load(std::memory_order_relaxed); }

void set_local_ranks(int local_ranks) {
  int64_t forced = params::SPIN_COUNT();
  uint32_t limit = forced >= 0 ? static_cast<uint32_t>(forced)
                               : (local_ranks <= usable_cpus() ? 1000u : 20u);
  g_spin_limit.store(limit, std::memory_order_relaxed);
}

}  // namespace weft
