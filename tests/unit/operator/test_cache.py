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
    owned,
    resource_version,
    slim,
    slim_workload,
    take_snapshot,
)
from kubetrain.children import BY_KIND, CHILD_KINDS
from kubetrain.plan import Children

NS, JOB, UID = "team", "cifar", "uid-cifar"


def obj(name: str, version: int, owner: str | None = UID, **extra: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": NS, "resourceVersion": str(version),
                            "labels": {"kubetrain.dev/job-name": JOB}, "uid": f"uid-{name}"}  # fmt: skip
    if owner:
        meta["ownerReferences"] = [{"uid": owner}]
    return {"metadata": meta, **extra}


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def indexes(**listed: list[dict[str, Any]]) -> dict[str, dict[tuple[str, str], list[dict[str, Any]]]]:
    return {child.field: {(NS, JOB): listed.get(child.field, [])} for child in CHILD_KINDS}


def training(version: int, **status: Any) -> dict[str, Any]:
    body = obj(JOB, version, owner=None, status=status)
    body["metadata"]["uid"] = UID
    return body


def test_planner_children_have_one_field_per_registered_child_kind_and_the_departed_pods():
    fields = [child.field for child in CHILD_KINDS] + ["departed", WORKLOADS]
    assert [f.name for f in dataclasses.fields(Children)] == fields


def test_kueues_workloads_reach_the_snapshot_without_their_pod_templates_when_watched():
    body = {"metadata": {"name": "cifar-0-1a2b3c4d", "namespace": NS, "ownerReferences": [{"uid": "uid-pod"}]},
            "spec": {"podSets": [{"template": {"spec": {"containers": []}}}]},
            "status": {"conditions": [{"type": "QuotaReserved", "status": "False", "message": "no quota"}]}}
    kept = slim_workload(body)
    assert "spec" not in kept and kept["status"] == body["status"]
    watched = {(NS, JOB): [training(1)]}
    snapshot = take_snapshot((NS, JOB), watched, {**indexes(), WORKLOADS: {(NS, JOB): [kept]}}, Written())
    assert snapshot is not None and snapshot.workloads == [kept]
    snapshot = take_snapshot((NS, JOB), watched, indexes(), Written())  # not watched: none
    assert snapshot is not None and snapshot.workloads == []


def test_a_status_the_operator_wrote_wins_until_the_watch_delivers_it():
    written = Written()
    watched = {(NS, JOB): [training(10, attempt=0, restarts=0)]}
    written.remember(TRAININGS, training(12, attempt=1, restarts=1))
    snapshot = take_snapshot((NS, JOB), watched, indexes(), written)
    assert snapshot is not None and snapshot.training["status"] == {"attempt": 1, "restarts": 1}
    watched[(NS, JOB)] = [training(12, attempt=1, restarts=1, phase="Restarting")]
    snapshot = take_snapshot((NS, JOB), watched, indexes(), written)
    assert snapshot is not None and snapshot.training["status"]["phase"] == "Restarting"  # the watch caught up
    watched[(NS, JOB)] = [training(11, attempt=0)]  # an older event arriving late is not made newer by our write
    snapshot = take_snapshot((NS, JOB), watched, indexes(), written)
    assert snapshot is not None and snapshot.training["status"] == {"attempt": 0}


def test_created_children_are_seen_before_their_watch_event_and_forgotten_once_deleted():
    written = Written()
    watched = {(NS, JOB): [training(10)]}
    written.remember("pods", obj("cifar-worker-0", 20))
    snapshot = take_snapshot((NS, JOB), watched, indexes(), written)
    assert snapshot is not None and [p["metadata"]["name"] for p in snapshot.children["pods"]] == ["cifar-worker-0"]
    written.forget("pods", NS, "cifar-worker-0")  # the watch said DELETED
    snapshot = take_snapshot((NS, JOB), watched, indexes(), written)
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
    clock.now = 61
    assert written.unseen("pods", NS, set()) == []


def test_a_deleted_training_has_no_snapshot_even_with_a_recent_write():
    written = Written()
    written.remember(TRAININGS, training(12))
    assert take_snapshot((NS, JOB), {}, indexes(), written) is None


def test_only_owned_children_and_the_launchers_pods_are_in_the_snapshot():
    launcher = obj("cifar-launcher", 5)
    listed = {
        "pods": [obj("cifar-worker-0", 6), obj("cifar-launcher-x1", 7, owner="uid-cifar-launcher"),
                 obj("imposter", 8, owner="someone-else")],  # fmt: skip
        "jobs": [launcher],
        **{child.field: [] for child in CHILD_KINDS if child.field not in ("pods", "jobs")},
    }
    found = owned(listed, UID)
    assert [p["metadata"]["name"] for p in found["pods"]] == ["cifar-worker-0", "cifar-launcher-x1"]
    assert found["jobs"] == [launcher]


def test_the_cache_keeps_no_key_material():
    secret = obj("cifar-ssh", 3, data={"id_ed25519": "c2VjcmV0"}, type="Opaque")
    kept = slim(BY_KIND[("v1", "Secret")], secret)
    assert "data" not in kept and kept["metadata"]["name"] == "cifar-ssh"


def test_resource_versions_compare_as_numbers():
    assert resource_version(obj("a", 10)) > resource_version(obj("a", 9))
    assert resource_version({"metadata": {}}) == -1


def test_departed_pods_reach_the_snapshot_while_gone_and_owned_then_expire() -> None:
    clock = Clock()
    departed = Departed(ttl=300, clock=clock)
    gone, other_job = obj("cifar-worker-1", 9), obj("cifar-worker-0", 9, owner="uid-of-a-namesake-deleted-before")
    departed.remember((NS, JOB), gone)
    departed.remember((NS, JOB), other_job)
    snapshot = take_snapshot((NS, JOB), {(NS, JOB): [training(3)]}, indexes(), Written(), departed)
    assert snapshot is not None and snapshot.departed == [gone]
    back = take_snapshot((NS, JOB), {(NS, JOB): [training(3)]}, indexes(pods=[obj("cifar-worker-1", 12)]), Written(),
                         departed)
    assert back is not None and back.departed == [], "a pod of that name exists again: the live one counts"
    clock.now = 301
    assert departed.of_job((NS, JOB)) == []
    departed.remember((NS, JOB), gone)
    departed.forget_job((NS, JOB))
    assert departed.of_job((NS, JOB)) == []
