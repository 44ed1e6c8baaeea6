"""The runtime layer without a cluster: the list-then-watch loop over a scripted transport (what the API server would
send), the store the watches feed, and the informers that join them on the event loop. The control-plane tests run
the same code against a real API server."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import kopf
import pytest
from prometheus_client import REGISTRY

from kubetrain.cache import TRAININGS, WORKLOADS
from kubetrain.controller import jobs_of, watched
from kubetrain.reconcile import health
from kubetrain.runtime.informers import LISTED, Informers
from kubetrain.runtime.liveness import Loop, not_alive
from kubetrain.runtime.store import Store
from kubetrain.runtime.watch import Resource, Watch, events, refusal
from kubetrain.settings import Settings

NS = "team"
PODS = Resource("v1", "Pod", "pods", NS, "kubetrain.dev/job-name")


def pod(name: str, version: int, job: str = "cifar", **status: Any) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": NS, "resourceVersion": str(version),
                         "labels": {"kubetrain.dev/job-name": job}}, "status": status}


def line(kind: str, obj: dict[str, Any]) -> bytes:
    return json.dumps({"type": kind, "object": obj}).encode() + b"\n"


class Script:
    """A transport that answers each list and watch from a script, and records what it was asked."""

    def __init__(self, lists: list[dict[str, Any]], watches: list[list[bytes] | Exception]) -> None:
        self.lists, self.watches = lists, watches
        self.asked: list[tuple[str, dict[str, Any]]] = []
        self.done = threading.Event()

    def list(self, path: str, params: dict[str, Any]) -> dict[str, Any]:
        self.asked.append(("list", dict(params)))
        return self.lists.pop(0)

    def watch(self, path: str, params: dict[str, Any]) -> Iterator[bytes]:
        self.asked.append(("watch", dict(params)))
        if not self.watches:
            self.done.set()
            raise ConnectionError("script over")
        step = self.watches.pop(0)
        if isinstance(step, Exception):
            raise step
        yield from step


def run_watch(script: Script) -> tuple[list[Any], Watch]:
    seen: list[Any] = []
    watch = Watch(PODS, script, keep=lambda obj: obj, on_list=lambda objects: seen.append(("LIST", objects)),
                  on_event=lambda kind, obj: seen.append((kind, obj["metadata"]["name"])), first_retry_seconds=0.01)
    thread = threading.Thread(target=watch.run, daemon=True)
    thread.start()
    assert script.done.wait(10), "the watch never came to the end of its script"
    watch.stop()
    thread.join(10)
    return seen, watch


def listing(version: int, *items: dict[str, Any], more: str = "") -> dict[str, Any]:
    return {"metadata": {"resourceVersion": str(version), **({"continue": more} if more else {})},
            "items": [dict(item) for item in items]}


def test_a_watch_lists_page_by_page_then_watches_from_the_lists_version_and_resumes_where_it_stopped() -> None:
    script = Script(
        lists=[listing(10, pod("a", 5), more="page-2"), listing(10, pod("b", 6))],
        watches=[[line("ADDED", pod("c", 11)), line("BOOKMARK", {"metadata": {"resourceVersion": "15"}})],
                 [line("MODIFIED", pod("a", 16)), line("DELETED", pod("b", 17))]],
    )
    seen, _ = run_watch(script)
    assert seen[0][0] == "LIST" and [p["metadata"]["name"] for p in seen[0][1]] == ["a", "b"]
    assert seen[0][1][0]["kind"] == "Pod" and seen[0][1][0]["apiVersion"] == "v1"  # list items come without them
    assert seen[1:] == [("ADDED", "c"), ("MODIFIED", "a"), ("DELETED", "b")]
    asks = [(what, params.get("resource_version"), params.get("_continue")) for what, params in script.asked]
    assert asks[:4] == [("list", None, None), ("list", None, "page-2"), ("watch", "10", None), ("watch", "15", None)]
    assert asks[4] == ("watch", "17", None)  # after the second watch ended: from its last event
    assert all(params["label_selector"] == "kubetrain.dev/job-name" for _, params in script.asked)


def test_410_gone_lists_again_and_an_error_retries_the_watch_from_the_same_version() -> None:
    gone = line("ERROR", {"kind": "Status", "code": 410, "message": "too old resource version: 10 (20)"})
    script = Script(lists=[listing(10, pod("a", 5)), listing(30, pod("b", 25))],
                    watches=[ConnectionResetError("API server restarting"), [gone], [line("ADDED", pod("c", 31))]])
    seen, _ = run_watch(script)
    assert [what for what, _ in script.asked] == ["list", "watch", "watch", "list", "watch", "watch"]
    assert [params.get("resource_version") for what, params in script.asked if what == "watch"] == ["10", "10", "30",
                                                                                                     "31"]
    assert [entry[0] for entry in seen] == ["LIST", "LIST", "ADDED"]


def test_an_error_event_other_than_gone_is_raised_with_the_api_servers_words() -> None:
    with pytest.raises(RuntimeError, match="watch error 500: etcd unavailable"):
        list(events([line("ERROR", {"code": 500, "message": "etcd unavailable"})]))


def test_paths_of_core_group_and_cluster_wide_resources() -> None:
    assert PODS.path == "/api/v1/namespaces/team/pods"
    assert Resource("kubetrain.dev/v1alpha1", "DistributedTraining", "distributedtrainings").path == (
        "/apis/kubetrain.dev/v1alpha1/distributedtrainings")


def store() -> Store:
    return Store({field: jobs_of(field) for field in (TRAININGS, WORKLOADS, "pods")})


def test_the_store_finds_objects_by_job_and_moves_one_whose_label_changed() -> None:
    objects = store()
    assert objects.put("pods", pod("cifar-worker-0", 1)) == {(NS, "cifar")}
    objects.put("pods", pod("mnist-worker-0", 2, job="mnist"))
    assert [p["metadata"]["name"] for p in objects.of("pods", (NS, "cifar"))] == ["cifar-worker-0"]
    assert objects.put("pods", pod("cifar-worker-0", 3, job="other")) == {(NS, "cifar"), (NS, "other")}
    assert objects.of("pods", (NS, "cifar")) == [] and sorted(objects.jobs("pods")) == [(NS, "mnist"), (NS, "other")]
    assert objects.remove("pods", pod("cifar-worker-0", 4, job="other")) == {(NS, "other")}
    assert objects.remove("pods", pod("never-seen", 5)) == set()
    assert objects.of("workloads", (NS, "cifar")) == [] and objects.of("not-watched", (NS, "cifar")) == []


def test_a_change_no_pass_reads_touches_no_job_but_the_store_keeps_its_version() -> None:
    objects = store()
    objects.put("pods", pod("cifar-worker-0", 1, phase="Running"))
    assert objects.put("pods", pod("cifar-worker-0", 2, phase="Running")) == set()
    assert objects.of("pods", (NS, "cifar"))[0]["metadata"]["resourceVersion"] == "2"
    assert objects.put("pods", pod("cifar-worker-0", 3, phase="Failed")) == {(NS, "cifar")}


def test_a_relisting_touches_only_changed_jobs_and_returns_what_went_while_no_watch_ran() -> None:
    objects = store()
    for name, job in (("a", "cifar"), ("b", "mnist"), ("c", "higgs")):
        objects.put("pods", pod(name, 1, job=job))
    touched, gone = objects.replace("pods", [pod("a", 1, job="cifar"), pod("b", 2, job="mnist", phase="Running")])
    assert touched == {(NS, "mnist"), (NS, "higgs")}
    assert [p["metadata"]["name"] for p in gone] == ["c"] and objects.of("pods", (NS, "higgs")) == []


def test_a_workload_belongs_to_the_job_whose_worker_pods_own_it() -> None:
    workload = {"metadata": {"name": "cifar-0-1a2b3c4d", "namespace": NS, "ownerReferences": [
        {"kind": "Pod", "name": "cifar-worker-0"}, {"kind": "Pod", "name": "cifar-worker-1"},
        {"kind": "Job", "name": "mnist-worker-0"}]}}
    assert jobs_of(WORKLOADS)(workload) == {(NS, "cifar")}


def test_informers_change_the_store_before_they_tell_which_jobs_changed_and_say_when_a_namespace_listed() -> None:
    async def scenario() -> list[Any]:
        told: list[Any] = []
        objects = store()
        ready = asyncio.Event()
        informers = Informers(objects, lambda field, kind, obj, jobs: told.append(
            (field, kind, obj and obj["metadata"]["name"], sorted(jobs), [p["metadata"]["name"] for p in
                                                                          objects.of("pods", (NS, "cifar"))])),
            on_ready=lambda namespace: ready.set())
        script = Script(lists=[listing(10, pod("cifar-worker-0", 5))],
                        watches=[[line("ADDED", pod("cifar-worker-1", 11))], [line("DELETED", pod("cifar-worker-0",
                                                                                                     12))]])
        informers.add("pods", PODS, script, keep=lambda obj: obj)
        assert not informers.ready(NS)
        informers.start()
        await asyncio.wait_for(ready.wait(), 10)
        assert informers.ready(NS)
        for _ in range(200):
            if len(told) >= 3:
                break
            await asyncio.sleep(0.01)
        informers.stop()
        return told

    told = asyncio.run(scenario())
    assert told[:3] == [
        ("pods", LISTED, None, [(NS, "cifar")], ["cifar-worker-0"]),
        ("pods", "ADDED", "cifar-worker-1", [(NS, "cifar")], ["cifar-worker-0", "cifar-worker-1"]),
        ("pods", "DELETED", "cifar-worker-0", [(NS, "cifar")], ["cifar-worker-1"]),
    ]


def test_the_operator_watches_its_jobs_and_every_watched_child_kind_per_namespace_and_workloads_with_kueue() -> None:
    fields = [field for field, _ in watched(Settings(namespaces=("a", "b")))]
    assert fields.count(TRAININGS) == 2 and WORKLOADS not in fields and fields.count("pods") == 2
    everywhere = watched(Settings(kueue=True))
    assert {resource.namespace for _, resource in everywhere} == {None}
    assert [resource.path for field, resource in everywhere if field == WORKLOADS] == [
        "/apis/kueue.x-k8s.io/v1beta1/workloads"]
    assert all(resource.label_selector for field, resource in everywhere if field not in (TRAININGS, WORKLOADS))


class Refusal(Exception):
    """What the client raises for an error status: the status and reason as attributes."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(f"({status}) Reason: {reason}")
        self.status, self.reason = status, reason


