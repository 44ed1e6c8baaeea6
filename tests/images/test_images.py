"""Every image starts as a user would start it: the program's --help, Horovod with MPI, the operator's kopf, a
non-root user by default."""

from __future__ import annotations

import subprocess

import pytest

from tests.support.programs import PROGRAMS


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


def test_entrypoints_image_copies_the_entrypoints_as_any_uid(images, scratch):
    """What the pods' init container does, under an arbitrary uid: the copies are executable by every uid."""
    target = scratch / "entrypoints"
    target.mkdir(mode=0o777)
    target.chmod(0o777)
    result = subprocess.run(["docker", "run", "--rm", "--user", "1000650000:0", "--volume", f"{target}:/target",
                             images["entrypoints"], "cp", "-R", "/opt/kubetrain/entrypoints/.", "/target/"],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    for name in ("worker", "launcher"):
        assert (target / name).stat().st_mode & 0o001, f"{name} is not executable by other uids"
    assert (target / "lib" / "libnss_wrapper.so").is_file()
