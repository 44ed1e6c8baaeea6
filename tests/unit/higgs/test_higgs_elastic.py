"""EASGD's elastic update and its stability condition, on small numbers."""

import numpy as np
import pytest

from higgs.elastic import check_elastic_stability, elastic_alpha, elastic_update


def test_elastic_step_by_hand():
    center = np.array([0.0, 0.0])
    workers = [np.array([1.0, 2.0]), np.array([3.0, 6.0])]
    summed = sum(x - center for x in workers)  # what the allreduce returns: [4, 8]
    alpha = 0.25
    new_workers, new_centers = zip(*(elastic_update(x, center, summed, alpha) for x in workers), strict=True)
    np.testing.assert_allclose(new_workers[0], [0.75, 1.5])  # 1 - 0.25 * 1, 2 - 0.25 * 2
    np.testing.assert_allclose(new_workers[1], [2.25, 4.5])
    np.testing.assert_allclose(new_centers[0], [1.0, 2.0])  # 0 + 0.25 * [4, 8]
    np.testing.assert_allclose(new_centers[1], new_centers[0])  # every rank computes the same centre


def test_elastic_steps_conserve_the_total_and_pull_everything_to_consensus():
    rng = np.random.default_rng(1)
    workers = [rng.normal(size=3) for _ in range(4)]
    center = np.zeros(3)
    total = sum(workers) + center
    for _ in range(200):
        summed = sum(x - center for x in workers)
        updates = [elastic_update(x, center, summed, 0.2) for x in workers]
        workers, center = [u[0] for u in updates], updates[0][1]
    np.testing.assert_allclose(sum(workers) + center, total)
    for x in workers:
        np.testing.assert_allclose(x, center, atol=1e-9)
    np.testing.assert_allclose(center, total / 5)


def test_notebook_parameters_give_alpha_one_fifth_and_too_many_ranks_are_refused():
    alpha = elastic_alpha(0.04, 5.0)
    assert alpha == pytest.approx(0.2)
    check_elastic_stability(alpha, 4)
    with pytest.raises(ValueError, match="lower --rho or --easgd-learning-rate"):
        check_elastic_stability(alpha, 5)