class RefusingScript(Script):
    """A transport whose lists the API server refuses `refusals` times, then answers."""

    def __init__(self, refusals: int, error: Exception, lists: list[dict[str, Any]]) -> None:
        super().__init__(lists, watches=[])
        self.refusals, self.error = refusals, error

    def list(self, path: str, params: dict[str, Any]) -> dict[str, Any]:
        if self.refusals:
            self.refusals -= 1
            self.asked.append(("list", dict(params)))
            raise self.error
        return super().list(path, params)


def test_a_refused_list_is_told_once_retried_and_told_again_when_it_lists() -> None:
    script = RefusingScript(3, Refusal(403, "Forbidden"), [listing(10, pod("a", 5))])
    troubles: list[str | None] = []
    seen: list[Any] = []
    watch = Watch(PODS, script, keep=lambda obj: obj, on_list=lambda objects: seen.append("LIST"),
                  on_event=lambda kind, obj: None, first_retry_seconds=0.01, on_trouble=troubles.append)
    before = watch.last_beat
    thread = threading.Thread(target=watch.run, daemon=True)
    thread.start()
    assert script.done.wait(10)
    watch.stop()
    thread.join(10)
    assert troubles == ["403 Forbidden", None], "one report while it lasts, one when it is mended"
    assert seen == ["LIST"] and [what for what, _ in script.asked][:4] == ["list"] * 4
    assert watch.last_beat > before


