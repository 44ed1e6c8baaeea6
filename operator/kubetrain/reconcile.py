"""kopf handlers: the only place decorators appear. Watches feed the cache; every event pokes the owning job's sync,
but for the echo of the operator's own write.

Run with `kopf run -m kubetrain.reconcile --all-namespaces` (or `--namespace NS` per namespace).
Each watched kind has a kopf index keyed by (namespace, job name) (kubetrain.cache reads them); kopf starts no other
handler until every index holds its first complete listing. No finalizers are added: children are removed by
Kubernetes' garbage collector through ownerReferences.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import kopf

from kubetrain import settings as settings_module
from kubetrain.cache import TRAININGS, WORKLOADS, Departed, Snapshot, Written, slim, slim_workload, take_snapshot
from kubetrain.children import CHILD_KINDS, ChildKind
from kubetrain.contract import GROUP, LABEL_JOB, PLURAL, VERSION, job_of_worker
from kubetrain.kube import Kube, load_api_client
from kubetrain.kueue import WORKLOAD_API
from kubetrain.leader import Elector, owned_by_pod
from kubetrain.lean import trim
from kubetrain.pod_state import is_disrupted
from kubetrain.queue import Key, SyncQueue
from kubetrain.sync import sync_training

log = logging.getLogger(__name__)
INDEX = "cached_"  # index names: cached_trainings, cached_pods, ... (kopf passes them to handlers by these names)


@kopf.on.startup()
async def configure(settings: kopf.OperatorSettings, memo: kopf.Memo, **kwargs: Any) -> None:
    config = settings_module.from_environment()
    asyncio.get_running_loop().set_default_executor(ThreadPoolExecutor(max_workers=config.sync_threads))
    settings.posting.level = logging.WARNING
    trim(settings)
    # No cluster-wide namespace/CRD scanning: the namespaced RBAC forbids it and kopf would stall retrying on 403.
    settings.scanning.disabled = True
    settings.watching.server_timeout = 300
    settings.networking.request_timeout = 60
    api_client = load_api_client()
    writes = ThreadPoolExecutor(max_workers=config.sync_threads * 2, thread_name_prefix="write")
    api_client.configuration.connection_pool_maxsize = config.sync_threads * 3  # passes and their parallel writes
    kube = Kube(api_client)
    written = Written()
    departed = Departed()
    trainings = kwargs[INDEX + TRAININGS]
    indexes = {child.field: kwargs[INDEX + child.field] for child in CHILD_KINDS}
    if config.kueue:
        indexes[WORKLOADS] = kwargs[INDEX + WORKLOADS]

    def read(key: Key) -> Snapshot | None:
        return take_snapshot(key, trainings, indexes, written, departed)

    memo.written = written
    memo.departed = departed
    memo.elector = None
    if config.lease_name:
        identity = f"{socket.gethostname()}-{uuid.uuid4().hex[:8]}"
        memo.elector = Elector(api_client, config.lease_namespace, config.lease_name, identity,
                               owners=owned_by_pod(config.pod_name, config.pod_uid))  # fmt: skip
    image = config.entrypoints_image
    memo.queue = SyncQueue(read, lambda snapshot: sync_training(kube, written, snapshot, writes, image),
                           config.error_retry_seconds, config.max_retry_seconds,
                           active=lambda: memo.elector is None or memo.elector.leading())  # fmt: skip
    if memo.elector is not None:
        memo.leading_task = asyncio.create_task(_lead(memo.elector, memo.queue, trainings))
    if config.metrics_port:
        from kubetrain.metrics import serve_metrics

        serve_metrics(config.metrics_port)


async def _lead(elector: Elector, queue: SyncQueue[Snapshot], trainings: kopf.Index[Key, Any]) -> None:
    """Acquire or renew the Lease every few seconds; on becoming the leader, look at every job once."""
    leading = False
    while True:
        now_leading = await asyncio.to_thread(elector.try_lead)
        if now_leading and not leading:
            for key in list(trainings):
                queue.spawn(key)
        leading = now_leading
        await asyncio.sleep(elector.timing.retry_seconds)


@kopf.on.cleanup()
async def release_lease(memo: kopf.Memo, **_: Any) -> None:
    """A clean stop (rollout, scale-down, uninstall) deletes the Lease: a standby takes over at once."""
    task = getattr(memo, "leading_task", None)
    if task is not None:
        task.cancel()
    if getattr(memo, "elector", None) is not None:
        await asyncio.to_thread(memo.elector.release)


# Index functions are coroutines although they never await: kopf runs a plain function in a worker thread (a thread
# hop, a task and a context copy for every watch event), a coroutine inline on the event loop.
@kopf.index(GROUP, VERSION, PLURAL, id=INDEX + TRAININGS)
async def _index_training(namespace: str | None, name: str, body: kopf.Body, **_: Any) -> dict[Key, dict[str, Any]]:
    return {(namespace or "", name): dict(body)}


@kopf.on.event(GROUP, VERSION, PLURAL)
async def on_training(event: kopf.RawEvent, name: str, namespace: str | None, body: kopf.Body, memo: kopf.Memo,
                      **_: Any) -> None:  # fmt: skip
    memo.queue.cache_filled()  # kopf runs no handler before every index holds its first complete listing
    if namespace is None:
        return
    if event.get("type") == "DELETED":
        memo.queue.forget((namespace, name))
        memo.written.forget(TRAININGS, namespace, name)
        memo.departed.forget_job((namespace, name))
        return
    if not memo.written.echo(TRAININGS, body):  # the operator's own status write coming back: nothing new
        await memo.queue.poke((namespace, name))


def _deleted(event: kopf.RawEvent, **_: Any) -> bool:
    return event.get("type") == "DELETED"


def _watch_child(child: ChildKind) -> None:
    """An index of `child`'s objects by (namespace, job name) whose function also pokes the job (one kopf handler per
    event instead of two), and a handler for deletions (kopf drops a deleted object without calling the function)."""
    async def index(namespace: str | None, labels: kopf.Labels, body: kopf.Body, memo: kopf.Memo,
                    **_: Any) -> dict[Key, dict[str, Any]]:  # fmt: skip
        key = (namespace or "", labels[LABEL_JOB])
        if namespace and not memo.written.echo(child.field, body):  # not a child just created, as it was created
            memo.queue.poke_soon(key)
        return {key: slim(child, body)}

    async def on_deleted(name: str, namespace: str | None, labels: kopf.Labels, body: kopf.Body, memo: kopf.Memo,
                         **_: Any) -> None:  # fmt: skip
        if namespace is None:
            return
        memo.written.forget(child.field, namespace, name)
        key = (namespace, labels[LABEL_JOB])
        if child.field == "pods" and is_disrupted(body):  # its last state says why it went
            memo.departed.remember(key, slim(child, body))
        await memo.queue.poke(key)

    labels = {LABEL_JOB: kopf.PRESENT}
    kopf.index(child.group, child.version, child.plural, id=INDEX + child.field, labels=labels)(index)
    kopf.on.event(child.group, child.version, child.plural, id=f"on_{child.field}_deleted", labels=labels,
                  when=_deleted)(on_deleted)  # fmt: skip


for _child in CHILD_KINDS:
    _watch_child(_child)


def _workload_jobs(namespace: str | None, body: kopf.Body) -> set[Key]:
    """The jobs whose worker pods own a Workload (Kueue makes every pod of a group an owner of its Workload)."""
    owners = body.get("metadata", {}).get("ownerReferences") or []
    names = {job_of_worker(ref.get("name", "")) for ref in owners if ref.get("kind") == "Pod"}
    return {(namespace or "", name) for name in names if name}


def _watch_workloads() -> None:
    """An index of Kueue's Workloads by the job they queue; a change (admitted, still waiting and why) pokes it."""
    async def index(namespace: str | None, body: kopf.Body, memo: kopf.Memo, **_: Any) -> dict[Key, dict[str, Any]]:
        keys = _workload_jobs(namespace, body)
        for key in keys:
            memo.queue.poke_soon(key)
        return {key: slim_workload(body) for key in keys}

    group, version, plural = WORKLOAD_API
    kopf.index(group, version, plural, id=INDEX + WORKLOADS)(index)


if settings_module.from_environment().kueue:
    _watch_workloads()
