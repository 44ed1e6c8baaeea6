"""The cache a sync pass reads: the watch's objects, never older than what the operator itself last wrote, and only
what the job owns."""

from __future__ import annotations

import dataclasses
from typing import Any

from kubetrain.cache import (
    TRAININGS,
    WORKLOADS,
    Departed,
    Written,
    kept,
    owned,
    resource_version,
    take_snapshot,
)
from kubetrain.children import WATCHED_KINDS
from kubetrain.controller import jobs_of
from kubetrain.plan import Children
from kubetrain.runtime.store import Store

NS, JOB, UID = "team", "cifar", "uid-cifar"


def obj(name: str, version: int, owner: str | None = UID, **extra: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": NS, "resourceVersion": str(version),
                            "labels": {"kubetrain.dev/job-name": JOB}, "uid": f"uid-{name}"}
    if owner:
        meta["ownerReferences"] = [{"uid": owner}]
    return {"metadata": meta, **extra}


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def listing(trainings: dict[tuple[str, str], list[dict[str, Any]]], **listed: list[dict[str, Any]]) -> Store:
    """The watch-fed store holding `trainings` and the children and Workloads in `listed`, by field."""
    store = Store({field: jobs_of(field) for field in [TRAININGS, WORKLOADS, *(c.field for c in WATCHED_KINDS)]})
    for training_list in trainings.values():
        for body in training_list:
            store.put(TRAININGS, body)
    for field, objects in listed.items():
        for child in objects:
            store.put(field, child)
    return store


def training(version: int, **status: Any) -> dict[str, Any]:
    body = obj(JOB, version, owner=None, status=status)
    body["metadata"]["uid"] = UID
    return body


def test_planner_children_have_one_field_per_watched_child_kind_and_the_departed_pods():
    fields = [child.field for child in WATCHED_KINDS] + ["departed", WORKLOADS]
    assert [f.name for f in dataclasses.fields(Children)] == fields


def test_kueues_workloads_reach_the_snapshot_without_their_pod_templates_when_watched():
    body = {"metadata": {"name": "cifar-0-1a2b3c4d", "namespace": NS,
                         "ownerReferences": [{"kind": "Pod", "name": "cifar-worker-0", "uid": "uid-pod"}]},
            "spec": {"podSets": [{"template": {"spec": {"containers": []}}}]},
            "status": {"conditions": [{"type": "QuotaReserved", "status": "False", "message": "no quota"}]}}
    small = kept(WORKLOADS, body)
    watched = {(NS, JOB): [training(1)]}
    snapshot = take_snapshot((NS, JOB), listing(watched, workloads=[small]), Written())
    assert snapshot is not None and snapshot.workloads == [small]
    snapshot = take_snapshot((NS, JOB), listing(watched), Written())  # not watched: none
    assert snapshot is not None and snapshot.workloads == []


def test_a_status_the_operator_wrote_wins_until_the_watch_delivers_it():
    written = Written()
    watched = {(NS, JOB): [training(10, attempt=0, restarts=0)]}
    written.remember(TRAININGS, training(12, attempt=1, restarts=1))
    snapshot = take_snapshot((NS, JOB), listing(watched), written)
    assert snapshot is not None and snapshot.training["status"] == {"attempt": 1, "restarts": 1}
    watched[(NS, JOB)] = [training(12, attempt=1, restarts=1, phase="Restarting")]
    snapshot = take_snapshot((NS, JOB), listing(watched), written)
    assert snapshot is not None and snapshot.training["status"]["phase"] == "Restarting"  # the watch caught up
    watched[(NS, JOB)] = [training(11, attempt=0)]  # an older event arriving late is not made newer by our write
    snapshot = take_snapshot((NS, JOB), listing(watched), written)
    assert snapshot is not None and snapshot.training["status"] == {"attempt": 0}


