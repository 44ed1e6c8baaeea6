"""`python -m higgs`: train the notebook's network with one trainer (or, with --compare, several in turn).

Every rank: validate the files, compute the scaling statistics (partial sums all-reduced), restore rank 0's latest
checkpoint (broadcast), then train. Epochs count from 1; after each, the trainer's result model is scored on the test
split and rank 0 checkpoints (model, optimizer and, for EASGD, the centre), writes the history and reports progress.
The `single` trainer runs on rank 0 alone over the whole training split; the other ranks wait for it.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np
import tensorflow as tf

from higgs import data as higgs_data
from higgs.cli import build_parser
from higgs.elastic import check_elastic_stability, elastic_alpha
from higgs.evaluate import evaluate
from higgs.model import build_model
from higgs.sync import ElasticAveraging, ModelAveraging, Synchronizer
from trainlib import distributed
from trainlib.cli import resolve_checkpoint_dir
from trainlib.custom_loop import EpochRecorder, warmup_learning_rate
from trainlib.distributed import WorkerContext
from trainlib.errors import TrainingInputError
from trainlib.resume import restore_and_broadcast

log = logging.getLogger("higgs")


@dataclass(frozen=True)
class TrainerResult:
    """What a trainer achieved: test F1 (weighted, as the notebook), signal F1, accuracy, training seconds."""

    trainer: str
    f1: float
    f1_signal: float
    accuracy: float
    seconds: float
    epochs: int
    ranks: int


@dataclass(frozen=True)
class Prepared:
    data: higgs_data.HiggsData
    mean: np.ndarray
    std: np.ndarray


def prepare(args: argparse.Namespace, context: WorkerContext) -> Prepared:
    """Validate the files and compute the scaling statistics of the training split over all ranks."""
    loaded = higgs_data.load(args.data_dir, args.train_file, args.test_file)
    if loaded.train.rows < 2:
        raise TrainingInputError(f"{loaded.train.path}: {loaded.train.rows} training rows; need at least 2")
    mean, std = higgs_data.scaling_statistics(loaded.train, context)
    if context.is_chief:
        log.info("%d training / %d test events, %d features; scaling from %d ranks' partial sums", loaded.train.rows,
                 loaded.test.rows, loaded.num_features, context.size)
    return Prepared(loaded, mean, std)


def make_synchronizer(trainer: str, model: tf.keras.Model, args: argparse.Namespace, size: int) -> Synchronizer:
    if trainer == "easgd":
        alpha = elastic_alpha(args.easgd_learning_rate, args.rho)
        try:
            check_elastic_stability(alpha, size)
        except ValueError as error:
            raise TrainingInputError(str(error)) from None
        center = build_model(model.input_shape[-1], args.hidden_units, args.dropout, name="center")
        return ElasticAveraging(model, center, args.communication_window, alpha)
    if trainer == "model-averaging":
        return ModelAveraging(model, args.communication_window)
    return Synchronizer(model)


def make_optimizer(trainer: str, learning_rate: float, size: int) -> tf.keras.optimizers.legacy.Optimizer:
    """Adagrad as in the notebook; the allreduce trainer wraps it in Horovod's DistributedOptimizer at lr x size."""
    if trainer == "allreduce":
        scaled = distributed.scaled_learning_rate(learning_rate, size)
        return distributed.distributed_optimizer(tf.keras.optimizers.legacy.Adagrad(scaled))
    return tf.keras.optimizers.legacy.Adagrad(learning_rate)


def make_train_step(model: tf.keras.Model, optimizer: tf.keras.optimizers.legacy.Optimizer):
    loss_function = tf.keras.losses.CategoricalCrossentropy()

    @tf.function
    def train_step(features: tf.Tensor, targets: tf.Tensor) -> tf.Tensor:
        with tf.GradientTape() as tape:
            loss = loss_function(targets, model(features, training=True))
        optimizer.minimize(loss, model.trainable_variables, tape=tape)
        return loss

    return train_step


