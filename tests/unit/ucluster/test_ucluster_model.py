"""The GAPNet-style network: shapes, neighbour search, and batch norm following the shared momentum."""

import dataclasses
import math

import numpy as np
import pytest
import tensorflow as tf

from ucluster.model import GapNetConfig, build_gapnet, eta_phi_distance, nearest_neighbors

TINY = GapNetConfig(num_points=12, num_features=8, num_classes=5, embedding_dim=3, num_clusters=3, neighbors=4,
                    edge_widths=(4, 8), conv_widths=(8, 8, 8, 8), dense_widths=(8, 8))


def test_outputs_logits_per_class_and_an_embedding_per_jet():
    model = build_gapnet(TINY)
    logits, embedding = model(tf.random.normal((6, 12, 8)), training=False)
    assert logits.shape == (6, 5) and embedding.shape == (6, 3)
    assert model.centroids.shape == (3, 3)
    assert any("centroids" in weight.name for weight in model.trainable_weights)


def test_the_embedding_pools_particles_by_mean_as_the_reference_or_by_max_on_request():
    points = tf.random.normal((4, 12, 8))
    for pooling, reduce in (("mean", np.mean), ("max", np.max)):
        model = build_gapnet(dataclasses.replace(TINY, pooling=pooling))
        captured = {}
        original = model.aggregate.call

        def spy(inputs, training=None, original=original, captured=captured):
            captured["aggregated"] = original(inputs, training=training)
            return captured["aggregated"]

        model.aggregate.call = spy
        _, embedding = model(points, training=False)
        np.testing.assert_allclose(embedding.numpy(), reduce(captured["aggregated"].numpy(), axis=1), rtol=1e-5,
                                   atol=1e-6)


def test_the_reference_head_has_no_dropout_and_the_option_adds_it():
    points = tf.random.normal((4, 12, 8))
    plain = build_gapnet(TINY)
    first, _ = plain(points, training=True)
    second, _ = plain(points, training=True)
    np.testing.assert_allclose(first.numpy(), second.numpy(), rtol=1e-5, atol=1e-6)  # nothing random in training
    dropped = build_gapnet(dataclasses.replace(TINY, dropout_rates=(0.5, 0.5)))
    dropped.momentum_source.variable.assign(1.0)  # batch statistics are the same both times; only dropout differs
    first, _ = dropped(points, training=True)
    second, _ = dropped(points, training=True)
    assert not np.allclose(first.numpy(), second.numpy())


def test_phi_wraps_around_and_padding_is_never_a_neighbour():
    points = np.zeros((1, 4, 8), dtype=np.float32)
    points[0, 0, :2] = [0.0, math.pi - 0.05]
    points[0, 1, :2] = [0.0, -math.pi + 0.05]  # 0.1 away across the wrap
    points[0, 2, :3] = [0.5, 0.0, 1.0]
    # point 3 is all zeros: padding
    distances = eta_phi_distance(tf.constant(points)).numpy()
    assert distances[0, 0, 1] == pytest.approx(0.01, abs=1e-5)
    neighbors = nearest_neighbors(tf.constant(distances), 3).numpy()[0]
    assert 3 not in neighbors[0] and 3 not in neighbors[2]


def test_batch_norm_momentum_is_the_shared_variable():
    model = build_gapnet(TINY)
    norm = model.aggregate.norm
    model.momentum_source.variable.assign(0.0)  # momentum 0: moving mean becomes the batch mean
    points = tf.random.normal((16, 12, 8))
    model(points, training=True)
    after_zero = norm.moving_mean.numpy().copy()
    model.momentum_source.variable.assign(1.0)  # momentum 1: moving mean frozen
    model(tf.random.normal((16, 12, 8)) * 5.0, training=True)
    np.testing.assert_allclose(norm.moving_mean.numpy(), after_zero)
    assert not np.allclose(after_zero, 0.0)
