"""The operator's controller: which objects it watches, what each change means for a job, and who acts on it.

Watches (kubetrain.runtime.informers) keep the store; a change pokes the jobs it touched, unless it is the echo of the
operator's own write; the work queue (kubetrain.runtime.queue) runs one sync pass (kubetrain.sync) at a time per job,
on the leader only (kubetrain.runtime.leader). No job gets a pass before every watch of its namespace has listed once;
then every job there gets one. A watch the API server refuses holds back its own namespace only (Kueue's Workloads:
none), and says so on the jobs it holds back. No finalizers: children go with their job through Kubernetes' garbage
collector (ownerReferences).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import socket
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from kubernetes import client
from kubernetes.dynamic import DynamicClient

from kubetrain.cache import TRAININGS, WORKLOADS, Departed, Snapshot, Written, kept, take_snapshot
from kubetrain.children import WATCHED_KINDS
from kubetrain.contract import GROUP, KIND, LABEL_JOB, PLURAL, VERSION, job_of_worker
from kubetrain.kube import Kube
from kubetrain.kueue import QUEUE_LABEL, WORKLOAD_API
from kubetrain.pod_state import is_disrupted
from kubetrain.reasons import WATCH_REFUSED
from kubetrain.runtime.informers import LISTED, Informers, resource_label
from kubetrain.runtime.leader import Elector, owned_by_pod
from kubetrain.runtime.liveness import Loop, not_alive
from kubetrain.runtime.queue import SyncQueue
from kubetrain.runtime.store import JobKey, Obj, Store
from kubetrain.runtime.watch import ApiTransport, Resource
from kubetrain.schema import crd_schema
from kubetrain.settings import Settings
from kubetrain.sync import sync_training

log = logging.getLogger(__name__)
# The longest a healthy leader election goes between rounds: each of a round's two calls has a timeout, which the
# client may retry a few times.
LEADER_QUIET_SECONDS = 120.0


def watched(settings: Settings) -> list[tuple[str, Resource]]:
    """(store field, resource) for everything the operator lists and watches: its jobs, every watched child kind
    (by the job label, kubetrain.children says which of them), and Kueue's Workloads when asked to; once per
    namespace, or once for all."""
    found: list[tuple[str, Resource]] = []
    for namespace in settings.namespaces or (None,):
        found.append((TRAININGS, Resource(f"{GROUP}/{VERSION}", KIND, PLURAL, namespace)))
        found += [(child.field, Resource(child.api_version, child.kind, child.plural, namespace, child.selector))
                  for child in WATCHED_KINDS]
        if settings.kueue:
            group, version, plural = WORKLOAD_API
            found.append((WORKLOADS, Resource(f"{group}/{version}", "Workload", plural, namespace)))
    return found


def jobs_of(field: str) -> Callable[[Obj], set[JobKey]]:
    """How an object of `field` names its jobs: a DistributedTraining is one, a child carries the job label, a
    Workload is owned by the worker pods of one job's pod group."""
    def training(obj: Obj) -> set[JobKey]:
        return {(obj["metadata"].get("namespace") or "", obj["metadata"]["name"])}

    def child(obj: Obj) -> set[JobKey]:
        name = (obj["metadata"].get("labels") or {}).get(LABEL_JOB)
        return {(obj["metadata"].get("namespace") or "", name)} if name else set()

    def workload(obj: Obj) -> set[JobKey]:
        owners = obj["metadata"].get("ownerReferences") or []
        names = {job_of_worker(ref.get("name", "")) for ref in owners if ref.get("kind") == "Pod"}
        return {(obj["metadata"].get("namespace") or "", name) for name in names if name}

    return {TRAININGS: training, WORKLOADS: workload}.get(field, child)


