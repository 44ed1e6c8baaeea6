"""The notebook's CNN: conv 24, 36, 48, 60 (3x3, same padding, ReLU, batch norm), dropout, dense, softmax.

`padding="same"` and the absence of pooling keep the spatial size, so the same architecture runs on 32x32 CIFAR
images and on 8x8 digits alike.
"""

from __future__ import annotations

import tensorflow as tf


def build_cnn(input_shape: tuple[int, int, int], num_classes: int = 10, number_conv: int = 4,
              number_dense: int = 2, dropout: float = 0.4) -> tf.keras.Model:
    """Conv(24 + 12 s) + BN for s < number_conv, Flatten, Dropout, number_dense x [Dense(num_classes, relu) + Dropout],
    BN, Dense(num_classes, softmax) -- the notebook's `create_model(4, 2)`. The softmax computes in float32 under any
    policy, so the loss never sees float16 probabilities."""
    layers = tf.keras.layers
    model = tf.keras.Sequential(name="cifar_mixup_cnn")
    model.add(tf.keras.Input(shape=input_shape))
    for step in range(number_conv):
        model.add(layers.Conv2D(24 + 12 * step, kernel_size=3, padding="same", activation="relu"))
        model.add(layers.BatchNormalization())
    model.add(layers.Flatten())
    model.add(layers.Dropout(dropout))
    for _ in range(number_dense):
        model.add(layers.Dense(num_classes, activation="relu"))
        model.add(layers.Dropout(dropout))
    model.add(layers.BatchNormalization())
    model.add(layers.Dense(num_classes, activation="softmax", dtype="float32"))
    return model
