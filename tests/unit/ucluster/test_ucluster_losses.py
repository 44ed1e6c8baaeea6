"""Focal and k-means losses against hand computations."""

import math

import numpy as np
import pytest
import tensorflow as tf

from ucluster.losses import focal_loss, kmeans_loss, nearest_cluster


def test_focal_loss_matches_a_hand_computation():
    # softmax([0, ln 3]) = [1/4, 3/4]
    logits = tf.constant([[0.0, math.log(3.0)], [0.0, math.log(3.0)]])
    classes = tf.constant([1, 0])
    by_hand_1 = 10.0 * (1 - 0.75) ** 4 * -math.log(0.75)  # upstream UCluster: gamma 4, alpha 10
    by_hand_0 = 10.0 * (1 - 0.25) ** 4 * -math.log(0.25)
    assert float(focal_loss(logits, classes)) == pytest.approx((by_hand_1 + by_hand_0) / 2, rel=1e-5)


def test_focal_loss_with_gamma_zero_is_scaled_cross_entropy():
    logits = tf.constant([[2.0, -1.0, 0.5]])
    cross_entropy = float(tf.nn.sparse_softmax_cross_entropy_with_logits(tf.constant([2]), logits)[0])
    assert float(focal_loss(logits, tf.constant([2]), gamma=0.0, alpha=1.0)) == pytest.approx(cross_entropy, rel=1e-5)


def test_confident_right_answers_cost_almost_nothing():
    assert float(focal_loss(tf.constant([[20.0, 0.0]]), tf.constant([0]))) < 1e-6


def test_kmeans_loss_matches_a_hand_computation():
    embeddings = tf.constant([[0.0, 0.0], [3.0, 0.0]])
    centroids = tf.constant([[0.0, 0.0], [1.0, 0.0]])
    # sample 0: distances [0, 1], weights softmax([0, -1]); sample 1: distances [9, 4], weights softmax([-5, 0])
    w0 = [1 / (1 + math.exp(-1)), math.exp(-1) / (1 + math.exp(-1))]
    w1 = [math.exp(-5) / (1 + math.exp(-5)), 1 / (1 + math.exp(-5))]
    by_hand = ((0 * w0[0] + 1 * w0[1]) + (9 * w1[0] + 4 * w1[1])) / 2
    loss, distances = kmeans_loss(embeddings, centroids, alpha=1.0)
    assert float(loss) == pytest.approx(by_hand, rel=1e-5)
    np.testing.assert_allclose(distances.numpy(), [[0.0, 9.0], [1.0, 4.0]])
    assert nearest_cluster(distances).numpy().tolist() == [0, 1]


def test_large_alpha_turns_the_loss_into_the_distance_to_the_nearest_centroid():
    embeddings = tf.constant([[0.2, 0.0], [2.5, 1.0]])
    centroids = tf.constant([[0.0, 0.0], [3.0, 1.0]])
    loss, _ = kmeans_loss(embeddings, centroids, alpha=1000.0)
    assert float(loss) == pytest.approx((0.04 + 0.25) / 2, rel=1e-4)
