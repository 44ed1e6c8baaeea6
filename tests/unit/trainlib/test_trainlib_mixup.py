"""MixUp in the tf.data graph: convex mixes of a batch with a permutation of itself, fresh each batch."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from trainlib.mixup import apply_mixup, mix_up, sample_beta_distribution


def test_beta_samples_lie_in_the_unit_interval_with_the_right_mean_and_spread():
    samples = sample_beta_distribution(20000, 0.2).numpy()
    assert samples.min() >= 0.0 and samples.max() <= 1.0
    assert samples.mean() == pytest.approx(0.5, abs=0.02)
    # Beta(0.2, 0.2) piles up near 0 and 1: variance 1/(4 (2 alpha + 1)) = 0.1786
    assert samples.var() == pytest.approx(1 / (4 * 1.4), abs=0.01)


def test_mix_up_mixes_images_and_labels_with_the_same_weights():
    tf.random.set_seed(1)
    batch = 64
    images = tf.reshape(tf.range(batch, dtype=tf.float32), [batch, 1, 1, 1]) * tf.ones([batch, 3, 3, 2])
    labels = tf.one_hot(tf.range(batch) % 8, 8)
    mixed_images, mixed_labels = mix_up(images, labels, alpha=0.2)
    assert mixed_images.shape == images.shape and mixed_labels.shape == labels.shape
    mixed_labels = mixed_labels.numpy()
    np.testing.assert_allclose(mixed_labels.sum(axis=1), 1.0, rtol=1e-6)
    # each mixed image is constant (a mix of two constant images) and lies between the smallest and largest input
    per_image = mixed_images.numpy().reshape(batch, -1)
    np.testing.assert_allclose(per_image.max(axis=1), per_image.min(axis=1), rtol=1e-5)
    assert per_image.min() >= 0 and per_image.max() <= batch - 1
    assert not np.allclose(per_image[:, 0], np.arange(batch)), "images were actually mixed"
    assert (mixed_labels > 0).sum(axis=1).max() <= 2, "each sample mixes with one partner"


def test_every_batch_gets_a_fresh_mix_inside_the_dataset_graph():
    images = tf.reshape(tf.range(32 * 4, dtype=tf.float32), [32 * 4, 1])
    labels = tf.one_hot(tf.range(32 * 4) % 4, 4)
    dataset = tf.data.Dataset.from_tensor_slices((images, labels)).batch(32).repeat(2)
    mixed = [labels.numpy() for _, labels in dataset.map(apply_mixup(0.4))]
    assert len(mixed) == 8
    assert not np.allclose(mixed[0], mixed[4]), "the same batch is mixed differently in the next epoch"


def test_alpha_must_be_positive():
    with pytest.raises(ValueError, match="alpha must be positive, got 0"):
        apply_mixup(0)
