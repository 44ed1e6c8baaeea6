"""A failed attempt's launcher output outlives its pods: which attempts the operator copies and when, what a copy
holds (bounded, labelled, owned by the job) and how many it keeps; and a pass that restarts a job copies the log
before it deletes the pods, and restarts all the same when the log cannot be read."""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path
from typing import Any

from dtr_bodies import training
from test_plan import NOW, config_children, job_of, launcher, worker
from test_sync_writes import one_pass, verbs, watch_sees

from kubetrain import reasons as r
from kubetrain.cache import Written
from kubetrain.manifests import attempt_log
from kubetrain.manifests.attempt_log import (
    KEEP_BYTES,
    KEPT_ATTEMPTS,
    READ_BYTES,
    TAIL_LINES,
    Tail,
    build_attempt_log,
    fewer_lines,
    pushed_out,
    read_attempt_log,
    size,
    tail_of,
)
from kubetrain.plan import Children, Delete, SaveLog, decide
from kubetrain.sync import waves
from tests.support.recording_kube import RecordingKube

CONFIGMAP_LIMIT = 1024 * 1024  # what the API server accepts in one ConfigMap


def failed_worker(job: Any, index: int = 1, attempt: int = 0) -> dict:
    return worker(job, index, phase="Failed", ready=False, attempt=attempt,
                  containerStatuses=[{"name": "worker", "state": {"terminated": {"reason": "Error", "exitCode": 1}}}])


def copy_of(job: Any, attempt: int) -> dict:
    return build_attempt_log(job, attempt, f"cifar-launcher-{attempt}", Tail(f"attempt {attempt}\n"))


def saves(plan: Any) -> list[SaveLog]:
    return [action for action in plan.actions if isinstance(action, SaveLog)]


def deleted(plan: Any, kind: str) -> set[str]:
    return {action.name for action in plan.actions if isinstance(action, Delete) and action.kind == kind}


# -- when the operator copies ----------------------------------------------------------------------------------------


def test_a_restart_copies_the_failed_attempts_launcher_log_before_deleting_its_pods() -> None:
    job = job_of()
    batch, pod = launcher(job)
    children = Children(pods=[worker(job, 0), failed_worker(job), pod], jobs=[batch], **config_children(job))
    plan = decide(job, {"phase": r.RUNNING, "attempt": 0}, children, NOW)
    assert plan.status["attempt"] == 1
    assert saves(plan) == [SaveLog(0, "cifar-launcher-abc")]
    first, then = waves(plan.actions)[:2]
    assert first == saves(plan), "the log is copied before anything is deleted"
    assert {action.name for action in then} == {"cifar-worker-0", "cifar-worker-1", "cifar-launcher"}


def test_a_launcher_that_failed_is_copied_and_so_is_a_failed_jobs_running_launcher() -> None:
    job = job_of(runPolicy={"backoffLimit": 1})
    batch, pod = launcher(job, finished="Failed")
    ready = Children(pods=[worker(job, 0), worker(job, 1), pod], jobs=[batch], **config_children(job))
    assert saves(decide(job, {"phase": r.RUNNING, "attempt": 0}, ready, NOW)) == [SaveLog(0, "cifar-launcher-abc")]
    batch, pod = launcher(job, attempt=1)
    last = Children(pods=[worker(job, 0, attempt=1), failed_worker(job, attempt=1), pod], jobs=[batch],
                    **config_children(job))
    plan = decide(job, {"phase": r.RUNNING, "attempt": 1, "restarts": 1}, last, NOW)
    assert plan.status["phase"] == r.FAILED and "cifar-launcher" in deleted(plan, "Job")
    assert saves(plan) == [SaveLog(1, "cifar-launcher-abc")]


def test_a_success_a_suspension_or_an_attempt_without_a_launcher_is_not_copied() -> None:
    job = job_of()
    no_launcher = Children(pods=[worker(job, 0), failed_worker(job)], **config_children(job))
    assert saves(decide(job, {"phase": r.RUNNING, "attempt": 0}, no_launcher, NOW)) == []
    batch, pod = launcher(job, finished="Complete")
    clean_all = job_of(runPolicy={"cleanPodPolicy": "All"})
    done = Children(pods=[worker(job, 0), worker(job, 1), pod], jobs=[batch], **config_children(job))
    succeeded = decide(clean_all, {"phase": r.RUNNING}, done, NOW)
    assert succeeded.status["phase"] == r.SUCCEEDED and "cifar-launcher-abc" in deleted(succeeded, "Pod")
    assert saves(succeeded) == []
    batch, pod = launcher(job)
    suspended = decide(job_of(runPolicy={"suspend": True}), {"phase": r.RUNNING},
                       Children(pods=[worker(job, 0), worker(job, 1), pod], jobs=[batch], **config_children(job)), NOW)
    assert suspended.status["phase"] == r.SUSPENDED and saves(suspended) == []


