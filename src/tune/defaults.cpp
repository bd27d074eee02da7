// The built-in tuning table, in tuning-file syntax (table.h) so that the defaults,
// what INFO prints and what scripts/calibrate writes are one format.
//
// Generic constants (the "* * 0 0" lines) stand for any algorithm and rank count;
// the per-algorithm lines were fitted by scripts/calibrate to medians of
// scripts/bench-algorithms on the development VMs (2 cores shared with other
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
# numa (shared memory between a host's NUMA domains) is guessed too, no multi-socket
# machine to measure on: shm's generic constants with one more cross-socket
# cache-line round trip per message (~0.5 us with the flag polling) and copies at
# ~60% of shm's rate, as cross-socket copies on two-socket servers commonly run.
numa * * 0 0 2.5e-06 2e-10 1e-10
# Device memory over cuda_p2p (alpha: one barrier of the ranks' streams; beta: a byte
# read from a peer's buffer; gamma: a byte reduced by the kernel). gpu: ranks sharing
# one GPU, measured on a lent H200 (bench-results/2026-11-26f-gpu-cuda-p2p.md): the
# 8-byte all-reduce, one barrier, took 0.17 ms at 2 ranks (0.5 ms at 4: the GPU takes
# the processes in turns), device copies ran at 2085 GB/s. nvl and p2p are guessed, no
# machine with several GPUs to measure on: a barrier of driver stream writes and waits
# ~10 us; NVLink ~300 GB/s a GPU (H100's 450 GB/s a direction, as achieved); PCIe 4.0
# x16 ~20 GB/s; reductions at device memory speed.
gpu * * 0 0 1.7e-04 4.8e-13 4.8e-13
nvl * * 0 0 1e-05 3.3e-12 4.8e-13
p2p * * 0 0 1e-05 5e-11 4.8e-13
# stg: GPUs of one host without peer access, through buffers in pinned host memory
# the ranks share (guessed for GPUs of their own): a barrier as p2p's; reads and the
# reductions' reads cross PCIe, ~20 GB/s. Ranks sharing one H200 measured a barrier
# as gpu's (0.17 ms; 28 us under MPS) and ~15 GB/s through the one PCIe link they
# share (bench-results/2026-11-28g-h200-windows-graphs.md).
stg * * 0 0 1e-05 5e-11 5e-11
# scripts/calibrate --split 64K,2M --generic-from 4 --from three scripts/bench-algorithms
# --repeat 2 sweeps, one per VM this project has run on (samples pooled per point):
# AMD EPYC Zen 5 (2026-11-22, bench-results/algorithms.json), Intel Xeon (2026-11-23,
# algorithms-2026-11-23.json), AMD EPYC Zen 3 (2026-11-23, algorithms-2026-11-23-zen3.json).
# A fit to one VM picks well there and poorly on the others (Zen 3 alone: 24 of 28
# points within 10% there, 9 of 28 on Zen 5); calibrate on the machine that runs the jobs.
shm * * 0 0 2.018e-06 1.227e-10 1e-10  # every algorithm at 4 ranks, 126 points
shm allreduce butterfly 2 0 3.809e-07 7.764e-11 1e-10  # 7 points, worst error 26%
shm allreduce butterfly 2 65536 0 9.064e-11 1e-10  # 3 points, worst error 28%
shm allreduce butterfly 2 2097152 0 1.25e-10 1e-10  # 4 points, worst error 35%
shm allreduce direct 2 0 2.392e-07 1.124e-10 1e-10  # 7 points, worst error 24%
shm allreduce direct 2 65536 0 9.354e-11 1e-10  # 3 points, worst error 19%
shm allreduce direct 2 2097152 0 1.281e-10 1e-10  # 4 points, worst error 34%
shm allreduce double_tree 2 0 3.937e-07 9.812e-11 1e-10  # 7 points, worst error 24%
shm allreduce double_tree 2 65536 0 5.166e-11 1e-10  # 3 points, worst error 36%
shm allreduce double_tree 2 2097152 0.0002226 0 1e-10  # 4 points, worst error 25%
shm allreduce naive 2 0 2.878e-07 9.918e-11 1e-10  # 7 points, worst error 64%
shm allreduce naive 2 65536 0 7.173e-11 1e-10  # 3 points, worst error 17%
shm allreduce naive 2 2097152 0 9.89e-11 1e-10  # 4 points, worst error 34%
shm allreduce oneshot 2 0 3e-07 7.951e-11 1e-10  # 7 points, worst error 35%
shm allreduce oneshot 2 65536 0 7.345e-11 1e-10  # 3 points, worst error 23%
shm allreduce oneshot 2 2097152 0 2.357e-10 1e-10  # 4 points, worst error 40%
shm allreduce rabenseifner 2 0 2.429e-07 9.697e-11 1e-10  # 7 points, worst error 24%
shm allreduce rabenseifner 2 65536 0 8.253e-11 1e-10  # 3 points, worst error 25%
shm allreduce rabenseifner 2 2097152 0 1.218e-10 1e-10  # 4 points, worst error 36%
shm allreduce recdoubling 2 0 2.94e-07 3.904e-11 1e-10  # 7 points, worst error 35%
shm allreduce recdoubling 2 65536 0 3.965e-11 1e-10  # 3 points, worst error 30%
shm allreduce recdoubling 2 2097152 0 1.188e-10 1e-10  # 4 points, worst error 28%
shm allreduce ring 2 0 2.768e-07 1.179e-10 1e-10  # 7 points, worst error 20%
shm allreduce ring 2 65536 0 9.787e-11 1e-10  # 3 points, worst error 26%
shm allreduce ring 2 2097152 0.0001495 0 1e-10  # 4 points, worst error 29%
shm allreduce tree 2 0 2.977e-07 9.132e-11 1e-10  # 7 points, worst error 43%
shm allreduce tree 2 65536 2.4e-06 6.573e-11 1e-10  # 3 points, worst error 12%
shm allreduce tree 2 2097152 0.0001128 0 1e-10  # 4 points, worst error 30%
shm allreduce butterfly 4 0 3.084e-06 1.707e-10 1e-10  # 7 points, worst error 17%
shm allreduce butterfly 0 0 3.084e-06 1.707e-10 1e-10  # 7 points, worst error 17%
shm allreduce butterfly 4 65536 0 2.523e-10 1e-10  # 3 points, worst error 24%
shm allreduce butterfly 0 65536 0 2.523e-10 1e-10  # 3 points, worst error 24%
shm allreduce butterfly 4 2097152 0 3.423e-10 1e-10  # 4 points, worst error 22%
shm allreduce butterfly 0 2097152 0 3.423e-10 1e-10  # 4 points, worst error 22%
shm allreduce direct 4 0 1.735e-06 1.498e-10 1e-10  # 7 points, worst error 21%
shm allreduce direct 0 0 1.735e-06 1.498e-10 1e-10  # 7 points, worst error 21%
shm allreduce direct 4 65536 0 2.151e-10 1e-10  # 3 points, worst error 5%
shm allreduce direct 0 65536 0 2.151e-10 1e-10  # 3 points, worst error 5%
shm allreduce direct 4 2097152 0 2.881e-10 1e-10  # 4 points, worst error 33%
shm allreduce direct 0 2097152 0 2.881e-10 1e-10  # 4 points, worst error 33%
shm allreduce double_tree 4 0 2.613e-06 9.263e-11 1e-10  # 7 points, worst error 13%
shm allreduce double_tree 0 0 2.613e-06 9.263e-11 1e-10  # 7 points, worst error 13%
shm allreduce double_tree 4 65536 0 9.94e-11 1e-10  # 3 points, worst error 24%
shm allreduce double_tree 0 65536 0 9.94e-11 1e-10  # 3 points, worst error 24%
shm allreduce double_tree 4 2097152 0.0004779 0 1e-10  # 4 points, worst error 33%
shm allreduce double_tree 0 2097152 0.0004779 0 1e-10  # 4 points, worst error 33%
shm allreduce naive 4 0 1.368e-06 9.994e-12 1e-10  # 7 points, worst error 9%
shm allreduce naive 0 0 1.368e-06 9.994e-12 1e-10  # 7 points, worst error 9%
shm allreduce naive 4 65536 0 4.649e-11 1e-10  # 3 points, worst error 15%
shm allreduce naive 0 65536 0 4.649e-11 1e-10  # 3 points, worst error 15%
shm allreduce naive 4 2097152 0 8.792e-11 1e-10  # 4 points, worst error 25%
shm allreduce naive 0 2097152 0 8.792e-11 1e-10  # 4 points, worst error 25%
shm allreduce oneshot 4 0 2.432e-06 2.589e-10 1e-10  # 7 points, worst error 16%
shm allreduce oneshot 0 0 2.432e-06 2.589e-10 1e-10  # 7 points, worst error 16%
shm allreduce oneshot 4 65536 1.513e-06 2.452e-10 1e-10  # 3 points, worst error 2%
shm allreduce oneshot 0 65536 1.513e-06 2.452e-10 1e-10  # 3 points, worst error 2%
shm allreduce oneshot 4 2097152 0 5.275e-10 1e-10  # 4 points, worst error 35%
shm allreduce oneshot 0 2097152 0 5.275e-10 1e-10  # 4 points, worst error 35%
shm allreduce rabenseifner 4 0 2.311e-06 1.386e-10 1e-10  # 7 points, worst error 14%
shm allreduce rabenseifner 0 0 2.311e-06 1.386e-10 1e-10  # 7 points, worst error 14%
shm allreduce rabenseifner 4 65536 0 2.206e-10 1e-10  # 3 points, worst error 29%
shm allreduce rabenseifner 0 65536 0 2.206e-10 1e-10  # 3 points, worst error 29%
shm allreduce rabenseifner 4 2097152 0 3.122e-10 1e-10  # 4 points, worst error 30%
shm allreduce rabenseifner 0 2097152 0 3.122e-10 1e-10  # 4 points, worst error 30%
shm allreduce recdoubling 4 0 4.386e-06 1.066e-10 1e-10  # 7 points, worst error 17%
shm allreduce recdoubling 0 0 4.386e-06 1.066e-10 1e-10  # 7 points, worst error 17%
shm allreduce recdoubling 4 65536 6.068e-06 3.227e-10 1e-10  # 3 points, worst error 3%
shm allreduce recdoubling 0 65536 6.068e-06 3.227e-10 1e-10  # 3 points, worst error 3%
shm allreduce recdoubling 4 2097152 0 3.377e-10 1e-10  # 4 points, worst error 13%
shm allreduce recdoubling 0 2097152 0 3.377e-10 1e-10  # 4 points, worst error 13%
shm allreduce ring 4 0 2.137e-06 2.123e-10 1e-10  # 7 points, worst error 40%
shm allreduce ring 0 0 2.137e-06 2.123e-10 1e-10  # 7 points, worst error 40%
shm allreduce ring 4 65536 0 2.339e-10 1e-10  # 3 points, worst error 9%
shm allreduce ring 0 65536 0 2.339e-10 1e-10  # 3 points, worst error 9%
shm allreduce ring 4 2097152 0.0003693 0 1e-10  # 4 points, worst error 16%
shm allreduce ring 0 2097152 0.0003693 0 1e-10  # 4 points, worst error 16%
shm allreduce tree 4 0 2.953e-06 3.662e-11 1e-10  # 7 points, worst error 7%
shm allreduce tree 0 0 2.953e-06 3.662e-11 1e-10  # 7 points, worst error 7%
shm allreduce tree 4 65536 3.606e-06 1.195e-10 1e-10  # 3 points, worst error 8%
shm allreduce tree 0 65536 3.606e-06 1.195e-10 1e-10  # 3 points, worst error 8%
shm allreduce tree 4 2097152 0.0001474 0 1e-10  # 4 points, worst error 14%
shm allreduce tree 0 2097152 0.0001474 0 1e-10  # 4 points, worst error 14%
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
