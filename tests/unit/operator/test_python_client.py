"""kubetrain.client as a notebook uses it: jobs built from keyword arguments, refused before anything is sent with the
field named, followed to the end with a callback per change, and its history from the status (or, without one there,
the epochs seen). The cluster is replaced by a script of what it answers."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubetrain import follow_loop, kube
from kubetrain.client import Client, ClusterUnavailable, InvalidJob, Job, JobFailed, JobNotFound, WaitTimeout
from kubetrain.client.jobs import as_frame, history_rows, job_from_body
from kubetrain.client.spec import body_from, body_from_arguments, camel_case, placed
from tests.support.offline_kubeconfig import use_offline_kubeconfig

MNIST = {"name": "mnist", "image": "kubetrain/mnist:0.1.0", "command": ["python", "-m", "mnist"]}


def job(phase: str | None, epoch: int | None = None, message: str = "", **metrics: float) -> dict[str, Any]:
    status: dict[str, Any] = {}
    if phase:
        status = {"phase": phase, "reason": f"{phase}Reason", "message": message, "workers": {"ready": 2, "total": 2}}
    if epoch is not None:
        status["progress"] = {"epoch": epoch, "epochs": 3, "metrics": metrics or {"loss": 1.0 / epoch},
                              "headline": "loss"}
    return {"metadata": {"name": "mnist", "namespace": "team-a"}, "status": status}


@pytest.fixture(autouse=True)
def kubeconfig(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A kubeconfig whose current context's namespace is team-a (nothing listens at its server)."""
    use_offline_kubeconfig(tmp_path, monkeypatch, "team-a")


