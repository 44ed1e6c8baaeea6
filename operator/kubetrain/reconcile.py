"""The operator process: kopf hosts it (command line, logging, the /healthz endpoint, signals, startup and cleanup);
kubetrain.controller does the rest. kopf itself watches nothing: no kopf resource handlers, indices or finalizers
(kopf's own watches were measured against kubetrain.runtime's and missed: docs/benchmarks.md, "Why kopf does not
watch").

/healthz (kopf's --liveness endpoint, with the probe handler below) answers 500 when one of the operator's loops (a
watch, the leader election) has ended or is stuck, so that the liveness probe restarts it; otherwise 200, naming the
watches the API server refuses (a restart would not mend those: they are logged, counted and put in events).

Run with `kopf run --standalone --all-namespaces -m kubetrain.reconcile`; KUBETRAIN_NAMESPACES (comma-separated)
narrows what the operator watches, as kubetrain.settings says.
"""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import kopf

from kubetrain import settings as settings_module
from kubetrain.controller import Controller
from kubetrain.kube import load_api_client


@kopf.on.startup()
async def start(settings: kopf.OperatorSettings, memo: kopf.Memo, **_: Any) -> None:
    config = settings_module.from_environment()
    # kopf's own cluster scanning (namespaces, CRDs) serves handlers this operator does not have.
    settings.scanning.disabled = True
    threads = config.sync_threads + 2  # the passes, and the Lease's calls beside them
    asyncio.get_running_loop().set_default_executor(ThreadPoolExecutor(max_workers=threads))
    memo.controller = Controller(config, load_api_client)
    memo.controller.start()
    if config.metrics_port:
        from kubetrain.metrics import serve_metrics

        serve_metrics(config.metrics_port)


@kopf.on.probe(id="kubetrain")
async def health(memo: kopf.Memo, **_: Any) -> dict[str, Any]:
    """Raises (kopf then answers 500) when a loop ended or is stuck; else the refused watches, if any."""
    controller = getattr(memo, "controller", None)
    if controller is None:
        return {"starting": True}
    dead = controller.dead_loops()
    if dead:
        raise kopf.PermanentError("; ".join(dead))
    return {"refusedWatches": controller.refused_watches()}


@kopf.on.cleanup()
async def stop(memo: kopf.Memo, **_: Any) -> None:
    """A clean stop (rollout, scale-down, uninstall) releases the Lease: a standby takes over at once."""
    controller = getattr(memo, "controller", None)
    if controller is not None:
        await controller.stop()
