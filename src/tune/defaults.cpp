// The built-in tuning table, in tuning-file syntax (table.h) so that the defaults,
// what INFO prints and what scripts/calibrate writes are one format.
//
// Generic constants (the "* * 0 0" lines) stand for any algorithm and rank count;
// the per-algorithm lines were fitted by scripts/calibrate to medians of
// scripts/bench-algorithms on the development machine (2 cores shared with other
// work; fp32 sum; WEFT_CHUNK_BYTES 1 MiB), for 2 ranks and for 4 ranks. The 4-rank
// fit also serves every other rank count (nranks 0): on 2 cores, 3 or more ranks are
// oversubscribed just like 4. Size segments follow the shared-memory transport:
// eager FIFO up to 64 KiB, in-place reads above, pipelined 1 MiB slices above 1 MiB.
#include <cstdio>
#include <cstdlib>

#include "tune/table.h"

namespace weft::tune {
namespace {

constexpr const char* kDefaults = R"(
# Generic constants: net is TCP guessed (~25 us per message, ~1 GB/s; no multi-host
# machine to measure on); shm is one fit over every all-reduce algorithm at 4 ranks,
# so an algorithm without its own lines is judged on the measured scale.
net * * 0 0 2.5e-05 1e-09 1e-10
shm * * 0 0 1.975e-06 8.473e-11 1e-10  # every algorithm at 4 ranks, 126 points
# scripts/calibrate --split 64K,2M --generic-from 4 pooling two
# scripts/bench-algorithms --repeat 2 sweeps taken while the shared machine was
# lightly loaded (2026-11-22, load 4-5 on 2 cores; medians of 8 samples). Sweeps
# under heavy load (8-15) rank the algorithms differently at small sizes --
# scheduling, not the algorithms, decides there -- so they were left out;
# calibrate on the machine as it will be used.
shm allreduce butterfly 2 0 3.703e-07 4.83e-12 1e-10  # 7 points, worst error 67%
shm allreduce butterfly 2 65536 0 2.533e-11 1e-10  # 3 points, worst error 63%
shm allreduce butterfly 2 2097152 0 2.453e-10 1e-10  # 4 points, worst error 26%
shm allreduce direct 2 0 4.019e-07 4.086e-11 1e-10  # 7 points, worst error 33%
shm allreduce direct 2 65536 0 4.157e-11 1e-10  # 3 points, worst error 85%
shm allreduce direct 2 2097152 0 2.435e-10 1e-10  # 4 points, worst error 23%
shm allreduce double_tree 2 0 1.712e-07 0 1e-10  # 7 points, worst error 91%
shm allreduce double_tree 2 65536 0 0 1e-10  # 3 points, worst error 118%
shm allreduce double_tree 2 2097152 0.0002673 0 1e-10  # 4 points, worst error 27%
shm allreduce naive 2 0 4.755e-07 1.504e-11 1e-10  # 7 points, worst error 46%
shm allreduce naive 2 65536 4.758e-06 1.246e-10 1e-10  # 3 points, worst error 1%
shm allreduce naive 2 2097152 0 1.484e-10 1e-10  # 4 points, worst error 12%
shm allreduce oneshot 2 0 3.705e-07 0 1e-10  # 7 points, worst error 46%
shm allreduce oneshot 2 65536 0 6.506e-11 1e-10  # 3 points, worst error 28%
shm allreduce oneshot 2 2097152 0 2.391e-10 1e-10  # 4 points, worst error 32%
shm allreduce rabenseifner 2 0 4.069e-07 4.108e-11 1e-10  # 7 points, worst error 33%
shm allreduce rabenseifner 2 65536 0 4.667e-11 1e-10  # 3 points, worst error 52%
shm allreduce rabenseifner 2 2097152 0 1.903e-10 1e-10  # 4 points, worst error 19%
shm allreduce recdoubling 2 0 1.633e-05 0 1e-10  # 7 points, worst error 8%
shm allreduce recdoubling 2 65536 5.648e-05 9.713e-11 1e-10  # 3 points, worst error 13%
shm allreduce recdoubling 2 2097152 0 2.587e-10 1e-10  # 4 points, worst error 28%
shm allreduce ring 2 0 3.368e-05 0 1e-10  # 7 points, worst error 3%
shm allreduce ring 2 65536 2.881e-05 1.511e-10 1e-10  # 3 points, worst error 31%
shm allreduce ring 2 2097152 0.00027 0 1e-10  # 4 points, worst error 27%
shm allreduce tree 2 0 3.136e-07 0 1e-10  # 7 points, worst error 67%
shm allreduce tree 2 65536 0 1.118e-10 1e-10  # 3 points, worst error 17%
shm allreduce tree 2 2097152 0.0001926 0 1e-10  # 4 points, worst error 6%
shm allreduce butterfly 4 0 3.608e-06 0 1e-10  # 7 points, worst error 20%
shm allreduce butterfly 0 0 3.608e-06 0 1e-10  # 7 points, worst error 20%
shm allreduce butterfly 4 65536 0 1.66e-10 1e-10  # 3 points, worst error 60%
shm allreduce butterfly 0 65536 0 1.66e-10 1e-10  # 3 points, worst error 60%
shm allreduce butterfly 4 2097152 0.0001545 5.19e-10 1e-10  # 4 points, worst error 23%
shm allreduce butterfly 0 2097152 0.0001545 5.19e-10 1e-10  # 4 points, worst error 23%
shm allreduce direct 4 0 1.789e-06 7.132e-11 1e-10  # 7 points, worst error 20%
shm allreduce direct 0 0 1.789e-06 7.132e-11 1e-10  # 7 points, worst error 20%
shm allreduce direct 4 65536 0 1.207e-10 1e-10  # 3 points, worst error 71%
shm allreduce direct 0 65536 0 1.207e-10 1e-10  # 3 points, worst error 71%
shm allreduce direct 4 2097152 0 4.725e-10 1e-10  # 4 points, worst error 16%
shm allreduce direct 0 2097152 0 4.725e-10 1e-10  # 4 points, worst error 16%
shm allreduce double_tree 4 0 2.343e-06 1.823e-11 1e-10  # 7 points, worst error 10%
shm allreduce double_tree 0 0 2.343e-06 1.823e-11 1e-10  # 7 points, worst error 10%
shm allreduce double_tree 4 65536 0 5.652e-11 1e-10  # 3 points, worst error 58%
shm allreduce double_tree 0 65536 0 5.652e-11 1e-10  # 3 points, worst error 58%
shm allreduce double_tree 4 2097152 0.0006983 0 1e-10  # 4 points, worst error 45%
shm allreduce double_tree 0 2097152 0.0006983 0 1e-10  # 4 points, worst error 45%
shm allreduce naive 4 0 1.449e-06 0 1e-10  # 7 points, worst error 39%
shm allreduce naive 0 0 1.449e-06 0 1e-10  # 7 points, worst error 39%
shm allreduce naive 4 65536 0 5.921e-11 1e-10  # 3 points, worst error 10%
shm allreduce naive 0 65536 0 5.921e-11 1e-10  # 3 points, worst error 10%
shm allreduce naive 4 2097152 0 1.147e-10 1e-10  # 4 points, worst error 18%
shm allreduce naive 0 2097152 0 1.147e-10 1e-10  # 4 points, worst error 18%
shm allreduce oneshot 4 0 1.856e-06 7.323e-11 1e-10  # 7 points, worst error 39%
shm allreduce oneshot 0 0 1.856e-06 7.323e-11 1e-10  # 7 points, worst error 39%
shm allreduce oneshot 4 65536 0 3.774e-10 1e-10  # 3 points, worst error 18%
shm allreduce oneshot 0 65536 0 3.774e-10 1e-10  # 3 points, worst error 18%
shm allreduce oneshot 4 2097152 0 8.108e-10 1e-10  # 4 points, worst error 11%
shm allreduce oneshot 0 2097152 0 8.108e-10 1e-10  # 4 points, worst error 11%
shm allreduce rabenseifner 4 0 3.318e-06 3.68e-11 1e-10  # 7 points, worst error 28%
shm allreduce rabenseifner 0 0 3.318e-06 3.68e-11 1e-10  # 7 points, worst error 28%
shm allreduce rabenseifner 4 65536 0 1.636e-10 1e-10  # 3 points, worst error 32%
shm allreduce rabenseifner 0 65536 0 1.636e-10 1e-10  # 3 points, worst error 32%
shm allreduce rabenseifner 4 2097152 0 4.806e-10 1e-10  # 4 points, worst error 16%
shm allreduce rabenseifner 0 2097152 0 4.806e-10 1e-10  # 4 points, worst error 16%
shm allreduce recdoubling 4 0 3.944e-06 0 1e-10  # 7 points, worst error 14%
shm allreduce recdoubling 0 0 3.944e-06 0 1e-10  # 7 points, worst error 14%
shm allreduce recdoubling 4 65536 5.748e-07 2.532e-10 1e-10  # 3 points, worst error 22%
shm allreduce recdoubling 0 65536 5.748e-07 2.532e-10 1e-10  # 3 points, worst error 22%
shm allreduce recdoubling 4 2097152 0 4.212e-10 1e-10  # 4 points, worst error 42%
shm allreduce recdoubling 0 2097152 0 4.212e-10 1e-10  # 4 points, worst error 42%
shm allreduce ring 4 0 2.7e-06 2.183e-10 1e-10  # 7 points, worst error 34%
shm allreduce ring 0 0 2.7e-06 2.183e-10 1e-10  # 7 points, worst error 34%
shm allreduce ring 4 65536 0 2.128e-10 1e-10  # 3 points, worst error 42%
shm allreduce ring 0 65536 0 2.128e-10 1e-10  # 3 points, worst error 42%
shm allreduce ring 4 2097152 0.000663 0 1e-10  # 4 points, worst error 10%
shm allreduce ring 0 2097152 0.000663 0 1e-10  # 4 points, worst error 10%
shm allreduce tree 4 0 2.27e-06 0 1e-10  # 7 points, worst error 28%
shm allreduce tree 0 0 2.27e-06 0 1e-10  # 7 points, worst error 28%
shm allreduce tree 4 65536 0 1.329e-10 1e-10  # 3 points, worst error 10%
shm allreduce tree 0 65536 0 1.329e-10 1e-10  # 3 points, worst error 10%
shm allreduce tree 4 2097152 0 2.386e-10 1e-10  # 4 points, worst error 18%
shm allreduce tree 0 2097152 0 2.386e-10 1e-10  # 4 points, worst error 18%
)";

}  // namespace

Table default_table() {
  Table t;
  Status st = parse_tuning_text(kDefaults, "built-in defaults", &t);
  if (!st.ok()) {  // a broken literal above: caught by the unit tests, never by users
    std::fprintf(stderr, "weft: %s\n", st.message().c_str());
    std::abort();
  }
  return t;
}

}  // namespace weft::tune
