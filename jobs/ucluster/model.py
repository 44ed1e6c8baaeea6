"""GAPNet-style point-cloud network for jets: k-NN graph attention over particles, pooled to a small embedding.

Input: (batch, points, features) particles, zero-padded; features 0 and 1 are the particle's (eta, phi) relative to the
jet axis. Output: class logits for the classification pretext task and the pooled embedding the k-means loss
clusters. The trainable centroids `mu` live in the model, so they are checkpointed and broadcast with the weights.

Every batch normalisation reads its momentum from one shared variable, which the training loop moves along the
reference's staircase schedule (see schedules.batch_norm_momentum).

Under Keras's mixed_float16 policy (--mixed-precision) the layers compute in float16, but the k-NN distances, the
logits and the embedding are float32: a float16 sum of squares overflows at 65504 and rounds neighbours together, and
the losses take float32 inputs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import tensorflow as tf

PADDING_SHIFT = 1000.0  # added to distances involving all-zero (padded) particles, so they are nobody's neighbour


@dataclass(frozen=True)
class GapNetConfig:
    """Architecture sizes; the defaults are the reference's GAPNet classifier for 100-particle jets (upstream
    UCluster's gapnet_classify, which the notebook imports: the embedding is the mean over particles and the dense
    head has no dropout)."""

    num_points: int = 100
    num_features: int = 8
    num_classes: int = 20
    embedding_dim: int = 3
    num_clusters: int = 3
    neighbors: int = 10
    attention_heads: int = 1
    edge_widths: tuple[int, int] = (16, 128)
    conv_widths: tuple[int, int, int, int] = (64, 128, 256, 256)
    dense_widths: tuple[int, int] = (256, 128)
    pooling: str = "mean"  # over particles: "mean" (the reference) or "max"
    dropout_rates: tuple[float, float] = (0.0, 0.0)  # after each dense layer of the head; 0 adds no layer


class MomentumSource:
    """Holds the shared batch-norm momentum variable (a plain object, so Keras does not track it as a weight)."""

    def __init__(self, initial: float = 0.5) -> None:
        self.variable = tf.Variable(initial, trainable=False, dtype=tf.float32, name="batch_norm_momentum")


class ScheduledBatchNormalization(tf.keras.layers.BatchNormalization):
    """Batch normalisation whose momentum is read from a MomentumSource at every call."""

    def __init__(self, momentum_source: MomentumSource, **kwargs) -> None:
        super().__init__(**kwargs)
        self._momentum_source = momentum_source

    @property
    def momentum(self):  # noqa: D102 - overrides the base attribute
        source = getattr(self, "_momentum_source", None)
        return self._fixed_momentum if source is None else source.variable

    @momentum.setter
    def momentum(self, value) -> None:
        self._fixed_momentum = value


def pairwise_squared_distance(features: tf.Tensor) -> tf.Tensor:
    """(batch, n, n) squared Euclidean distances between the points of each cloud."""
    inner = tf.matmul(features, features, transpose_b=True)
    squares = tf.reduce_sum(tf.square(features), axis=-1, keepdims=True)
    return squares - 2.0 * inner + tf.transpose(squares, [0, 2, 1])


def eta_phi_distance(points: tf.Tensor) -> tf.Tensor:
    """(batch, n, n) squared (eta, phi) distances, phi wrapped to [-pi, pi); padded particles pushed far away."""
    eta, phi = points[..., 0], points[..., 1]
    delta_eta = eta[:, :, tf.newaxis] - eta[:, tf.newaxis, :]
    delta_phi = phi[:, :, tf.newaxis] - phi[:, tf.newaxis, :]
    delta_phi = tf.math.floormod(delta_phi + math.pi, 2.0 * math.pi) - math.pi
    padded = tf.cast(tf.reduce_all(tf.equal(points, 0.0), axis=-1), points.dtype) * PADDING_SHIFT
    return tf.square(delta_eta) + tf.square(delta_phi) + padded[:, :, tf.newaxis] + padded[:, tf.newaxis, :]


def nearest_neighbors(distances: tf.Tensor, k: int) -> tf.Tensor:
    """(batch, n, k) indices of the k closest points (each point is its own nearest)."""
    return tf.math.top_k(-distances, k=k).indices


class PointwiseDense(tf.keras.layers.Layer):
    """A 1x1 convolution over points: dense on the last axis, batch norm, ReLU."""

    def __init__(self, units: int, momentum_source: MomentumSource, use_bias: bool = True, **kwargs) -> None:
        super().__init__(**kwargs)
        self.dense = tf.keras.layers.Dense(units, use_bias=use_bias)
        self.norm = ScheduledBatchNormalization(momentum_source)

    def call(self, inputs: tf.Tensor, training: bool | None = None) -> tf.Tensor:
        return tf.nn.relu(self.norm(self.dense(inputs), training=training))


class GraphAttentionHead(tf.keras.layers.Layer):
    """One GAPNet attention head: attention over each particle's k neighbours, weighting encoded edge features."""

    def __init__(self, units: int, momentum_source: MomentumSource, **kwargs) -> None:
        super().__init__(**kwargs)
        self.node_encoder = PointwiseDense(units, momentum_source, use_bias=False)
        self.edge_encoder = PointwiseDense(units, momentum_source)
        self.node_score = PointwiseDense(1, momentum_source)
        self.edge_score = PointwiseDense(1, momentum_source)
        self.units = units

    def build(self, input_shape) -> None:
        self.output_bias = self.add_weight(name="output_bias", shape=(self.units,), initializer="zeros")
        super().build(input_shape)

    def call(
        self, features: tf.Tensor, neighbor_index: tf.Tensor, training: bool | None = None
    ) -> tuple[tf.Tensor, tf.Tensor]:
        """Return (attended features (batch, n, units), edge features (batch, n, k, units))."""
        nodes = self.node_encoder(features, training=training)
        neighbors = tf.gather(features, neighbor_index, batch_dims=1)
        edges = self.edge_encoder(features[:, :, tf.newaxis, :] - neighbors, training=training)
        scores = self.node_score(nodes, training=training)[:, :, tf.newaxis, :] + self.edge_score(
            edges, training=training
        )
        coefficients = tf.nn.softmax(tf.nn.leaky_relu(scores), axis=2)
        attended = tf.reduce_sum(coefficients * edges, axis=2)
        return tf.nn.relu(attended + self.output_bias), edges


