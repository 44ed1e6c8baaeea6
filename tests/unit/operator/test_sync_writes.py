"""What one pass writes, in which order (kubetrain.sync): children in waves, the status after them (before them when
the pass restarts the job), events last; and what it wrote is seen by the next pass before the watch delivers it."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from dtr_bodies import training
from test_plan import config_children, job_of, worker

from kubetrain import reasons
from kubetrain.api import SpecError, parse_job
from kubetrain.cache import TRAININGS, WORKLOADS, Written, take_snapshot
from kubetrain.children import WATCHED_KINDS
from kubetrain.controller import jobs_of
from kubetrain.keys import generate_job_keys
from kubetrain.kube import ChildRefused
from kubetrain.kueue import PRIORITY_LABEL, QUEUE_LABEL
from kubetrain.manifests.ssh import build_ssh_secret
from kubetrain.refusals import not_served
from kubetrain.runtime.store import Store
from kubetrain.sync import sync_training
from tests.support.recording_kube import RecordingKube

KEY = ("ml", "cifar")


def watch_sees(body: dict[str, Any], children: dict[str, list[dict]] | None = None) -> Store:
    """A store as the watches fill it: the job and the children it owns."""
    store = Store({field: jobs_of(field) for field in (TRAININGS, WORKLOADS, *(k.field for k in WATCHED_KINDS))})
    store.put(TRAININGS, body)
    for field, objects in (children or {}).items():
        for obj in objects:
            store.put(field, {**obj, "metadata": {**obj["metadata"], "namespace": "ml"}})
    return store


def one_pass(kube: RecordingKube, store: Store, written: Written) -> float | None:
    """One pass as the operator runs it: writes that do not wait for each other go out together."""
    snapshot = take_snapshot(KEY, store, written)
    assert snapshot is not None
    with ThreadPoolExecutor(8) as pool:
        return sync_training(kube, written, snapshot, pool)  # type: ignore[arg-type]


def verbs(kube: RecordingKube) -> list[str]:
    return [f"{verb} {kind}" for verb, kind, _ in kube.writes]


def test_a_new_job_gets_its_children_then_its_status() -> None:
    body = training()
    kube = RecordingKube(body, slow={"Pod": 0.2})  # a status sent with them would return before them
    one_pass(kube, watch_sees(body), Written())
    writes = verbs(kube)
    assert sorted(writes[:5]) == ["create ConfigMap", "create Pod", "create Pod", "create Secret", "create Service"]
    assert writes[5] == "status DistributedTraining", "the status goes after the children; no launcher yet"
    assert writes[6:] and all(write.startswith("event ") for write in writes[6:])
    assert kube.statuses[0]["phase"] == reasons.PENDING


def test_the_next_pass_sees_what_this_one_wrote_before_the_watch_does() -> None:
    body = training()
    store, written = watch_sees(body), Written()
    first = RecordingKube(body)
    one_pass(first, store, written)
    again = RecordingKube(body)
    one_pass(again, store, written)  # the watch has delivered nothing yet
    # It records the uids of the pods the first created (the pods that may report progress), nothing else.
    assert verbs(again) == ["status DistributedTraining"], "a second pass re-created children"
    (before,), (after,) = first.statuses, again.statuses
    assert before["podUIDs"] == [] and len(after["podUIDs"]) == 2
    assert {**after, "podUIDs": []} == before
    third = RecordingKube(body)
    one_pass(third, store, written)
    assert third.writes == [], "a third pass re-wrote an unchanged status"


def test_ready_workers_get_the_launcher_then_the_status() -> None:
    body, job = training(), job_of()
    existing = {**config_children(job), "secrets": [build_ssh_secret(job, generate_job_keys())]}
    kube = RecordingKube(body, slow={"Job": 0.2})
    one_pass(kube, watch_sees(body, {**existing, "pods": [worker(job, 0), worker(job, 1)]}), Written())
    writes = verbs(kube)
    assert writes[0] == "create Job" and kube.created[-1]["metadata"]["name"] == "cifar-launcher"
    assert writes[1] == "status DistributedTraining"


def test_a_restart_is_recorded_before_the_old_attempt_is_deleted() -> None:
    job = job_of()
    body = {**training(), "status": {"phase": reasons.RUNNING, "restarts": 0, "attempt": 0}}
    failed = worker(job, 1, phase="Failed", ready=False)
    kube = RecordingKube(body)
    one_pass(kube, watch_sees(body, {**config_children(job), "pods": [worker(job, 0), failed]}), Written())
    writes = verbs(kube)
    assert writes[0] == "status DistributedTraining" and kube.statuses[0]["phase"] == reasons.RESTARTING
    assert writes[1:3] == ["delete Pod", "delete Pod"], "a crash after the deletes must not forget the restart"


def test_a_refused_pod_group_stops_the_pass_before_any_worker_is_made() -> None:
    body = training(scheduling={"gang": {"scheduler": "Volcano"}})
    refused = ChildRefused(not_served("scheduling.volcano.sh/v1beta1", "PodGroup", "cifar-workers"))
    kube = RecordingKube(body, refuse=lambda obj: refused if obj["kind"] == "PodGroup" else None)
    one_pass(kube, watch_sees(body), Written())
    assert "create Pod" not in verbs(kube)
    assert (kube.statuses[-1]["phase"], kube.statuses[-1]["reason"]) == (reasons.FAILED, reasons.KIND_NOT_SERVED)


def test_a_spec_the_parser_refuses_fails_the_job_naming_the_field_and_creates_nothing() -> None:
    body = training()
    body["metadata"]["labels"] = {PRIORITY_LABEL: "high"}  # Kueue reads it only with a queue label
    kube = RecordingKube(body)
    one_pass(kube, watch_sees(body), Written())
    assert verbs(kube) == ["status DistributedTraining", f"event {reasons.INVALID_SPEC}"]
    status = kube.statuses[0]
    assert (status["phase"], status["reason"]) == (reasons.FAILED, reasons.INVALID_SPEC)
    assert PRIORITY_LABEL in status["message"] and QUEUE_LABEL in status["message"]


def test_the_operator_leaves_the_crd_rules_to_the_api_server_that_stored_the_object() -> None:
    body = training(slotsPerWorker=2)  # the CRD refuses more ranks than GPUs; `kubetrain render` says so
    with pytest.raises(SpecError) as raised:
        parse_job(body)
    assert raised.value.field == "spec.slotsPerWorker"
    assert parse_job(body, admitted=True).spec.slots_per_worker == 2


def test_a_secret_an_older_operator_wrote_is_never_patched() -> None:
    """The chart lets the operator create Secrets, not patch them: one without a host key is left as it is."""
    body, job = training(), job_of()
    old = {"metadata": {"name": "cifar-ssh", "namespace": "ml", "labels": {"kubetrain.dev/job-name": "cifar"},
                        "ownerReferences": [{"uid": "uid-1"}]}}
    kube = RecordingKube(body)
    one_pass(kube, watch_sees(body, {**config_children(job), "secrets": [old]}), Written())
    assert not [write for write in kube.writes if write[1] == "Secret"], kube.writes

