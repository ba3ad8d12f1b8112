/* MPI_Allreduce peer of bench/allreduce_bench: N processes on this host (Open MPI's shared
 * memory transport), float32 sums of 4 KB ... 64 MB per rank, back to back; rank 0 prints
 * latency, algbw and busbw = algbw * 2(n-1)/n per size, the median of 3 windows.
 *
 *   mpicc -O2 -o /tmp/mpi_allreduce bench/peers/mpi_allreduce.c
 *   mpirun --allow-run-as-root --oversubscribe --bind-to none -np 2 /tmp/mpi_allreduce
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmp(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return x < y ? -1 : x > y;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, n;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  long max_bytes = 64L << 20;
  float* buf = calloc(max_bytes / 4, sizeof(float));
  if (rank == 0) {
    printf("# MPI_Allreduce, %d processes\n", n);
    printf("%12s %8s %12s %12s %12s\n", "bytes", "iters", "latency_us", "algbw_GB/s", "busbw_GB/s");
  }
  for (long bytes = 4096; bytes <= max_bytes; bytes *= 2) {
    const int count = (int)(bytes / 4);
    const double guess = 5e-6 + (double)bytes * n / 5e9;
    int iters = (int)(0.1 / guess);
    if (iters < 3) iters = 3;
    for (int i = 0; i < (iters < 10 ? iters : 10); ++i) {
      MPI_Allreduce(MPI_IN_PLACE, buf, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    }
    double t[3];
    for (int rep = 0; rep < 3; ++rep) {
      MPI_Barrier(MPI_COMM_WORLD);
      const double start = MPI_Wtime();
      for (int i = 0; i < iters; ++i) {
        MPI_Allreduce(MPI_IN_PLACE, buf, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      }
      t[rep] = (MPI_Wtime() - start) / iters;
    }
    qsort(t, 3, sizeof(double), cmp);
    if (rank == 0) {
      const double algbw = bytes / t[1];
      printf("%12ld %8d %12.2f %12.3f %12.3f\n", bytes, iters, t[1] * 1e6, algbw / 1e9,
             algbw * 2.0 * (n - 1) / n / 1e9);
      fflush(stdout);
    }
  }
  free(buf);
  MPI_Finalize();
  return 0;
}
