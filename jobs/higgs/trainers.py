"""The trainers and their settings: the notebook's five (dist-keras) and ours, in the order --compare runs them.

Each trainer's defaults are the notebook's call (batch size, learning rate, rho, communication window, momentum), with
dist-keras's default where the notebook gave none (the synchronous EASGD's window of 1, DOWNPOUR's 5). Flags override
them for every trainer of a run. Pure data: no TensorFlow.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any


@dataclass(frozen=True)
class TrainerSettings:
    """How one trainer runs. `learning_rate` is the trainer's (dist-keras's `learning_rate`: the elastic moving rate
    is learning_rate x rho; EAMSGD scales its optimizer's steps by it), not the workers' Adagrad rate (--learning-rate).
    `parameter_server`: rank 0 serves the centre and the other ranks train asynchronously."""

    name: str
    label: str
    batch_size: int
    window: int = 1
    rho: float = 0.0
    learning_rate: float = 0.0
    momentum: float = 0.0
    parameter_server: bool = False

    @property
    def elastic(self) -> bool:
        return self.rho > 0.0

    def workers(self, ranks: int) -> int:
        """How many ranks train: one for `single`, all but the server's for parameter-server trainers."""
        if self.name == "single":
            return 1
        return ranks - 1 if self.parameter_server else ranks


NOTEBOOK = (
    TrainerSettings("single", "SingleTrainer", batch_size=64),
    TrainerSettings("easgd", "EASGD", batch_size=64, window=1, rho=5.0, learning_rate=0.04),
    TrainerSettings("async-easgd", "Asynchronous EASGD", batch_size=10, window=30, rho=5.0, learning_rate=0.05,
                    parameter_server=True),
    TrainerSettings("async-eamsgd", "Asynchronous EAMSGD", batch_size=10, window=10, rho=5.0, learning_rate=0.05,
                    momentum=0.85, parameter_server=True),
    TrainerSettings("downpour", "DOWNPOUR", batch_size=62, window=5, learning_rate=0.05, parameter_server=True),
)
OURS = (
    TrainerSettings("allreduce", "Allreduce (Horovod)", batch_size=64),
    TrainerSettings("model-averaging", "Model averaging", batch_size=64, window=30),
)
SETTINGS = {settings.name: settings for settings in NOTEBOOK + OURS}
TRAINERS = tuple(SETTINGS)


def settings_for(name: str, *, batch_size: int | None = None, window: int | None = None, rho: float | None = None,
                 learning_rate: float | None = None, momentum: float | None = None) -> TrainerSettings:
    """A trainer's settings with the flags that were given (not None) in place of the notebook's values."""
    given: dict[str, Any] = {"batch_size": batch_size, "window": window, "rho": rho, "learning_rate": learning_rate,
             "momentum": momentum}
    base = SETTINGS[name]
    if not base.elastic:  # rho and momentum mean nothing to the other trainers
        given.pop("rho")
    if not base.momentum:
        given.pop("momentum")
    return replace(base, **{key: value for key, value in given.items() if value is not None})


@dataclass(frozen=True)
class TrainerResult:
    """What a trainer achieved: test F1 (weighted, as the notebook), signal F1, accuracy, training seconds; `workers`
    is how many ranks trained (the job had `ranks`)."""

    trainer: str
    f1: float
    f1_signal: float
    accuracy: float
    seconds: float
    epochs: int
    workers: int
    ranks: int
