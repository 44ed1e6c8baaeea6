"""Horovod setup in the canonical order, and the few collectives the programs need.

1. `init_horovod()`: `hvd.init()`, then pin one GPU per process by local rank with memory growth (no-op on CPU);
   `start_rank(seed)` adds this rank's logging and seed.
2. `scaled_learning_rate(base, size)`: the effective batch grows with the number of ranks, so does the learning rate.
3. `distributed_optimizer(optimizer)`: gradients are averaged over ranks with allreduce. Horovod 0.28 supports
   TF 2.15's *legacy* Keras optimizers only (`tf.keras.optimizers.legacy.*`); pass one of those.
4. `horovod_callbacks(...)`: average epoch metrics over ranks, warm the lr up. Rank 0's variables reach every rank
   before training in `resume.restore_and_broadcast`, which also checks that they arrived.

Works the same with a single process started without horovodrun (size 1). `cli.is_elastic()` tells an elastic run
(`horovodrun --min-np/--max-np`), where rank and size change while training: see `trainlib.elastic`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import horovod.tensorflow as hvd_tf
import horovod.tensorflow.keras as hvd
import numpy as np
import numpy.typing as npt
import tensorflow as tf

from trainlib import startup
from trainlib.cli import setup_logging


@dataclass(frozen=True)
class WorkerContext:
    """Where this process sits in the job."""

    rank: int
    size: int
    local_rank: int

    @property
    def is_chief(self) -> bool:
        """Rank 0 alone checkpoints, logs, plots and reports progress."""
        return self.rank == 0


def pin_gpu(local_rank: int) -> None:
    """Make only the GPU of this local rank visible, with memory growth; nothing happens on a CPU-only machine."""
    gpus = tf.config.list_physical_devices("GPU")
    for gpu in gpus:
        tf.config.experimental.set_memory_growth(gpu, True)
    if gpus:
        tf.config.set_visible_devices(gpus[local_rank % len(gpus)], "GPU")


def init_horovod() -> WorkerContext:
    """Initialise Horovod and pin this process's GPU; returns the rank, size and local rank."""
    hvd.init()
    pin_gpu(hvd.local_rank())
    return current_context()


def current_context() -> WorkerContext:
    """This process's rank, size and local rank now. In an elastic run they change when ranks leave or join."""
    return WorkerContext(rank=hvd.rank(), size=hvd.size(), local_rank=hvd.local_rank())


def start_rank(seed: int | None) -> WorkerContext:
    """A Horovod program's first step: `init_horovod()`, this rank's logging, rank 0's startup report (the world is
    up), and, with a seed, `seed + rank` as TensorFlow's, NumPy's and Python's seed (every rank shuffles and drops out
    differently, reproducibly)."""
    context = init_horovod()
    setup_logging(context.rank)
    startup.world_up(context.rank)
    if seed is not None:
        tf.keras.utils.set_random_seed(seed + context.rank)
    return context


def scaled_learning_rate(base: float, size: int) -> float:
    """Learning rate for `size` ranks: `base x size` (linear scaling with the global batch)."""
    if base <= 0:
        raise ValueError(f"learning rate must be positive, got {base}")
    return base * size


def distributed_optimizer(optimizer: tf.keras.optimizers.legacy.Optimizer) -> tf.keras.optimizers.legacy.Optimizer:
    """Wrap a legacy Keras optimizer so gradients are averaged over all ranks before they are applied."""
    if not isinstance(optimizer, tf.keras.optimizers.legacy.Optimizer):
        raise TypeError("Horovod 0.28 needs a tf.keras.optimizers.legacy optimizer, got "
                        f"{type(optimizer).__module__}.{type(optimizer).__name__}")
    return hvd.DistributedOptimizer(optimizer)


def horovod_callbacks(initial_lr: float, warmup_epochs: int, steps_per_epoch: int, verbose: int = 0) -> list[Any]:
    """Keras callbacks every rank runs, in order: metric averaging, lr warm-up. (No broadcast callback: call
    `resume.restore_and_broadcast` before `fit`; broadcasting again in the first batch would only delay it.)

    Put these before any rank-0 callback (checkpoints, history, progress) so those see metrics averaged over ranks.
    `initial_lr` is the already scaled learning rate; the warm-up ramps from `initial_lr / size` to it over
    `warmup_epochs` (0 disables it).
    """
    callbacks: list[Any] = [hvd.callbacks.MetricAverageCallback()]
    if warmup_epochs > 0:
        callbacks.append(hvd.callbacks.LearningRateWarmupCallback(
            initial_lr=initial_lr, warmup_epochs=warmup_epochs, steps_per_epoch=steps_per_epoch, verbose=verbose))
    return callbacks


def broadcast_object(value: Any, root_rank: int = 0) -> Any:
    """Send a picklable value from `root_rank` to every rank (every rank must call this)."""
    return hvd_tf.broadcast_object(value, root_rank=root_rank)


def broadcast_variables(variables: list[tf.Variable], root_rank: int = 0) -> None:
    """Overwrite `variables` on every rank with `root_rank`'s values (every rank must call this)."""
    if variables:
        hvd_tf.broadcast_variables(variables, root_rank=root_rank)


def _allreduce(value: npt.ArrayLike, op: Any, name: str | None) -> np.ndarray:
    tensor = tf.convert_to_tensor(np.asarray(value, dtype=np.float64))
    return hvd_tf.allreduce(tensor, op=op, name=name).numpy()


def allreduce_sum(value: npt.ArrayLike, name: str | None = None) -> np.ndarray:
    """Element-wise sum of `value` (float64) over all ranks (every rank must call this with the same shape)."""
    return _allreduce(value, hvd_tf.Sum, name)


def allreduce_mean(value: npt.ArrayLike, name: str | None = None) -> np.ndarray:
    """Element-wise mean of `value` (float64) over all ranks (every rank must call this with the same shape)."""
    return _allreduce(value, hvd_tf.Average, name)


def allgather_object(value: Any) -> list[Any]:
    """Every rank's picklable `value`, in rank order, on every rank (every rank must call this)."""
    return list(hvd_tf.allgather_object(value))