def test_only_a_refusal_is_trouble_a_network_error_or_a_restart_is_only_retried() -> None:
    assert refusal(Refusal(403, "Forbidden")) == "403 Forbidden"
    assert refusal(Refusal(404, "Not Found")) == "404 Not Found"
    assert refusal(Refusal(500, "Internal Server Error")) is None
    assert refusal(ConnectionRefusedError(111, "refused")) is None


def test_a_namespace_whose_list_is_refused_holds_back_only_itself_and_an_optional_kind_holds_back_none() -> None:
    async def scenario() -> tuple[list[str | None], Informers, list[tuple[str, str | None]]]:
        became_ready: list[str | None] = []
        refused: list[tuple[str, str | None]] = []
        objects = store()
        informers = Informers(objects, lambda field, kind, obj, jobs: None, on_ready=became_ready.append,
                              on_refused=lambda field, resource, why: refused.append((resource.path, why)))
        open_pods = Script(lists=[listing(10, pod("cifar-worker-0", 5))], watches=[])
        forbidden = RefusingScript(10**6, Refusal(403, "Forbidden"), [])
        not_served = RefusingScript(10**6, Refusal(404, "Not Found"), [])
        informers.add("pods", PODS, open_pods, keep=lambda obj: obj)
        informers.add("pods", Resource("v1", "Pod", "pods", "gone"), forbidden, keep=lambda obj: obj)
        informers.add(WORKLOADS, Resource("kueue.x-k8s.io/v1beta1", "Workload", "workloads", NS), not_served,
                      keep=lambda obj: obj, required=False)
        informers.start()
        for _ in range(500):
            if became_ready and len(refused) == 2:
                break
            await asyncio.sleep(0.01)
        informers.stop()
        return became_ready, informers, refused

    became_ready, informers, refused = asyncio.run(scenario())
    assert became_ready == [NS] and informers.ready(NS) and not informers.ready("gone")
    assert sorted(refused) == [("/api/v1/namespaces/gone/pods", "403 Forbidden"),
                               (f"/apis/kueue.x-k8s.io/v1beta1/namespaces/{NS}/workloads", "404 Not Found")]
    assert REGISTRY.get_sample_value("kubetrain_watch_refused", {"resource": "pods", "namespace": "gone"}) == 1
    assert REGISTRY.get_sample_value("kubetrain_watch_refused", {"resource": "workloads.kueue.x-k8s.io",
                                                                 "namespace": NS}) == 1


