"""Images/s of three MixUp input pipelines alone, no model: what an accelerator would ask of them.

    python -m tests.bench.workers.pipeline_alone --data train.h5 --threads 2 --batches 400 --repeats 5 --out r.json

- `hdf5`: cifar_mixup's own feed, `make_dataset` over the file with the program's preprocessing and MixUp (alpha 0.2),
  shuffled, streamed from the file.
- `memory`: the same rows preprocessed to float32 in memory, `from_tensor_slices -> shuffle -> batch -> map(mix_up)`:
  a vectorised tf.data MixUp pipeline with no input cost.
- `notebook`: the reference notebook's `MixupImageDataGenerator_from_tensor` (two shuffled tf.data iterators over the
  in-memory arrays, numpy Beta weights, numpy mixing), indexed as Keras indexes a `Sequence`.

The tf.data feeds are drained inside a `tf.function` (as `model.fit` pulls them); the notebook's is called from Python,
as it runs. Feeds take turns `--repeats` times, each timed over `--batches` batches, wall-clock and CPU seconds.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

from tests.bench.workers.common import NUM_CLASSES, limit_threads, write_result

MIXUP_ALPHA = 0.2
SHUFFLE_BUFFER = 4096  # make_dataset's default


def notebook_generator(images: Any, labels: Any, batch_size: int, alpha: float) -> Any:
    """The notebook's MixUp generator, kept as it is written there (minus its unused `subset`)."""
    import numpy as np
    import tensorflow as tf

    class MixupImageDataGeneratorFromTensor(tf.keras.utils.Sequence):
        def __init__(self, X: Any, Y: Any, batch_size: int, alpha: float = 0.2) -> None:  # noqa: N803
            self.batch_size = batch_size
            self.batch_index = 0
            self.alpha = alpha
            self.X = X
            self.Y = Y
            self.n = len(X)
            self.reset_index()

        def __len__(self) -> int:
            return (self.n + self.batch_size - 1) // self.batch_size

        def __getitem__(self, index: int) -> tuple[Any, Any]:
            if self.batch_index >= self.__len__() - 1:
                self.reset_index()
                self.batch_index = 0
            else:
                self.batch_index += 1
            X1, y1 = self.generator1.next()  # noqa: N806
            X2, y2 = self.generator2.next()  # noqa: N806
            lam = np.random.beta(self.alpha, self.alpha, X1.shape[0])
            X_l = lam.reshape(X1.shape[0], 1, 1, 1)  # noqa: N806
            y_l = lam.reshape(X1.shape[0], 1)
            return X1 * X_l + X2 * (1 - X_l), y1 * y_l + y2 * (1 - y_l)

        def reset_index(self) -> None:
            ind = np.random.permutation(len(self.X))
            first = tf.data.Dataset.from_tensor_slices((self.X[ind], self.Y[ind]))
            self.generator1 = iter(first.batch(self.batch_size))
            ind = np.random.permutation(len(self.X))
            second = tf.data.Dataset.from_tensor_slices((self.X[ind], self.Y[ind]))
            self.generator2 = iter(second.batch(self.batch_size))

    return MixupImageDataGeneratorFromTensor(images, labels, batch_size, alpha)


def drain_dataset(dataset: Any) -> Callable[[int], float]:
    """Pull `n` batches of `dataset` inside one tf.function call; returns a checksum (so nothing is optimised away)."""
    import tensorflow as tf

    iterator = iter(dataset)

    @tf.function
    def drain(batches: tf.Tensor) -> tf.Tensor:
        total = tf.constant(0.0)
        for _ in tf.range(batches):
            images, labels = next(iterator)
            total += tf.cast(tf.reshape(images, [-1])[0], tf.float32) + tf.cast(tf.reshape(labels, [-1])[0], tf.float32)
        return total

    return lambda batches: float(drain(tf.constant(batches)))


def drain_sequence(sequence: Any) -> Callable[[int], float]:
    position = 0

    def drain(batches: int) -> float:
        nonlocal position
        total = 0.0
        for _ in range(batches):
            images, labels = sequence[position % len(sequence)]
            position += 1
            total += float(images[0, 0, 0, 0] + labels[0, 0])
        return total

    return drain


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", required=True, help="HDF5 file with images (N, 32, 32, 3) uint8 and labels (N,)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--batches", type=int, default=300, help="timed batches per feed and repeat")
    parser.add_argument("--warmup-batches", type=int, default=50)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--feeds", default="hdf5,memory,notebook")
    parser.add_argument("--out", required=True, help="JSON result file")
    args = parser.parse_args()

    limit_threads(args.threads)
    import h5py
    import numpy as np
    import tensorflow as tf

    from cifar_mixup.data import FIX, IMAGES, LABELS, SPECS, scale_images
    from cifar_mixup.train import make_preprocess
    from trainlib.hdf5_files import validate_files
    from trainlib.hdf5_input import make_dataset
    from trainlib.mixup import apply_mixup

    tf.keras.utils.set_random_seed(0)
    info = validate_files([args.data], SPECS, FIX)[0]
    with h5py.File(args.data, "r") as handle:
        images = scale_images(handle[IMAGES][:])
        labels = np.eye(NUM_CLASSES, dtype=np.float32)[handle[LABELS][:]]
    builders: dict[str, Callable[[], Callable[[int], float]]] = {
        "hdf5": lambda: drain_dataset(make_dataset(
            [info], [IMAGES, LABELS], rank=0, size=1, batch_size=args.batch_size, training=True,
            preprocess=make_preprocess(NUM_CLASSES), batch_transform=apply_mixup(MIXUP_ALPHA), seed=0).dataset),
        "memory": lambda: drain_dataset(
            tf.data.Dataset.from_tensor_slices((images, labels)).shuffle(SHUFFLE_BUFFER, seed=0)
            .batch(args.batch_size, drop_remainder=True)
            .map(apply_mixup(MIXUP_ALPHA), num_parallel_calls=tf.data.AUTOTUNE, deterministic=False)
            .repeat().prefetch(tf.data.AUTOTUNE)),
        "notebook": lambda: drain_sequence(notebook_generator(images, labels, args.batch_size, MIXUP_ALPHA)),
    }
    feeds = {name: builders[name]() for name in args.feeds.split(",")}
    for drain in feeds.values():
        drain(args.warmup_batches)
    images_per_second: dict[str, list[float]] = {name: [] for name in feeds}
    images_per_cpu_second: dict[str, list[float]] = {name: [] for name in feeds}
    for _ in range(args.repeats):
        for name, drain in feeds.items():
            wall, cpu = time.perf_counter(), time.process_time()
            drain(args.batches)
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
            images_per_second[name].append(args.batches * args.batch_size / wall)
            images_per_cpu_second[name].append(args.batches * args.batch_size / cpu)
    write_result(args.out, {"images_per_second": images_per_second, "images_per_cpu_second": images_per_cpu_second,
                            "batch_size": args.batch_size, "threads": args.threads, "rows": info.rows})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
