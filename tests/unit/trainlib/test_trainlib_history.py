"""history.json and history.png next to the checkpoints."""

from __future__ import annotations

import json

from trainlib.history import HistoryLog


def test_each_epoch_rewrites_json_and_png(tmp_path):
    history = HistoryLog(str(tmp_path), "demo")
    history.append(1, {"loss": 2.0, "accuracy": 0.2, "val_loss": 2.1, "val_accuracy": 0.1})
    history.append(2, {"loss": 1.0, "accuracy": 0.5, "val_loss": 1.2, "val_accuracy": 0.4, "skip": float("nan")})
    saved = json.loads((tmp_path / "history.json").read_text())
    assert saved == {"title": "demo", "epochs": [
        {"epoch": 1, "loss": 2.0, "accuracy": 0.2, "val_loss": 2.1, "val_accuracy": 0.1},
        {"epoch": 2, "loss": 1.0, "accuracy": 0.5, "val_loss": 1.2, "val_accuracy": 0.4}]}
    png = (tmp_path / "history.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 5000
    assert sorted(path.name for path in tmp_path.iterdir()) == ["history.json", "history.png"]


def test_resume_drops_epochs_after_the_restored_checkpoint(tmp_path):
    first = HistoryLog(str(tmp_path), "run")
    for epoch in range(1, 5):
        first.append(epoch, {"loss": 1.0 / epoch})
    resumed = HistoryLog(str(tmp_path), "run")
    resumed.resume_at(2)  # the newest checkpoint was epoch 2; epochs 3-4 died with the killed process
    resumed.append(3, {"loss": 0.3})
    epochs = json.loads((tmp_path / "history.json").read_text())["epochs"]
    assert epochs == [{"epoch": 1, "loss": 1.0}, {"epoch": 2, "loss": 0.5}, {"epoch": 3, "loss": 0.3}]


def test_unreadable_history_starts_over(tmp_path):
    (tmp_path / "history.json").write_text("{not json")
    history = HistoryLog(str(tmp_path), "run")
    assert history.records == []
