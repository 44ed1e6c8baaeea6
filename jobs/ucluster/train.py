"""UCluster's training under Horovod, one process per rank, on `ucluster.cli.parse`'s checked flags and files.

Epochs are counted from 1. Epochs 1..P (P = --epochs-pretrain) train the classifier alone; after epoch P, k-means on
the embeddings initialises the centroids; epochs P+1.. train classification + k-means loss with alpha = 2 (epoch - P).
Every epoch ends with an evaluation on the test files (each rank its own block; losses and confusion counts summed over
ranks before the Hungarian matching) and, on rank 0, a checkpoint (weights incl. centroids, optimizer state), the
history files and a progress report. A restarted run resumes after the latest checkpoint.

Not elastic (no `horovodrun --min-np/--max-np`): the loop is its own, not Keras `fit`, and its compiled steps and
learning-rate and batch-norm schedules are built for one number of ranks (samples per step = batch x ranks).
"""

from __future__ import annotations

import argparse
import functools
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import tensorflow as tf

from trainlib import distributed
from trainlib.custom_loop import EpochRecorder, loss_scaled
from trainlib.distributed import WorkerContext
from trainlib.hdf5_files import FileInfo
from trainlib.hdf5_input import RankInput, make_dataset
from trainlib.resume import create_optimizer_slots, restore_and_broadcast
from ucluster.clustering import initialise_centroids
from ucluster.metrics import confusion_counts, matched_accuracy
from ucluster.model import GapNetConfig, build_gapnet
from ucluster.schedules import StaircaseLearningRate, alpha_for_epoch, batch_norm_momentum
from ucluster.steps import UClusterSteps

log = logging.getLogger("ucluster")


@dataclass
class Inputs:
    train: RankInput
    test: RankInput
    train_for_kmeans: RankInput


def model_config(args: argparse.Namespace) -> GapNetConfig:
    return GapNetConfig(num_points=args.num_point, num_features=args.nfeat, num_classes=args.ncat,
                        embedding_dim=args.max_dim, num_clusters=args.n_clusters, neighbors=args.neighbors,
                        attention_heads=args.attention_heads, edge_widths=args.edge_widths,
                        conv_widths=args.conv_widths, dense_widths=args.dense_widths, pooling=args.pooling,
                        dropout_rates=args.head_dropout)


def load_inputs(args: argparse.Namespace, context: WorkerContext) -> Inputs:
    """This rank's pipelines over the checked files."""
    common = dict(rank=context.rank, size=context.size, batch_size=args.batch_size)
    return Inputs(train=rank_input(args.train_files, training=True, seed=args.seed, **common),
                  test=rank_input(args.test_files, training=False, **common),
                  train_for_kmeans=rank_input(args.train_files, training=False, **common))


def rank_input(files: Sequence[FileInfo], *, rank: int, size: int, batch_size: int, training: bool,
               seed: int | None = None) -> RankInput:
    """This rank's contiguous block of every file as batches of (points, pid, true cluster index)."""
    return make_dataset(files, ["data", "pid", "label"], rank=rank, size=size, batch_size=batch_size,
                        training=training, preprocess=_to_example, seed=seed)


