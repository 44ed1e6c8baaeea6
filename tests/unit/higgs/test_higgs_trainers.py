"""The trainer table, the flags that override it, and the comparison's printout, without TensorFlow."""

import json

import pytest

from higgs.cli import build_parser, parse, trainer_settings
from higgs.compare import format_table, improvement_lines, report_comparison
from higgs.trainers import NOTEBOOK, SETTINGS, TrainerResult, settings_for


def test_the_notebooks_five_trainers_with_their_calls_parameters():
    assert [(s.name, s.batch_size, s.window, s.rho, s.learning_rate, s.momentum, s.parameter_server)
            for s in NOTEBOOK] == [
        ("single", 64, 1, 0.0, 0.0, 0.0, False),
        ("easgd", 64, 1, 5.0, 0.04, 0.0, False),
        ("async-easgd", 10, 30, 5.0, 0.05, 0.0, True),
        ("async-eamsgd", 10, 10, 5.0, 0.05, 0.85, True),
        ("downpour", 62, 5, 0.0, 0.05, 0.0, True),
    ]
    assert [SETTINGS[name].workers(8) for name in ("single", "easgd", "downpour", "allreduce")] == [1, 8, 7, 8]


def test_flags_override_each_trainers_defaults_where_they_apply():
    assert settings_for("async-easgd", batch_size=32, window=5).batch_size == 32
    assert settings_for("async-easgd", window=5).window == 5
    assert settings_for("downpour", rho=2.0, momentum=0.5) == SETTINGS["downpour"]  # no elasticity, no momentum
    assert settings_for("async-eamsgd", momentum=0.5).momentum == 0.5


def test_each_compared_trainer_gets_its_own_settings():
    args = build_parser().parse_args(["--compare", "--trainers", "single,async-easgd"])
    assert [(s.name, s.batch_size) for s in trainer_settings(args)] == [("single", 64), ("async-easgd", 10)]
    args = build_parser().parse_args(["--trainer", "downpour", "--batch-size", "100"])
    assert [(s.name, s.batch_size) for s in trainer_settings(args)] == [("downpour", 100)]


def test_a_moving_rate_of_one_or_more_is_refused_naming_the_flags(capsys):
    with pytest.raises(SystemExit) as exited:
        parse(["--trainer", "async-easgd", "--rho", "20"])
    assert exited.value.code == 2
    assert "--trainer async-easgd: the elastic moving rate alpha = --trainer-learning-rate x --rho = 1" in \
        capsys.readouterr().err


def result(trainer, seconds, f1=0.7):
    settings = SETTINGS[trainer]
    return TrainerResult(trainer, f1, 0.5, 0.72, seconds, 1, settings.workers(4), 4)


def test_the_notebooks_improvement_lines(tmp_path):
    results = [result("single", 30.0), result("async-easgd", 12.0), result("downpour", 10.0)]
    assert improvement_lines(results) == ["Number of parallel workers: 3", "Improvement using AEASGD: 250.0 %"]
    assert improvement_lines(results[1:]) == []
    table = format_table(results).splitlines()
    assert table[2].split() == ["single", "1", "0.7000", "0.5000", "0.7200", "30.0"]
    text = report_comparison(results, str(tmp_path))
    assert text.endswith("Improvement using AEASGD: 250.0 %")
    assert [row["trainer"] for row in json.loads((tmp_path / "compare.json").read_text())] == [
        "single", "async-easgd", "downpour"]
    assert (tmp_path / "compare.png").stat().st_size > 10_000
