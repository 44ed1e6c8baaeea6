"""The reference's staircase schedules, counted in samples seen."""

import pytest

from ucluster.schedules import StaircaseLearningRate, alpha_for_epoch, batch_norm_momentum, staircase_learning_rate


def test_learning_rate_halves_every_decay_step_samples_and_stops_at_the_clip():
    # 1000 samples per step, a halving every 5000 samples
    rates = [float(staircase_learning_rate(step, 0.001, 1000, 5000, 0.5)) for step in (0, 4, 5, 9, 10, 200)]
    assert rates[:5] == pytest.approx([0.001, 0.001, 0.0005, 0.0005, 0.00025])
    assert rates[5] == pytest.approx(1e-5)


def test_keras_schedule_agrees_with_the_function():
    schedule = StaircaseLearningRate(0.002, 64, 640, 0.5)
    assert float(schedule(25)) == pytest.approx(0.002 * 0.5**2)


def test_batch_norm_momentum_starts_at_one_half_and_rises_to_the_clip():
    values = [float(batch_norm_momentum(step, 100, 1000)) for step in (0, 10, 20, 1000)]
    assert values == pytest.approx([0.5, 0.75, 0.875, 0.99])


def test_alpha_grows_by_two_per_clustering_epoch():
    assert [alpha_for_epoch(epoch, 3) for epoch in (3, 4, 7)] == [2.0, 4.0, 10.0]


def test_warm_up_follows_horovods_formula_then_the_staircase():
    from trainlib.custom_loop import warmup_learning_rate

    schedule = StaircaseLearningRate(0.004, 100, 10**9, 0.5, size=4, warmup_steps=20)
    for step in (0, 5, 10, 20, 40):
        expected = warmup_learning_rate(0.004, 4, step / 10, 2)  # 10 steps per epoch, 2 warm-up epochs
        assert float(schedule(step)) == pytest.approx(expected, rel=1e-6)
