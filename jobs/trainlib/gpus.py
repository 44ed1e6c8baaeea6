"""The GPUs a rank is given, and the image that can use them.

kubetrain's GPU images are named by one rule: the same repository, with `-gpu` after the tag
(`kubetrain/cifar-mixup:0.1.0` -> `kubetrain/cifar-mixup:0.1.0-gpu`). `gpu_image` and `is_gpu_image` are that rule.

The operator tells each rank how many GPUs it holds (KUBETRAIN_GPUS_PER_RANK) and which image it runs
(KUBETRAIN_IMAGE). `check_gpus` stops a rank that holds GPUs TensorFlow cannot see, before any data is read: the job
would otherwise train on the CPU while it holds the GPUs. `shortfall` is the decision, a pure function;
`tensorflow_gpus` asks TensorFlow. TensorFlow loads only when the rank holds GPUs.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping

from trainlib.errors import MissingGpuError

GPUS_ENV = "KUBETRAIN_GPUS_PER_RANK"
IMAGE_ENV = "KUBETRAIN_IMAGE"
GPU_TAG_SUFFIX = "-gpu"


def _repository_and_tag(image: str) -> tuple[str, str | None]:
    """`[registry/]repository[:tag][@digest]` -> (repository, tag); no tag: `latest`, or None beside a digest."""
    name, at, _digest = image.partition("@")
    colon = name.rfind(":")
    if colon > name.rfind("/"):  # the tag's colon; one before the last slash is a registry's port
        return name[:colon], name[colon + 1:]
    return name, None if at else "latest"


def gpu_image(image: str) -> str:
    """The GPU variant of a CPU image. An image named by its digest alone has no tag to derive it from."""
    repository, tag = _repository_and_tag(image)
    if tag is None:
        raise ValueError(f"{image} names no tag, so its GPU variant cannot be named")
    return image if is_gpu_image(image) else f"{repository}:{tag}{GPU_TAG_SUFFIX}"


def is_gpu_image(image: str) -> bool:
    """Whether the image's tag names a GPU variant."""
    _, tag = _repository_and_tag(image)
    return tag is not None and tag.endswith(GPU_TAG_SUFFIX)


def gpus_per_rank(environ: Mapping[str, str] | None = None) -> int:
    """The GPUs this rank holds, as the operator says; 0 outside a pod or without GPUs."""
    env = os.environ if environ is None else environ
    value = env.get(GPUS_ENV, "").strip() or "0"
    if not value.isdigit():
        raise MissingGpuError(f"{GPUS_ENV}={value!r} must be a whole number (the operator sets it)")
    return int(value)


def shortfall(wanted: int, seen: int, built_with_cuda: bool, image: str | None) -> str | None:
    """Why a rank that holds `wanted` GPUs must not train when TensorFlow sees `seen`; None when it may."""
    if wanted <= 0 or seen >= wanted:
        return None
    name = image or "this image"
    held = f"{wanted} GPU" if wanted == 1 else f"{wanted} GPUs"
    if built_with_cuda:
        return (f"{name}: TensorFlow sees {seen} of the {held} this rank holds: the node's NVIDIA driver or container "
                "runtime did not pass them to the container (run nvidia-smi in the pod)")
    if image and is_gpu_image(image):
        return f"{name} is named a GPU image but its TensorFlow was built without CUDA: rebuild it"
    return f"{name} is a CPU image: use {_gpu_variant(image)}, or set resources.gpusPerWorker: 0 to train on CPUs"


def _gpu_variant(image: str | None) -> str:
    """`gpu_image(image)`, or words for it when the image or its tag is not known."""
    if image:
        with contextlib.suppress(ValueError):
            return gpu_image(image)
    return f"its GPU variant (tag ending in {GPU_TAG_SUFFIX})"


def tensorflow_gpus() -> tuple[int, bool]:
    """The GPUs TensorFlow sees in this process, and whether it was built with CUDA."""
    import tensorflow as tf

    return len(tf.config.list_physical_devices("GPU")), tf.test.is_built_with_cuda()


def check_gpus(environ: Mapping[str, str] | None = None) -> None:
    """Raise MissingGpuError when this rank holds GPUs TensorFlow cannot see."""
    env = os.environ if environ is None else environ
    wanted = gpus_per_rank(env)
    if wanted == 0:
        return
    seen, built_with_cuda = tensorflow_gpus()
    message = shortfall(wanted, seen, built_with_cuda, env.get(IMAGE_ENV))
    if message is not None:
        raise MissingGpuError(message)
