"""A small Keras training run that checkpoints with trainlib after every epoch, as the programs do (resume from the
latest checkpoint, broadcast, CheckpointCallback). The state is ~13 MB (a 1M-weight MLP plus Adam's slots), so a save
takes long enough for a kill to land inside it. Prints `saving <epoch>` before and `saved <epoch>` after each save.

    python checkpoint_trainer.py --checkpoint-dir DIR --epochs 50
"""

from __future__ import annotations

import argparse
import logging
import sys

from trainlib.cli import quiet_tensorflow

quiet_tensorflow()

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from sklearn.datasets import load_digits  # noqa: E402

from trainlib import distributed  # noqa: E402
from trainlib.callbacks import CheckpointCallback  # noqa: E402
from trainlib.checkpoints import CheckpointManager  # noqa: E402
from trainlib.resume import keras_state, restore_and_broadcast  # noqa: E402


class Announce(tf.keras.callbacks.Callback):
    def __init__(self, word: str) -> None:
        super().__init__()
        self.word = word

    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        print(f"{self.word} {epoch + 1}", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--checkpoint-dir", required=True)
    parser.add_argument("--epochs", type=int, default=50)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, stream=sys.stdout, format="%(name)s: %(message)s")
    context = distributed.init_horovod()
    digits = load_digits()
    features = (digits.data / 16.0).astype(np.float32)
    labels = tf.keras.utils.to_categorical(digits.target, 10)
    model = tf.keras.Sequential([tf.keras.Input((64,)), tf.keras.layers.Dense(1024, activation="relu"),
                                 tf.keras.layers.Dense(1024, activation="relu"), tf.keras.layers.Dense(10)])
    model.compile(optimizer=distributed.distributed_optimizer(tf.keras.optimizers.legacy.Adam(1e-3)),
                  loss=tf.keras.losses.CategoricalCrossentropy(from_logits=True), metrics=["accuracy"])
    manager = CheckpointManager(args.checkpoint_dir, keep=3)
    variables = keras_state(model)
    initial_epoch = restore_and_broadcast(context, manager, variables)
    dataset = tf.data.Dataset.from_tensor_slices((features, labels)).repeat().batch(64)
    model.fit(dataset, steps_per_epoch=4, epochs=args.epochs, initial_epoch=initial_epoch, verbose=0,
              callbacks=[Announce("saving"), CheckpointCallback(manager, variables), Announce("saved")])
    print(f"finished {args.epochs}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
