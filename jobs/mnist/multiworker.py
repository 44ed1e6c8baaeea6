"""mnist with tf.distribute.MultiWorkerMirroredStrategy: one process per worker, cluster described by TF_CONFIG.

Each worker reads its own contiguous block of the HDF5 files (`distribute_datasets_from_function`, no auto-sharding).
The chief (task type `chief`, or worker 0 when the cluster has none) alone writes checkpoints, history and progress.
On start every worker restores the latest complete checkpoint from the shared checkpoint directory itself (there is no
Horovod broadcast here); the strategy keeps the replicas in sync from then on.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
from collections.abc import Mapping

from trainlib.errors import TrainingInputError
from trainlib.hdf5_files import FileInfo

log = logging.getLogger("mnist")

EXAMPLE = '{"cluster": {"worker": ["host0:12345", "host1:12345"]}, "task": {"type": "worker", "index": 0}}'


def parse_tf_config(environ: Mapping[str, str] | None = None) -> tuple[bool, int, int]:
    """Check TF_CONFIG early; returns (is_chief, worker rank, number of workers). Chief first, then workers."""
    env = os.environ if environ is None else environ
    raw = env.get("TF_CONFIG")
    if not raw:
        raise TrainingInputError(f"--strategy multiworker needs TF_CONFIG describing the cluster, e.g. {EXAMPLE}")
    try:
        config = json.loads(raw)
        cluster, task = config["cluster"], config["task"]
        task_type, index = task["type"], int(task["index"])
        members = [("chief", i) for i in range(len(cluster.get("chief", [])))]
        members += [("worker", i) for i in range(len(cluster.get("worker", [])))]
    except (ValueError, KeyError, TypeError) as error:
        raise TrainingInputError(f"TF_CONFIG is not valid ({type(error).__name__}: {error}); expected e.g. "
                                 f"{EXAMPLE}") from None
    if (task_type, index) not in members:
        raise TrainingInputError(f"TF_CONFIG task {task_type}:{index} is not in its cluster {dict(cluster)}; "
                                 "fix task.type/task.index")
    rank = members.index((task_type, index))
    return rank == 0, rank, len(members)


def train_multiworker(args: argparse.Namespace, train_info: FileInfo, test_info: FileInfo, checkpoint_dir: str) -> int:
    """Train with MultiWorkerMirroredStrategy; TF_CONFIG must already be checked with `parse_tf_config`."""
    import tensorflow as tf

    from mnist.data import IMAGES, LABELS
    from mnist.model import build_cnn, preprocessing
    from trainlib.callbacks import CheckpointCallback, HistoryCallback, ProgressCallback
    from trainlib.checkpoints import CheckpointManager
    from trainlib.cli import setup_logging
    from trainlib.hdf5_input import make_dataset, rows_per_rank
    from trainlib.history import HistoryLog
    from trainlib.progress import ProgressReporter
    from trainlib.resume import assign_state, keras_state

    is_chief, rank, workers = parse_tf_config()
    strategy = tf.distribute.MultiWorkerMirroredStrategy()  # must exist before any other TensorFlow op
    setup_logging(rank)
    if args.seed is not None:
        tf.keras.utils.set_random_seed(args.seed + rank)
    names = [IMAGES, LABELS]

    def pipeline(info: FileInfo, training: bool) -> tf.distribute.DistributedDataset:
        def dataset_fn(context: tf.distribute.InputContext) -> tf.data.Dataset:
            return make_dataset([info], names, rank=context.input_pipeline_id, size=context.num_input_pipelines,
                                batch_size=args.batch_size, training=training, preprocess=preprocessing,
                                shuffle_buffer=args.shuffle_buffer, seed=args.seed).dataset

        options = tf.distribute.InputOptions(experimental_fetch_to_device=False)
        return strategy.distribute_datasets_from_function(dataset_fn, options)

    train_rows, test_rows = rows_per_rank([train_info], workers), rows_per_rank([test_info], workers)
    train_steps, test_steps = train_rows // args.batch_size, -(-test_rows // args.batch_size)
    if train_steps < 1:
        raise TrainingInputError(f"{train_info.path}: {train_rows} rows per worker is fewer than one batch of "
                                 f"{args.batch_size}; use a smaller --batch-size")
    learning_rate = args.learning_rate * workers
    with strategy.scope():
        height, width = train_info.row_shapes[IMAGES]  # two sides: checked by mnist.data
        model = build_cnn((height, width, 1))
        model.compile(optimizer=tf.keras.optimizers.legacy.Adam(learning_rate=learning_rate),
                      loss="categorical_crossentropy", metrics=["accuracy"])
        variables = keras_state(model)
    manager = CheckpointManager(checkpoint_dir, args.keep_checkpoints)
    latest = manager.latest()
    initial_epoch = 0
    if latest is not None:
        state, _ = manager.load(latest)
        assign_state(variables, state, latest.path)
        initial_epoch = latest.epoch
    log.info("multiworker with %d workers (this is %s); per worker %d training rows (%d steps); starting at epoch %d",
             workers, "the chief" if is_chief else f"worker {rank}", train_rows, train_steps, initial_epoch + 1)
    if initial_epoch >= args.epochs:
        log.info("the latest checkpoint already has %d of %d epochs: nothing to train", initial_epoch, args.epochs)
        return 0
    callbacks: list[tf.keras.callbacks.Callback] = []
    if is_chief:
        history = HistoryLog(checkpoint_dir, f"mnist (multiworker, {workers} workers)")
        history.resume_at(initial_epoch)
        checkpoints = CheckpointCallback(manager, variables, rank=rank)
        callbacks = [checkpoints, HistoryCallback(history),
                     ProgressCallback(ProgressReporter.from_environment(), args.epochs, train_steps, checkpoints)]
    model.fit(pipeline(train_info, True), steps_per_epoch=train_steps, epochs=args.epochs,
              initial_epoch=initial_epoch, validation_data=pipeline(test_info, False), validation_steps=test_steps,
              callbacks=callbacks, verbose=2 if is_chief else 0)
    return 0
