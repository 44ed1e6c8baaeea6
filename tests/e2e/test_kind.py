"""The user's path on a kind cluster (tests/e2e/run-kind.sh and scenarios.sh): install the chart, prepare data,
train cifar_mixup to Succeeded with progress and checkpoints, restart after a lost worker, an elastic job that loses
a worker and grows by kubectl scale without restarting, a missing image, delete, uninstall. Uses the kind and node
image tests/e2e/kind-node/build.sh made on this machine (`make test` builds them), else kind from PATH with its
default node image. Skipped, with the reason, only where Docker or kind cannot run."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support.programs import image_name

pytestmark = pytest.mark.e2e

HERE = Path(__file__).resolve().parent
SCRIPT = HERE / "run-kind.sh"
NODE_BUILD = HERE / "kind-node" / "build.sh"


def docker_has(image: str) -> bool:
    docker = os.environ.get("DOCKER", "docker")
    return subprocess.run([docker, "image", "inspect", image], capture_output=True).returncode == 0


def local_kind_settings() -> dict[str, str]:
    """run-kind.sh's settings for the kind and node image built here, when both exist; else none."""
    if "KUBETRAIN_KIND_NODE_IMAGE" in os.environ:
        return {}
    printed = subprocess.run(["bash", str(NODE_BUILD), "--print-env"], capture_output=True, text=True, check=True)
    settings = dict(line.split("=", 1) for line in printed.stdout.split())
    built = os.access(settings["KIND"], os.X_OK) and docker_has(settings["KUBETRAIN_KIND_NODE_IMAGE"])
    return settings if built else {}


def missing_prerequisite(kind: str) -> str | None:
    """Why the kind test cannot run here, or None when Docker and kind both work."""
    docker = os.environ.get("DOCKER", "docker")
    if shutil.which(docker) is None:
        return f"Docker is not installed ({docker} not on PATH)"
    info = subprocess.run([docker, "info"], capture_output=True, text=True, timeout=60)
    if info.returncode != 0:
        reason = (info.stderr.strip().splitlines() or ["no output"])[-1]
        return f"the Docker engine is not reachable (docker info: {reason})"
    if shutil.which(kind) is None:
        return f"kind is not installed ({kind} not on PATH); tests/e2e/kind-node/build.sh builds it"
    version = subprocess.run([kind, "version"], capture_output=True, text=True, timeout=60)
    if version.returncode != 0:
        return f"kind does not run (kind version: {version.stderr.strip()})"
    return None


@pytest.mark.timeout(2 * 3600)  # cluster, image loads and three trainings; the suite's 900 s default is for the rest
def test_user_path_on_kind(tmp_path: Path) -> None:
    settings = local_kind_settings()
    reason = missing_prerequisite(settings.get("KIND", os.environ.get("KIND", "kind")))
    if reason:
        pytest.skip(f"kind end-to-end test not run: {reason}")
    env = {**os.environ, **settings, "KUBETRAIN_E2E_ARTIFACTS": str(tmp_path)}
    if all(docker_has(image_name(name)) for name in ("operator", "entrypoints", "cifar_mixup")):
        env.setdefault("KUBETRAIN_E2E_SKIP_BUILD", "1")  # `make images` built them
    result = subprocess.run(["bash", str(SCRIPT)], env=env, capture_output=True, text=True, timeout=2 * 3600)
    print(result.stdout[-20000:])
    print(result.stderr[-30000:])
    assert result.returncode == 0, f"run-kind.sh failed (exit {result.returncode}); artifacts in {tmp_path}"
    for scenario in ("install", "train", "own image", "restart", "elastic", "missing image", "delete", "uninstall"):
        assert f"PASSED scenario {scenario}" in result.stderr
    assert "PASSED: kind scenarios install, train own_image restart elastic missing_image delete, uninstall" \
        in result.stderr