def run_trainer(trainer: str, args: argparse.Namespace, context: WorkerContext, prepared: Prepared,
                checkpoint_dir: str) -> TrainerResult:
    """Train with one trainer from its latest checkpoint to --epochs; every rank returns rank 0's result."""
    alone = trainer == "single"
    model = build_model(prepared.data.num_features, args.hidden_units, args.dropout)
    optimizer = make_optimizer(trainer, args.learning_rate, context.size)
    optimizer._create_all_weights(model.trainable_variables)  # slots exist before restore and broadcast
    synchronizer = make_synchronizer(trainer, model, args, context.size)
    variables = {"model": list(model.weights), "optimizer": list(optimizer.variables()),
                 **synchronizer.extra_state()}

    rank, size = (0, 1) if alone else (context.rank, context.size)
    train = None  # the single trainer's other ranks build no input and wait
    if context.is_chief or not alone:
        train = higgs_data.training_input(prepared.data.train, prepared.mean, prepared.std, rank=rank, size=size,
                                          batch_size=args.batch_size, seed=args.seed)
    steps_per_epoch = distributed.broadcast_object(train.steps if train else 0)
    recorder = EpochRecorder.for_rank(context, checkpoint_dir, args.keep_checkpoints, f"Higgs ({trainer})",
                                      args.epochs, steps_per_epoch)
    start = restore_and_broadcast(context, recorder.manager if recorder else None, variables)
    seconds = 0.0
    if recorder:
        recorder.resume_at(start)
        latest = recorder.manager.latest()
        seconds = latest.metrics.get("train_seconds_total", 0.0) if latest and start else 0.0
        log.info("trainer %s: %d ranks, %d steps per epoch, checkpoints in %s", trainer,
                 1 if alone else context.size, steps_per_epoch, checkpoint_dir)

    metrics: dict[str, float] = {}
    if train is not None:
        train_step = make_train_step(model, optimizer)
        train_step.get_concrete_function(*train.dataset.element_spec)  # compile now, so epochs time training only
        synchronizer.compile()
        warm_up = trainer == "allreduce" and args.warmup_epochs > 0
        target_rate = float(optimizer.learning_rate.numpy()) if warm_up else 0.0
        for epoch in range(start + 1, args.epochs + 1):
            began = time.monotonic()
            loss_sum = 0.0
            for features, targets in train.dataset.take(train.steps):
                if warm_up:  # only the allreduce trainer scales its rate by the ranks, so only it warms up
                    done = int(optimizer.iterations.numpy()) / train.steps
                    optimizer.learning_rate = warmup_learning_rate(target_rate, size, done, args.warmup_epochs)
                loss_sum += float(train_step(features, targets))
                synchronizer.after_step(int(optimizer.iterations.numpy()))
            synchronizer.end_of_epoch()
            elapsed = time.monotonic() - began
            loss = loss_sum / train.steps if alone else float(distributed.allreduce_mean(loss_sum / train.steps))
            seconds += elapsed
            metrics = {"loss": loss, "train_seconds": elapsed, "train_seconds_total": seconds}
            metrics.update(evaluate(synchronizer.result_model, prepared.data, prepared.mean, prepared.std, context,
                                    alone=alone))
            if recorder:
                recorder.record(epoch, metrics, variables)
        if not metrics:  # nothing left to train: score the restored model
            metrics = evaluate(synchronizer.result_model, prepared.data, prepared.mean, prepared.std, context,
                               alone=alone)
    result = None
    if context.is_chief:
        result = TrainerResult(trainer=trainer, f1=metrics["val_f1"], f1_signal=metrics["val_f1_signal"],
                               accuracy=metrics["val_accuracy"], seconds=seconds, epochs=args.epochs,
                               ranks=1 if alone else context.size)
        os.makedirs(checkpoint_dir, exist_ok=True)
        with open(os.path.join(checkpoint_dir, "result.json"), "w", encoding="utf-8") as handle:
            json.dump(asdict(result), handle, indent=2)
        log.info("trainer %s: test F1 %.4f (signal F1 %.4f, accuracy %.4f) after %.1f s of training", trainer,
                 result.f1, result.f1_signal, result.accuracy, seconds)
    return distributed.broadcast_object(result, root_rank=0)


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    context = distributed.start_rank(args.seed)
    prepared = prepare(args, context)
    checkpoint_dir = resolve_checkpoint_dir(args.checkpoint_dir, "higgs")
    if not args.compare:
        run_trainer(args.trainer, args, context, prepared, checkpoint_dir)
        return 0
    from higgs.compare import report_comparison

    results = [run_trainer(trainer, args, context, prepared, os.path.join(checkpoint_dir, trainer))
               for trainer in args.trainers]
    if context.is_chief:
        report_comparison(results, checkpoint_dir)
    return 0
