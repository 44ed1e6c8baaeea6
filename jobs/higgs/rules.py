"""The weight-update rules of the distributed trainers, as pure array arithmetic (numpy arrays or TensorFlow tensors).

They follow dist-keras (the library the notebook ran, October 2016), with two sign errors of its own fixed. `step` is
what the worker's own optimizer (Adagrad) just changed in the weights, `lr` the trainer's learning rate and
alpha = lr x rho its moving rate (the notebook: EASGD rho 5, lr 0.04, alpha 0.2; asynchronous EASGD and EAMSGD rho 5,
lr 0.05, alpha 0.25).

- EASGD, synchronous (every step, one allreduce): the centre moves by alpha times the MEAN of the workers' distances,
  c <- c + alpha * mean_i(x_i - c), as dist-keras's parameter server does, so it is stable at any number of workers
  (the paper's sum form overshoots once alpha x workers >= 1). Each worker then takes dist-keras's step
  x <- x + lr * step - alpha (x - c); dist-keras subtracts `lr * step`, undoing its own optimizer's step.
- Asynchronous EASGD and EAMSGD, every window of local steps: the worker sends E = alpha (x - c) for the centre it
  fetched; the worker takes x - E and the parameter server c + E.
- EAMSGD's local step is Nesterov momentum around the worker optimizer's step: the optimizer steps at the look-ahead
  point x + m v, then v <- m v + lr * step and x <- x + v. dist-keras looked ahead to x - m v (the wrong side).
- DOWNPOUR: the worker adds up its optimizer's steps; every window it sends the sum, which the server adds to the
  centre, and restarts from the centre. (The notebook's learning_rate is unused by dist-keras's DOWNPOUR worker.)
- Model averaging (ours): every window, every worker's weights become the mean over workers.
"""

from __future__ import annotations

from typing import Protocol, TypeVar

Array = TypeVar("Array", bound="ArrayArithmetic")


class ArrayArithmetic(Protocol):
    """The arithmetic the rules need, which numpy arrays and TensorFlow tensors both offer."""

    def __add__(self: Array, other: Array, /) -> Array: ...

    def __sub__(self: Array, other: Array, /) -> Array: ...

    def __rmul__(self: Array, other: float, /) -> Array: ...


def elastic_alpha(learning_rate: float, rho: float) -> float:
    """The moving rate alpha = learning_rate x rho."""
    return learning_rate * rho


def check_moving_rate(alpha: float) -> None:
    """Raise ValueError unless 0 < alpha < 1 (at 1 a worker jumps onto the centre; beyond, past it)."""
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"the elastic moving rate alpha = --trainer-learning-rate x --rho = {alpha:g}; it must lie in "
                         "(0, 1): lower --rho or --trainer-learning-rate")


def easgd_worker(before: Array, step: Array, center: Array, learning_rate: float, alpha: float) -> Array:
    """Synchronous EASGD: a worker's new weights from its weights before the step, its optimizer's step and the
    centre."""
    return before + learning_rate * step - alpha * (before - center)


def easgd_center(center: Array, mean_distance: Array, alpha: float) -> Array:
    """Synchronous EASGD: the new centre from the mean over workers of (weights after the step - centre)."""
    return center + alpha * mean_distance


def elastic_difference(local: Array, center: Array, alpha: float) -> Array:
    """Asynchronous EASGD/EAMSGD: E = alpha (x - c); the worker subtracts it, the parameter server adds it."""
    return alpha * (local - center)


def look_ahead(weights: Array, velocity: Array, momentum: float) -> Array:
    """EAMSGD: the point where the worker's optimizer takes its step, x + m v."""
    return weights + momentum * velocity


def momentum_velocity(velocity: Array, step: Array, momentum: float, learning_rate: float) -> Array:
    """EAMSGD: the new velocity m v + lr * step (then x <- x + v)."""
    return momentum * velocity + learning_rate * step
