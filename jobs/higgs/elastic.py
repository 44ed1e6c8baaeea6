"""The parameter-synchronisation rules of the EASGD and model-averaging trainers, as pure array arithmetic.

EASGD (Zhang, Choromanska, LeCun 2015), synchronous form with a communication window: every window of local steps,
each worker i moves towards the centre variable and the centre moves towards all workers, with the moving rate
alpha = learning_rate x rho (the notebook's EASGD: rho 5.0, learning rate 0.04, so alpha 0.2):

    x_i <- x_i - alpha (x_i - c)          c <- c + alpha * sum_i (x_i - c)

The sum over workers is one allreduce. The update conserves sum_i x_i + c; it is stable while alpha x workers < 1.
Model averaging: every window, every worker's weights become the mean over workers (one allreduce).
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


def check_elastic_stability(alpha: float, workers: int) -> None:
    """Raise ValueError when alpha x workers >= 1 (the centre would overshoot the workers)."""
    if not 0.0 < alpha * workers < 1.0:
        raise ValueError(
            f"EASGD moving rate alpha = {alpha:g} (--easgd-learning-rate x --rho) times {workers} ranks is "
            f"{alpha * workers:g}; it must lie in (0, 1): lower --rho or --easgd-learning-rate"
        )


def elastic_update(local: Array, center: Array, summed_difference: Array, alpha: float) -> tuple[Array, Array]:
    """One elastic step for one variable: (new local, new centre). `summed_difference` = sum over workers of
    (x_j - c), all-reduced; `local` and `center` are this worker's copies (the centre is the same on every worker)."""
    return local - alpha * (local - center), center + alpha * summed_difference
