"""The tags tests/images/byo/build.sh gives its images: kubetrain-test/byo-<mpi>:<key of the directory's inputs>."""

from __future__ import annotations

import hashlib
from pathlib import Path

HERE = Path(__file__).resolve().parent
NAMES = ("openmpi4", "openmpi5", "mpich", "intelmpi")
# Keep in step with build.sh: sha256 of these files' bytes in this order, first 12 hex digits.
INPUTS = ("Dockerfile", "allreduce.py", "build.sh")


def byo_image(mpi: str) -> str:
    """The image build.sh builds with `mpi`: openmpi4, openmpi5, mpich or intelmpi."""
    if mpi not in NAMES:
        raise ValueError(f"no byo image with MPI {mpi!r}; one of {', '.join(NAMES)}")
    key = hashlib.sha256(b"".join((HERE / name).read_bytes() for name in INPUTS)).hexdigest()[:12]
    return f"kubetrain-test/byo-{mpi}:{key}"

