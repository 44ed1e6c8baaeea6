"""A parameter server inside the job, over MPI point-to-point (mpi4py on the job's own MPI world).

Rank 0 holds the centre weights as one flat float32 vector and answers the other ranks until each has said it is
done with the epoch: a PULL gets the current centre, a PUSH adds the sent vector to it (dist-keras's asynchronous
parameter servers all add what they receive). Workers never wait for each other, only for their own request. The
server polls with a short sleep instead of a blocking receive, which in Open MPI would spin a core the workers need.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

PULL, PUSH, DONE, CENTRE = 1, 2, 3, 4
SERVER = 0
POLL_SECONDS = 0.0005


def flatten(arrays: Sequence[np.ndarray]) -> np.ndarray:
    """The arrays as one float32 vector."""
    return np.concatenate([np.asarray(array, np.float32).ravel() for array in arrays])


def unflatten(vector: np.ndarray, shapes: Sequence[tuple[int, ...]]) -> list[np.ndarray]:
    """The inverse of `flatten` for arrays of these shapes."""
    sizes = [int(np.prod(shape)) for shape in shapes]
    if sum(sizes) != vector.size:
        raise ValueError(f"vector of {vector.size} values does not hold arrays of shapes {list(shapes)}")
    bounds = np.cumsum([0, *sizes])
    return [vector[start:stop].reshape(shape) for start, stop, shape in zip(bounds[:-1], bounds[1:], shapes,
                                                                             strict=True)]


@dataclass
class ServerStats:
    """What the server did in one epoch."""

    pulls: int = 0
    pushes: int = 0


def communicator():  # -> MPI.Comm (mpi4py has no type stubs here)
    """A private duplicate of the job's MPI world, so our messages never meet Horovod's (collective: every rank)."""
    from mpi4py import MPI

    return MPI.COMM_WORLD.Dup()


def serve(comm, centre: np.ndarray, workers: int) -> ServerStats:
    """Rank 0: answer PULL and PUSH until `workers` ranks have sent DONE; `centre` is updated in place."""
    from mpi4py import MPI

    stats, done, incoming, status = ServerStats(), 0, np.empty_like(centre), MPI.Status()
    empty = np.empty(0, np.float32)
    while done < workers:
        if not comm.Iprobe(source=MPI.ANY_SOURCE, tag=MPI.ANY_TAG, status=status):
            time.sleep(POLL_SECONDS)
            continue
        source, tag = status.Get_source(), status.Get_tag()
        if tag == PUSH:
            comm.Recv([incoming, MPI.FLOAT], source=source, tag=PUSH)
            centre += incoming
            stats.pushes += 1
            continue
        comm.Recv([empty, MPI.FLOAT], source=source, tag=tag)
        if tag == PULL:
            comm.Send([centre, MPI.FLOAT], dest=source, tag=CENTRE)
            stats.pulls += 1
        elif tag == DONE:
            done += 1
    return stats


class Client:
    """A worker's side: fetch the centre, send a vector to add to it, say the epoch is done."""

    def __init__(self, comm, size: int) -> None:
        from mpi4py import MPI

        self._comm, self._float = comm, MPI.FLOAT
        self._centre = np.empty(size, np.float32)
        self._empty = np.empty(0, np.float32)

    def pull(self) -> np.ndarray:
        """The server's current centre (a buffer reused by the next pull)."""
        self._comm.Send([self._empty, self._float], dest=SERVER, tag=PULL)
        self._comm.Recv([self._centre, self._float], source=SERVER, tag=CENTRE)
        return self._centre

    def push(self, vector: np.ndarray) -> None:
        """Add `vector` to the centre (returns once sent)."""
        self._comm.Send([np.ascontiguousarray(vector, np.float32), self._float], dest=SERVER, tag=PUSH)

    def done(self) -> None:
        """This worker has finished the epoch."""
        self._comm.Send([self._empty, self._float], dest=SERVER, tag=DONE)
