"""F1 on the test split. The notebook scored with Spark's MulticlassClassificationEvaluator("f1"), the support-weighted
F1 over both classes: reported as `f1`; the F1 of the signal class alone is reported as `f1_signal`."""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from higgs.data import HiggsData, evaluation_block, iter_test_chunks
from higgs.scaling import standardize
from trainlib import distributed
from trainlib.distributed import WorkerContext


def classification_metrics(labels: np.ndarray, predicted: np.ndarray) -> dict[str, float]:
    """Weighted F1 (the notebook's metric), signal-class F1 and accuracy."""
    from sklearn.metrics import accuracy_score, f1_score  # scikit-learn (1 CPU second to import) after training

    return {
        "f1": float(f1_score(labels, predicted, average="weighted", zero_division=0)),
        "f1_signal": float(f1_score(labels, predicted, pos_label=1, average="binary", zero_division=0)),
        "accuracy": float(accuracy_score(labels, predicted)),
    }


def predict_rows(model: tf.keras.Model, data: HiggsData, mean: np.ndarray, std: np.ndarray, start: int,
                 stop: int) -> tuple[np.ndarray, np.ndarray, float]:
    """(true labels, predicted labels, summed cross-entropy) for test rows [start, stop)."""
    labels, predicted, loss = [np.zeros(0, np.int64)], [np.zeros(0, np.int64)], 0.0
    for features, chunk_labels in iter_test_chunks(data.test, start, stop):
        probabilities = model(standardize(features, mean, std), training=False).numpy()
        chunk_labels = chunk_labels.astype(np.int64)
        picked = np.clip(probabilities[np.arange(len(chunk_labels)), chunk_labels], 1e-7, 1.0)
        loss += float(-np.log(picked).sum())
        labels.append(chunk_labels)
        predicted.append(probabilities.argmax(axis=1))
    return np.concatenate(labels), np.concatenate(predicted), loss


def evaluate(model: tf.keras.Model, data: HiggsData, mean: np.ndarray, std: np.ndarray, context: WorkerContext,
             alone: bool = False) -> dict[str, float]:
    """Test metrics as `val_*`. Every rank predicts its block and the predictions are gathered (collective), or with
    `alone` the calling rank predicts the whole split by itself (no collectives)."""
    if alone:
        labels, predicted, loss = predict_rows(model, data, mean, std, 0, data.test.rows)
    else:
        start, stop = evaluation_block(data.test.rows, context.rank, context.size)
        parts = distributed.allgather_object(predict_rows(model, data, mean, std, start, stop))
        labels = np.concatenate([part[0] for part in parts])
        predicted = np.concatenate([part[1] for part in parts])
        loss = sum(part[2] for part in parts)
    metrics = classification_metrics(labels, predicted)
    metrics["loss"] = loss / max(len(labels), 1)
    return {f"val_{name}": value for name, value in metrics.items()}
