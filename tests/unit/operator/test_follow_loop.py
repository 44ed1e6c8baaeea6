"""`kubetrain status [--watch]` and `kubetrain wait` as a user runs them, the cluster's watch replaced by a script of
what it sends: the output, the exit codes and the one-line errors."""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from kubetrain import follow, follow_loop
from kubetrain.cli import main
from kubetrain.progress_bar import EpochBar
from tests.support.offline_kubeconfig import use_offline_kubeconfig


def job(phase: str | None, epoch: int | None = None, restarts: int = 0, message: str = "") -> dict[str, Any]:
    status: dict[str, Any] = {}
    if phase:
        status = {"phase": phase, "reason": f"{phase}Reason", "message": message, "restarts": restarts,
                  "workers": {"ready": 2, "total": 2}}
    if epoch is not None:
        status["progress"] = {"epoch": epoch, "epochs": 3, "metrics": {"val_accuracy": 0.5 + epoch / 10},
                              "headline": "val_accuracy"}
    return {"metadata": {"name": "cifar", "namespace": "team-a"}, "status": status}


class Watched:
    """Stands for kube.follow_training: yields `bodies`, then raises `end` (TimeoutError) or waits for ever."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, *bodies: dict[str, Any] | None,
                 end: Exception | None = None) -> None:
        self.bodies, self.end = bodies, end
        self.asked: list[tuple[str, str, float | None]] = []
        monkeypatch.setattr(follow_loop, "follow_training", self)

    def __call__(self, cluster: Any, namespace: str, name: str, timeout: float | None = None
                 ) -> Iterator[dict[str, Any] | None]:
        self.asked.append((namespace, name, timeout))
        yield from self.bodies
        if self.end is not None:
            raise self.end
        raise AssertionError("the command asked for more than the job ever sent")


@pytest.fixture(autouse=True)
def kubeconfig(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A kubeconfig whose current context's namespace is team-a (nothing listens at its server)."""
    use_offline_kubeconfig(tmp_path, monkeypatch, "team-a")


def test_wait_prints_one_line_when_the_job_succeeds(monkeypatch, capsys) -> None:
    watched = Watched(monkeypatch, job(None), job("Running", 1), job("Running", 2), job("Succeeded", 3))
    assert main(["wait", "cifar"]) == 0
    out, err = capsys.readouterr()
    assert out == "team-a/cifar Succeeded: SucceededReason (workers=2/2, epoch=3/3, val_accuracy=0.8000, restarts=0)\n"
    assert err == ""
    assert watched.asked == [("team-a", "cifar", None)], "the namespace of the kubeconfig's current context"


def test_wait_exits_1_when_the_job_fails_and_says_why(monkeypatch, capsys) -> None:
    watched = Watched(monkeypatch, job("Running", 1), job("Failed", 1, 1, "worker pod cifar-worker-0 failed"))
    assert main(["wait", "cifar", "-n", "ml", "--timeout", "60"]) == 1
    out, err = capsys.readouterr()
    assert out.startswith("ml/cifar Failed: FailedReason: worker pod cifar-worker-0 failed (workers=2/2")
    assert out.count("\n") == 1 and err == ""
    assert watched.asked == [("ml", "cifar", 60.0)], "-n overrides the context's namespace"


def test_wait_for_a_job_that_does_not_exist_exits_2_naming_it(monkeypatch, capsys) -> None:
    Watched(monkeypatch, None)
    assert main(["wait", "nope"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err == "kubetrain: error: DistributedTraining team-a/nope not found\n"


def test_wait_that_times_out_exits_124_saying_so(monkeypatch, capsys) -> None:
    Watched(monkeypatch, job("Running", 1), end=TimeoutError())
    assert main(["wait", "cifar", "--timeout", "1"]) == follow.EXIT_TIMEOUT == 124
    out, err = capsys.readouterr()
    assert out == ""
    assert err == ("kubetrain: error: timed out after 1s waiting for DistributedTraining team-a/cifar to finish: it is "
                   "Running (workers=2/2, epoch=1/3, val_accuracy=0.6000, restarts=0)\n")


def test_a_job_deleted_while_waited_for_exits_2(monkeypatch, capsys) -> None:
    Watched(monkeypatch, job("Running", 1), None)
    assert main(["wait", "cifar"]) == 2
    err = capsys.readouterr().err
    assert err == "kubetrain: error: DistributedTraining team-a/cifar was deleted before it finished\n"


@pytest.mark.parametrize("timeout", ["0", "-5", "soon", "inf"])
def test_a_timeout_that_is_not_a_positive_number_is_a_usage_error(timeout, capsys) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["wait", "cifar", "--timeout", timeout])
    assert exited.value.code == 2
    assert "argument --timeout" in capsys.readouterr().err


def test_no_cluster_is_one_line_and_exit_2(capsys) -> None:
    assert main(["wait", "cifar"]) == 2  # the kubeconfig's server does not answer
    err = capsys.readouterr().err
    assert err.startswith("kubetrain: error: no cluster reachable at https://127.0.0.1:1 (kubeconfig ")
    assert err.count("\n") == 1


@pytest.mark.parametrize(("last", "code"), [("Succeeded", 0), ("Failed", 1)])
def test_status_watch_in_a_pipe_prints_the_status_then_plain_lines(monkeypatch, capsys, last, code) -> None:
    Watched(monkeypatch, job("Pending"), job("Pending"), job("Running"), job("Running", 1), job(last, 1))
    assert main(["status", "cifar", "--watch"]) == code
    out, err = capsys.readouterr()
    lines = out.splitlines()
    changes = [line for line in lines if line[:4].isdigit()]  # after the status: a line per change, time first
    assert lines[0] == "team-a/cifar: Pending"
    assert [line.split()[1] for line in changes] == ["Running", "Running", last]
    assert changes[1].endswith("reason=RunningReason workers=2/2 epoch=1/3 val_accuracy=0.6000 restarts=0")
    assert "\x1b" not in out and err == ""


def test_status_without_watch_shows_the_status_once(monkeypatch, capsys) -> None:
    Watched(monkeypatch, job("Running", 1))
    assert main(["status", "cifar", "-n", "team-a"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("team-a/cifar: Running\n") and "epoch 1/3" in out


def test_status_of_a_missing_job_exits_2(monkeypatch, capsys) -> None:
    Watched(monkeypatch, None)
    assert main(["status", "nope", "--watch"]) == 2
    assert capsys.readouterr().err == "kubetrain: error: DistributedTraining team-a/nope not found\n"


def test_on_a_terminal_a_bar_of_the_epochs_follows_the_job() -> None:
    screen = io.StringIO()
    console = Console(file=screen, force_terminal=True, width=120)
    first = follow.snapshot(job("Running", 0))
    with EpochBar(first, console) as bar:
        for epoch in (1, 2):
            snap = follow.snapshot(job("Running", epoch))
            bar.show(snap, f"line for epoch {epoch}")
        task = bar.progress.tasks[0]
        assert (task.completed, task.total, task.fields["metric"]) == (2, 3, "val_accuracy=0.7000")
        bar.show(follow.snapshot(job("Restarting", 1, restarts=1)), "line for the restart")
        assert (task.completed, task.description) == (1, "Restarting")
    shown = screen.getvalue()
    assert all(f"line for {what}" in shown for what in ("epoch 1", "epoch 2", "the restart"))
