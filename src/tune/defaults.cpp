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
shm * * 0 0 1.844e-06 7.871e-11 1e-10  # every algorithm at 4 ranks, 126 points
# scripts/calibrate --split 64K,2M --generic-from 4 pooling three
# scripts/bench-algorithms --repeat 2 sweeps taken while the shared machine was
# lightly loaded or idle (2026-11-22, load 0.6-5 on 2 cores; medians of 12
# samples). Sweeps under heavy load (8-15) rank the algorithms differently at small
# sizes -- scheduling, not the algorithms, decides there -- so they were left out;
# calibrate on the machine as it will be used.
shm allreduce butterfly 2 0 2.066e-07 0 1e-10  # 7 points, worst error 59%
shm allreduce butterfly 2 65536 0 1.832e-12 1e-10  # 3 points, worst error 60%
shm allreduce butterfly 2 2097152 0 1.365e-10 1e-10  # 4 points, worst error 29%
shm allreduce direct 2 0 2.759e-07 1.499e-11 1e-10  # 7 points, worst error 28%
shm allreduce direct 2 65536 0 2.271e-11 1e-10  # 3 points, worst error 64%
shm allreduce direct 2 2097152 0 1.842e-10 1e-10  # 4 points, worst error 22%
shm allreduce double_tree 2 0 1.767e-07 0 1e-10  # 7 points, worst error 92%
shm allreduce double_tree 2 65536 0 0 1e-10  # 3 points, worst error 118%
shm allreduce double_tree 2 2097152 0.0002129 0 1e-10  # 4 points, worst error 31%
shm allreduce naive 2 0 3.315e-07 0 1e-10  # 7 points, worst error 59%
shm allreduce naive 2 65536 3.809e-06 1.019e-10 1e-10  # 3 points, worst error 8%
shm allreduce naive 2 2097152 0 1.279e-10 1e-10  # 4 points, worst error 22%
shm allreduce oneshot 2 0 2.372e-07 0 1e-10  # 7 points, worst error 71%
shm allreduce oneshot 2 65536 0 4.785e-11 1e-10  # 3 points, worst error 17%
shm allreduce oneshot 2 2097152 0 1.355e-10 1e-10  # 4 points, worst error 43%
shm allreduce rabenseifner 2 0 2.805e-07 1.36e-11 1e-10  # 7 points, worst error 26%
shm allreduce rabenseifner 2 65536 0 2.058e-11 1e-10  # 3 points, worst error 58%
shm allreduce rabenseifner 2 2097152 0 1.373e-10 1e-10  # 4 points, worst error 31%
shm allreduce recdoubling 2 0 4.978e-07 0 1e-10  # 7 points, worst error 44%
shm allreduce recdoubling 2 65536 1.276e-05 5.184e-11 1e-10  # 3 points, worst error 13%
shm allreduce recdoubling 2 2097152 0 1.477e-10 1e-10  # 4 points, worst error 35%
shm allreduce ring 2 0 1.646e-05 1.319e-11 1e-10  # 7 points, worst error 2%
shm allreduce ring 2 65536 1.281e-05 7.186e-11 1e-10  # 3 points, worst error 10%
shm allreduce ring 2 2097152 0.0002046 0 1e-10  # 4 points, worst error 27%
shm allreduce tree 2 0 1.564e-07 0 1e-10  # 7 points, worst error 88%
shm allreduce tree 2 65536 0 7.71e-11 1e-10  # 3 points, worst error 23%
shm allreduce tree 2 2097152 0.0001435 0 1e-10  # 4 points, worst error 17%
shm allreduce butterfly 4 0 3.427e-06 0 1e-10  # 7 points, worst error 22%
shm allreduce butterfly 0 0 3.427e-06 0 1e-10  # 7 points, worst error 22%
shm allreduce butterfly 4 65536 0 1.226e-10 1e-10  # 3 points, worst error 43%
shm allreduce butterfly 0 65536 0 1.226e-10 1e-10  # 3 points, worst error 43%
shm allreduce butterfly 4 2097152 0 4.401e-10 1e-10  # 4 points, worst error 18%
shm allreduce butterfly 0 2097152 0 4.401e-10 1e-10  # 4 points, worst error 18%
shm allreduce direct 4 0 1.678e-06 4.24e-11 1e-10  # 7 points, worst error 24%
shm allreduce direct 0 0 1.678e-06 4.24e-11 1e-10  # 7 points, worst error 24%
shm allreduce direct 4 65536 0 9.574e-11 1e-10  # 3 points, worst error 47%
shm allreduce direct 0 65536 0 9.574e-11 1e-10  # 3 points, worst error 47%
shm allreduce direct 4 2097152 0 3.125e-10 1e-10  # 4 points, worst error 30%
shm allreduce direct 0 2097152 0 3.125e-10 1e-10  # 4 points, worst error 30%
shm allreduce double_tree 4 0 2.808e-06 1.742e-11 1e-10  # 7 points, worst error 18%
shm allreduce double_tree 0 0 2.808e-06 1.742e-11 1e-10  # 7 points, worst error 18%
shm allreduce double_tree 4 65536 0 6.045e-11 1e-10  # 3 points, worst error 45%
shm allreduce double_tree 0 65536 0 6.045e-11 1e-10  # 3 points, worst error 45%
shm allreduce double_tree 4 2097152 0.0005298 0 1e-10  # 4 points, worst error 26%
shm allreduce double_tree 0 2097152 0.0005298 0 1e-10  # 4 points, worst error 26%
shm allreduce naive 4 0 1.307e-06 0 1e-10  # 7 points, worst error 39%
shm allreduce naive 0 0 1.307e-06 0 1e-10  # 7 points, worst error 39%
shm allreduce naive 4 65536 0 4.673e-11 1e-10  # 3 points, worst error 9%
shm allreduce naive 0 65536 0 4.673e-11 1e-10  # 3 points, worst error 9%
shm allreduce naive 4 2097152 0 9.991e-11 1e-10  # 4 points, worst error 14%
shm allreduce naive 0 2097152 0 9.991e-11 1e-10  # 4 points, worst error 14%
shm allreduce oneshot 4 0 1.792e-06 4.312e-11 1e-10  # 7 points, worst error 18%
shm allreduce oneshot 0 0 1.792e-06 4.312e-11 1e-10  # 7 points, worst error 18%
shm allreduce oneshot 4 65536 3.197e-06 2.266e-10 1e-10  # 3 points, worst error 4%
shm allreduce oneshot 0 65536 3.197e-06 2.266e-10 1e-10  # 3 points, worst error 4%
shm allreduce oneshot 4 2097152 0 6.077e-10 1e-10  # 4 points, worst error 21%
shm allreduce oneshot 0 2097152 0 6.077e-10 1e-10  # 4 points, worst error 21%
shm allreduce rabenseifner 4 0 3.11e-06 4.203e-11 1e-10  # 7 points, worst error 20%
shm allreduce rabenseifner 0 0 3.11e-06 4.203e-11 1e-10  # 7 points, worst error 20%
shm allreduce rabenseifner 4 65536 0 1.436e-10 1e-10  # 3 points, worst error 29%
shm allreduce rabenseifner 0 65536 0 1.436e-10 1e-10  # 3 points, worst error 29%
shm allreduce rabenseifner 4 2097152 0 3.217e-10 1e-10  # 4 points, worst error 25%
shm allreduce rabenseifner 0 2097152 0 3.217e-10 1e-10  # 4 points, worst error 25%
shm allreduce recdoubling 4 0 3.306e-06 0 1e-10  # 7 points, worst error 26%
shm allreduce recdoubling 0 0 3.306e-06 0 1e-10  # 7 points, worst error 26%
shm allreduce recdoubling 4 65536 1.857e-05 1.094e-10 1e-10  # 3 points, worst error 4%
shm allreduce recdoubling 0 65536 1.857e-05 1.094e-10 1e-10  # 3 points, worst error 4%
shm allreduce recdoubling 4 2097152 0 2.531e-10 1e-10  # 4 points, worst error 6%
shm allreduce recdoubling 0 2097152 0 2.531e-10 1e-10  # 4 points, worst error 6%
shm allreduce ring 4 0 2.337e-06 2.178e-10 1e-10  # 7 points, worst error 35%
shm allreduce ring 0 0 2.337e-06 2.178e-10 1e-10  # 7 points, worst error 35%
shm allreduce ring 4 65536 0 1.642e-10 1e-10  # 3 points, worst error 48%
shm allreduce ring 0 65536 0 1.642e-10 1e-10  # 3 points, worst error 48%
shm allreduce ring 4 2097152 0.0005523 0 1e-10  # 4 points, worst error 12%
shm allreduce ring 0 2097152 0.0005523 0 1e-10  # 4 points, worst error 12%
shm allreduce tree 4 0 2.135e-06 0 1e-10  # 7 points, worst error 24%
shm allreduce tree 0 0 2.135e-06 0 1e-10  # 7 points, worst error 24%
shm allreduce tree 4 65536 4.339e-08 1.105e-10 1e-10  # 3 points, worst error 12%
shm allreduce tree 0 65536 4.339e-08 1.105e-10 1e-10  # 3 points, worst error 12%
shm allreduce tree 4 2097152 0 1.71e-10 1e-10  # 4 points, worst error 11%
shm allreduce tree 0 2097152 0 1.71e-10 1e-10  # 4 points, worst error 11%
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
