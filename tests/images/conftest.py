"""Fixtures for the images tier: kubetrain's own images (images/build.sh) run as containers on Docker networks.

`make test` builds the images first (`make images`, which also starts a Docker engine where none runs); run alone,
the `images` fixture builds whichever is missing. Where no Docker engine answers, the tier is skipped with the reason.
Every container, network and folder a test creates is removed when it ends, pass or fail.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from docker_pods import DockerJob, deploy

from tests.images.byo.tags import NAMES as BYO_NAMES
from tests.images.byo.tags import byo_image
from tests.support.programs import IMAGES, PROGRAMS, REPO, image_name
from trainlib.gpus import gpu_image

BYO = Path(__file__).resolve().parent / "byo"


def image_present(name: str) -> bool:
    return subprocess.run(["docker", "image", "inspect", name], capture_output=True).returncode == 0


def docker_problem() -> str | None:
    if shutil.which("docker") is None:
        return "Docker is not installed (no docker on PATH)"
    info = subprocess.run(["docker", "info"], capture_output=True, text=True, timeout=60)
    if info.returncode != 0:
        reason = (info.stderr.strip().splitlines() or ["no output"])[-1]
        return f"no Docker engine answers (docker info: {reason}); .ci/docker-engine starts one"
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    mine = [item for item in items if Path(str(item.fspath)).is_relative_to(here)]
    reason = docker_problem() if mine else None
    for item in mine:
        item.add_marker(pytest.mark.images)
        if reason:
            item.add_marker(pytest.mark.skip(reason=f"images tier: {reason}"))


@pytest.fixture(scope="session")
def images() -> dict[str, str]:
    """images/ directory -> image name, every image present in the engine (built by images/build.sh if missing).
    kubetrain/entrypoints is built every session: its scripts are what these tests check, and Docker's cache makes
    an unchanged build take a second."""
    names = {directory: image_name(directory) for directory in IMAGES}
    missing = [d for d, name in names.items() if not image_present(name)]
    rebuilt = missing if "entrypoints" in missing else [*missing, "entrypoints"]
    subprocess.run([str(REPO / "images" / "build.sh"), *rebuilt], check=True)
    return names


@pytest.fixture(scope="session")
def gpu_images() -> dict[str, str]:
    """images/ directory -> its GPU image, named by trainlib.gpus.gpu_image, for base and every program. Those missing
    are built by `images/build.sh <directory>-gpu`, and must then be there under that name: a tag that build.sh
    derives otherwise fails here."""
    names = {directory: gpu_image(image_name(directory)) for directory in ("base", *PROGRAMS)}
    missing = [d for d, name in names.items() if not image_present(name)]
    if missing:
        subprocess.run([str(REPO / "images" / "build.sh"), *(f"{d}-gpu" for d in missing)], check=True)
    absent = [name for name in names.values() if not image_present(name)]
    assert not absent, f"images/build.sh built no {absent}: its GPU tags differ from trainlib.gpus.gpu_image"
    return names


@pytest.fixture(scope="session")
def byo(images: dict[str, str]) -> None:
    """A user's own MPI images without Horovod (tests/images/byo/build.sh, which `make test` runs; built here when
    missing)."""
    missing = [name for name in BYO_NAMES if not image_present(byo_image(name))]
    if missing:
        subprocess.run([str(BYO / "build.sh")], check=True)


@pytest.fixture(scope="session")
def digits(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """train.h5 and test.h5 written by cifar_mixup's own converter from scikit-learn's bundled digits."""
    out = tmp_path_factory.mktemp("digits")
    subprocess.run([sys.executable, "-m", "cifar_mixup.convert", "digits", "--out", str(out)], check=True,
                   capture_output=True)
    return out


@pytest.fixture
def scratch() -> Iterator[Path]:
    """A folder the containers' users can traverse (pytest's tmp_path is private to root)."""
    path = Path(tempfile.mkdtemp(prefix="kubetrain-images-"))
    path.chmod(0o755)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def on_docker(scratch: Path, images: dict[str, str]) -> Iterator:
    """on_docker(body) -> DockerJob; containers and networks are removed before scratch is."""
    started: list[DockerJob] = []

    def make(body: dict) -> DockerJob:
        job = deploy(scratch, body)
        started.append(job)
        return job

    try:
        yield make
    finally:
        for job in started:
            job.kubelet.close()
