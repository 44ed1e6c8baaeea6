"""kopf handlers: the only place decorators appear. Every event becomes a poke of the owning job's sync.

Run with `kopf run -m kubetrain.reconcile --all-namespaces` (or `--namespace NS` per namespace).
No finalizers are added: children are removed by Kubernetes' garbage collector through ownerReferences.
"""

from __future__ import annotations

import asyncio
import logging
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import kopf

from kubetrain import settings as settings_module
from kubetrain.api import GROUP, PLURAL, VERSION
from kubetrain.build.names import LABEL_JOB
from kubetrain.kube import Kube, load_api_client
from kubetrain.queue import SyncQueue
from kubetrain.sync import sync_training

log = logging.getLogger(__name__)


@kopf.on.startup()
async def configure(settings: kopf.OperatorSettings, memo: kopf.Memo, **_: Any) -> None:
    config = settings_module.from_environment()
    asyncio.get_running_loop().set_default_executor(ThreadPoolExecutor(max_workers=config.sync_threads))
    settings.posting.level = logging.WARNING
    # No cluster-wide namespace/CRD scanning: the namespaced RBAC forbids it and kopf would stall retrying on 403.
    settings.scanning.disabled = True
    settings.watching.server_timeout = 300
    settings.networking.request_timeout = 60
    api_client = load_api_client()
    api_client.configuration.connection_pool_maxsize = config.sync_threads * 2
    kube = Kube(api_client)
    memo.queue = SyncQueue(lambda ns, name: sync_training(kube, ns, name), config.error_retry_seconds)
    if config.metrics_port:
        from kubetrain.metrics import serve_metrics

        serve_metrics(config.metrics_port)


@kopf.on.event(GROUP, VERSION, PLURAL)
async def on_training(event: kopf.RawEvent, name: str, namespace: str | None, memo: kopf.Memo, **_: Any) -> None:
    if namespace is None:
        return
    if event.get("type") == "DELETED":
        memo.queue.forget((namespace, name))
        return
    await memo.queue.poke((namespace, name))


@kopf.on.event("", "v1", "pods", labels={LABEL_JOB: kopf.PRESENT})
async def on_pod(labels: kopf.Labels, namespace: str | None, memo: kopf.Memo, **_: Any) -> None:
    if namespace is not None:
        await memo.queue.poke((namespace, labels[LABEL_JOB]))


@kopf.on.event("batch", "v1", "jobs", labels={LABEL_JOB: kopf.PRESENT})
async def on_launcher(labels: kopf.Labels, namespace: str | None, memo: kopf.Memo, **_: Any) -> None:
    if namespace is not None:
        await memo.queue.poke((namespace, labels[LABEL_JOB]))
