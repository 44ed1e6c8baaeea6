"""DistributedTraining bodies shared by the operator unit tests."""

from __future__ import annotations

import copy
from typing import Any

BASE: dict[str, Any] = {
    "apiVersion": "kubetrain.dev/v1alpha1",
    "kind": "DistributedTraining",
    "metadata": {"name": "cifar", "namespace": "ml", "uid": "uid-1"},
    "spec": {
        "image": "kubetrain/cifar-mixup:0.1.0",
        "command": ["python", "-m", "cifar_mixup", "--epochs", "30"],
        "workers": 2,
        "resources": {"gpusPerWorker": 1, "cpu": "4", "memory": "16Gi"},
        "data": {"claimName": "hdf5-data"},
        "checkpoint": {"claimName": "checkpoints"},
    },
}


def training(**spec_overrides: Any) -> dict[str, Any]:
    """A valid DistributedTraining body with top-level spec fields replaced."""
    body = copy.deepcopy(BASE)
    body["spec"].update(spec_overrides)
    return body
