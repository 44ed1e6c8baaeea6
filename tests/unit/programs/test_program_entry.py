"""`python -m <program>` checks its input before TensorFlow or Horovod start: `--help`, a bad flag or a missing data
directory ends the run without loading either (the program's `cli.parse`, then its `train`: `trainlib.cli.run_program`).
Every job file's `spec.command` runs so too, with the job's own arguments and the environment the pods give it, up to
where the data is needed: where the job's data volume does not exist, it stops with exit code 2 and one line naming
the missing file under the job's own data path.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kubetrain.contract import ENV_PREFIX
from kubetrain.local import load_job
from kubetrain.manifests.env import job_environment
from tests.support.programs import PROGRAMS

REPO = Path(__file__).resolve().parents[3]
JOB_FILES = sorted(REPO.glob("jobs/*/*.yaml"))
# Every `python -m` training entry point and the program name its error lines start with.
ENTRY_POINTS = {**{program: program for program in PROGRAMS}, "higgs.compare": "higgs"}
# Runs a module as `python -m` does, then reports its exit code and which of TensorFlow and Horovod were imported.
PROBE = """
import json, runpy, sys
module = sys.argv[1]
sys.argv = [module, *sys.argv[2:]]
code = 0
try:
    runpy.run_module(module, run_name="__main__", alter_sys=True)
except SystemExit as error:
    code = error.code
loaded = [name for name in ("tensorflow", "horovod") if name in sys.modules]
print("probe: " + json.dumps({"exit": code, "loaded": loaded}))
"""


def probe(module: str, *argv: str, cwd: Path, env: dict[str, str] | None = None,
          ) -> tuple[dict, subprocess.CompletedProcess]:
    done = subprocess.run([sys.executable, "-c", PROBE, module, *argv], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=300)
    report = [line for line in done.stdout.splitlines() if line.startswith("probe: ")]
    assert done.returncode == 0 and report, done.stderr
    return json.loads(report[-1].removeprefix("probe: ")), done


@pytest.mark.parametrize("module", ENTRY_POINTS)
def test_help_prints_usage_without_tensorflow(module, tmp_path):
    result, done = probe(module, "--help", cwd=tmp_path)
    assert result == {"exit": 0, "loaded": []}
    assert done.stdout.startswith(f"usage: python -m {module} ")


@pytest.mark.parametrize("module", ENTRY_POINTS)
def test_a_bad_flag_is_refused_without_tensorflow(module, tmp_path):
    result, done = probe(module, "--epochs", "0", cwd=tmp_path)
    assert result == {"exit": 2, "loaded": []}
    assert "argument --epochs: must be at least 1, got 0" in done.stderr


@pytest.mark.parametrize("module", ENTRY_POINTS)
def test_missing_data_is_one_error_line_without_tensorflow(module, tmp_path):
    result, done = probe(module, "--data-dir", str(tmp_path / "missing"), "--checkpoint-dir", str(tmp_path / "ckpt"),
                         cwd=tmp_path)
    assert result == {"exit": 2, "loaded": []}
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"{ENTRY_POINTS[module]}: error: {tmp_path / 'missing'}"), \
        done.stderr
    assert not (tmp_path / "ckpt").exists()


def test_the_probe_sees_tensorflow_load(tmp_path):
    result, _ = probe("ucluster.train", cwd=tmp_path)  # the training module imports both
    assert result == {"exit": 0, "loaded": ["tensorflow", "horovod"]}


def option(command: list[str], name: str) -> str | None:
    """The value of `--name value` or `--name=value` in a command line."""
    for index, word in enumerate(command):
        if word == name and index + 1 < len(command):
            return command[index + 1]
        if word.startswith(name + "="):
            return word.split("=", 1)[1]
    return None


def is_under(path: str, directory: str) -> bool:
    return path == directory or path.startswith(directory.rstrip("/") + "/")


@pytest.mark.parametrize("job_file", JOB_FILES, ids=lambda path: str(path.relative_to(REPO)))
def test_job_command_reaches_its_data_and_names_the_missing_file(job_file: Path, tmp_path: Path) -> None:
    job = load_job(job_file)
    command = list(job.spec.command)
    assert command[:2] == ["python", "-m"], f"{job_file.name}: spec.command is not `python -m <program> ...`"
    module, arguments = command[2], command[3:]
    pod_env = job_environment(job)  # what every rank of the job sees (the env contract), spec.env after it
    env = {name: value for name, value in os.environ.items() if not name.startswith(ENV_PREFIX)}
    env.update(pod_env)
    env.update({entry["name"]: entry["value"] for entry in job.spec.env if "value" in entry})
    data_dir = option(command, "--data-dir") or pod_env["KUBETRAIN_DATA_DIR"]
    assert is_under(data_dir, job.spec.data.mount_path), \
        f"{job_file.name} reads its data from {data_dir}, outside its data volume {job.spec.data.mount_path}"
    if os.path.exists(data_dir):
        pytest.skip(f"this machine has {data_dir}: the test needs the job's data path to be missing")
    checkpoints = pod_env["KUBETRAIN_CHECKPOINT_DIR"]
    existed = os.path.exists(checkpoints)

    result, done = probe(module, *arguments, cwd=tmp_path, env=env)

    lines = done.stderr.strip().splitlines()
    assert result["exit"] == 2 and len(lines) == 1, f"python -m {module} exited {result['exit']}: {done.stderr}"
    program = module.split(".")[0]
    assert lines[0].startswith(f"{program}: error: {data_dir.rstrip('/')}/"), \
        f"the error names another path than the job's data path {data_dir}: {lines[0]}"
    assert "not found" in lines[0], lines[0]
    assert result["loaded"] == [], "the data is checked before TensorFlow or Horovod load"
    assert existed or not os.path.exists(checkpoints), f"a run that could not start created {checkpoints}"
