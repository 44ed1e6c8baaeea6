"""The MixUp comparison: both runs read back into one table and one plot; the shipped job.yaml files parse."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from cifar_mixup.cli import build_parser, parse
from cifar_mixup.compare import write_comparison

JOBS = Path(__file__).resolve().parents[3] / "jobs" / "cifar_mixup"


def write_run(directory: Path, accuracies: list[float], held_out: float) -> None:
    directory.mkdir(parents=True)
    epochs = [{"epoch": i + 1, "accuracy": a - 0.05, "val_accuracy": a, "loss": 2 - a, "val_loss": 2.1 - a}
              for i, a in enumerate(accuracies)]
    (directory / "history.json").write_text(json.dumps({"title": "t", "epochs": epochs}))
    (directory / "evaluation.json").write_text(json.dumps({"heldOutAccuracy": held_out}))


def test_the_table_shows_each_runs_best_and_final_validation_and_the_plot_is_written(tmp_path):
    write_run(tmp_path / "mixup", [0.50, 0.70, 0.75], 0.75)
    write_run(tmp_path / "no-mixup", [0.55, 0.72, 0.68], 0.68)
    table = write_comparison(str(tmp_path), {"ranks": 2, "epochs": 3})
    rows = [line for line in table.splitlines() if line.startswith("| mixup") or line.startswith("| no-mixup")]
    assert rows == ["| mixup | 3 | 0.7500 (3) | 0.7500 | 1.3500 | 0.7500 |",
                    "| no-mixup | 3 | 0.7200 (2) | 0.6800 | 1.4200 | 0.6800 |"]
    assert "ranks 2, epochs 3" in (tmp_path / "comparison.md").read_text()
    assert (tmp_path / "comparison.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    saved = json.loads((tmp_path / "comparison.json").read_text())
    assert [run["name"] for run in saved["runs"]] == ["mixup", "no-mixup"]


def test_compare_refuses_no_mixup(capsys):
    with pytest.raises(SystemExit):
        parse(["--compare", "--no-mixup", "--data-dir", "/nowhere"])
    assert "--compare trains both with and without MixUp" in capsys.readouterr().err


@pytest.mark.parametrize("name", ["job.yaml", "compare.yaml"])
def test_shipped_jobs_parse_with_the_notebooks_settings(name):
    command = yaml.safe_load((JOBS / name).read_text())["spec"]["command"]
    assert command[:3] == ["python", "-m", "cifar_mixup"]
    args = build_parser().parse_args(command[3:])
    assert (args.batch_size, args.learning_rate, args.alpha) == (32, 0.1, 0.2)
    assert args.compare == (name == "compare.yaml")