class Controller:
    def __init__(self, settings: Settings, connect: Callable[[int], client.ApiClient]) -> None:
        """`connect(n)`: a client with up to n connections kept open (kubetrain.kube.load_api_client)."""
        self.settings = settings
        self.watched = watched(settings)
        api_client = connect(settings.sync_threads * 3)  # passes and their parallel writes
        self.kube = Kube(api_client)
        self.watches = connect(len(self.watched))  # one long-lived stream per watch, apart from the writes
        self.written = Written()
        self.departed = Departed()
        self.store = Store({field: jobs_of(field) for field in {field for field, _ in self.watched}})
        self.informers = Informers(self.store, self.changed, self._ready, self._refused)
        self._told: set[tuple[JobKey, str]] = set()  # (job, watch path): the job has an event on that refusal
        self._events = ThreadPoolExecutor(max_workers=1, thread_name_prefix="event")
        self.elector: Elector | None = None
        if settings.lease_name:
            identity = f"{socket.gethostname()}-{uuid.uuid4().hex[:8]}"
            self.elector = Elector(api_client, settings.lease_namespace, settings.lease_name, identity,
                                   owners=owned_by_pod(settings.pod_name, settings.pod_uid))
        writes = ThreadPoolExecutor(max_workers=settings.sync_threads * 2, thread_name_prefix="write")
        self.queue: SyncQueue[Snapshot] = SyncQueue(
            self.read, lambda snapshot: sync_training(self.kube, self.written, snapshot, writes,
                                                      settings.entrypoints_image),
            settings.error_retry_seconds, settings.max_retry_seconds, active=self.active,
            slots=settings.sync_threads)
        self._leader: asyncio.Task[None] | None = None
        self._leader_beat = time.monotonic()
        self._stopping = False

    def start(self) -> None:
        """Start the watches, and the leader election; a namespace's first passes follow once its watches listed."""
        crd_schema()  # read now: the first passes, all at once, would each read it (a cache fills only once read)
        transport = ApiTransport(DynamicClient(self.watches))
        for field, resource in self.watched:
            # Kueue's Workloads only add what Kueue says to a status: jobs do not wait for them.
            self.informers.add(field, resource, transport, functools.partial(kept, field), required=field != WORKLOADS)
        self.informers.start()
        if self.elector is not None:
            self._leader = asyncio.create_task(self._lead(self.elector))

    async def stop(self) -> None:
        """Stop watching; a leader deletes its Lease, so that a standby takes over at once."""
        self._stopping = True
        if self._leader is not None:
            self._leader.cancel()
        self.informers.stop()
        if self.elector is not None:
            await asyncio.to_thread(self.elector.release)

    def dead_loops(self) -> list[str]:
        """The loops that ended or are stuck (the liveness probe fails on any): every watch, the leader election."""
        loops = self.informers.loops()
        if self._leader is not None:
            loops.append(Loop("leader election", ended=self._leader.done() and not self._stopping,
                              last_beat=self._leader_beat, quiet_seconds=LEADER_QUIET_SECONDS))
        return not_alive(loops, time.monotonic())

    def refused_watches(self) -> list[str]:
        """`<resource> in <namespace>: <refusal>` for each watch the API server refuses now."""
        return [f"{resource_label(w.resource)} in {w.resource.namespace or 'all namespaces'}: {w.refused}"
                for w in self.informers.refusals()]

    def active(self) -> bool:
        """Whether this replica syncs jobs: it leads, or there is no election."""
        return self.elector is None or self.elector.leading()

    def read(self, key: JobKey) -> Snapshot | None:
        return take_snapshot(key, self.store, self.written, self.departed)

    def changed(self, field: str, kind: str, obj: Obj | None, jobs: set[JobKey]) -> None:
        """What a change means for the jobs it touched (on the event loop, after the store took it)."""
        if field == TRAININGS and kind != "DELETED":
            self._tell_refusals(jobs)
        if kind == LISTED or obj is None:
            self._poke(jobs)
            return
        meta = obj["metadata"]
        namespace, name = meta.get("namespace") or "", meta["name"]
        if kind == "DELETED":
            self.written.forget(field, namespace, name)
            if field == TRAININGS:
                for job in jobs:
                    self.queue.forget(job)
                    self.departed.forget_job(job)
                if self._told:
                    self._told = {(job, path) for job, path in self._told if job not in jobs}
                return
            if field == "pods" and is_disrupted(obj):  # its last state says why it went
                for job in jobs:
                    self.departed.remember(job, obj)
            self._poke(jobs)
            return
        if not self.written.echo(field, obj):  # the operator's own write coming back tells no pass anything new
            self._poke(jobs)

    def _poke(self, jobs: set[JobKey]) -> None:
        """Sync these jobs, those whose namespace is ready (the others get a pass once it is)."""
        for job in jobs:
            if self.informers.ready(job[0]):
                self.queue.spawn(job)

    def _ready(self, namespace: str | None) -> None:
        """Every watch of `namespace` (None: of all namespaces) has listed: each of its jobs gets a pass."""
        log.info("watching %d kinds in %s: every job gets a pass", len({field for field, _ in self.watched}),
                 namespace or "all namespaces")
        self._poke({job for job in self.store.jobs(TRAININGS) if namespace is None or job[0] == namespace})

    def _refused(self, field: str, resource: Resource, refusal: str | None) -> None:
        """A watch's list is refused (or no longer): the jobs it holds back get one Warning event each."""
        if refusal is None:
            self._told = {(job, path) for job, path in self._told if path != resource.path}
        self._tell_refusals({job for job in self.store.jobs(TRAININGS)
                             if resource.namespace in (None, job[0])})

    def _tell_refusals(self, jobs: set[JobKey]) -> None:
        """One Warning event on each of `jobs` for each refused watch that concerns it, once per refusal."""
        refused = self.informers.refusals()
        for job in jobs if refused else ():
            observed = next(iter(self.store.of(TRAININGS, job)), None)
            for watched in refused:
                if observed is None or watched.resource.namespace not in (None, job[0]):
                    continue
                optional = watched.field == WORKLOADS
                if optional and QUEUE_LABEL not in (observed["metadata"].get("labels") or {}):
                    continue
                if (job, watched.resource.path) in self._told:
                    continue
                self._told.add((job, watched.resource.path))
                message = refusal_message(resource_label(watched.resource), job[0], str(watched.refused), optional)
                self._events.submit(self._post_event, dict(observed), message)

    def _post_event(self, training: Obj, message: str) -> None:
        try:
            self.kube.event(training, "Warning", WATCH_REFUSED, message)
        except Exception as error:  # events are best effort; the log and the metric say it too
            log.warning("could not post event %s: %s", WATCH_REFUSED, error)

    async def _lead(self, elector: Elector) -> None:
        """Acquire or renew the Lease every few seconds; on becoming the leader, look at every job once. No error
        ends this loop; the liveness probe fails if it ends or stops going round all the same."""
        leading = False
        while True:
            self._leader_beat = time.monotonic()
            try:
                now_leading = await asyncio.to_thread(elector.try_lead)
            except Exception:  # try_lead never raises; whatever does must not end the election
                log.exception("lease %s/%s: the round failed", elector.namespace, elector.name)
                now_leading = elector.leading()
            if now_leading and not leading:
                self._poke(set(self.store.jobs(TRAININGS)))
            elif leading and not now_leading:
                log.warning("lease %s/%s not renewed within %.0fs: no job is synced until it is",
                            elector.namespace, elector.name, elector.timing.renew_deadline_seconds)
            leading = now_leading
            await asyncio.sleep(elector.timing.retry_seconds)


def refusal_message(resource: str, namespace: str, refusal: str, optional: bool) -> str:
    """The event on a job whose namespace the operator cannot list `resource` in."""
    if optional:
        return (f"the operator cannot list {resource} ({refusal}): this job runs, but its status cannot say what "
                "Kueue says of it. Install Kueue, or install the chart with kueue.enabled=false")
    return (f"the operator cannot list {resource} in namespace {namespace} ({refusal}): no job here is synced until "
            "it can. Grant it (the chart's Role in this namespace) or remove the namespace from watch.namespaces")

