"""The notebook's network: dense 600 ReLU, dropout 0.2, dense 600 ReLU, dense 2 softmax. The softmax computes in
float32 under any policy (--mixed-precision), so the loss never sees float16 probabilities."""

from __future__ import annotations

import tensorflow as tf

HIDDEN_UNITS = 600
DROPOUT = 0.2
NUM_CLASSES = 2  # background, signal


def build_model(num_features: int, hidden_units: int = HIDDEN_UNITS, dropout: float = DROPOUT,
                name: str = "higgs_mlp") -> tf.keras.Model:
    """A fresh, built Keras model mapping standardised features to class probabilities."""
    return tf.keras.Sequential(
        [
            tf.keras.Input(shape=(num_features,)),
            tf.keras.layers.Dense(hidden_units, activation="relu"),
            tf.keras.layers.Dropout(dropout),
            tf.keras.layers.Dense(hidden_units, activation="relu"),
            tf.keras.layers.Dense(NUM_CLASSES, activation="softmax", dtype="float32"),
        ],
        name=name,
    )