def test_a_loop_that_ended_or_stopped_beating_is_not_alive_a_quiet_one_is() -> None:
    loops = [Loop("watch of /api/v1/pods", ended=False, last_beat=100.0, quiet_seconds=660),
             Loop("leader election", ended=True, last_beat=995.0, quiet_seconds=120),
             Loop("watch of /api/v1/secrets", ended=False, last_beat=200.0, quiet_seconds=660)]
    assert not_alive(loops, now=700.0) == ["leader election has ended"]
    assert not_alive(loops, now=1000.0) == ["watch of /api/v1/pods has not moved for 900s", "leader election has ended",
                                            "watch of /api/v1/secrets has not moved for 800s"]


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")  # the thread's end, on purpose
def test_a_watch_thread_that_died_is_seen_by_the_liveness_check() -> None:
    async def scenario() -> list[str]:
        informers = Informers(store(), lambda field, kind, obj, jobs: None)
        informers.add("pods", PODS, RefusingScript(1, SystemExit(3), []), keep=lambda obj: obj)  # not an Exception
        informers.start()
        for _ in range(500):
            if not_alive(informers.loops(), time.monotonic()):
                break
            await asyncio.sleep(0.01)
        return not_alive(informers.loops(), time.monotonic())

    assert asyncio.run(scenario()) == ["watch of /api/v1/namespaces/team/pods has ended"]


class Loops:
    """The controller as the health probe sees it."""

    def __init__(self, dead: list[str]) -> None:
        self.dead = dead

    def dead_loops(self) -> list[str]:
        return self.dead

    def refused_watches(self) -> list[str]:
        return ["pods in gone: 403 Forbidden"]


def test_the_health_probe_fails_while_a_loop_is_dead_and_names_the_refused_watches_otherwise() -> None:
    assert asyncio.run(health(memo=kopf.Memo(controller=Loops([])))) == {
        "refusedWatches": ["pods in gone: 403 Forbidden"]}
    with pytest.raises(kopf.PermanentError, match="leader election has ended"):
        asyncio.run(health(memo=kopf.Memo(controller=Loops(["leader election has ended"]))))
    assert asyncio.run(health(memo=kopf.Memo())) == {"starting": True}


def test_a_refused_watch_is_told_and_its_end_is_told_once_a_watch_goes_through_again() -> None:
    script = Script(lists=[listing(10, pod("a", 5))],
                    watches=[Refusal(403, "Forbidden"), Refusal(403, "Forbidden"), [line("ADDED", pod("b", 11))]])
    troubles: list[str | None] = []
    watch = Watch(PODS, script, keep=lambda obj: obj, on_list=lambda objects: None, on_event=lambda kind, obj: None,
                  first_retry_seconds=0.01, on_trouble=troubles.append)
    thread = threading.Thread(target=watch.run, daemon=True)
    thread.start()
    assert script.done.wait(10)
    watch.stop()
    thread.join(10)
    assert troubles == ["403 Forbidden", None]
    assert [what for what, _ in script.asked] == ["list", "watch", "watch", "watch", "watch"], "no relist needed"
