"""Initialising the centroids: k-means on the embeddings of the training jets after pretraining.

Every rank embeds (up to) its share of its own training block; rank 0 fits k-means on all of them and broadcasts the
centres, so every rank starts the joint training with the same centroids (the reference ran k-means on each rank's
own pool and never synchronised the results).
"""

from __future__ import annotations

import logging

import numpy as np

from trainlib import distributed
from trainlib.distributed import WorkerContext
from trainlib.hdf5_input import RankInput
from ucluster.steps import UClusterSteps

log = logging.getLogger(__name__)


def fit_centroids(embeddings: np.ndarray, n_clusters: int, seed: int | None) -> np.ndarray:
    """k-means centres (n_clusters, dim) of the embeddings (sklearn, 10 initialisations)."""
    from sklearn.cluster import KMeans  # scikit-learn (1 CPU second to import) only where it is used: rank 0

    if len(embeddings) < n_clusters:
        raise ValueError(f"k-means needs at least {n_clusters} embeddings, got {len(embeddings)}")
    kmeans = KMeans(n_clusters=n_clusters, n_init=10, random_state=seed).fit(embeddings)
    return kmeans.cluster_centers_.astype(np.float32)


def rank_embeddings(steps: UClusterSteps, pipeline: RankInput, limit: int) -> np.ndarray:
    """Embeddings (inference mode) of the first `limit` jets of this rank's block."""
    collected, count = [], 0
    for points, classes, _ in pipeline.dataset.take(pipeline.steps):
        embedding = steps.evaluate(points, classes, 1.0)[3].numpy()
        collected.append(embedding[: limit - count])
        count += len(collected[-1])
        if count >= limit:
            break
    return np.concatenate(collected)


def initialise_centroids(context: WorkerContext, steps: UClusterSteps, pipeline: RankInput, total_samples: int,
                         seed: int | None) -> np.ndarray:
    """Fit k-means on rank 0 over every rank's embeddings, set the model's centroids on all ranks; returns them."""
    local = rank_embeddings(steps, pipeline, max(1, total_samples // context.size))
    gathered = distributed.allgather_object(local)
    centres = None
    if context.is_chief:
        embeddings = np.concatenate(gathered)
        centres = fit_centroids(embeddings, steps.model.config.num_clusters, seed)
        log.info("k-means on %d embeddings: centroids %s", len(embeddings), np.round(centres, 4).tolist())
    centres = distributed.broadcast_object(centres, root_rank=0)
    steps.model.centroids.assign(centres)
    return centres
