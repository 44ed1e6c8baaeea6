"""The operator's controller: which objects it watches, what each change means for a job, and who acts on it.

Watches (kubetrain.runtime.informers) keep the store; a change pokes the jobs it touched, unless it is the echo of the
operator's own write; the work queue (kubetrain.runtime.queue) runs one sync pass (kubetrain.sync) at a time per job,
on the leader only (kubetrain.runtime.leader). No pass runs before every watch has listed once; then every job gets
one. No finalizers: children go with their job through Kubernetes' garbage collector (ownerReferences).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import socket
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from kubernetes import client
from kubernetes.dynamic import DynamicClient

from kubetrain.cache import TRAININGS, WORKLOADS, Departed, Snapshot, Written, kept, take_snapshot
from kubetrain.children import WATCHED_KINDS
from kubetrain.contract import GROUP, KIND, LABEL_JOB, PLURAL, VERSION, job_of_worker
from kubetrain.kube import Kube
from kubetrain.kueue import WORKLOAD_API
from kubetrain.pod_state import is_disrupted
from kubetrain.runtime.informers import LISTED, Informers
from kubetrain.runtime.leader import Elector, owned_by_pod
from kubetrain.runtime.queue import SyncQueue
from kubetrain.runtime.store import JobKey, Obj, Store
from kubetrain.runtime.watch import ApiTransport, Resource
from kubetrain.settings import Settings
from kubetrain.sync import sync_training

log = logging.getLogger(__name__)


def watched(settings: Settings) -> list[tuple[str, Resource]]:
    """(store field, resource) for everything the operator lists and watches: its jobs, every watched child kind
    (by the job label), and Kueue's Workloads when asked to; once per namespace, or once for all."""
    found: list[tuple[str, Resource]] = []
    for namespace in settings.namespaces or (None,):
        found.append((TRAININGS, Resource(f"{GROUP}/{VERSION}", KIND, PLURAL, namespace)))
        found += [(child.field, Resource(child.api_version, child.kind, child.plural, namespace, LABEL_JOB))
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
        self.informers = Informers(self.store, self.changed)
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
        self._tasks: list[asyncio.Task[None]] = []

    def start(self) -> None:
        """Start the watches, and the leader election; the first passes follow once every watch has listed."""
        transport = ApiTransport(DynamicClient(self.watches))
        for field, resource in self.watched:
            self.informers.add(field, resource, transport, functools.partial(kept, field))
        self.informers.start()
        self._tasks.append(asyncio.create_task(self._first_passes()))
        if self.elector is not None:
            self._tasks.append(asyncio.create_task(self._lead(self.elector)))

    async def stop(self) -> None:
        """Stop watching; a leader deletes its Lease, so that a standby takes over at once."""
        for task in self._tasks:
            task.cancel()
        self.informers.stop()
        if self.elector is not None:
            await asyncio.to_thread(self.elector.release)

    def active(self) -> bool:
        """Whether this replica syncs jobs: it leads, or there is no election."""
        return self.elector is None or self.elector.leading()

    def read(self, key: JobKey) -> Snapshot | None:
        return take_snapshot(key, self.store, self.written, self.departed)

    def changed(self, field: str, kind: str, obj: Obj | None, jobs: set[JobKey]) -> None:
        """What a change means for the jobs it touched (on the event loop, after the store took it)."""
        if not self.informers.is_synced:
            return  # every job gets a pass once all watches have listed
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
                return
            if field == "pods" and is_disrupted(obj):  # its last state says why it went
                for job in jobs:
                    self.departed.remember(job, obj)
            self._poke(jobs)
            return
        if not self.written.echo(field, obj):  # the operator's own write coming back tells no pass anything new
            self._poke(jobs)

    def _poke(self, jobs: set[JobKey]) -> None:
        for job in jobs:
            self.queue.spawn(job)

    async def _first_passes(self) -> None:
        await self.informers.synced()
        log.info("watching %d kinds in %s: every job gets a pass", len({field for field, _ in self.watched}),
                 ", ".join(self.settings.namespaces) or "all namespaces")
        self._poke(set(self.store.jobs(TRAININGS)))

    async def _lead(self, elector: Elector) -> None:
        """Acquire or renew the Lease every few seconds; on becoming the leader, look at every job once."""
        leading = False
        while True:
            now_leading = await asyncio.to_thread(elector.try_lead)
            if now_leading and not leading and self.informers.is_synced:
                self._poke(set(self.store.jobs(TRAININGS)))
            leading = now_leading
            await asyncio.sleep(elector.timing.retry_seconds)

