"""Keras callbacks for rank 0: checkpoint, history, TensorBoard and progress after every epoch, none of them blocking
on I/O.

Give them to `model.fit` after `distributed.horovod_callbacks(...)` so the metrics they record are averaged over ranks.
Keras numbers epochs from 0; these callbacks record completed epochs (1-based), which is also the `initial_epoch` to
resume from.

With a `BackgroundWriter` (put it last in the callback list), the callbacks only copy what they need at the end of an
epoch (the variables' values, the metrics) and hand the file writes, the plot and the Kubernetes status patch to its
one thread, in order: history, then TensorBoard, then checkpoint, then progress (which names that checkpoint and
sends the history's epochs). Every N steps the TensorBoard callback also reads the learning rate and hands its write
over. Training goes on meanwhile; the writer waits for its work when training ends and raises a failed checkpoint save
in the training thread. Progress is reported by time (`report_interval`), not every epoch, and the last epoch always.
Without a writer every callback does its work in the training thread, as a crash test needs ("saved" means on disk).
`chief_callbacks` builds the whole set rank 0 runs.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor

import tensorflow as tf

from trainlib import startup
from trainlib.checkpoints import Checkpoint, CheckpointManager
from trainlib.cli import DEFAULT_TENSORBOARD_EVERY_STEPS
from trainlib.distributed import WorkerContext
from trainlib.history import HistoryLog
from trainlib.progress import ProgressReporter
from trainlib.tensorboard import TensorBoardLog, current_learning_rate, graph_of, is_due

log = logging.getLogger(__name__)

REPORT_INTERVAL_SECONDS = 15.0  # status patches at most this often (the last epoch's always goes out)
PLOT_INTERVAL_SECONDS = 30.0  # history.png redrawn at most this often, and once training ends


class BackgroundWriter(tf.keras.callbacks.Callback):
    """One worker thread for rank 0's end-of-epoch I/O; tasks run in submission order.

    `submit` first raises the failure of any earlier task (a checkpoint that could not be written must stop
    training, as it would have without the thread); `flush` waits for every task. Keras calls `on_train_end`, which
    flushes: list this callback after the ones that submit to it. `busy_seconds` and `cpu_seconds` sum the tasks'
    wall-clock and CPU time (for the benchmarks).
    """

    def __init__(self) -> None:
        super().__init__()
        self._supports_tf_logs = True
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="trainlib-writer")
        self._pending: list[Future[None]] = []
        self._lock = threading.Lock()
        self.busy_seconds = 0.0
        self.cpu_seconds = 0.0

    def submit(self, task: Callable[[], None]) -> None:
        self._raise_failures(wait=False)
        self._pending.append(self._executor.submit(self._timed, task))

    def _timed(self, task: Callable[[], None]) -> None:
        wall, cpu = time.perf_counter(), time.thread_time()
        try:
            task()
        finally:
            with self._lock:
                self.busy_seconds += time.perf_counter() - wall
                self.cpu_seconds += time.thread_time() - cpu

    def _raise_failures(self, wait: bool) -> None:
        pending, self._pending = self._pending, []
        for index, future in enumerate(pending):
            if not wait and not future.done():
                self._pending = pending[index:]
                return
            future.result()

    def flush(self) -> None:
        """Wait for every submitted task; raise the first failure."""
        self._raise_failures(wait=True)

    def on_train_end(self, logs: dict | None = None) -> None:
        self.flush()


def run_or_submit(writer: BackgroundWriter | None, task: Callable[[], None]) -> None:
    """`task` on the writer's thread, or now without a writer."""
    if writer is None:
        task()
    else:
        writer.submit(task)


class CheckpointCallback(tf.keras.callbacks.Callback):
    """Save `variables` (see `resume.keras_state`) with the epoch's metrics after every epoch.

    The values are copied in the training thread at the epoch's end; the write happens on `writer`'s thread if given.
    `last` is the newest checkpoint written.
    """

    def __init__(self, manager: CheckpointManager, variables: Mapping[str, Sequence[tf.Variable]],
                 rank: int = 0, writer: BackgroundWriter | None = None) -> None:
        super().__init__()
        self._supports_tf_logs = True
        self.manager = manager
        self.variables = variables
        self.rank = rank
        self.writer = writer
        self.last: Checkpoint | None = None

    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        state = {group: [variable.numpy() for variable in group_vars] for group, group_vars in self.variables.items()}
        names = {group: [variable.name for variable in group_vars] for group, group_vars in self.variables.items()}
        metrics = dict(logs or {})

        def save() -> None:
            self.last = self.manager.save(epoch + 1, state, metrics, names=names, rank=self.rank)
            log.info("saved checkpoint %s", self.last.path)

        run_or_submit(self.writer, save)


class HistoryCallback(tf.keras.callbacks.Callback):
    """Append the epoch's metrics to history.json and redraw history.png (see `HistoryLog.plot_interval`)."""

    def __init__(self, history: HistoryLog, writer: BackgroundWriter | None = None) -> None:
        super().__init__()
        self._supports_tf_logs = True
        self.history = history
        self.writer = writer

    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        metrics = dict(logs or {})
        run_or_submit(self.writer, lambda: self.history.append(epoch + 1, metrics))

    def on_train_end(self, logs: dict | None = None) -> None:
        run_or_submit(self.writer, self.history.finish)