class GapBlock(tf.keras.layers.Layer):
    """Several attention heads; returns (points ++ attended features, max over neighbours of the edge features)."""

    def __init__(self, units: int, heads: int, momentum_source: MomentumSource, **kwargs) -> None:
        super().__init__(**kwargs)
        self.heads = [GraphAttentionHead(units, momentum_source, name=f"head_{i}") for i in range(heads)]

    def call(
        self, features: tf.Tensor, points: tf.Tensor, neighbor_index: tf.Tensor, training: bool | None = None
    ) -> tuple[tf.Tensor, tf.Tensor]:
        outputs = [head(features, neighbor_index, training=training) for head in self.heads]
        attended = tf.concat([points] + [attention for attention, _ in outputs], axis=-1)
        local = tf.reduce_max(tf.concat([edges for _, edges in outputs], axis=-1), axis=2)
        return attended, local


class GapNet(tf.keras.Model):
    """Classifier + embedding network with the k-means centroids as a weight. call() -> (logits, embedding)."""

    def __init__(self, config: GapNetConfig, momentum_source: MomentumSource | None = None, **kwargs) -> None:
        super().__init__(**kwargs)
        self.config = config
        self.momentum_source = momentum_source or MomentumSource()
        source = self.momentum_source
        self.block0 = GapBlock(config.edge_widths[0], config.attention_heads, source, name="gap_block_0")
        self.block1 = GapBlock(config.edge_widths[1], config.attention_heads, source, name="gap_block_1")
        self.convs = [PointwiseDense(width, source, name=f"conv_{i}") for i, width in enumerate(config.conv_widths)]
        self.aggregate = PointwiseDense(config.embedding_dim, source, name="aggregate")
        self.dense = [PointwiseDense(width, source, name=f"dense_{i}") for i, width in enumerate(config.dense_widths)]
        self.dropouts = [tf.keras.layers.Dropout(rate) if rate else None for rate in config.dropout_rates]
        self.classifier = tf.keras.layers.Dense(config.num_classes, name="logits", dtype="float32")
        self.centroids = self.add_weight(
            name="centroids", shape=(config.num_clusters, config.embedding_dim), initializer="zeros", trainable=True
        )

    def call(self, points: tf.Tensor, training: bool | None = None) -> tuple[tf.Tensor, tf.Tensor]:
        k = self.config.neighbors
        neighbor_index = nearest_neighbors(eta_phi_distance(tf.cast(points, tf.float32)), k)
        net, local0 = self.block0(points, points, neighbor_index, training=training)
        net01 = self.convs[0](net, training=training)
        net02 = self.convs[1](net01, training=training)
        neighbor_index = nearest_neighbors(pairwise_squared_distance(tf.cast(net02, tf.float32)), k)
        net, local1 = self.block1(net02, points, neighbor_index, training=training)
        net11 = self.convs[2](net, training=training)
        net12 = self.convs[3](net11, training=training)
        net = tf.concat([net01, net02, net11, net12, local0, local1], axis=-1)
        aggregated = self.aggregate(net, training=training)
        embedding = tf.reduce_max(aggregated, axis=1) if self.config.pooling == "max" else tf.reduce_mean(aggregated, 1)
        embedding = tf.cast(embedding, tf.float32)
        hidden = embedding
        for dense, dropout in zip(self.dense, self.dropouts, strict=True):
            hidden = dense(hidden, training=training)
            if dropout is not None:
                hidden = dropout(hidden, training=training)
        return self.classifier(hidden), embedding


def build_gapnet(config: GapNetConfig) -> GapNet:
    """Create the network and its weights (one forward pass on zeros)."""
    model = GapNet(config, name="gapnet")
    model(tf.zeros((1, config.num_points, config.num_features)), training=False)
    return model