class Cluster:
    """Stands for the API server: `bodies` is what the watch sends, `stored` what get and list find."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, *bodies: dict[str, Any] | None,
                 end: Exception | None = None, stored: dict[str, Any] | None = None) -> None:
        self.bodies, self.end, self.stored = bodies, end, stored
        self.created: list[dict[str, Any]] = []
        monkeypatch.setattr(follow_loop, "follow_training", self.follow)
        monkeypatch.setattr(kube, "create_training", self.create)
        monkeypatch.setattr(kube, "list_training", lambda cluster, namespace, name: (self.stored, "1"))

    def follow(self, cluster: Any, namespace: str, name: str, timeout: float | None = None
               ) -> Iterator[dict[str, Any] | None]:
        yield from self.bodies
        if self.end is not None:
            raise self.end
        raise AssertionError("the client asked for more than the job ever sent")

    def create(self, cluster: Any, body: dict[str, Any]) -> dict[str, Any]:
        self.created.append(body)
        return body


# -- building and checking a job ---------------------------------------------------------------------------------------

def test_keyword_arguments_build_the_job_the_yaml_would_write() -> None:
    body = body_from_arguments(**MNIST, workers=2, slots_per_worker=1, run_policy={"backoffLimit": 0},
                               labels={"team": "a"})
    assert body == {
        "apiVersion": "kubetrain.dev/v1alpha1", "kind": "DistributedTraining",
        "metadata": {"name": "mnist", "labels": {"team": "a"}},
        "spec": {"image": "kubetrain/mnist:0.1.0", "command": ["python", "-m", "mnist"], "workers": 2,
                 "slotsPerWorker": 1, "runPolicy": {"backoffLimit": 0}},
    }


@pytest.mark.parametrize(("written", "field"), [("slots_per_worker", "slotsPerWorker"), ("runPolicy", "runPolicy"),
                                                ("image", "image"), ("wait_for_workers", "waitForWorkers")])
def test_snake_case_names_become_the_yamls_camel_case(written: str, field: str) -> None:
    assert camel_case(written) == field


def test_a_checked_job_is_placed_in_the_clients_namespace() -> None:
    assert placed(body_from_arguments(**MNIST), "team-a")["metadata"] == {"name": "mnist", "namespace": "team-a"}


@pytest.mark.parametrize(("spec", "field", "words"), [
    ({"workers": -1}, "spec.workers", "should be greater than or equal to 0"),
    ({"wrkers": 2}, "spec.wrkers", "unknown field, the API server refuses it; did you mean workers?"),
    ({"slots_per_worker": 4, "resources": {"gpusPerWorker": 1}}, "spec.slotsPerWorker",
     "slotsPerWorker must not exceed resources.gpusPerWorker"),
    ({"checkpoint": {"mountPath": "/data"}}, "spec.checkpoint.mountPath", "must differ from data.mountPath"),
])
def test_a_job_the_api_server_would_refuse_names_the_field(spec: dict[str, Any], field: str, words: str) -> None:
    with pytest.raises(InvalidJob) as refused:
        placed(body_from_arguments(**MNIST, **spec), "team-a")
    assert refused.value.field == field
    assert str(refused.value).startswith(f"invalid DistributedTraining: {field}: ") and words in str(refused.value)


def test_a_job_naming_another_namespace_is_refused() -> None:
    body = body_from_arguments(**MNIST)
    body["metadata"]["namespace"] = "other"
    with pytest.raises(InvalidJob, match="metadata.namespace: is 'other', but this client works in 'team-a'"):
        placed(body, "team-a")


def test_a_dict_gets_apiversion_and_kind_and_a_path_is_read_as_kubetrain_run_reads_it(tmp_path: Path) -> None:
    assert body_from({"metadata": {"name": "x"}})["kind"] == "DistributedTraining"
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(body_from_arguments(**MNIST)))
    assert body_from(str(path)) == body_from_arguments(**MNIST)
    with pytest.raises(InvalidJob, match="cannot read the job file"):
        body_from(str(tmp_path / "missing.yaml"))


def test_create_refuses_an_invalid_job_before_sending_it(monkeypatch: pytest.MonkeyPatch) -> None:
    cluster = Cluster(monkeypatch)
    with pytest.raises(InvalidJob, match="spec.workers"):
        Client().create(**MNIST, workers=-1)
    with pytest.raises(InvalidJob, match="Required value: create\\(\\) needs image"):
        Client().create(name="mnist", command=["python"])
    assert cluster.created == []


def test_create_sends_the_checked_job_in_the_contexts_namespace(monkeypatch: pytest.MonkeyPatch) -> None:
    cluster = Cluster(monkeypatch)
    created = Client().create(**MNIST, workers=2)
    assert created == Job(name="mnist", namespace="team-a", phase="Pending")
    assert cluster.created[0]["metadata"] == {"name": "mnist", "namespace": "team-a"}


# -- following a job ---------------------------------------------------------------------------------------------------

def test_wait_calls_on_change_per_change_and_returns_how_it_ended(monkeypatch: pytest.MonkeyPatch) -> None:
    Cluster(monkeypatch, job(None), job("Running"), job("Running", 1), job("Running", 1), job("Running", 2),
            job("Succeeded", 3))
    seen: list[Job] = []
    final = Client().wait("mnist", on_change=seen.append)
    assert [(j.phase, j.epoch) for j in seen] == [("Pending", None), ("Running", None), ("Running", 1),
                                                  ("Running", 2), ("Succeeded", 3)]
    assert final == seen[-1] and final.metrics == {"loss": 1 / 3}


def test_wait_raises_job_failed_with_the_reason_and_message(monkeypatch: pytest.MonkeyPatch) -> None:
    Cluster(monkeypatch, job("Running", 1), job("Failed", 1, message="launcher pod mnist-launcher-x exited 1"))
    with pytest.raises(JobFailed) as failed:
        Client().wait("mnist")
    assert (failed.value.reason, failed.value.message) == ("FailedReason", "launcher pod mnist-launcher-x exited 1")
    assert str(failed.value) == "team-a/mnist Failed: FailedReason: launcher pod mnist-launcher-x exited 1"


def test_wait_raises_wait_timeout_saying_where_the_job_was(monkeypatch: pytest.MonkeyPatch) -> None:
    Cluster(monkeypatch, job("Running", 1), end=TimeoutError("5s passed"))
    with pytest.raises(WaitTimeout) as late:
        Client().wait("mnist", timeout=5)
    assert str(late.value).startswith("timed out after 5s waiting for DistributedTraining team-a/mnist to finish: "
                                      "it is Running (workers=2/2, epoch=1/3")
    assert isinstance(late.value.job, Job) and late.value.job.epoch == 1


def test_no_such_job_and_a_deleted_job_are_job_not_found(monkeypatch: pytest.MonkeyPatch) -> None:
    Cluster(monkeypatch, None)
    with pytest.raises(JobNotFound, match="^DistributedTraining team-a/mnist not found$"):
        Client().wait("mnist")
    with pytest.raises(JobNotFound, match="^DistributedTraining team-a/mnist not found$"):
        Client().get("mnist")
    Cluster(monkeypatch, job("Running"), None)
    with pytest.raises(JobNotFound, match="was deleted before it finished"):
        Client().wait("mnist")


def test_a_cluster_that_does_not_answer_is_one_line() -> None:
    client = Client(namespace="ml")
    assert client.namespace == "ml", "namespace= overrides the context's"
    with pytest.raises(ClusterUnavailable, match="^no cluster reachable at https://127.0.0.1:1 "):
        client.get("mnist")


def test_no_kubeconfig_and_no_service_account_is_one_line(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "none"))
    with pytest.raises(ClusterUnavailable, match="^no cluster reachable: tried kubeconfig .*none"):
        Client()


# -- history -----------------------------------------------------------------------------------------------------------

def test_history_has_one_row_per_epoch_seen_the_later_one_winning() -> None:
    seen = [job_from_body(body) for body in (job("Running"), job("Running", 1, loss=0.9, accuracy=0.5),
                                             job("Running", 2, loss=0.7, accuracy=0.6),
                                             job("Restarting", 2, loss=0.7, accuracy=0.6),
                                             job("Running", 2, loss=0.6, accuracy=0.65))]
    assert history_rows(seen) == [{"epoch": 1, "loss": 0.9, "accuracy": 0.5},
                                  {"epoch": 2, "loss": 0.6, "accuracy": 0.65}]
    assert history_rows([]) == []


def test_without_a_status_history_history_adds_the_epoch_the_status_holds_now(
    monkeypatch: pytest.MonkeyPatch
) -> None:
    """A program on an older trainlib reports its latest epoch only."""
    Cluster(monkeypatch, job("Running", 1), job("Succeeded", 2), stored=job("Succeeded", 3))
    client = Client()
    client.wait("mnist")
    assert [row["epoch"] for row in client.history("mnist")] == [1, 2, 3]
    assert [row["epoch"] for row in Client().history("mnist")] == [3], "another client saw only the status"


def reported(body: dict[str, Any], *epochs: int) -> dict[str, Any]:
    """`body` with status.progress.history as rank 0 sends it: `epochs`, loss 1/epoch."""
    body["status"]["progress"]["history"] = [{"epoch": epoch, "metrics": {"loss": 1.0 / epoch}} for epoch in epochs]
    return body


def test_history_is_the_status_history_for_a_client_that_never_waited(monkeypatch: pytest.MonkeyPatch) -> None:
    Cluster(monkeypatch, stored=reported(job("Succeeded", 3), 3, 1, 2))
    assert Client().history("mnist") == [{"epoch": 1, "loss": 1.0}, {"epoch": 2, "loss": 0.5},
                                         {"epoch": 3, "loss": 1.0 / 3}]
    frame = Client().history("mnist", as_frame=True)
    assert list(frame.index) == [1, 2, 3] and frame.loc[2, "loss"] == 0.5


def test_the_status_history_wins_over_the_epochs_seen_and_older_ones_seen_come_first(
    monkeypatch: pytest.MonkeyPatch
) -> None:
    """The status keeps the last epochs only: epochs this client saw before them are kept."""
    Cluster(monkeypatch, job("Running", 1, loss=0.9), job("Running", 2, loss=0.8), job("Succeeded", 3),
            stored=reported(job("Succeeded", 3), 2, 3))
    client = Client()
    client.wait("mnist")
    assert client.history("mnist") == [{"epoch": 1, "loss": 0.9}, {"epoch": 2, "loss": 0.5},
                                       {"epoch": 3, "loss": 1.0 / 3}]


def test_history_of_a_job_that_is_gone_is_job_not_found(monkeypatch: pytest.MonkeyPatch) -> None:
    Cluster(monkeypatch, stored=None)
    with pytest.raises(JobNotFound):
        Client().history("mnist")


def test_history_as_a_frame_needs_pandas(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pandas", None)
    with pytest.raises(ImportError, match="needs pandas: pip install pandas"):
        as_frame([{"epoch": 1, "loss": 0.5}])


def test_history_as_a_frame_is_indexed_by_epoch() -> None:
    rows = [{"epoch": 1, "loss": 0.5, "accuracy": 0.4}, {"epoch": 2, "loss": 0.25, "accuracy": 0.7, "lr": 0.1}]
    frame = as_frame(rows)
    assert frame.index.name == "epoch" and list(frame.index) == [1, 2]
    assert list(frame.columns) == ["loss", "accuracy", "lr"]
    assert frame.loc[2, "accuracy"] == 0.7 and frame["lr"].isna().tolist() == [True, False]


def test_the_example_notebook_creates_a_valid_job_and_prints_its_history(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = importlib.util.spec_from_file_location("notebook", Path(__file__).parents[3] / "examples" / "notebook.py")
    assert spec is not None and spec.loader is not None
    notebook = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(notebook)
    cluster = Cluster(monkeypatch, job("Running", 1), job("Succeeded", 2), stored=job("Succeeded", 2))
    assert notebook.main() == 0
    assert cluster.created[0]["metadata"] == {"name": "mnist-notebook", "namespace": "team-a"}
    out = capsys.readouterr().out
    assert out.startswith("created team-a/mnist-notebook\nRunning epoch 1/3 {'loss': 1.0}\n"), out
    assert out.endswith("{'epoch': 1, 'loss': 1.0}\n{'epoch': 2, 'loss': 0.5}\n"), out