def _to_example(points: tf.Tensor, pid: tf.Tensor, label: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
    return tf.cast(points, tf.float32), tf.cast(pid, tf.int32), tf.argmax(label, output_type=tf.int32)


def build_optimizer(args: argparse.Namespace, size: int, steps_per_epoch: int) -> tf.keras.optimizers.legacy.Optimizer:
    """Adam (or momentum SGD) at lr x size on the reference's staircase (after the optional warm-up), wrapped to
    average gradients over ranks, and to scale the loss under --mixed-precision."""
    schedule = StaircaseLearningRate(distributed.scaled_learning_rate(args.learning_rate, size),
                                     samples_per_step=args.batch_size * size, decay_step=args.decay_step,
                                     decay_rate=args.decay_rate, size=size,
                                     warmup_steps=args.warmup_epochs * steps_per_epoch)
    if args.optimizer == "momentum":
        optimizer = tf.keras.optimizers.legacy.SGD(schedule, momentum=args.momentum)
    else:
        optimizer = tf.keras.optimizers.legacy.Adam(schedule)
    return loss_scaled(distributed.distributed_optimizer(optimizer))


def train_epoch(steps: UClusterSteps, train: RankInput, full: bool, alpha: float, num_clusters: int,
                after_step: Callable[[], None] | None = None) -> dict:
    """One pass over this rank's block; metrics averaged over ranks (cluster counts summed). `after_step` runs after
    every optimizer step (rank 0's TensorBoard learning rate)."""
    class_sum = kmeans_sum = 0.0
    counts = np.zeros((num_clusters, num_clusters), dtype=np.int64)
    for points, classes, clusters in train.dataset.take(train.steps):
        if full:
            class_loss, cluster_loss, assigned = steps.full_step(points, classes, tf.constant(alpha, tf.float32))
            kmeans_sum += float(cluster_loss)
            counts += confusion_counts(clusters.numpy(), assigned.numpy(), num_clusters)
        else:
            class_loss = steps.pretrain_step(points, classes)
        class_sum += float(class_loss)
        if after_step is not None:
            after_step()
    means = distributed.allreduce_mean(np.array([class_sum, kmeans_sum]) / train.steps)
    metrics = {"class_loss": float(means[0])}
    if full:
        metrics["kmeans_loss"] = float(means[1])
        metrics["cluster_accuracy"] = matched_accuracy(distributed.allreduce_sum(counts))
    metrics["loss"] = sum(value for key, value in metrics.items() if key.endswith("_loss"))
    return metrics


def evaluate(steps: UClusterSteps, test: RankInput, with_clusters: bool, alpha: float, num_clusters: int) -> dict:
    """Losses and Hungarian cluster accuracy over every rank's test block (counts summed before matching)."""
    sums = np.zeros(3)  # focal loss, k-means loss, jets
    counts = np.zeros((num_clusters, num_clusters), dtype=np.int64)
    for points, classes, clusters in test.dataset.take(test.steps):
        class_loss, cluster_loss, assigned, _ = steps.evaluate(points, classes, tf.constant(alpha, tf.float32))
        sums += [float(class_loss), float(cluster_loss), len(classes)]
        counts += confusion_counts(clusters.numpy(), assigned.numpy(), num_clusters)
    sums = distributed.allreduce_sum(sums)
    metrics = {"val_class_loss": sums[0] / sums[2]}
    if with_clusters:
        metrics["val_kmeans_loss"] = sums[1] / sums[2]
        metrics["val_cluster_accuracy"] = matched_accuracy(distributed.allreduce_sum(counts))
    metrics["val_loss"] = sum(value for key, value in metrics.items() if key.endswith("_loss"))
    return {key: float(value) for key, value in metrics.items()}


def train(args: argparse.Namespace) -> int:
    """Pretrain, initialise the centroids, train jointly; `args` as `ucluster.cli.parse` returns them."""
    context = distributed.start_rank(args.seed)
    config = model_config(args)
    inputs = load_inputs(args, context)
    checkpoint_dir = args.checkpoint_dir

    model = build_gapnet(config)
    optimizer = build_optimizer(args, context.size, inputs.train.steps)
    create_optimizer_slots(optimizer, model.trainable_variables)  # before restore and broadcast
    steps = UClusterSteps(model, optimizer, samples_per_step=args.batch_size * context.size,
                          decay_step=args.decay_step, weight_decay=args.wd, focal_gamma=args.focal_gamma)
    variables = {"model": list(model.weights), "optimizer": list(optimizer.variables())}
    recorder = EpochRecorder.for_rank(context, checkpoint_dir, args.keep_checkpoints, "UCluster", args.epochs,
                                      inputs.train.steps, headline="val_cluster_accuracy",
                                      tensorboard_every_steps=args.tensorboard_every_steps)
    start = restore_and_broadcast(context, recorder.manager if recorder else None, variables)
    after_step: Callable[[], None] | None = None
    if recorder:
        recorder.resume_at(start, model, [tf.TensorSpec((None, config.num_points, config.num_features), tf.float32)])
        after_step = functools.partial(recorder.after_step, optimizer)
        log.info("%d ranks, %d training steps per epoch, %d trainable weights, checkpoints in %s", context.size,
                 inputs.train.steps, sum(int(np.prod(v.shape)) for v in model.trainable_variables), checkpoint_dir)

    pretrain = args.epochs_pretrain
    if start == 0 and pretrain == 0:
        initialise_centroids(context, steps, inputs.train_for_kmeans, args.kmeans_samples, args.seed)
    for epoch in range(start + 1, args.epochs + 1):
        began = time.monotonic()
        full = epoch > pretrain
        alpha = alpha_for_epoch(epoch - 1, pretrain) if full else 0.0
        metrics = train_epoch(steps, inputs.train, full, alpha, config.num_clusters, after_step)
        if epoch == pretrain:
            initialise_centroids(context, steps, inputs.train_for_kmeans, args.kmeans_samples, args.seed)
        eval_alpha = alpha if full else 2.0
        metrics.update(evaluate(steps, inputs.test, epoch >= pretrain, eval_alpha, config.num_clusters))
        step = int(optimizer.iterations.numpy())
        metrics.update(alpha=alpha, learning_rate=float(optimizer.learning_rate(step)),
                       bn_momentum=float(batch_norm_momentum(step, args.batch_size * context.size, args.decay_step)),
                       seconds=time.monotonic() - began)
        if recorder:
            recorder.record(epoch, metrics, variables)
    if recorder:
        recorder.finish()
        log.info("done: %d epochs, checkpoints in %s", args.epochs, checkpoint_dir)
    return 0
