"""Every image starts as a user would start it: the program's --help, Horovod with MPI, the operator's kopf, a
non-root user by default."""

from __future__ import annotations

import subprocess

import pytest
from image_names import PROGRAMS


def run(image: str, *command: str, entrypoint: str | None = None) -> subprocess.CompletedProcess[str]:
    args = ["docker", "run", "--rm", *(["--entrypoint", entrypoint] if entrypoint else []), image, *command]
    return subprocess.run(args, capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("program", PROGRAMS)
def test_program_image_default_command_prints_the_programs_help(images, program):
    result = run(images[program])  # CMD: python -m <program> --help
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"usage: {program}") or f"python -m {program}" in result.stdout, result.stdout


@pytest.mark.parametrize("image", ["base", *PROGRAMS])
def test_horovod_in_the_image_has_mpi_and_gloo(images, image):
    check = "import horovod.tensorflow.keras as hvd; assert hvd.mpi_built() and hvd.gloo_built(); print('ok')"
    result = run(images[image], "python", "-c", check)
    assert result.returncode == 0 and result.stdout.strip().endswith("ok"), result.stderr


def test_operator_image_runs_kopf(images):
    result = run(images["operator"], "--help")  # ENTRYPOINT kopf run --standalone -m kubetrain.reconcile
    assert result.returncode == 0, result.stderr
    assert "Usage: kopf run" in result.stdout


@pytest.mark.parametrize("image", ["base", "operator", *PROGRAMS])
def test_image_runs_as_a_non_root_user_by_default(images, image):
    result = run(images[image], "-u", entrypoint="id")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "1000"


@pytest.mark.parametrize("image", ["base", *PROGRAMS])
def test_image_ships_no_compiler(images, image):
    """Horovod is compiled in the builder stage; nodes pull only what runs."""
    result = run(images[image], "-c", "command -v g++ gcc cc cmake mpicc || true", entrypoint="sh")
    assert result.stdout.strip() == "", f"{images[image]} contains {result.stdout.split()}"
