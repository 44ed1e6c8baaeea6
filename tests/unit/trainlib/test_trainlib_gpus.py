"""A rank that holds GPUs TensorFlow cannot see stops at once with one line naming the image and the fix; the GPU
variant of an image is the same repository with `-gpu` after the tag."""

from __future__ import annotations

import argparse
from types import SimpleNamespace

import pytest

from trainlib import cli, gpus
from trainlib.cli import EXIT_BAD_INPUT, run_program
from trainlib.errors import MissingGpuError


@pytest.mark.parametrize(("image", "variant"), [
    ("kubetrain/cifar-mixup:0.1.0", "kubetrain/cifar-mixup:0.1.0-gpu"),
    ("localhost:5001/kubetrain/cifar-mixup:0.1.0", "localhost:5001/kubetrain/cifar-mixup:0.1.0-gpu"),
    ("localhost:5001/kubetrain/cifar-mixup", "localhost:5001/kubetrain/cifar-mixup:latest-gpu"),
    ("registry.example.com/team/own:1.0@sha256:abc", "registry.example.com/team/own:1.0-gpu"),
    ("kubetrain/cifar-mixup:0.1.0-gpu", "kubetrain/cifar-mixup:0.1.0-gpu"),
])
def test_the_gpu_variant_is_the_same_repository_with_gpu_after_the_tag(image: str, variant: str) -> None:
    assert gpus.gpu_image(image) == variant
    assert gpus.is_gpu_image(variant)
    assert gpus.is_gpu_image(image) == (image == variant)


def test_an_image_named_by_its_digest_alone_has_no_variant_to_name() -> None:
    with pytest.raises(ValueError, match="names no tag"):
        gpus.gpu_image("kubetrain/cifar-mixup@sha256:abc")
    assert not gpus.is_gpu_image("kubetrain/cifar-mixup@sha256:abc")
    assert not gpus.is_gpu_image("localhost:5001/gpu")  # a registry's port is no tag


CPU_IMAGE = "kubetrain/cifar-mixup:0.1.0"
GPU_IMAGE = "kubetrain/cifar-mixup:0.1.0-gpu"


@pytest.mark.parametrize(("wanted", "seen", "cuda", "image", "expected"), [
    (0, 0, False, CPU_IMAGE, None),  # a CPU job
    (1, 1, True, GPU_IMAGE, None),
    (1, 4, True, GPU_IMAGE, None),  # every GPU of the pod is listed; the rank pins one
    (2, 2, True, "registry.example.com/team/own:1.0", None),  # what TensorFlow sees decides, not the name
    (1, 0, False, CPU_IMAGE, "kubetrain/cifar-mixup:0.1.0 is a CPU image: use kubetrain/cifar-mixup:0.1.0-gpu, "
                             "or set resources.gpusPerWorker: 0 to train on CPUs"),
    (1, 0, False, None, "this image is a CPU image: use its GPU variant (tag ending in -gpu), or set "
                        "resources.gpusPerWorker: 0 to train on CPUs"),
    (1, 0, False, "kubetrain/cifar-mixup@sha256:abc", "kubetrain/cifar-mixup@sha256:abc is a CPU image: use its GPU "
                                                      "variant (tag ending in -gpu), or set resources.gpusPerWorker: "
                                                      "0 to train on CPUs"),
    (1, 0, False, GPU_IMAGE, "kubetrain/cifar-mixup:0.1.0-gpu is named a GPU image but its TensorFlow was built "
                             "without CUDA: rebuild it"),
    (2, 1, True, GPU_IMAGE, "kubetrain/cifar-mixup:0.1.0-gpu: TensorFlow sees 1 of the 2 GPUs this rank holds: the "
                            "node's NVIDIA driver or container runtime did not pass them to the container (run "
                            "nvidia-smi in the pod)"),
])
def test_the_decision(wanted: int, seen: int, cuda: bool, image: str | None, expected: str | None) -> None:
    assert gpus.shortfall(wanted, seen, cuda, image) == expected


def test_without_gpus_tensorflow_is_not_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    def asked() -> tuple[int, bool]:
        raise AssertionError("TensorFlow was asked")

    monkeypatch.setattr(gpus, "tensorflow_gpus", asked)
    gpus.check_gpus({})
    gpus.check_gpus({gpus.GPUS_ENV: "0", gpus.IMAGE_ENV: CPU_IMAGE})


def test_a_rank_holding_a_gpu_tensorflow_cannot_see_stops(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gpus, "tensorflow_gpus", lambda: (0, False))
    with pytest.raises(MissingGpuError, match="^kubetrain/cifar-mixup:0.1.0 is a CPU image: use "):
        gpus.check_gpus({gpus.GPUS_ENV: "1", gpus.IMAGE_ENV: CPU_IMAGE})
    monkeypatch.setattr(gpus, "tensorflow_gpus", lambda: (1, True))
    gpus.check_gpus({gpus.GPUS_ENV: "1", gpus.IMAGE_ENV: GPU_IMAGE})
    with pytest.raises(MissingGpuError, match="KUBETRAIN_GPUS_PER_RANK='one' must be a whole number"):
        gpus.check_gpus({gpus.GPUS_ENV: "one"})


def test_every_program_checks_after_its_flags_and_before_it_trains(monkeypatch: pytest.MonkeyPatch,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """run_program: the flags and files first (no TensorFlow), then the GPUs, then the program's train module."""
    steps: list[str] = []
    monkeypatch.setattr(gpus, "tensorflow_gpus", lambda: steps.append("gpus") or (0, False))
    monkeypatch.setattr(cli, "importlib", SimpleNamespace(import_module=steps.append))
    monkeypatch.setenv(gpus.GPUS_ENV, "1")
    monkeypatch.setenv(gpus.IMAGE_ENV, CPU_IMAGE)

    def parse(argv: object) -> argparse.Namespace:
        steps.append("parse")
        return argparse.Namespace()

    assert run_program("cifar_mixup", parse, []) == EXIT_BAD_INPUT
    assert steps == ["parse", "gpus"]
    assert capsys.readouterr().err == (f"cifar_mixup: error: {CPU_IMAGE} is a CPU image: use {GPU_IMAGE}, or set "
                                       "resources.gpusPerWorker: 0 to train on CPUs\n")
