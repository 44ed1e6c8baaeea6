"""The article's deliberately small CNN: Conv2D(8, 3x3, same, ReLU) -> Flatten -> Dense(10, softmax). The softmax
computes in float32 under any policy (--mixed-precision), so the loss never sees float16 probabilities."""

from __future__ import annotations

import tensorflow as tf


def build_cnn(input_shape: tuple[int, int, int], num_classes: int = 10) -> tf.keras.Model:
    inputs = tf.keras.Input(shape=input_shape)
    features = tf.keras.layers.Conv2D(8, (3, 3), padding="same", activation="relu")(inputs)
    features = tf.keras.layers.Flatten()(features)
    outputs = tf.keras.layers.Dense(num_classes, activation="softmax", dtype="float32")(features)
    return tf.keras.Model(inputs, outputs, name="mnist_cnn")


def preprocessing(image: tf.Tensor, label: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    """The article's per-element map: scale to [0, 1], add the channel axis, one-hot the label."""
    image = tf.cast(image, tf.float32) / 255.0
    return tf.expand_dims(image, axis=-1), tf.one_hot(tf.cast(label, tf.int32), 10)
