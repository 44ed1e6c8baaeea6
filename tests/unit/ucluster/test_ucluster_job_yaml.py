"""The shipped job.yaml runs `python -m ucluster` with flags the program accepts, at the notebook's settings."""

from pathlib import Path

import yaml

from ucluster.cli import build_parser

JOB = Path(__file__).resolve().parents[3] / "jobs" / "ucluster" / "job.yaml"


def test_job_yaml_command_parses_with_the_reference_settings():
    spec = yaml.safe_load(JOB.read_text())["spec"]
    command = spec["command"]
    assert command[:3] == ["python", "-m", "ucluster"]
    args = build_parser().parse_args(command[3:])
    assert args.data_dir.startswith(spec["data"]["mountPath"])
    assert (args.epochs, args.epochs_pretrain, args.batch_size, args.learning_rate) == (10, 1, 1024, 0.001)
    assert (args.ncat, args.n_clusters, args.max_dim, args.num_point, args.nfeat) == (20, 3, 3, 100, 8)
    assert (args.pooling, args.head_dropout, args.focal_gamma) == ("mean", (0.0, 0.0), 4.0)


def test_the_first_releases_model_is_an_option_and_bad_rates_are_refused(capsys):
    import pytest

    args = build_parser().parse_args(["--pooling", "max", "--head-dropout", "0.1,0.4", "--focal-gamma", "2"])
    assert (args.pooling, args.head_dropout, args.focal_gamma) == ("max", (0.1, 0.4), 2.0)
    with pytest.raises(SystemExit):
        build_parser().parse_args(["--head-dropout", "1.5,0"])
    assert "--head-dropout" in capsys.readouterr().err
