#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
#include <unistd.h>
int main(int argc, char **argv) {
  int rank; MPI_Init(&argc, &argv); MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  printf("rank %d starting\n", rank); fflush(stdout);
  if (rank == 1) { usleep(300000); printf("Traceback (most recent call last):\n"); fflush(stdout);
    fprintf(stderr, "ValueError: boom on rank %d\n", rank);
    if (argc > 1) raise(SIGKILL);
    exit(3); }
  MPI_Barrier(MPI_COMM_WORLD);
  printf("rank %d done\n", rank);
  MPI_Finalize(); return 0; }
