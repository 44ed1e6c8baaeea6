"""`python -m cifar_mixup`: the notebook's CNN trained with Horovod, with or without MixUp, validated on held-out data.

Reference hyperparameters (notebook "CNNs and MixUp with Horovod"): Adadelta with learning rate 0.1 x ranks, batch 32
per rank, 30 epochs, MixUp alpha 0.2. Unlike the notebook, validation runs on the held-out split (`test.h5`), not on
the training data, only rank 0 writes checkpoints, and the learning rate warms up from 0.1 to 0.1 x ranks over the
first 3 epochs (Horovod's recipe for large effective batches; `--warmup-epochs 0` turns it off).

    horovodrun -np 2 python -m cifar_mixup --data-dir /data/cifar10 --epochs 30 --mixup --alpha 0.2

Under elastic Horovod (`horovodrun --min-np/--max-np`) training goes on when ranks fail or join; see trainlib.elastic.

This module parses the flags and checks the data files; TensorFlow loads later, in cifar_mixup.train.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from cifar_mixup.data import INPUT_SCALING, validate_data
from trainlib.cli import (
    add_common_arguments,
    add_elastic_arguments,
    positive_float,
    positive_int,
    resolve_checkpoint_dir,
)

PROGRAM = "cifar_mixup"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=f"python -m {PROGRAM}", description=__doc__.split("\n\n")[0])
    add_common_arguments(parser, epochs=30, batch_size=32, learning_rate=0.1, warmup_epochs=3)
    add_elastic_arguments(parser)
    parser.add_argument("--mixup", action=argparse.BooleanOptionalAction, default=None,
                        help="train on MixUp batches (default: on; --no-mixup trains on the plain images)")
    parser.add_argument("--alpha", "--mixup-alpha", dest="alpha", type=positive_float, default=0.2,
                        help="MixUp Beta(alpha, alpha) concentration (default: 0.2)")
    parser.add_argument("--num-classes", type=positive_int, default=10, help="number of classes (default: 10)")
    parser.add_argument("--input-scaling", choices=sorted(INPUT_SCALING), default="symmetric",
                        help="pixels to inputs: symmetric [-1, 1], or notebook: its x/255*2-2, i.e. [-2, 0] "
                             "(default: symmetric)")
    parser.add_argument("--compare", action="store_true",
                        help="the notebook's comparison in one command: train with MixUp, then without (same seed, "
                             "data and settings) into <checkpoint-dir>/mixup and /no-mixup, then write "
                             "comparison.md, comparison.json and comparison.png (both validation curves)")
    return parser


def parse(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The flags, checked: bad input raises `TrainingInputError` (or exits as argparse does) before TensorFlow loads.
    Adds the data files' descriptions (`train_info`, `test_info`) and resolves `mixup` and `checkpoint_dir`."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.compare and args.mixup is False:
        parser.error("--compare trains both with and without MixUp: drop --no-mixup")
    args.mixup = args.mixup is not False  # unset: on
    args.train_info, args.test_info = validate_data(args.data_dir, args.num_classes)
    args.checkpoint_dir = resolve_checkpoint_dir(args.checkpoint_dir, PROGRAM)
    return args
