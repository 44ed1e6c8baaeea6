"""mnist's training, on `mnist.cli.parse`'s checked flags: with Horovod here (one process per rank, each reading its own
block of the HDF5 files; elastic under `horovodrun --min-np/--max-np`), or with a tf.distribute strategy
(`mnist.strategies`)."""

from __future__ import annotations

import argparse
import logging

import tensorflow as tf

from mnist.data import IMAGES, LABELS
from mnist.model import build_cnn, preprocessing
from mnist.strategies import train_with_strategy
from trainlib import distributed
from trainlib.hdf5_input import RankInput, make_dataset
from trainlib.keras_training import fit_distributed

log = logging.getLogger("mnist")


def train(args: argparse.Namespace) -> int:
    """Train as `args.strategy` says; `args` as `mnist.cli.parse` returns them."""
    return train_horovod(args) if args.strategy == "horovod" else train_with_strategy(args)


def train_horovod(args: argparse.Namespace) -> int:
    train_info, test_info = args.train_info, args.test_info
    context = distributed.start_rank(args.seed)
    names = [IMAGES, LABELS]

    def inputs(context: distributed.WorkerContext) -> tuple[RankInput, RankInput]:
        train_input = make_dataset([train_info], names, rank=context.rank, size=context.size,
                                   batch_size=args.batch_size, training=True, preprocess=preprocessing,
                                   shuffle_buffer=args.shuffle_buffer, seed=args.seed)
        test_input = make_dataset([test_info], names, rank=context.rank, size=context.size,
                                  batch_size=args.batch_size, training=False, preprocess=preprocessing)
        if context.is_chief:
            log.info("horovod with %d ranks; per rank %d training rows (%d steps), %d held-out rows", context.size,
                     train_input.rows, train_input.steps, test_input.rows)
        return train_input, test_input

    height, width = train_info.row_shapes[IMAGES]  # two sides: checked by mnist.data
    model = build_cnn((height, width, 1))
    learning_rate = distributed.scaled_learning_rate(args.learning_rate, context.size)
    optimizer = distributed.distributed_optimizer(tf.keras.optimizers.legacy.Adam(learning_rate=learning_rate))
    model.compile(optimizer=optimizer, loss="categorical_crossentropy", metrics=["accuracy"])
    trained = fit_distributed(context, model, inputs, epochs=args.epochs, learning_rate=args.learning_rate,
                              warmup_epochs=args.warmup_epochs, checkpoint_dir=args.checkpoint_dir,
                              keep_checkpoints=args.keep_checkpoints, commit_every_batches=args.commit_every_batches,
                              title=f"mnist (horovod, {context.size} ranks)", headline="val_accuracy",
                              tensorboard_every_steps=args.tensorboard_every_steps)
    if trained.context.is_chief and trained.held_out is not None:
        log.info("held-out accuracy %.4f, loss %.4f", trained.held_out["accuracy"], trained.held_out["loss"])
    return 0
