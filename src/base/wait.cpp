#include "base/wait.h"

#include <sched.h>
#include <time.h>
#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#endif

#include <algorithm>
#include <atomic>
#include <chrono>

#include "base/log.h"

namespace weft {
namespace {
std::atomic<uint32_t> g_spin_limit{1000};
std::atomic<uint64_t> g_progress{0};

int usable_cpus() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return 1;
  return CPU_COUNT(&set);
}

// Polls whose pauses alone take about `us` microseconds (a poll's own work adds
// 2-3x on top). A pause costs 10-40 ns depending on the CPU, so a fixed count
// spins 4x longer on some machines: with 1,000 polls an Emerald Rapids VM spun
// ~38 us before yielding, which two ranks pay per hand-off whenever the
// scheduler puts them on one core (whole runs at 40-66 us per 8-byte all-reduce
// instead of 0.4; ~100 polls cut that to ~5 us). 100-300 polls measured no
// slower than 1,000 when each rank has its core.
uint32_t polls_for_us(double us) {
  using Clock = std::chrono::steady_clock;
  constexpr int kProbe = 2000;
  auto t0 = Clock::now();
  for (int i = 0; i < kProbe; ++i) cpu_relax();
  double ns = std::chrono::duration<double, std::nano>(Clock::now() - t0).count() / kProbe;
  double polls = us * 1000.0 / (ns > 1.0 ? ns : 1.0);
  return static_cast<uint32_t>(std::clamp(polls, 20.0, 1000.0));
}
}  // namespace

uint32_t spin_limit() { return g_spin_limit.load(std::memory_order_relaxed); }

uint64_t ticks() {
#if defined(__x86_64__) || defined(__i386__)
  return __rdtsc();
#elif defined(__aarch64__)
  uint64_t v;
  asm volatile("mrs %0, cntvct_el0" : "=r"(v));
  return v;
#else
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
#endif
}

double ms_since(uint64_t earlier) {
  static const double ticks_per_ms = [] {
    const auto t0 = Clock::now();
    const uint64_t k0 = ticks();
    while (Clock::now() - t0 < std::chrono::milliseconds(5)) cpu_relax();
    const uint64_t k1 = ticks();
    const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    return std::max(1.0, static_cast<double>(k1 - k0) / ms);
  }();
  const uint64_t now = ticks();
  return now > earlier ? static_cast<double>(now - earlier) / ticks_per_ms : 0.0;
}

void note_progress() { g_progress.fetch_add(1, std::memory_order_relaxed); }
uint64_t progress_count() { return g_progress.load(std::memory_order_relaxed); }

void set_machine_ranks(int ranks) {
  int64_t forced = params::SPIN_COUNT();
  uint32_t limit = forced >= 0 ? static_cast<uint32_t>(forced) : (ranks <= usable_cpus() ? polls_for_us(1.5) : 5u);
  g_spin_limit.store(limit, std::memory_order_relaxed);
  WEFT_INFO(INIT, "waiting: %u busy polls before yielding (%d ranks on this machine, %d usable cores)", limit, ranks,
            usable_cpus());
}

}  // namespace weft
