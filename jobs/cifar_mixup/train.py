"""cifar_mixup's training, on `cifar_mixup.cli.parse`'s checked flags: Horovod setup, input pipelines, the CNN,
`fit_distributed` (elastic under `horovodrun --min-np/--max-np`), held-out evaluation, and with `--compare` both runs
and their comparison."""

from __future__ import annotations

import argparse
import json
import logging
import os
from collections.abc import Callable

import tensorflow as tf

from cifar_mixup.compare import VARIANTS, write_comparison
from cifar_mixup.data import IMAGES, INPUT_SCALING, LABELS
from cifar_mixup.model import build_cnn
from trainlib import distributed
from trainlib.hdf5_input import RankInput, make_dataset
from trainlib.keras_training import Trained, fit_distributed
from trainlib.mixup import apply_mixup

log = logging.getLogger("cifar_mixup")


def make_preprocess(num_classes: int, scaling: str = "symmetric"
                    ) -> Callable[[tf.Tensor, tf.Tensor], tuple[tf.Tensor, tf.Tensor]]:
    """uint8 image -> float32 (see `INPUT_SCALING`); class id -> one-hot float (MixUp mixes labels, so they must be
    one-hot)."""
    scale, shift = INPUT_SCALING[scaling]

    def preprocess(image: tf.Tensor, label: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        return tf.cast(image, tf.float32) * scale + shift, tf.one_hot(tf.cast(label, tf.int32), num_classes)

    return preprocess


def train(args: argparse.Namespace) -> int:
    """One run, or with `--compare` the MixUp and the plain run one after the other (same seed, data and settings,
    each in its own folder), then rank 0 writes the comparison. `args` as `cifar_mixup.cli.parse` returns them."""
    context = distributed.start_rank(args.seed)
    if not args.compare:
        train_once(context, args)
        return 0
    for name, mixup in VARIANTS:
        if args.seed is not None:
            tf.keras.utils.set_random_seed(args.seed + context.rank)  # both runs start from the same weights
        tf.keras.backend.clear_session()
        variant = {"mixup": mixup, "checkpoint_dir": os.path.join(args.checkpoint_dir, name)}
        context = train_once(context, argparse.Namespace(**{**vars(args), **variant})).context
    if context.is_chief:
        settings = {"ranks": context.size, "epochs": args.epochs, "batch": args.batch_size,
                    "lr": args.learning_rate, "alpha": args.alpha, "seed": args.seed}
        table = write_comparison(args.checkpoint_dir, settings)
        log.info("MixUp vs no MixUp (comparison.md, comparison.png in %s):\n%s", args.checkpoint_dir, table)
    return 0


def train_once(context: distributed.WorkerContext, args: argparse.Namespace) -> Trained:
    """Train one variant, evaluate it on the held-out data; rank 0 writes evaluation.json."""
    train_info, test_info, checkpoint_dir = args.train_info, args.test_info, args.checkpoint_dir
    preprocess = make_preprocess(args.num_classes, args.input_scaling)
    names = [IMAGES, LABELS]

    def inputs(context: distributed.WorkerContext) -> tuple[RankInput, RankInput]:
        train_input = make_dataset([train_info], names, rank=context.rank, size=context.size,
                                   batch_size=args.batch_size, training=True, preprocess=preprocess,
                                   batch_transform=apply_mixup(args.alpha) if args.mixup else None, seed=args.seed)
        test_input = make_dataset([test_info], names, rank=context.rank, size=context.size,
                                  batch_size=args.batch_size, training=False, preprocess=preprocess)
        if context.is_chief:
            log.info("%d ranks; per rank %d training rows (%d steps) and %d held-out rows; mixup %s (alpha %g)",
                     context.size, train_input.rows, train_input.steps, test_input.rows,
                     "on" if args.mixup else "off", args.alpha)
        return train_input, test_input

    height, width, channels = train_info.row_shapes[IMAGES]  # three axes: checked by cifar_mixup.data
    model = build_cnn((height, width, channels), args.num_classes)
    learning_rate = distributed.scaled_learning_rate(args.learning_rate, context.size)
    optimizer = distributed.distributed_optimizer(tf.keras.optimizers.legacy.Adadelta(learning_rate=learning_rate))
    model.compile(optimizer=optimizer, loss="categorical_crossentropy", metrics=["accuracy"])
    trained = fit_distributed(context, model, inputs, epochs=args.epochs, learning_rate=args.learning_rate,
                              warmup_epochs=args.warmup_epochs, checkpoint_dir=checkpoint_dir,
                              keep_checkpoints=args.keep_checkpoints, commit_every_batches=args.commit_every_batches,
                              headline="val_accuracy", tensorboard_every_steps=args.tensorboard_every_steps,
                              title=f"cifar_mixup ({f'mixup alpha {args.alpha:g}' if args.mixup else 'no mixup'}, "
                                    f"{context.size} ranks)")
    if trained.context.is_chief and trained.held_out is not None:
        loss, accuracy = trained.held_out["loss"], trained.held_out["accuracy"]
        log.info("held-out accuracy %.4f, loss %.4f (%d images)", accuracy, loss, trained.held_out_rows)
        os.makedirs(checkpoint_dir, exist_ok=True)
        with open(os.path.join(checkpoint_dir, "evaluation.json"), "w", encoding="utf-8") as handle:
            json.dump({"heldOutAccuracy": float(accuracy), "heldOutLoss": float(loss),
                       "heldOutImages": trained.held_out_rows, "epochs": args.epochs}, handle, indent=2)
    return trained
