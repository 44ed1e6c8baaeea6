"""A kubeconfig for the command line's unit tests: its current context names a namespace, nothing listens at its
server."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml


def use_offline_kubeconfig(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, namespace: str) -> Path:
    """Writes the kubeconfig, points KUBECONFIG at it and leaves no in-cluster setting; returns its path."""
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "team",
        "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:1"}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "team", "context": {"cluster": "c", "user": "u", "namespace": namespace}}],
    }))
    monkeypatch.setenv("KUBECONFIG", str(path))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    return path
