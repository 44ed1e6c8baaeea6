"""A job that requests GPUs names a GPU image, and a job that requests none names a CPU image (trainlib.gpus names
them): every job file, every example of examples/, and every DistributedTraining the documentation shows with its
image (tests/support/documented.py finds them for the docs tier)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.documented import KIND, Example, checked_jobs, rel
from trainlib.gpus import is_gpu_image

REPO = Path(__file__).resolve().parents[3]


def names_its_image(example: Example) -> bool:
    """A job file, or an example that writes `image` itself (a fragment without one gets the docs tier's)."""
    if example.path is not None:
        return True
    written = example.written
    return isinstance(written, Mapping) and "image" in (written.get("spec") or written)


def shipped_jobs() -> list[tuple[str, dict[str, Any]]]:
    found = [(example.id, example.body) for example in checked_jobs() if names_its_image(example)]
    for path in sorted(REPO.glob("examples/**/*.yaml")):
        found += [(rel(path), document) for document in yaml.safe_load_all(path.read_text(encoding="utf-8"))
                  if isinstance(document, Mapping) and document.get("kind") == KIND]
    return found


SHIPPED = shipped_jobs()


@pytest.mark.parametrize(("source", "body"), SHIPPED, ids=[source for source, _ in SHIPPED])
def test_a_job_names_a_gpu_image_exactly_when_it_requests_gpus(source: str, body: dict[str, Any]) -> None:
    spec = body["spec"]
    gpus = (spec.get("resources") or {}).get("gpusPerWorker", 0)
    wanted = "a GPU image (tag ending in -gpu)" if gpus else "a CPU image"
    assert is_gpu_image(spec["image"]) == (gpus > 0), f"{source}: gpusPerWorker {gpus} needs {wanted}, not " \
                                                      f"{spec['image']}"


def test_every_kind_of_shipped_job_is_checked() -> None:
    sources = {source for source, _ in SHIPPED}
    assert {"jobs/cifar_mixup/job.yaml", "jobs/ucluster/job.yaml", "jobs/mnist/job.yaml",
            "examples/kind/cifar-mixup.yaml"} <= sources, sources
    assert any(source.startswith("docs/gpus.md") for source in sources), "the GPU page's example names its image"
