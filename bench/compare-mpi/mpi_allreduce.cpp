// The peer side of bench/compare-mpi: MPI_Allreduce (fp32 sum) timed the way
// weft-perf times weftAllReduce, so both print comparable rows.
//   mpi-allreduce BYTES [ITERS] [WARMUP]  -> "bytes time_us busbw_GBps" on rank 0
#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, n;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  if (argc < 2) {
    if (rank == 0) std::fprintf(stderr, "usage: mpi-allreduce BYTES [ITERS] [WARMUP]\n");
    MPI_Finalize();
    return 2;
  }
  size_t bytes = std::strtoull(argv[1], nullptr, 0);
  int iters = argc > 2 ? std::atoi(argv[2]) : 20;
  int warmup = argc > 3 ? std::atoi(argv[3]) : 5;
  size_t count = bytes / sizeof(float);
  std::vector<float> buf(count, 1.0f);
  for (int i = 0; i < warmup; ++i)
    MPI_Allreduce(MPI_IN_PLACE, buf.data(), static_cast<int>(count), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  MPI_Barrier(MPI_COMM_WORLD);
  double t0 = MPI_Wtime();
  for (int i = 0; i < iters; ++i)
    MPI_Allreduce(MPI_IN_PLACE, buf.data(), static_cast<int>(count), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  double local = (MPI_Wtime() - t0) / iters, slowest = 0;
  MPI_Reduce(&local, &slowest, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
  if (rank == 0) {
    double busbw = static_cast<double>(bytes) / slowest / 1e9 * 2.0 * (n - 1) / n;
    std::printf("%zu %.3f %.3f\n", bytes, slowest * 1e6, busbw);
  }
  MPI_Finalize();
  return 0;
}
