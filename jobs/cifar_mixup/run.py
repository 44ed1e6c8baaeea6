"""cifar_mixup's training run: Horovod setup, input pipelines, the CNN, `fit_distributed`, held-out evaluation."""

from __future__ import annotations

import argparse
import json
import logging
import os
from collections.abc import Callable

import tensorflow as tf

from cifar_mixup.data import IMAGES, LABELS
from cifar_mixup.model import build_cnn
from trainlib import distributed
from trainlib.hdf5_files import FileInfo
from trainlib.hdf5_input import make_dataset
from trainlib.keras_training import fit_distributed
from trainlib.mixup import apply_mixup

log = logging.getLogger("cifar_mixup")


def make_preprocess(num_classes: int) -> Callable[[tf.Tensor, tf.Tensor], tuple[tf.Tensor, tf.Tensor]]:
    """uint8 image -> float32 in [-1, 1]; class id -> one-hot float (MixUp mixes labels, so they must be one-hot)."""

    def preprocess(image: tf.Tensor, label: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        return tf.cast(image, tf.float32) / 127.5 - 1.0, tf.one_hot(tf.cast(label, tf.int32), num_classes)

    return preprocess


def train(args: argparse.Namespace, train_info: FileInfo, test_info: FileInfo, checkpoint_dir: str) -> int:
    context = distributed.start_rank(args.seed)
    preprocess = make_preprocess(args.num_classes)
    names = [IMAGES, LABELS]
    train_input = make_dataset([train_info], names, rank=context.rank, size=context.size, batch_size=args.batch_size,
                               training=True, preprocess=preprocess,
                               batch_transform=apply_mixup(args.alpha) if args.mixup else None, seed=args.seed)
    test_input = make_dataset([test_info], names, rank=context.rank, size=context.size, batch_size=args.batch_size,
                              training=False, preprocess=preprocess)
    if context.is_chief:
        log.info("%d ranks; per rank %d training rows (%d steps) and %d held-out rows; mixup %s (alpha %g)",
                 context.size, train_input.rows, train_input.steps, test_input.rows,
                 "on" if args.mixup else "off", args.alpha)
    height, width, channels = train_info.row_shapes[IMAGES]  # three axes: checked by cifar_mixup.data
    model = build_cnn((height, width, channels), args.num_classes)
    learning_rate = distributed.scaled_learning_rate(args.learning_rate, context.size)
    optimizer = distributed.distributed_optimizer(tf.keras.optimizers.legacy.Adadelta(learning_rate=learning_rate))
    model.compile(optimizer=optimizer, loss="categorical_crossentropy", metrics=["accuracy"])
    fit_distributed(context, model, train_input, test_input, epochs=args.epochs, initial_lr=learning_rate,
                    warmup_epochs=args.warmup_epochs, checkpoint_dir=checkpoint_dir,
                    keep_checkpoints=args.keep_checkpoints,
                    title=f"cifar_mixup ({f'mixup alpha {args.alpha:g}' if args.mixup else 'no mixup'}, "
                          f"{context.size} ranks)")
    loss, accuracy = model.evaluate(test_input.dataset, steps=test_input.steps, verbose=0)
    loss, accuracy = distributed.allreduce_mean([loss, accuracy], name="held_out_evaluation")
    if context.is_chief:
        log.info("held-out accuracy %.4f, loss %.4f (%d images)", accuracy, loss, test_input.rows * context.size)
        os.makedirs(checkpoint_dir, exist_ok=True)
        with open(os.path.join(checkpoint_dir, "evaluation.json"), "w", encoding="utf-8") as handle:
            json.dump({"heldOutAccuracy": float(accuracy), "heldOutLoss": float(loss),
                       "heldOutImages": test_input.rows * context.size, "epochs": args.epochs}, handle, indent=2)
    return 0
