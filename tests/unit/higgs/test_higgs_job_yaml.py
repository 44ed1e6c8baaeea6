"""The shipped job.yaml runs `python -m higgs` with flags the program accepts, at the notebook's settings."""

from pathlib import Path

import yaml

from higgs.cli import build_parser

JOB = Path(__file__).resolve().parents[3] / "jobs" / "higgs" / "job.yaml"


def test_job_yaml_command_parses_with_the_reference_settings():
    spec = yaml.safe_load(JOB.read_text())["spec"]
    command = spec["command"]
    assert command[:3] == ["python", "-m", "higgs"]
    args = build_parser().parse_args(command[3:])
    assert args.data_dir.startswith(spec["data"]["mountPath"])
    assert (args.trainer, args.epochs, args.batch_size, args.learning_rate) == ("allreduce", 1, 64, 0.01)
    assert (args.hidden_units, args.dropout, args.rho, args.easgd_learning_rate) == (600, 0.2, 5.0, 0.04)
