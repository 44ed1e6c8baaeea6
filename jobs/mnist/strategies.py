"""mnist with tf.distribute: `MirroredStrategy` (the article's: every GPU of one machine, one process) or
`MultiWorkerMirroredStrategy` (one process per worker, the cluster described by TF_CONFIG).

Batches: `--batch-size` is per replica, as in the article; one step takes one batch per replica, so the global batch
is `--batch-size x replicas` and an epoch has rows / global batch steps (the article's mirrored run kept the
single-device steps per epoch, so each of its epochs went over the data `replicas` times). The learning rate is
`--learning-rate x replicas` (linear scaling with the global batch, as with Horovod; the article kept Adam's default).

Each input pipeline (one per worker) reads its own contiguous block of the HDF5 files (`distribute_datasets_from_
function`, no auto-sharding). The chief (task `chief`, or worker 0 when the cluster has none; the only process under
Mirrored) alone writes checkpoints, history and progress; every worker restores the latest complete checkpoint from the
shared directory itself, and the strategy keeps the replicas in sync from then on.
"""

from __future__ import annotations

import argparse
import logging

import tensorflow as tf

from mnist.cli import parse_tf_config
from mnist.data import IMAGES, LABELS
from mnist.model import build_cnn, preprocessing
from trainlib.cli import setup_logging
from trainlib.distributed import WorkerContext
from trainlib.errors import TrainingInputError
from trainlib.hdf5_files import FileInfo
from trainlib.hdf5_input import RankInput, make_dataset, rows_per_rank
from trainlib.keras_training import fit_with_strategy

log = logging.getLogger("mnist")


def steps_per_epoch(rows_per_pipeline: int, batch_per_replica: int, replicas_per_pipeline: int) -> int:
    """Steps that take one batch per replica from each input pipeline's `rows_per_pipeline` rows."""
    return rows_per_pipeline // (batch_per_replica * replicas_per_pipeline)


def train_with_strategy(args: argparse.Namespace) -> int:
    """Train with `args.strategy` ("mirrored" or "multiworker"), `args` as `mnist.cli.parse` returns them."""
    if args.strategy == "multiworker":
        is_chief, rank, workers = parse_tf_config()
        strategy: tf.distribute.Strategy = tf.distribute.MultiWorkerMirroredStrategy()  # before any other TF op
        who = f"{workers} workers (this is {'the chief' if is_chief else f'worker {rank}'})"
    else:
        rank, workers = 0, 1
        strategy = tf.distribute.MirroredStrategy(devices=_mirrored_devices(args.replicas))
    context = WorkerContext(rank=rank, size=workers, local_rank=0)
    setup_logging(rank)
    if args.seed is not None:
        tf.keras.utils.set_random_seed(args.seed + rank)
    replicas = strategy.num_replicas_in_sync
    if args.strategy == "mirrored":
        who = f"{replicas} replicas on {', '.join(strategy.extended.worker_devices)}"

    def pipeline(info: FileInfo, training: bool) -> RankInput:
        rows = rows_per_rank([info], workers)
        steps = steps_per_epoch(rows, args.batch_size, replicas // workers)
        if not training:
            steps = -(-rows // (args.batch_size * (replicas // workers)))
        elif steps < 1:
            raise TrainingInputError(f"{info.path}: {rows} rows per worker are fewer than one global batch of "
                                     f"{args.batch_size} x {replicas // workers} replicas; use a smaller "
                                     "--batch-size")

        def dataset_fn(input_context: tf.distribute.InputContext) -> tf.data.Dataset:
            return make_dataset([info], [IMAGES, LABELS], rank=input_context.input_pipeline_id,
                                size=input_context.num_input_pipelines, batch_size=args.batch_size,
                                training=training, preprocess=preprocessing, shuffle_buffer=args.shuffle_buffer,
                                seed=args.seed).dataset

        options = tf.distribute.InputOptions(experimental_fetch_to_device=False)
        return RankInput(strategy.distribute_datasets_from_function(dataset_fn, options), steps, rows)

    train, test = pipeline(args.train_info, True), pipeline(args.test_info, False)
    learning_rate = args.learning_rate * replicas
    with strategy.scope():
        height, width = args.train_info.row_shapes[IMAGES]  # two sides: checked by mnist.data
        model = build_cnn((height, width, 1))
        model.compile(optimizer=tf.keras.optimizers.legacy.Adam(learning_rate=learning_rate),
                      loss="categorical_crossentropy", metrics=["accuracy"])
    log.info("%s with %s; global batch %d (%d per replica), learning rate %g; per worker %d training rows "
             "(%d steps)", args.strategy, who, args.batch_size * replicas, args.batch_size, learning_rate,
             train.rows, train.steps)
    started = fit_with_strategy(strategy, context, model, train, test, epochs=args.epochs,
                                checkpoint_dir=args.checkpoint_dir, keep_checkpoints=args.keep_checkpoints,
                                title=f"mnist ({args.strategy}, {who})", headline="val_accuracy",
                                tensorboard_every_steps=args.tensorboard_every_steps)
    if started >= args.epochs and context.is_chief:
        log.info("the latest checkpoint already has %d of %d epochs: nothing to train", started, args.epochs)
    return 0


def _mirrored_devices(replicas: int | None) -> list[str] | None:
    """Every GPU (MirroredStrategy's default) unless `replicas` asks for a number; without GPUs, `replicas` logical
    CPU devices, so the multi-device path runs on any machine."""
    gpus = tf.config.list_physical_devices("GPU")
    if gpus:
        if replicas is not None and replicas > len(gpus):
            raise TrainingInputError(f"--replicas {replicas}: this machine has {len(gpus)} GPUs")
        return None if replicas is None else [f"/gpu:{index}" for index in range(replicas)]
    count = replicas or 1
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * count)
    return [f"/cpu:{index}" for index in range(count)]
