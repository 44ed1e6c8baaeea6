"""The command line's cluster (kubetrain.kube): the namespace kubectl would use, what an unreachable cluster says, and
the watch that resumes from its last resourceVersion and lists again after 410 Gone."""

from __future__ import annotations

import itertools
import json
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from kubetrain import kube


def write_kubeconfig(tmp_path: Path, server: str, namespace: str | None) -> Path:
    context: dict[str, Any] = {"cluster": "test", "user": "test"}
    if namespace:
        context["namespace"] = namespace
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "test-context",
        "clusters": [{"name": "test", "cluster": {"server": server, "insecure-skip-tls-verify": True}}],
        "users": [{"name": "test", "user": {"token": "not-a-real-token"}}],
        "contexts": [{"name": "other", "context": {"cluster": "test", "user": "test", "namespace": "other"}},
                     {"name": "test-context", "context": context}],
    }))
    return path


@pytest.fixture
def outside_a_pod(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_PORT", raising=False)


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.parametrize(("namespace", "expected"), [("team-a", "team-a"), (None, "default")])
def test_the_namespace_is_the_current_contexts_else_default(tmp_path, monkeypatch, outside_a_pod, namespace,
                                                             expected) -> None:
    monkeypatch.setenv("KUBECONFIG", str(write_kubeconfig(tmp_path, "https://127.0.0.1:6443", namespace)))
    cluster = kube.connect()
    assert cluster.namespace == expected
    assert cluster.server == "https://127.0.0.1:6443"
    assert cluster.source == f"kubeconfig {tmp_path / 'kubeconfig'}, context test-context"


def test_in_a_pod_the_namespace_is_the_pods(tmp_path) -> None:
    (tmp_path / "namespace").write_text("ml\n")
    assert kube.pod_namespace(tmp_path / "namespace") == "ml"
    assert kube.pod_namespace(tmp_path / "missing") == "default"


def test_no_kubeconfig_and_no_pod_says_what_was_tried(tmp_path, monkeypatch, outside_a_pod) -> None:
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "missing"))
    with pytest.raises(kube.ClusterError) as raised:
        kube.connect()
    message = str(raised.value)
    assert message.startswith(f"no cluster reachable: tried kubeconfig {tmp_path / 'missing'} (")
    assert "and a pod's service account (" in message and "\n" not in message


def test_a_server_that_does_not_answer_is_named_with_where_it_came_from(tmp_path, monkeypatch, outside_a_pod) -> None:
    server = f"https://127.0.0.1:{closed_port()}"
    monkeypatch.setenv("KUBECONFIG", str(write_kubeconfig(tmp_path, server, "ml")))
    with pytest.raises(kube.ClusterError) as raised:
        kube.list_training(kube.connect(), "ml", "cifar")
    assert str(raised.value) == (f"no cluster reachable at {server} (kubeconfig {tmp_path / 'kubeconfig'}, context "
                                 "test-context): Failed to establish a new connection: [Errno 111] Connection refused")


# -- the watch, against a fake CustomObjectsApi that answers as the API server does -----------------------------------


class Response:
    """A streamed watch response: one JSON event per line."""

    status = 200

    def __init__(self, events: list[dict[str, Any]]) -> None:
        self.events = events

    def stream(self, amt: Any = None, decode_content: Any = None) -> Iterator[bytes]:
        for event in self.events:
            yield json.dumps(event).encode() + b"\n"

    def close(self) -> None:
        pass

    def release_conn(self) -> None:
        pass


class FakeObjects:
    """Answers lists and watches from the scripts it is given; records every request."""

    def __init__(self, listings: list[dict[str, Any]], watches: list[list[dict[str, Any]]]) -> None:
        self.listings, self.watches = iter(listings), iter(watches)
        self.requests: list[dict[str, Any]] = []

    def __call__(self, api_client: Any = None) -> FakeObjects:  # stands for the CustomObjectsApi class
        return self

    def list_namespaced_custom_object(self, group: str, version: str, namespace: str, plural: str, **kwargs: Any):
        self.requests.append({"path": (group, version, namespace, plural), **kwargs})
        return Response(next(self.watches)) if kwargs.get("watch") else next(self.listings)


def job(version: int, phase: str) -> dict[str, Any]:
    return {"metadata": {"name": "cifar", "namespace": "ml", "resourceVersion": str(version)},
            "status": {"phase": phase}}


def listing(version: int, *items: dict[str, Any]) -> dict[str, Any]:
    return {"metadata": {"resourceVersion": str(version)}, "items": list(items)}


GONE = {"type": "ERROR", "object": {"kind": "Status", "code": 410, "reason": "Expired",
                                    "message": "too old resource version: 2 (9)"}}


@pytest.fixture
def cluster() -> kube.Cluster:
    configuration = client.Configuration()
    configuration.host = "https://127.0.0.1:6443"
    return kube.Cluster(client.ApiClient(configuration), "ml", "a test kubeconfig")


def test_the_watch_resumes_from_the_last_version_and_lists_again_after_410_gone(cluster, monkeypatch) -> None:
    objects = FakeObjects(
        listings=[listing(1, job(1, "Pending")), listing(9, job(8, "Running"))],
        watches=[[{"type": "MODIFIED", "object": job(2, "Starting")}, GONE],
                 [{"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "10"}}},
                  {"type": "MODIFIED", "object": job(11, "Succeeded")}],
                 [{"type": "DELETED", "object": job(12, "Succeeded")}]],
    )
    monkeypatch.setattr(kube.client, "CustomObjectsApi", objects)
    seen = kube.follow_training(cluster, "ml", "cifar")
    phases = [None if body is None else body["status"]["phase"] for body in itertools.islice(seen, 5)]
    assert phases == ["Pending", "Starting", "Running", "Succeeded", None]
    lists = [r for r in objects.requests if not r.get("watch")]
    watches = [r for r in objects.requests if r.get("watch")]
    assert all(r["path"] == ("kubetrain.dev", "v1alpha1", "ml", "distributedtrainings") for r in objects.requests)
    assert all(r["field_selector"] == "metadata.name=cifar" for r in objects.requests)
    assert len(lists) == 2, "listed at the start and again after 410 Gone"
    assert [w["resource_version"] for w in watches] == ["1", "9", "11"], "resumed from the last version seen"
    assert all(w["allow_watch_bookmarks"] and w["timeout_seconds"] == kube.WATCH_SECONDS for w in watches)


def test_the_watch_ends_with_timeout_error_when_its_time_is_up(cluster, monkeypatch) -> None:
    now = [100.0]
    objects = FakeObjects(listings=[listing(1, job(1, "Running"))], watches=[[]])

    def watched(*args: Any, **kwargs: Any) -> Response:
        if kwargs.get("watch"):
            now[0] += 1.5  # the server ends the watch when its timeoutSeconds pass
        return FakeObjects.list_namespaced_custom_object(objects, *args, **kwargs)

    monkeypatch.setattr(objects, "list_namespaced_custom_object", watched)
    monkeypatch.setattr(kube.client, "CustomObjectsApi", objects)
    seen = kube.follow_training(cluster, "ml", "cifar", timeout=1.2, clock=lambda: now[0])
    assert next(seen)["status"]["phase"] == "Running"
    with pytest.raises(TimeoutError):
        next(seen)
    assert [r["timeout_seconds"] for r in objects.requests if r.get("watch")] == [2], "the time left, rounded up"
