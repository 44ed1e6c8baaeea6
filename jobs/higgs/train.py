"""Training (after higgs.cli has checked the flags and files): one trainer, or with --compare several in turn.

Every rank computes the scaling statistics (partial sums all-reduced), restores rank 0's latest checkpoint
(broadcast), then trains. Epochs count from 1; after each, the trainer's result model (the centre for the EASGD
trainers) is scored on the test split and rank 0 checkpoints it, writes the history and reports progress.
Who trains: `single` rank 0 alone (the other ranks wait); the parameter-server trainers every rank but 0, which
serves; the others every rank.

Not elastic (no `horovodrun --min-np/--max-np`): the parameter-server trainers talk over MPI and elastic Horovod runs
on Gloo; the others have their own loops, not Keras `fit`, and the EASGD and averaging trainers keep per-rank state.
"""

from __future__ import annotations

import argparse
import functools
import json
import logging
import os
import time
from dataclasses import asdict, dataclass

import numpy as np
import tensorflow as tf

from higgs import data as higgs_data
from higgs.asynchronous import WORKERS, ParameterServer, weights_vector
from higgs.compare import report_comparison
from higgs.evaluate import evaluate
from higgs.model import build_model
from higgs.parameter_server import Client, communicator
from higgs.sync import ElasticAveraging, LocalTraining, WarmedUpTraining, WindowedAveraging
from higgs.trainers import TrainerResult, TrainerSettings
from trainlib import distributed
from trainlib.cli import resolve_checkpoint_dir
from trainlib.custom_loop import EpochRecorder, loss_scaled
from trainlib.distributed import WorkerContext
from trainlib.errors import TrainingInputError
from trainlib.hdf5_input import RankInput
from trainlib.resume import create_optimizer_slots, restore_and_broadcast

log = logging.getLogger("higgs")


@dataclass(frozen=True)
class Prepared:
    data: higgs_data.HiggsData
    mean: np.ndarray
    std: np.ndarray


def prepare(files: higgs_data.HiggsData, context: WorkerContext) -> Prepared:
    """The scaling statistics of the training split over all ranks."""
    if files.train.rows < 2:
        raise TrainingInputError(f"{files.train.path}: {files.train.rows} training rows; need at least 2")
    mean, std = higgs_data.scaling_statistics(files.train, context)
    if context.is_chief:
        log.info("%d training / %d test events, %d features; scaling from %d ranks' partial sums", files.train.rows,
                 files.test.rows, files.num_features, context.size)
    return Prepared(files, mean, std)


def check_parameter_server_world(settings: TrainerSettings, context: WorkerContext) -> None:
    """A parameter-server trainer needs a worker besides rank 0 and the MPI world Horovod runs in."""
    import horovod.tensorflow as hvd

    if context.size < 2:
        raise TrainingInputError(f"--trainer {settings.name} needs at least 2 ranks (rank 0 serves the parameters, "
                                 "the others train); run it under mpirun or horovodrun -np 2 or more")
    if not hvd.mpi_enabled():
        raise TrainingInputError(f"--trainer {settings.name} exchanges with its parameter server over MPI; this job "
                                 "runs Horovod on Gloo: launch it with mpirun or `horovodrun --mpi`")


def make_optimizer(settings: TrainerSettings, learning_rate: float, size: int) -> tf.keras.optimizers.legacy.Optimizer:
    """Adagrad as in the notebook; the allreduce trainer wraps it in Horovod's DistributedOptimizer at lr x size.
    Under --mixed-precision every trainer's optimizer scales the loss (`custom_loop.loss_scaled`)."""
    if settings.name == "allreduce":
        scaled = distributed.scaled_learning_rate(learning_rate, size)
        return loss_scaled(distributed.distributed_optimizer(tf.keras.optimizers.legacy.Adagrad(scaled)))
    return loss_scaled(tf.keras.optimizers.legacy.Adagrad(learning_rate))


def make_role(settings: TrainerSettings, model: tf.keras.Model, optimizer: tf.keras.optimizers.legacy.Optimizer,
              args: argparse.Namespace, context: WorkerContext, comm) -> LocalTraining | ParameterServer | None:
    """What this rank does in each epoch of this trainer (None: nothing, it waits for rank 0)."""
    if settings.parameter_server:
        if context.is_chief:
            return ParameterServer(model, comm, settings.workers(context.size))
        return WORKERS[settings.name](model, optimizer, settings, Client(comm, weights_vector(model).size))
    if settings.name == "single":
        return LocalTraining(model, optimizer) if context.is_chief else None
    if settings.name == "easgd":
        center = build_model(model.input_shape[-1], args.hidden_units, args.dropout, name="center")
        return ElasticAveraging(model, optimizer, center, settings)
    if settings.name == "model-averaging":
        return WindowedAveraging(model, optimizer, settings.window)
    if args.warmup_epochs > 0:
        return WarmedUpTraining(model, optimizer, context.size, args.warmup_epochs)
    return LocalTraining(model, optimizer)


def training_block(settings: TrainerSettings, context: WorkerContext) -> tuple[int, int]:
    """(block, blocks) of the training split this rank trains on."""
    if settings.name == "single":
        return 0, 1
    if settings.parameter_server:
        return context.rank - 1, context.size - 1
    return context.rank, context.size


