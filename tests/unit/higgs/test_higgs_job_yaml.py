"""The shipped job.yaml and compare.yaml run higgs with flags the program accepts, at the notebook's settings."""

from pathlib import Path

import yaml

from higgs.cli import build_parser, trainer_settings
from higgs.trainers import SETTINGS

JOB = Path(__file__).resolve().parents[3] / "jobs" / "higgs" / "job.yaml"


def test_job_yaml_command_parses_with_the_reference_settings():
    spec = yaml.safe_load(JOB.read_text())["spec"]
    command = spec["command"]
    assert command[:3] == ["python", "-m", "higgs"]
    args = build_parser().parse_args(command[3:])
    assert args.data_dir.startswith(spec["data"]["mountPath"])
    assert (args.trainer, args.epochs, args.learning_rate, args.hidden_units, args.dropout) == (
        "allreduce", 1, 0.01, 600, 0.2)
    assert trainer_settings(args) == [SETTINGS["allreduce"]]


def test_compare_yaml_runs_every_trainer_with_the_notebooks_settings():
    spec = yaml.safe_load((JOB.parent / "compare.yaml").read_text())["spec"]
    assert spec["command"][:3] == ["python", "-m", "higgs.compare"]
    args = build_parser().parse_args(["--compare", *spec["command"][3:]])
    assert trainer_settings(args) == list(SETTINGS.values())
    assert spec["workers"] * spec["slotsPerWorker"] == 8
