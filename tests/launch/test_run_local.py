"""`kubetrain run <example job.yaml> --local`: the shipped example trains here with 2 ranks and leaves checkpoints."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.launch

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "jobs" / "cifar_mixup" / "job.yaml"


def activated_environment() -> dict[str, str]:
    """The environment of a user who activated the Python environment kubetrain and the programs live in."""
    return {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}"}


def test_example_job_trains_locally_with_two_ranks(tmp_path, digits):
    # the example reads --data-dir /data/cifar10: /data is the data volume, here the folder given with --data-dir
    (tmp_path / "volume" / "cifar10").mkdir(parents=True)
    for path in digits.iterdir():
        shutil.copy(path, tmp_path / "volume" / "cifar10")
    result = subprocess.run(
        [sys.executable, "-m", "kubetrain.cli", "run", str(EXAMPLE), "--local", "--data-dir", "volume",
         "--checkpoint-dir", "checkpoints", "--", "--epochs", "2"],
        cwd=tmp_path, capture_output=True, text=True, timeout=400, env=activated_environment(),
    )
    assert result.returncode == 0, result.stdout + result.stderr
    job_dir = tmp_path / "checkpoints" / "default" / "cifar-mixup"  # <volume>/<namespace>/<name>, as in the cluster
    assert "running default/cifar-mixup locally with 2 rank(s)" in result.stderr
    assert "on all 2 ranks" in result.stderr
    records = [json.loads(path.read_text()) for path in sorted(job_dir.glob("ckpt-*.json"))]
    assert [record["epoch"] for record in records] == [1, 2]
    assert {record["rank"] for record in records} == {0}
    assert (job_dir / "history.json").is_file() and (job_dir / "evaluation.json").is_file()
    assert "progress reporting is off" in result.stderr, "no cluster: KUBETRAIN_REPORT_STATUS must be unset"
