"""Test-split scoring: the notebook's weighted F1, the signal F1, test blocks per rank, the comparison table."""

import numpy as np
import pytest

from higgs.data import evaluation_block
from higgs.evaluate import classification_metrics


def test_weighted_f1_of_a_constant_background_guess_by_hand():
    labels = np.array([0, 0, 0, 1])  # 3 background, 1 signal
    metrics = classification_metrics(labels, np.zeros(4, dtype=int))
    # background: precision 3/4, recall 1 -> F1 6/7; signal F1 0; weighted by support 3:1
    assert metrics["f1"] == pytest.approx(0.75 * 6 / 7)
    assert metrics["f1_signal"] == 0.0 and metrics["accuracy"] == 0.75


def test_perfect_predictions_score_one():
    labels = np.array([0, 1, 1, 0, 1])
    assert classification_metrics(labels, labels) == {"f1": 1.0, "f1_signal": 1.0, "accuracy": 1.0}


@pytest.mark.parametrize(("rows", "size"), [(10, 3), (2, 2), (7, 1), (3, 4)])
def test_test_blocks_cover_every_row_once_in_order(rows, size):
    blocks = [evaluation_block(rows, rank, size) for rank in range(size)]
    covered = [row for start, stop in blocks for row in range(start, stop)]
    assert covered == list(range(rows))