def test_a_launcher_job_whose_pod_is_gone_gets_a_copy_that_says_so() -> None:
    job = job_of()
    batch, _ = launcher(job)
    children = Children(pods=[worker(job, 0), failed_worker(job)], jobs=[batch], **config_children(job))
    assert saves(decide(job, {"phase": r.RUNNING, "attempt": 0}, children, NOW)) == [SaveLog(0, None)]


def test_after_a_crash_between_the_restart_and_the_copy_the_old_attempt_is_still_copied() -> None:
    # The status says attempt 1 (written first), but attempt 0's launcher is still there: it is copied, then deleted.
    job = job_of()
    batch, pod = launcher(job, attempt=0)
    children = Children(pods=[pod], jobs=[batch], **config_children(job))
    plan = decide(job, {"phase": r.RESTARTING, "attempt": 1, "restarts": 1}, children, NOW)
    assert saves(plan) == [SaveLog(0, "cifar-launcher-abc")] and "cifar-launcher" in deleted(plan, "Job")


def test_the_newest_attempts_copies_stay() -> None:
    assert pushed_out(range(KEPT_ATTEMPTS)) == []
    assert pushed_out([7, 1, 3, 4, 5, 6, 2]) == [1, 2], "gaps and order do not matter: the newest five stay"


# -- what a copy holds -----------------------------------------------------------------------------------------------


def test_a_short_log_is_kept_whole_without_a_note() -> None:
    raw = b"kubetrain launcher: waiting up to 300s for 2 host(s)\n[1,0]<stdout>:epoch 1/3\n"
    assert tail_of(raw, lines_asked=5000) == Tail(raw.decode())


def test_a_long_log_keeps_its_end_from_a_lines_start_and_says_what_was_cut() -> None:
    raw = b"".join(b"[1,%d]<stdout>:step %06d loss 0.5\n" % (n % 2, n) for n in range(60_000))
    tail = tail_of(raw, lines_asked=60_000)
    assert len(tail.text.encode()) <= KEEP_BYTES
    assert raw.decode().endswith(tail.text) and tail.text.startswith("[1,")
    assert tail.note.startswith("the start of the launcher's log was cut: this copy keeps its last 512 KiB (")


def test_invalid_bytes_are_replaced_and_the_copy_stays_bounded() -> None:
    raw = os.urandom(3 * KEEP_BYTES)  # replacement characters take 3 bytes each: the text grows
    tail = tail_of(raw, lines_asked=5000)
    assert len(tail.text.encode()) <= KEEP_BYTES and "the start of the launcher's log was cut" in tail.note


def test_what_could_not_be_read_is_said() -> None:
    exactly = b"line\n" * 10
    assert tail_of(exactly, lines_asked=10).note == ("only the launcher's last 10 lines were read: any before them "
                                                     "are not in this copy")
    capped = b"x" * 100 + b"\n"
    assert "the end of the log is missing" in tail_of(capped, lines_asked=10, read_bytes=50).note
    assert fewer_lines(b"a\n" * 1000, keep_bytes=100) == 50
    assert fewer_lines(b"one enormous line without an end", keep_bytes=10) == 1


def test_a_copy_is_named_labelled_owned_immutable_and_reads_back() -> None:
    job = job_of()
    tail = Tail("[0]<stdout>:hello\n", "the start of the launcher's log was cut: ...")
    copy = build_attempt_log(job, 2, "cifar-launcher-x7k2p", tail)
    meta = copy["metadata"]
    assert (copy["kind"], meta["name"], meta["namespace"]) == ("ConfigMap", "cifar-attempt-2-log", "ml")
    assert {key: meta["labels"][key] for key in ("kubetrain.dev/job-name", "kubetrain.dev/role",
                                                 "kubetrain.dev/attempt")} == {
        "kubetrain.dev/job-name": "cifar", "kubetrain.dev/role": "attempt-log", "kubetrain.dev/attempt": "2"}
    assert [(ref["kind"], ref["uid"]) for ref in meta["ownerReferences"]] == [("DistributedTraining", "uid-1")]
    assert meta["annotations"][attempt_log.POD_ANNOTATION] == "cifar-launcher-x7k2p"
    assert copy["immutable"] is True and "data" not in copy, "the operator's cache keeps data, not binaryData"
    assert read_attempt_log(json.loads(json.dumps(copy))) == tail


