"""The user's story on a kind cluster (tests/e2e/run-kind.sh): install the chart, prepare data, train cifar_mixup,
see it succeed with progress and a checkpoint. Needs a working Docker engine and kind; skipped, with the reason,
where either is missing."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e

SCRIPT = Path(__file__).resolve().parent / "run-kind.sh"


def missing_prerequisite() -> str | None:
    """Why the kind test cannot run here, or None when Docker and kind both work."""
    docker = os.environ.get("DOCKER", "docker")
    kind = os.environ.get("KIND", "kind")
    if shutil.which(docker) is None:
        return f"Docker is not installed ({docker} not on PATH)"
    info = subprocess.run([docker, "info"], capture_output=True, text=True, timeout=60)
    if info.returncode != 0:
        reason = (info.stderr.strip().splitlines() or ["no output"])[-1]
        return f"the Docker engine is not reachable (docker info: {reason})"
    if shutil.which(kind) is None:
        return f"kind is not installed ({kind} not on PATH)"
    version = subprocess.run([kind, "version"], capture_output=True, text=True, timeout=60)
    if version.returncode != 0:
        return f"kind does not run (kind version: {version.stderr.strip()})"
    return None


@pytest.mark.timeout(3 * 3600)  # image builds + training; the suite's 900 s default is for the other tiers
def test_cifar_mixup_trains_to_succeeded_on_kind(tmp_path: Path) -> None:
    reason = missing_prerequisite()
    if reason:
        pytest.skip(f"kind end-to-end test not run: {reason}")
    env = {**os.environ, "KUBETRAIN_E2E_ARTIFACTS": str(tmp_path)}
    result = subprocess.run(["bash", str(SCRIPT)], env=env, capture_output=True, text=True, timeout=3 * 3600)
    print(result.stdout[-20000:])
    print(result.stderr[-20000:])
    assert result.returncode == 0, f"run-kind.sh failed (exit {result.returncode}); artifacts in {tmp_path}"
    assert "PASSED:" in result.stderr