def run_epoch(role: LocalTraining | ParameterServer, train: RankInput | None, settings: TrainerSettings,
              prepared: Prepared, context: WorkerContext) -> dict[str, float]:
    """One epoch of this rank's role: the training loss over all training ranks, seconds, and (on rank 0, or every
    rank when the evaluation is shared) the test metrics of the result model."""
    began = time.monotonic()
    if isinstance(role, ParameterServer):
        loss_sum, steps = role.run_epoch()
    else:
        assert train is not None, "a training rank has its input"
        loss_sum, steps = role.run_epoch(train)
    elapsed = time.monotonic() - began
    alone = settings.name == "single"
    if not alone:
        loss_sum, steps = distributed.allreduce_sum(np.array([loss_sum, steps], np.float64))
    metrics = {"loss": float(loss_sum / max(steps, 1)), "train_seconds": elapsed}
    shared = not alone and not settings.parameter_server  # every rank holds the result model
    if shared or context.is_chief:
        metrics.update(evaluate(role.result_model, prepared.data, prepared.mean, prepared.std, context,
                                alone=not shared))
    return metrics


def run_trainer(settings: TrainerSettings, args: argparse.Namespace, context: WorkerContext, prepared: Prepared,
                checkpoint_dir: str) -> TrainerResult:
    """Train with one trainer from its latest checkpoint to --epochs; every rank returns rank 0's result."""
    comm = communicator() if settings.parameter_server else None
    model = build_model(prepared.data.num_features, args.hidden_units, args.dropout)
    optimizer = make_optimizer(settings, args.learning_rate, context.size)
    create_optimizer_slots(optimizer, model.trainable_variables)  # before restore and broadcast
    role = make_role(settings, model, optimizer, args, context, comm)
    variables = {"model": list(model.weights), "optimizer": list(optimizer.variables()),
                 **(role.extra_state() if isinstance(role, LocalTraining) else {})}
    train = None
    if isinstance(role, LocalTraining):
        rank, size = training_block(settings, context)
        train = higgs_data.training_input(prepared.data.train, prepared.mean, prepared.std, rank=rank, size=size,
                                          batch_size=settings.batch_size, seed=args.seed)
    steps = distributed.broadcast_object(train.steps if train else 0, root_rank=1 if settings.parameter_server else 0)
    recorder = EpochRecorder.for_rank(context, checkpoint_dir, args.keep_checkpoints, f"Higgs ({settings.name})",
                                      args.epochs, steps, headline="val_f1",
                                      tensorboard_every_steps=args.tensorboard_every_steps)
    start = restore_and_broadcast(context, recorder.manager if recorder else None, variables)
    seconds = 0.0
    if recorder:
        recorder.resume_at(start, model)
        if isinstance(role, LocalTraining):
            role.on_step = functools.partial(recorder.after_step, optimizer)
        latest = recorder.manager.latest()
        seconds = latest.metrics.get("train_seconds_total", 0.0) if latest and start else 0.0
        log.info("trainer %s: %d of %d ranks train, batch %d, %d steps per epoch per worker, checkpoints in %s",
                 settings.name, settings.workers(context.size), context.size, settings.batch_size, steps,
                 checkpoint_dir)
    metrics: dict[str, float] = {}
    if role is not None:
        if isinstance(role, LocalTraining) and train:
            role.compile(train.dataset.element_spec)  # trace now, so epochs time training only
            role.begin()
        for epoch in range(start + 1, args.epochs + 1):
            if comm is not None:
                comm.Barrier()  # the server's clock starts with its workers'
            metrics = run_epoch(role, train, settings, prepared, context)
            seconds += metrics["train_seconds"]
            metrics["train_seconds_total"] = seconds
            if recorder:
                recorder.record(epoch, metrics, variables)
        if context.is_chief and "val_f1" not in metrics:  # nothing left to train: score the restored model
            metrics.update(evaluate(role.result_model, prepared.data, prepared.mean, prepared.std, context,
                                    alone=True))
    if recorder:
        recorder.finish()
    result = None
    if context.is_chief:
        result = TrainerResult(trainer=settings.name, f1=metrics["val_f1"], f1_signal=metrics["val_f1_signal"],
                               accuracy=metrics["val_accuracy"], seconds=seconds, epochs=args.epochs,
                               workers=settings.workers(context.size), ranks=context.size)
        save_result(result, checkpoint_dir)
    return distributed.broadcast_object(result, root_rank=0)


def save_result(result: TrainerResult, checkpoint_dir: str) -> None:
    """Log the result and write it to result.json beside the checkpoints."""
    os.makedirs(checkpoint_dir, exist_ok=True)
    with open(os.path.join(checkpoint_dir, "result.json"), "w", encoding="utf-8") as handle:
        json.dump(asdict(result), handle, indent=2)
    log.info("trainer %s: test F1 %.4f (signal F1 %.4f, accuracy %.4f) after %.1f s of training", result.trainer,
             result.f1, result.f1_signal, result.accuracy, result.seconds)


def train(args: argparse.Namespace) -> int:
    """Start this rank, then run each trainer of the run (one, or with --compare every one of --trainers)."""
    context = distributed.start_rank(args.seed)
    for settings in args.settings:
        if settings.parameter_server:
            check_parameter_server_world(settings, context)  # before any trainer of a --compare run starts
    prepared = prepare(args.files, context)
    checkpoint_dir = resolve_checkpoint_dir(args.checkpoint_dir, "higgs")
    if not args.compare:
        run_trainer(args.settings[0], args, context, prepared, checkpoint_dir)
        return 0
    results = [run_trainer(settings, args, context, prepared, os.path.join(checkpoint_dir, settings.name))
               for settings in args.settings]
    if context.is_chief:
        report_comparison(results, checkpoint_dir)
    return 0