def test_the_largest_copy_fits_in_a_configmap() -> None:
    text = base64.b64encode(os.urandom(KEEP_BYTES))[:KEEP_BYTES].decode()  # gzip gains little on this
    copy = build_attempt_log(job_of(), 0, "p", Tail(text, "n" * 200))
    assert len(base64.b64decode(copy["binaryData"][attempt_log.LOG_KEY])) < CONFIGMAP_LIMIT - 64 * 1024


# -- the pass that restarts ------------------------------------------------------------------------------------------


def restarting_job(kube_logs: dict[str, bytes], existing: list[dict] | None = None) -> RecordingKube:
    """A pass over attempt KEPT_ATTEMPTS, whose worker 1 failed, with `existing` in the cluster."""
    job = job_of()
    batch, pod = launcher(job, attempt=KEPT_ATTEMPTS)
    batch["metadata"]["uid"] = "uid-launcher"  # the watch sees the launcher's pod as the launcher Job's
    pod["metadata"]["ownerReferences"] = [{"kind": "Job", "name": "cifar-launcher", "uid": "uid-launcher"}]
    body = {**training(), "status": {"phase": r.RUNNING, "restarts": 0, "attempt": KEPT_ATTEMPTS}}
    kube = RecordingKube(body, logs=kube_logs, existing=existing or [])
    store = watch_sees(body, {**config_children(job), "pods": [worker(job, 0, attempt=KEPT_ATTEMPTS),
                                                                failed_worker(job, attempt=KEPT_ATTEMPTS), pod],
                              "jobs": [batch]})
    one_pass(kube, store, Written())
    return kube


def test_a_pass_that_restarts_copies_the_log_then_deletes_the_attempt_and_the_oldest_copy() -> None:
    job = job_of()
    others = [copy_of(job, attempt) for attempt in range(KEPT_ATTEMPTS)]
    stranger = copy_of(job, 0)  # labelled like a copy, owned by someone else: never deleted
    stranger["metadata"].update(name="not-ours", ownerReferences=[{"uid": "someone-else"}])
    kube = restarting_job({"cifar-launcher-abc": b"[1,1]<stderr>:Traceback: boom\n"}, [*others, stranger])
    writes = verbs(kube)
    assert writes[:4] == ["status DistributedTraining", "read log Pod", "create ConfigMap", "list ConfigMap"]
    assert sorted(writes[4:8]) == ["delete ConfigMap", "delete Job", "delete Pod", "delete Pod"]
    assert [name for verb, kind, name in kube.writes if (verb, kind) == ("delete", "ConfigMap")] == [
        "cifar-attempt-0-log"], "the oldest of six copies goes"
    copy = kube.created[0]
    assert copy["metadata"]["name"] == f"cifar-attempt-{KEPT_ATTEMPTS}-log"
    assert read_attempt_log(copy) == Tail("[1,1]<stderr>:Traceback: boom\n")


def test_a_log_that_cannot_be_read_still_restarts_and_says_why() -> None:
    kube = restarting_job({})  # the pod's node is gone: the API server cannot get its log
    assert "delete Job" in verbs(kube) and kube.statuses[0]["phase"] == r.RESTARTING
    note = read_attempt_log(kube.created[0]).note
    assert note == 'the log of launcher pod cifar-launcher-abc could not be read: 404 Not Found: pods ' \
                   '"cifar-launcher-abc" not found'
    assert ("Warning", r.LOG_NOT_SAVED, f"attempt {KEPT_ATTEMPTS}: {note}") in kube.events


def test_the_documentation_states_the_limits_the_operator_has() -> None:
    from kubetrain.log_copy import LOG_READ_SECONDS

    page = " ".join((Path(__file__).parents[3] / "docs" / "logs.md").read_text().split())
    for words in (f"the launcher's last {TAIL_LINES} lines, at most {size(READ_BYTES)} of them read, of which the "
                  f"last {size(KEEP_BYTES)} are kept",
                  f"for the last {KEPT_ATTEMPTS} attempts",
                  f"each bounded at {LOG_READ_SECONDS:g} s", f"up to {2 * LOG_READ_SECONDS:g} s later",
                  f"up to {KEPT_ATTEMPTS} copies of at most {size(KEEP_BYTES)} each"):
        assert words in page, f"docs/logs.md no longer says {words!r}"