class TensorBoardCallback(tf.keras.callbacks.Callback):
    """Epoch metrics, the learning rate every `tensorboard.every_steps` steps and the model's graph into TensorBoard
    event files (`trainlib.tensorboard`).

    At the start of `fit` it reads the optimizer's step count; at the first start it also has the events after the
    restored state dropped and the graph traced and written. Per batch it only counts; when a step is due it reads
    the learning rate. Everything else runs on `writer`'s thread if given.
    """

    def __init__(self, tensorboard: TensorBoardLog, initial_epoch: int, writer: BackgroundWriter | None = None) -> None:
        super().__init__()
        self._supports_tf_logs = True
        self.tensorboard = tensorboard
        self.initial_epoch = initial_epoch
        self.writer = writer
        self._step = 0
        self._started = False

    def on_train_begin(self, logs: dict | None = None) -> None:
        self._step = int(self.model.optimizer.iterations.numpy())
        if self._started:
            return
        self._started = True
        steps, epochs, model = self._step, self.initial_epoch, self.model
        run_or_submit(self.writer, lambda: self.tensorboard.resume_at(epochs, steps))
        run_or_submit(self.writer, lambda: self.tensorboard.graph(graph_of(model)))

    def on_train_batch_end(self, batch: int, logs: dict | None = None) -> None:
        self._step += 1
        if is_due(self._step, self.tensorboard.every_steps):
            step, rate = self._step, current_learning_rate(self.model.optimizer)
            run_or_submit(self.writer, lambda: self.tensorboard.learning_rate(step, rate))

    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        metrics = dict(logs or {})
        run_or_submit(self.writer, lambda: self.tensorboard.epoch(epoch + 1, metrics))

    def on_train_end(self, logs: dict | None = None) -> None:
        run_or_submit(self.writer, self.tensorboard.flush)


class ProgressCallback(tf.keras.callbacks.Callback):
    """Report epoch, step, metrics, the earlier epochs of `history` and the newest checkpoint to the
    DistributedTraining status.

    A report goes out at the end of an epoch when `report_interval` seconds have passed since the last one, and at
    the end of the last epoch (0: every epoch); one held back is sent when training ends. The epochs in between reach
    the status with the next report, from `history`.
    """

    def __init__(self, reporter: ProgressReporter, epochs: int, steps_per_epoch: int,
                 checkpoints: CheckpointCallback | None = None, writer: BackgroundWriter | None = None,
                 report_interval: float = 0.0, clock: Callable[[], float] = time.monotonic,
                 history: HistoryLog | None = None) -> None:
        super().__init__()
        self._supports_tf_logs = True
        self.reporter = reporter
        self.epochs = epochs
        self.steps_per_epoch = steps_per_epoch
        self.checkpoints = checkpoints
        self.history = history
        self.writer = writer
        self.report_interval = report_interval
        self._clock = clock
        self._reported_at: float | None = None
        self._held: tuple[int, dict] | None = None

    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        if not self.reporter.enabled:
            return
        now = self._clock()
        due = self._reported_at is None or now - self._reported_at >= self.report_interval
        if due or epoch + 1 >= self.epochs:
            self._reported_at = now
            self._held = None
            self._report(epoch + 1, dict(logs or {}))
        else:
            self._held = (epoch + 1, dict(logs or {}))

    def on_train_end(self, logs: dict | None = None) -> None:
        if self._held is not None:
            self._report(*self._held)
            self._held = None

    def _report(self, epoch: int, metrics: dict) -> None:
        def send() -> None:  # reads the checkpoint and the history once the writer has saved them: tasks run in order
            last = self.checkpoints.last if self.checkpoints else None
            self.reporter.report(epoch=epoch, epochs=self.epochs, step=epoch * self.steps_per_epoch,
                                 metrics=metrics, checkpoint_path=last.path if last else None,
                                 checkpoint_epoch=last.epoch if last else None,
                                 history=self.history.records if self.history else ())

        run_or_submit(self.writer, send)


class FirstStepCallback(tf.keras.callbacks.Callback):
    """Rank 0's first training step ends its startup (trainlib.startup); later steps cost one attribute check."""

    def __init__(self) -> None:
        super().__init__()
        self._supports_tf_logs = True  # the step's logs stay tensors: reading none of them, it waits for none

    def on_train_batch_end(self, batch: int, logs: dict | None = None) -> None:
        startup.first_step()


def chief_callbacks(context: WorkerContext, manager: CheckpointManager, variables: Mapping[str, Sequence[tf.Variable]],
                    title: str, epochs: int, steps: int, initial_epoch: int, headline: str | None = None,
                    tensorboard_every_steps: int = DEFAULT_TENSORBOARD_EVERY_STEPS,
                    ) -> list[tf.keras.callbacks.Callback]:
    """The first step's startup report, then history after every epoch (json; the plot by time), then TensorBoard
    (the learning rate also every `tensorboard_every_steps` steps), then the checkpoint, then progress in the job's
    status (by time), all written on one background thread so that training never waits for a disk or the API
    server. The history is history.json's, resumed at `initial_epoch`: the status's history keeps the epochs of the
    attempts before."""
    history = HistoryLog(manager.directory, title, plot_interval=PLOT_INTERVAL_SECONDS)
    history.resume_at(initial_epoch)
    writer = BackgroundWriter()
    checkpoints = CheckpointCallback(manager, variables, rank=context.rank, writer=writer)
    tensorboard = TensorBoardLog(manager.directory, tensorboard_every_steps)
    # History and TensorBoard before the checkpoint: a kill between them leaves an epoch recorded but not saved, which
    # the resume drops and trains again (`resume_at`); the other order would lose the epoch from them for good.
    return [FirstStepCallback(), HistoryCallback(history, writer),
            TensorBoardCallback(tensorboard, initial_epoch, writer), checkpoints,
            ProgressCallback(ProgressReporter.from_environment(headline=headline), epochs, steps, checkpoints, writer,
                             report_interval=REPORT_INTERVAL_SECONDS, history=history),
            writer]
