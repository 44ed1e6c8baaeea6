"""What the worker programs share: TensorFlow thread limits, the cifar_mixup model as the program compiles it,
a step timer, in-memory data, and the JSON result file. TensorFlow is imported only inside the functions."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

NUM_CLASSES = 10
IMAGE_SHAPE = (32, 32, 3)
LEARNING_RATE = 0.1  # cifar_mixup's default, scaled by the number of ranks like the program does


def limit_threads(threads: int) -> None:
    """Give TensorFlow `threads` intra-op and inter-op threads; call before any TensorFlow op runs."""
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(threads)
    tf.config.threading.set_inter_op_parallelism_threads(threads)


def compiled_cnn(size: int = 1, horovod: bool = False) -> Any:
    """cifar_mixup's CNN compiled like `cifar_mixup.run.train`: legacy Adadelta (wrapped by Horovod when asked),
    categorical cross-entropy, accuracy."""
    import tensorflow as tf

    from cifar_mixup.model import build_cnn

    optimizer = tf.keras.optimizers.legacy.Adadelta(learning_rate=LEARNING_RATE * size)
    if horovod:
        from trainlib.distributed import distributed_optimizer

        optimizer = distributed_optimizer(optimizer)
    model = build_cnn(IMAGE_SHAPE, NUM_CLASSES)
    model.compile(optimizer=optimizer, loss="categorical_crossentropy", metrics=["accuracy"])
    return model


def step_timer() -> Any:
    """A Keras callback recording the end of every training step: `times` in wall-clock seconds (perf_counter) and
    `cpu_times` in this process's CPU seconds (every thread: TensorFlow's pools, tf.data, Horovod's background
    thread). CPU seconds per step barely move when other programs share the cores, wall-clock seconds do."""
    import tensorflow as tf

    class StepTimer(tf.keras.callbacks.Callback):
        def __init__(self) -> None:
            super().__init__()
            self.times: list[float] = []
            self.cpu_times: list[float] = []

        def on_train_batch_end(self, batch: int, logs: dict | None = None) -> None:
            self.times.append(time.perf_counter())
            self.cpu_times.append(time.process_time())

    return StepTimer()


def random_examples(rows: int, seed: int) -> tuple[Any, Any]:
    """Preprocessed CIFAR-shaped examples like the program's: images in [-1, 1], one-hot labels (numpy)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    images = rng.integers(0, 256, (rows, *IMAGE_SHAPE), dtype=np.uint8).astype(np.float32) / 127.5 - 1.0
    labels = np.eye(NUM_CLASSES, dtype=np.float32)[rng.integers(0, NUM_CLASSES, rows)]
    return images, labels


def in_memory_dataset(images: Any, labels: Any, batch_size: int) -> Any:
    """Batches from tensors already in memory: the feed with no input cost to compare against."""
    import tensorflow as tf

    dataset = tf.data.Dataset.from_tensor_slices((images, labels)).repeat().batch(batch_size, drop_remainder=True)
    return dataset.prefetch(tf.data.AUTOTUNE)


def peak_rss_bytes() -> int:
    """This process's peak resident set size (VmHWM)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("/proc/self/status has no VmHWM line")


def write_result(path: str, result: dict[str, Any]) -> None:
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    temporary = f"{path}.tmp"
    with open(temporary, "w", encoding="utf-8") as handle:
        json.dump(result, handle)
    os.replace(temporary, path)

