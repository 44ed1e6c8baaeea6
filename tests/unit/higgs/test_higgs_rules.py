"""The trainers' update rules on small numbers: dist-keras's EASGD centre (mean form) is stable at the notebook's
worker counts, the asynchronous exchange conserves weight, EAMSGD's momentum is Nesterov's."""

import numpy as np
import pytest

from higgs.rules import (
    check_moving_rate,
    easgd_center,
    easgd_worker,
    elastic_alpha,
    elastic_difference,
    look_ahead,
    momentum_velocity,
)


def test_easgd_step_by_hand():
    center = np.array([0.0, 0.0])
    before = [np.array([1.0, 2.0]), np.array([3.0, 6.0])]
    steps = [np.array([0.5, 0.0]), np.array([-1.0, 2.0])]
    after = [x + s for x, s in zip(before, steps, strict=True)]
    mean_distance = sum(x - center for x in after) / 2  # what the allreduce (average) returns: [1.75, 5]
    np.testing.assert_allclose(easgd_center(center, mean_distance, 0.2), [0.35, 1.0])
    # x + lr * step - alpha (x - c): 1 + 0.04 * 0.5 - 0.2 * 1, 2 + 0 - 0.2 * 2
    np.testing.assert_allclose(easgd_worker(before[0], steps[0], center, 0.04, 0.2), [0.82, 1.6])


@pytest.mark.parametrize("workers", [2, 8, 28])
def test_easgd_reaches_consensus_at_the_notebooks_worker_counts(workers):
    """No optimizer steps: the elastic force alone must pull every worker and the centre together, at any count
    (the paper's sum form, c += alpha * sum, diverges from 5 workers at alpha 0.2)."""
    rng = np.random.default_rng(workers)
    xs = [rng.normal(size=4) for _ in range(workers)]
    center = np.zeros(4)
    alpha = elastic_alpha(0.04, 5.0)
    zero = np.zeros(4)
    for _ in range(300):
        mean_distance = sum(x - center for x in xs) / workers
        xs = [easgd_worker(x, zero, center, 0.04, alpha) for x in xs]
        center = easgd_center(center, mean_distance, alpha)
    assert np.all(np.isfinite(center))
    for x in xs:
        np.testing.assert_allclose(x, center, atol=1e-6)


def test_asynchronous_exchange_moves_weight_from_worker_to_centre_and_conserves_it():
    local, center = np.array([2.0, -1.0]), np.array([1.0, 1.0])
    difference = elastic_difference(local, center, elastic_alpha(0.05, 5.0))  # alpha 0.25
    np.testing.assert_allclose(difference, [0.25, -0.5])
    np.testing.assert_allclose((local - difference) + (center + difference), local + center)


def test_eamsgd_local_steps_are_nesterov_momentum_and_minimise_a_quadratic():
    """The optimizer's step at the look-ahead point x + m v, scaled by lr, drives the velocity (paper's EAMSGD)."""
    def optimizer_step(point):  # plain gradient descent on f(x) = |x|^2 / 2, rate 0.5
        return -0.5 * point

    x, v, momentum, rate = np.array([4.0, -2.0]), np.zeros(2), 0.85, 0.05
    first_ahead = look_ahead(x, v, momentum)
    v = momentum_velocity(v, optimizer_step(first_ahead), momentum, rate)
    np.testing.assert_allclose(v, 0.05 * -0.5 * np.array([4.0, -2.0]))
    x = x + v
    for _ in range(2000):
        v = momentum_velocity(v, optimizer_step(look_ahead(x, v, momentum)), momentum, rate)
        x = x + v
    np.testing.assert_allclose(x, [0.0, 0.0], atol=1e-6)


def test_notebook_moving_rates_and_the_bounds():
    assert elastic_alpha(0.04, 5.0) == pytest.approx(0.2)  # EASGD
    assert elastic_alpha(0.05, 5.0) == pytest.approx(0.25)  # asynchronous EASGD and EAMSGD
    check_moving_rate(0.25)
    for bad in (1.0, 1.5, 0.0):
        with pytest.raises(ValueError, match="lower --rho or --trainer-learning-rate"):
            check_moving_rate(bad)
