"""An MPI smoke test for the byo images: every rank adds rank+1 in an allreduce, once as one number and once as 4 MB
(large messages take each MPI's shared-memory path between ranks of one pod); rank 0 prints one line.

Usage: python allreduce.py N   (N: the world size the launcher was asked for)
"""

import sys
from array import array

from mpi4py import MPI

LARGE = 1 << 19  # doubles: 4 MB


def main() -> int:
    if len(sys.argv) != 2 or not sys.argv[1].isdigit():
        print("usage: allreduce.py EXPECTED_WORLD_SIZE", file=sys.stderr)
        return 2
    expected = int(sys.argv[1])
    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    if size != expected:
        print(f"allreduce FAILED: rank {rank} sees world size {size}, expected {expected}", file=sys.stderr)
        return 1
    total = comm.allreduce(rank + 1, op=MPI.SUM)
    sent, received = array("d", [rank + 1.0]) * LARGE, array("d", [0.0]) * LARGE
    comm.Allreduce(sent, received, op=MPI.SUM)
    want = size * (size + 1) // 2
    if total != want or received[0] != want or received[-1] != want:
        print(f"allreduce FAILED: rank {rank} got {total} and {received[0]}..{received[-1]}, expected {want}",
              file=sys.stderr)
        return 1
    if rank == 0:
        implementation = MPI.Get_library_version().replace("\0", "").strip().splitlines()[0].strip()
        host = MPI.Get_processor_name()
        print(f"allreduce ok: size={size} sum={total} rank0={host} implementation={implementation}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