def test_created_children_are_seen_before_their_watch_event_and_forgotten_once_deleted():
    written = Written()
    watched = {(NS, JOB): [training(10)]}
    written.remember("pods", obj("cifar-worker-0", 20))
    snapshot = take_snapshot((NS, JOB), listing(watched), written)
    assert snapshot is not None and [p["metadata"]["name"] for p in snapshot.children["pods"]] == ["cifar-worker-0"]
    written.forget("pods", NS, "cifar-worker-0")  # the watch said DELETED
    snapshot = take_snapshot((NS, JOB), listing(watched), written)
    assert snapshot is not None and snapshot.children["pods"] == []


def test_only_the_exact_version_the_operator_wrote_is_an_echo_that_needs_no_pass():
    written = Written()
    written.remember("pods", obj("cifar-worker-0", 20))
    assert not written.echo("pods", obj("cifar-worker-1", 20))  # another pod
    assert not written.echo("pods", obj("cifar-worker-0", 19))  # an older version: what changed since is unknown
    assert written.echo("pods", obj("cifar-worker-0", 20))
    assert not written.echo("pods", obj("cifar-worker-0", 20))  # delivered once: forgotten
    written.remember(TRAININGS, training(30, phase="Running"))
    assert not written.echo(TRAININGS, training(31, phase="Running"))  # someone else wrote after us: news


def test_writes_expire_so_a_missed_event_cannot_pin_a_stale_object_forever():
    clock = Clock()
    written = Written(ttl=60, clock=clock)
    written.remember("pods", obj("cifar-worker-0", 20))
    assert [p["metadata"]["name"] for p in written.unseen("pods", (NS, JOB), set())] == ["cifar-worker-0"]
    assert written.unseen("pods", (NS, "another-job"), set()) == []
    clock.now = 61
    assert written.unseen("pods", (NS, JOB), set()) == []


def test_a_deleted_training_has_no_snapshot_even_with_a_recent_write():
    written = Written()
    written.remember(TRAININGS, training(12))
    assert take_snapshot((NS, JOB), listing({}), written) is None


def test_only_owned_children_and_the_launchers_pods_are_in_the_snapshot():
    launcher = obj("cifar-launcher", 5)
    listed = {
        "pods": [obj("cifar-worker-0", 6), obj("cifar-launcher-x1", 7, owner="uid-cifar-launcher"),
                 obj("imposter", 8, owner="someone-else")],
        "jobs": [launcher],
        **{child.field: [] for child in WATCHED_KINDS if child.field not in ("pods", "jobs")},
    }
    found = owned(listed, UID)
    assert [p["metadata"]["name"] for p in found["pods"]] == ["cifar-worker-0", "cifar-launcher-x1"]
    assert found["jobs"] == [launcher]


def test_resource_versions_compare_as_numbers():
    assert resource_version(obj("a", 10)) > resource_version(obj("a", 9))
    assert resource_version({"metadata": {}}) == -1


def test_departed_pods_reach_the_snapshot_while_gone_and_owned_then_expire() -> None:
    clock = Clock()
    departed = Departed(ttl=300, clock=clock)
    gone, other_job = obj("cifar-worker-1", 9), obj("cifar-worker-0", 9, owner="uid-of-a-namesake-deleted-before")
    departed.remember((NS, JOB), gone)
    departed.remember((NS, JOB), other_job)
    snapshot = take_snapshot((NS, JOB), listing({(NS, JOB): [training(3)]}), Written(), departed)
    assert snapshot is not None and snapshot.departed == [gone]
    back = take_snapshot((NS, JOB), listing({(NS, JOB): [training(3)]}, pods=[obj("cifar-worker-1", 12)]), Written(),
                         departed)
    assert back is not None and back.departed == [], "a pod of that name exists again: the live one counts"
    clock.now = 301
    assert departed.of_job((NS, JOB)) == []
    departed.remember((NS, JOB), gone)
    departed.forget_job((NS, JOB))
    assert departed.of_job((NS, JOB)) == []
