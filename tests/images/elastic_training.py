"""A small elastic Horovod training for the images tier (run by horovodrun on the workers of an elastic job).

A linear classifier on random batches, trained with `hvd.elastic.run`: the state (weights, optimizer, epoch, batch)
is committed every few batches, restored from the last commit when a rank is lost, and broadcast to ranks that join.
Prints one line per step, `step rank=R size=S epoch=E batch=B host=H time=T`, and rank 0 one per commit,
`commit epoch=E batch=B time=T` (the position training resumes from).

Usage: python elastic_training.py [--epochs N] [--batches N] [--commit-every N] [--step-seconds S]
"""

from __future__ import annotations

import argparse
import socket
import time
from collections.abc import Sequence

import horovod.tensorflow as hvd
import numpy as np
import tensorflow as tf

FEATURES = 8
BATCH_SIZE = 32


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=3, help="epochs to train (default: 3)")
    parser.add_argument("--batches", type=int, default=40, help="batches per epoch (default: 40)")
    parser.add_argument("--commit-every", type=int, default=5, help="batches between commits (default: 5)")
    parser.add_argument("--step-seconds", type=float, default=0.3, help="pause after each step (default: 0.3)")
    return parser.parse_args()


def batch(epoch: int, index: int, rank: int) -> tuple[np.ndarray, np.ndarray]:
    """A batch of random points, labelled by the sign of their sum; the same for the same position and rank."""
    generator = np.random.default_rng([epoch, index, rank])
    features = generator.normal(size=(BATCH_SIZE, FEATURES)).astype("float32")
    return features, (features.sum(axis=1) > 0).astype("int64")


def create_optimizer_slots(optimizer: tf.keras.optimizers.legacy.Optimizer, variables: Sequence[tf.Variable]) -> None:
    """Horovod: the state broadcasts the optimizer's variables, so its slots must exist on every rank before the first
    sync, a joining rank's included. One step of zero gradients creates them without a collective op and moves no
    weight; `iterations` goes back to 0."""
    optimizer.apply_gradients(zip([tf.zeros_like(variable) for variable in variables], variables, strict=True))
    optimizer.iterations.assign(0)


def main() -> None:
    args = parse_args()
    hvd.init()
    model = tf.keras.Sequential([tf.keras.Input((FEATURES,)), tf.keras.layers.Dense(2)])
    optimizer = tf.keras.optimizers.legacy.SGD(learning_rate=0.05, momentum=0.9)
    loss_function = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    create_optimizer_slots(optimizer, model.trainable_variables)

    @tf.function
    def train_step(features: tf.Tensor, labels: tf.Tensor) -> tf.Tensor:
        with tf.GradientTape() as tape:
            loss = loss_function(labels, model(features, training=True))
        # Horovod: average the gradients over the ranks there are now.
        tape = hvd.DistributedGradientTape(tape)
        gradients = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(gradients, model.trainable_variables, strict=True))
        return loss

    state = hvd.elastic.TensorFlowKerasState(model, optimizer, epoch=0, batch=0)
    host = socket.gethostname()

    @hvd.elastic.run
    def train(state: hvd.elastic.TensorFlowKerasState) -> None:
        while state.epoch < args.epochs:
            while state.batch < args.batches:
                train_step(*batch(state.epoch, state.batch, hvd.rank()))
                print(f"step rank={hvd.rank()} size={hvd.size()} epoch={state.epoch} batch={state.batch} host={host} "
                      f"time={time.time():.3f}", flush=True)
                time.sleep(args.step_seconds)
                state.batch += 1
                if state.batch % args.commit_every == 0:
                    state.commit()
                    if hvd.rank() == 0:
                        print(f"commit epoch={state.epoch} batch={state.batch} time={time.time():.3f}", flush=True)
            state.epoch, state.batch = state.epoch + 1, 0
            state.commit()
            if hvd.rank() == 0:
                print(f"commit epoch={state.epoch} batch=0 time={time.time():.3f}", flush=True)

    train(state)
    if hvd.rank() == 0:
        print(f"training done: {args.epochs} epochs on {hvd.size()} ranks", flush=True)


if __name__ == "__main__":
    main()
