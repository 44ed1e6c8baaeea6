"""UCluster's two losses: a focal classification loss and the soft k-means loss on the pooled embeddings."""

from __future__ import annotations

import tensorflow as tf

from ucluster.cli import FOCAL_GAMMA

FOCAL_ALPHA = 10.0  # overall scale of upstream UCluster's focal loss (its exponent: ucluster.cli.FOCAL_GAMMA)
FOCAL_EPSILON = 1e-9  # added to the probability before the log, as in the reference


def focal_loss(
    logits: tf.Tensor, classes: tf.Tensor, gamma: float = FOCAL_GAMMA, alpha: float = FOCAL_ALPHA
) -> tf.Tensor:
    """Mean over the batch of alpha * (1 - p_t)^gamma * -log(p_t), p_t the softmax probability of the true class.

    logits: (batch, num_classes); classes: (batch,) integer class indices.
    """
    probabilities = tf.nn.softmax(logits, axis=-1)
    true_probability = tf.gather(probabilities, tf.cast(classes, tf.int32), axis=1, batch_dims=1) + FOCAL_EPSILON
    per_sample = alpha * tf.pow(1.0 - true_probability, gamma) * -tf.math.log(true_probability)
    return tf.reduce_mean(per_sample)


def squared_distances(embeddings: tf.Tensor, centroids: tf.Tensor) -> tf.Tensor:
    """(num_clusters, batch) squared Euclidean distances between every centroid and every embedding."""
    difference = embeddings[tf.newaxis, :, :] - centroids[:, tf.newaxis, :]
    return tf.reduce_sum(tf.square(difference), axis=-1)


def kmeans_loss(embeddings: tf.Tensor, centroids: tf.Tensor, alpha: float | tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    """Soft k-means loss and the distances it used.

    Each sample's distances to the centroids are weighted by softmax(-alpha * (d - min d)) over the clusters and summed;
    the loss is the batch mean. A larger alpha makes the assignment harder (alpha grows with the epoch).
    Returns (loss, distances of shape (num_clusters, batch)).
    """
    distances = squared_distances(embeddings, centroids)
    shifted = distances - tf.reduce_min(distances, axis=0, keepdims=True)
    weights = tf.nn.softmax(-tf.cast(alpha, distances.dtype) * shifted, axis=0)
    loss = tf.reduce_mean(tf.reduce_sum(weights * distances, axis=0))
    return loss, distances


def nearest_cluster(distances: tf.Tensor) -> tf.Tensor:
    """Index of the closest centroid per sample, from (num_clusters, batch) distances."""
    return tf.argmin(distances, axis=0, output_type=tf.int32)
