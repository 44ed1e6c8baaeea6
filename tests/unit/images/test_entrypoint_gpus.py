"""The entrypoints' GPU check (kt_check_gpus, images/entrypoints/lib/common.sh), for an image that does not use
trainlib: a pod whose ranks hold GPUs exits 2 with one line when nvidia-smi lists fewer; without nvidia-smi it says it
cannot check and goes on."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

LIB = Path(__file__).resolve().parents[3] / "images" / "entrypoints" / "lib"
IMAGE = "registry.example.com/team/own:1.0"
A100 = "GPU 0: NVIDIA A100-SXM4-40GB (UUID: GPU-1)\nGPU 1: NVIDIA A100-SXM4-40GB (UUID: GPU-2)\n"
MIG = "GPU 0: NVIDIA A100-SXM4-40GB (UUID: GPU-1)\n  MIG 1g.5gb Device 0: (UUID: MIG-1)\n" \
      "  MIG 1g.5gb Device 1: (UUID: MIG-2)\n"


def check(tmp_path: Path, wanted: str | None, listed: str | None, status: int = 0) -> subprocess.CompletedProcess:
    """kt_check_gpus in bash, with a fake nvidia-smi printing `listed` (None: no nvidia-smi on PATH)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    for tool in ("grep", "cat"):  # nothing else: not this machine's nvidia-smi
        (bin_dir / tool).symlink_to(str(shutil.which(tool)))
    if listed is not None:
        (tmp_path / "listed").write_text(listed)
        smi = bin_dir / "nvidia-smi"
        smi.write_text(f"#!/bin/bash\n[ \"$1\" = -L ] && cat {tmp_path / 'listed'}\nexit {status}\n")
        smi.chmod(0o755)
    env = {"PATH": str(bin_dir), "KUBETRAIN_IMAGE": IMAGE}
    if wanted is not None:
        env["KUBETRAIN_GPUS_PER_RANK"] = wanted
    return subprocess.run(["/bin/bash", "-c", f'set -euo pipefail; KT_ROLE=worker; . "{LIB}/common.sh"; '
                           'kt_check_gpus; echo checked'], env=env, capture_output=True, text=True)


@pytest.mark.parametrize(("wanted", "listed"), [(None, None), ("0", ""), ("1", A100), ("2", A100), ("2", MIG)])
def test_a_pod_whose_ranks_see_their_gpus_goes_on(tmp_path: Path, wanted: str | None, listed: str | None) -> None:
    done = check(tmp_path, wanted, listed)
    assert (done.returncode, done.stdout, done.stderr) == (0, "checked\n", "")


def test_a_pod_whose_ranks_hold_more_gpus_than_nvidia_smi_lists_stops_with_one_line(tmp_path: Path) -> None:
    done = check(tmp_path, "4", A100)
    assert done.returncode == 2 and not done.stdout
    assert done.stderr == ("kubetrain worker: error: each rank holds 4 GPU(s) and nvidia-smi lists 2 in image "
                           f"{IMAGE}: the node's NVIDIA container runtime did not pass them to the container\n")


def test_a_failing_nvidia_smi_is_quoted(tmp_path: Path) -> None:
    done = check(tmp_path, "1", "Failed to initialize NVML: Driver/library version mismatch\nmore\n", status=18)
    assert done.returncode == 2
    assert done.stderr == ("kubetrain worker: error: each rank holds 1 GPU(s) and nvidia-smi -L fails in image "
                           f"{IMAGE}: Failed to initialize NVML: Driver/library version mismatch\n")


def test_without_nvidia_smi_the_pod_says_it_cannot_check_and_goes_on(tmp_path: Path) -> None:
    done = check(tmp_path, "1", None)
    assert done.returncode == 0 and done.stdout == "checked\n"
    assert done.stderr == f"kubetrain worker: no nvidia-smi in image {IMAGE}: not checking that each rank sees its 1 " \
                          "GPU(s)\n"


def test_a_count_that_is_not_a_number_is_bad_configuration(tmp_path: Path) -> None:
    done = check(tmp_path, "two", A100)
    assert done.returncode == 2 and "KUBETRAIN_GPUS_PER_RANK='two' must be a whole number" in done.stderr
