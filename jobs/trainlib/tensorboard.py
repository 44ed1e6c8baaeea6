"""Rank 0's TensorBoard event files in `<checkpoint dir>/tensorboard`, written with TensorFlow's `tf.summary`.

- `epoch/<metric>` at step = the completed epoch (1-based): every metric history.json gets, the same values (float32).
- `step/learning_rate` at step = the optimizer's step count, every `every_steps` steps (0: never).
- The model's graph, once per start (`graph_of` traces it, on the writer's thread too: it only reads the model).

`TensorBoardLog` does the file work, like `HistoryLog`: callers run it on the `BackgroundWriter`'s thread. On resume
(`resume_at`) the events of epochs and steps after the restored state are dropped, as history.json drops its records,
so a restarted run's curves show one value per step.
"""

from __future__ import annotations

import glob
import logging
import os
from collections.abc import Mapping, Sequence

import tensorflow as tf

from trainlib.metrics import finite_metrics

log = logging.getLogger(__name__)

SUBDIRECTORY = "tensorboard"
EPOCH_PREFIX = "epoch/"
LEARNING_RATE_TAG = "step/learning_rate"
_EVENT_FILES = "events.out.tfevents.*"


def log_directory(checkpoint_dir: str) -> str:
    """Where a run's event files go: `<checkpoint dir>/tensorboard`."""
    return os.path.join(checkpoint_dir, SUBDIRECTORY)


def is_due(step: int, every_steps: int) -> bool:
    """Whether optimizer step `step` (1-based) writes the learning rate."""
    return every_steps > 0 and step > 0 and step % every_steps == 0


def current_learning_rate(optimizer: tf.keras.optimizers.legacy.Optimizer) -> float:
    """The rate of the optimizer's next step: its value, or its schedule's at the current step."""
    rate = optimizer.learning_rate
    if isinstance(rate, tf.keras.optimizers.schedules.LearningRateSchedule):
        rate = rate(optimizer.iterations)
    return float(tf.keras.backend.get_value(rate))


def graph_of(model: tf.keras.Model, inputs: Sequence[tf.TensorSpec] | None = None) -> tf.Graph | None:
    """The model's inference graph, traced now into a graph of its own (the model's variables are only read), for
    `inputs` (default: the model's own, which a subclassed model lacks); None when there are none or the model cannot
    be traced (logged: the graph is a convenience, training goes on)."""
    specs = list(inputs) if inputs else [tf.TensorSpec(tensor.shape, tensor.dtype) for tensor in model.inputs or []]
    if not specs:
        log.info("TensorBoard: model %s has no known inputs; no graph written", model.name)
        return None
    try:
        forward = tf.function(lambda *inputs: model(inputs[0] if len(inputs) == 1 else list(inputs), training=False))
        return forward.get_concrete_function(*specs).graph
    except Exception as error:  # any tracing failure: the run goes on without a graph
        log.warning("TensorBoard: could not trace model %s (%s); no graph written", model.name, error)
        return None


class TensorBoardLog:
    """One run's event files in `<checkpoint_dir>/tensorboard` (rank 0 only). The writer opens at the first write."""

    def __init__(self, checkpoint_dir: str, every_steps: int) -> None:
        self.directory = log_directory(checkpoint_dir)
        self.every_steps = every_steps
        self._writer: tf.summary.SummaryWriter | None = None

    def _open(self) -> tf.summary.SummaryWriter:
        if self._writer is None:
            os.makedirs(self.directory, exist_ok=True)
            self._writer = tf.summary.create_file_writer(self.directory)
        return self._writer

    def resume_at(self, epochs_done: int, steps_done: int) -> None:
        """Keep only the events of epochs up to `epochs_done` and steps up to `steps_done`: the old files are read
        (tf.data's TFRecord reader), what is kept is written again into this run's file, then they are removed. The
        graph is not kept: this run writes it again."""
        old = sorted(glob.glob(os.path.join(self.directory, _EVENT_FILES)), key=os.path.getmtime)
        if not old:
            return
        kept: dict[tuple[str, int], float] = {}
        for path in old:
            for tag, step, value in _scalars(path):
                if tag.startswith(EPOCH_PREFIX):
                    keep = step <= epochs_done
                else:
                    keep = tag == LEARNING_RATE_TAG and step <= steps_done
                if keep:
                    kept[(tag, step)] = value  # a later file's value wins
        with self._open().as_default():
            for (tag, step), value in sorted(kept.items(), key=lambda item: (item[0][1], item[0][0])):
                tf.summary.scalar(tag, value, step=step)
        self.flush()
        for path in old:
            os.remove(path)

    def epoch(self, epoch: int, metrics: Mapping[str, object]) -> None:
        """Completed epoch `epoch` (1-based): its finite metrics as `epoch/<name>`, then flushed so TensorBoard
        shows them now."""
        with self._open().as_default():
            for name, value in finite_metrics(metrics).items():
                tf.summary.scalar(EPOCH_PREFIX + name, value, step=epoch)
        self.flush()

    def learning_rate(self, step: int, value: float) -> None:
        with self._open().as_default():
            tf.summary.scalar(LEARNING_RATE_TAG, value, step=step)

    def graph(self, graph: tf.Graph | None) -> None:
        """Write `graph` (None: nothing, `graph_of` said why)."""
        if graph is None:
            return
        with self._open().as_default():
            tf.summary.graph(graph)
        self.flush()

    def flush(self) -> None:
        if self._writer is not None:
            self._writer.flush()

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None


def _scalars(path: str) -> list[tuple[str, int, float]]:
    """(tag, step, value) of every scalar summary in one event file; a truncated tail (a killed writer) ends it."""
    found: list[tuple[str, int, float]] = []
    try:
        for record in tf.data.TFRecordDataset(path):
            event = tf.compat.v1.Event.FromString(record.numpy())
            for value in event.summary.value:
                if value.HasField("tensor") and not value.tensor.tensor_shape.dim:
                    found.append((value.tag, int(event.step), float(tf.make_ndarray(value.tensor))))
    except tf.errors.DataLossError:
        log.info("TensorBoard: %s ends in a partial record (its writer was killed); read up to it", path)
    return found
