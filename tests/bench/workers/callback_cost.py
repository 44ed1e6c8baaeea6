"""What rank 0's callbacks cost per training step: the cifar_mixup CNN under Horovod (np=1) with the callbacks
`keras_training.fit_distributed` gives it, each timed inside its own hooks.

    python -m tests.bench.workers.callback_cost --threads 2 --steps-per-epoch 50 --epochs 6 --repeats 2 --out r.json

Two settings take turns `--repeats` times in one process: `background`, the callbacks as shipped (`chief_callbacks`:
file writes, TensorBoard's event files, plot and status patch on one background thread, progress and plot by time),
and `inline`, the same callbacks doing their work in the training thread after every epoch, as before. Both run
Horovod's callbacks (metric averaging, lr warm-up). The status patch is a stand-in that sleeps `--patch-seconds` (an API
server's round trip); checkpoints, history.json, history.png and the event files (the learning rate every
`--tensorboard-every-steps` steps) are written to a scratch directory. Per callback:
seconds inside its hooks; per run: steps, fit seconds, and the background thread's busy and CPU seconds. The
training step is compiled in an untimed warm-up fit first.
"""

from __future__ import annotations

import argparse
import os
import shutil
import time
from typing import Any

from tests.bench.workers.common import compiled_cnn, in_memory_dataset, limit_threads, random_examples, write_result

HOOKS = ("on_train_begin", "on_train_end", "on_epoch_begin", "on_epoch_end", "on_train_batch_begin",
         "on_train_batch_end", "on_test_begin", "on_test_end", "on_test_batch_begin", "on_test_batch_end")


def timed(callback: Any, seconds: dict[str, float]) -> Any:
    """`callback` behind a proxy that adds the time spent in each of its hooks to `seconds[name]`."""
    import tensorflow as tf

    name = type(callback).__name__

    class Timed(tf.keras.callbacks.Callback):
        def __init__(self) -> None:
            super().__init__()
            self._supports_tf_logs = getattr(callback, "_supports_tf_logs", False)

        def set_model(self, model: Any) -> None:
            callback.set_model(model)

        def set_params(self, params: Any) -> None:
            callback.set_params(params)

    def forward(hook: str) -> Any:
        def call(self: Any, *args: Any, **kwargs: Any) -> None:
            started = time.perf_counter()
            getattr(callback, hook)(*args, **kwargs)
            seconds[name] = seconds.get(name, 0.0) + time.perf_counter() - started

        return call

    for hook in HOOKS:
        setattr(Timed, hook, forward(hook))
    return Timed()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--steps-per-epoch", type=int, default=50)
    parser.add_argument("--epochs", type=int, default=6)
    parser.add_argument("--warmup-epochs", type=int, default=3, help="lr warm-up epochs (the programs' default)")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--patch-seconds", type=float, default=0.05, help="stand-in status patch round trip")
    parser.add_argument("--tensorboard-every-steps", type=int, default=None,
                        help="the learning rate to TensorBoard every N steps (default: the programs' default)")
    parser.add_argument("--scratch", required=True, help="directory for checkpoints and history (emptied per run)")
    parser.add_argument("--out", required=True, help="JSON result file")
    args = parser.parse_args()

    limit_threads(args.threads)
    from trainlib.callbacks import CheckpointCallback, HistoryCallback, ProgressCallback, TensorBoardCallback
    from trainlib.checkpoints import CheckpointManager
    from trainlib.cli import DEFAULT_TENSORBOARD_EVERY_STEPS
    from trainlib.distributed import horovod_callbacks, init_horovod
    from trainlib.history import HistoryLog
    from trainlib.keras_training import chief_callbacks
    from trainlib.progress import ProgressReporter
    from trainlib.resume import keras_state
    from trainlib.tensorboard import TensorBoardLog

    every = DEFAULT_TENSORBOARD_EVERY_STEPS if args.tensorboard_every_steps is None else args.tensorboard_every_steps
    context = init_horovod()
    model = compiled_cnn(context.size, horovod=True)
    images, labels = random_examples(1024, seed=0)
    dataset = in_memory_dataset(images, labels, args.batch_size)
    variables = keras_state(model)
    model.fit(dataset, steps_per_epoch=5, epochs=1, verbose=0, callbacks=horovod_callbacks(0.1, 0, 5))

    def patch(namespace: str, name: str, body: dict) -> None:
        time.sleep(args.patch_seconds)

    def callbacks(setting: str, directory: str) -> list[Any]:
        reporter = ProgressReporter("bench", "callback-cost", patch)
        manager = CheckpointManager(directory, keep=3)
        if setting == "inline":
            checkpoints = CheckpointCallback(manager, variables, rank=0)
            chief = [HistoryCallback(HistoryLog(directory, "bench")),
                     TensorBoardCallback(TensorBoardLog(directory, every), initial_epoch=0), checkpoints,
                     ProgressCallback(reporter, args.epochs, args.steps_per_epoch, checkpoints)]
        else:
            chief = chief_callbacks(context, manager, variables, "bench", args.epochs, args.steps_per_epoch, 0,
                                    tensorboard_every_steps=every)
            next(c for c in chief if isinstance(c, ProgressCallback)).reporter = reporter
        return [*horovod_callbacks(0.1, args.warmup_epochs, args.steps_per_epoch), *chief]

    runs: list[dict[str, Any]] = []
    for repeat in range(args.repeats):
        for setting in ("inline", "background"):
            directory = os.path.join(args.scratch, f"{setting}-{repeat}")
            shutil.rmtree(directory, ignore_errors=True)
            seconds: dict[str, float] = {}
            chosen = callbacks(setting, directory)
            writer = next((c for c in chosen if hasattr(c, "busy_seconds")), None)
            started = time.perf_counter()
            model.fit(dataset, steps_per_epoch=args.steps_per_epoch, epochs=args.epochs, verbose=0,
                      callbacks=[timed(callback, seconds) for callback in chosen])
            runs.append({"setting": setting, "fit_seconds": time.perf_counter() - started,
                         "steps": args.steps_per_epoch * args.epochs, "callback_seconds": seconds,
                         "writer_busy_seconds": writer.busy_seconds if writer else 0.0,
                         "writer_cpu_seconds": writer.cpu_seconds if writer else 0.0})
    write_result(args.out, {"runs": runs, "batch_size": args.batch_size, "threads": args.threads,
                            "steps_per_epoch": args.steps_per_epoch, "epochs": args.epochs,
                            "patch_seconds": args.patch_seconds})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
