"""The compiled per-batch steps of UCluster training: pretraining, joint training, and evaluation.

The optimizer is Horovod's DistributedOptimizer, so `minimize` averages gradients over ranks; under --mixed-precision
a LossScaleOptimizer wraps it, and `minimize` also scales the loss and unscales the gradients. Before each training step
the shared batch-norm momentum is moved to the schedule's value for the optimizer's current step.
"""

from __future__ import annotations

import tensorflow as tf

from ucluster.losses import FOCAL_GAMMA, focal_loss, kmeans_loss, nearest_cluster
from ucluster.model import GapNet
from ucluster.schedules import batch_norm_momentum


class UClusterSteps:
    """Builds the tf.functions for one model and optimizer."""

    def __init__(self, model: GapNet, optimizer: tf.keras.optimizers.legacy.Optimizer, samples_per_step: int,
                 decay_step: int, weight_decay: float = 0.0, focal_gamma: float = FOCAL_GAMMA) -> None:
        self.model = model
        self.optimizer = optimizer
        self.samples_per_step = samples_per_step
        self.decay_step = decay_step
        self.weight_decay = weight_decay
        self.focal_gamma = focal_gamma
        self.network_variables = [v for v in model.trainable_variables if v is not model.centroids]
        self.kernels = [v for v in self.network_variables if "kernel" in v.name]
        config = model.config
        points = tf.TensorSpec((None, config.num_points, config.num_features), tf.float32)
        classes = tf.TensorSpec((None,), tf.int32)
        alpha = tf.TensorSpec((), tf.float32)
        self.pretrain_step = tf.function(self._pretrain_step, input_signature=[points, classes])
        self.full_step = tf.function(self._full_step, input_signature=[points, classes, alpha])
        self.evaluate = tf.function(self._evaluate, input_signature=[points, classes, alpha])

    def _regularization(self) -> tf.Tensor:
        if not self.weight_decay or not self.kernels:
            return tf.constant(0.0)
        return self.weight_decay * tf.add_n([tf.nn.l2_loss(kernel) for kernel in self.kernels])

    def _set_momentum(self) -> None:
        momentum = batch_norm_momentum(self.optimizer.iterations, self.samples_per_step, self.decay_step)
        self.model.momentum_source.variable.assign(momentum)

    def _pretrain_step(self, points: tf.Tensor, classes: tf.Tensor) -> tf.Tensor:
        """Classification only; the centroids do not move. Returns the focal loss."""
        self._set_momentum()
        with tf.GradientTape() as tape:
            logits, _ = self.model(points, training=True)
            class_loss = focal_loss(logits, classes, self.focal_gamma)
            loss = class_loss + self._regularization()
        self.optimizer.minimize(loss, self.network_variables, tape=tape)
        return class_loss

    def _full_step(self, points: tf.Tensor, classes: tf.Tensor, alpha: tf.Tensor):
        """Classification + k-means loss, centroids trained too. Returns (focal loss, k-means loss, nearest cluster)."""
        self._set_momentum()
        with tf.GradientTape() as tape:
            logits, embedding = self.model(points, training=True)
            class_loss = focal_loss(logits, classes, self.focal_gamma)
            cluster_loss, distances = kmeans_loss(embedding, self.model.centroids, alpha)
            loss = class_loss + cluster_loss + self._regularization()
        self.optimizer.minimize(loss, self.model.trainable_variables, tape=tape)
        return class_loss, cluster_loss, nearest_cluster(distances)

    def _evaluate(self, points: tf.Tensor, classes: tf.Tensor, alpha: tf.Tensor):
        """Inference on one batch: (summed focal loss, summed k-means loss, nearest cluster, embedding)."""
        logits, embedding = self.model(points, training=False)
        count = tf.cast(tf.shape(points)[0], tf.float32)
        class_loss = focal_loss(logits, classes, self.focal_gamma) * count
        cluster_loss, distances = kmeans_loss(embedding, self.model.centroids, alpha)
        return class_loss, cluster_loss * count, nearest_cluster(distances), embedding
