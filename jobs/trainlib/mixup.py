"""MixUp inside the tf.data graph: every batch is mixed with a fresh permutation of itself and fresh Beta(α, α) weights.

MixUp (Zhang et al., 2018) trains on convex combinations `λ·x_i + (1-λ)·x_j` with labels mixed the same way. Mixing a
batch with a shuffled copy of itself needs one input stream only, so it works on each rank's streamed HDF5 block.
"""

from __future__ import annotations

from collections.abc import Callable

import tensorflow as tf


def sample_beta_distribution(size: tf.Tensor | int, alpha: float) -> tf.Tensor:
    """Draw `size` samples of Beta(alpha, alpha) as X / (X + Y) with X, Y ~ Gamma(alpha)."""
    first = tf.random.gamma([size], alpha)
    second = tf.random.gamma([size], alpha)
    return first / (first + second)


def mix_up(images: tf.Tensor, labels: tf.Tensor, alpha: float) -> tuple[tf.Tensor, tf.Tensor]:
    """Mix a batch with a random permutation of itself, one λ ~ Beta(alpha, alpha) per sample.

    `images` is float (batch, ...), `labels` one-hot float (batch, classes); returns tensors of the same shapes.
    """
    batch = tf.shape(images)[0]
    weights = sample_beta_distribution(batch, alpha)
    partner = tf.random.shuffle(tf.range(batch))
    image_weights = tf.reshape(weights, tf.concat([[batch], tf.ones([tf.rank(images) - 1], tf.int32)], axis=0))
    label_weights = tf.reshape(weights, [batch, 1])
    # λ·x + (1-λ)·p written as p + λ·(x - p): one pass over the images fewer
    partner_images, partner_labels = tf.gather(images, partner), tf.gather(labels, partner)
    return (partner_images + image_weights * (images - partner_images),
            partner_labels + label_weights * (labels - partner_labels))


def apply_mixup(alpha: float) -> Callable[[tf.Tensor, tf.Tensor], tuple[tf.Tensor, tf.Tensor]]:
    """A batch transform for `hdf5_input.make_dataset(batch_transform=...)` that applies `mix_up` with `alpha`."""
    if alpha <= 0:
        raise ValueError(f"MixUp alpha must be positive, got {alpha}")

    def transform(images: tf.Tensor, labels: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        return mix_up(images, labels, alpha)

    return transform
