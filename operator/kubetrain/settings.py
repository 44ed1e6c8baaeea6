"""Operator settings, read once from the environment; each with its default and meaning."""

from __future__ import annotations

import os
from dataclasses import dataclass

from kubetrain.contract import ENTRYPOINTS_IMAGE


@dataclass(frozen=True)
class Settings:
    # KUBETRAIN_SYNC_THREADS: jobs reconciled in parallel (each sync is a few blocking API calls).
    sync_threads: int = 16
    # KUBETRAIN_ERROR_RETRY_SECONDS: delay before retrying a sync that raised (API down, conflict, ...); it doubles
    # with each consecutive failure of the same job, up to KUBETRAIN_MAX_RETRY_SECONDS.
    error_retry_seconds: float = 1.0
    max_retry_seconds: float = 300.0
    # KUBETRAIN_METRICS_PORT: port of the Prometheus /metrics endpoint (0 disables it).
    metrics_port: int = 0
    # KUBETRAIN_LEASE_NAMESPACE / KUBETRAIN_LEASE_NAME: the Lease that elects the one replica that syncs jobs;
    # unset: no election, this process always syncs (one replica, or the operator run on a laptop).
    lease_namespace: str = ""
    lease_name: str = ""
    # KUBETRAIN_POD_NAME / KUBETRAIN_POD_UID: this replica's own Pod (downward API). The Lease it holds names that
    # Pod as its owner, so the garbage collector removes the Lease with the operator (`helm uninstall`).
    pod_name: str = ""
    pod_uid: str = ""
    # KUBETRAIN_ENTRYPOINTS_IMAGE: the image every job pod's init container copies the entrypoints from.
    entrypoints_image: str = ENTRYPOINTS_IMAGE
    # KUBETRAIN_NAMESPACES: the namespaces whose jobs this operator runs, comma-separated; unset: all of them.
    namespaces: tuple[str, ...] = ()
    # KUBETRAIN_KUEUE=true: watch Kueue's Workloads, so a job waiting for quota says what Kueue says (the chart's
    # kueue.enabled, which also grants reading them). Jobs with Kueue's label are queued either way.
    kueue: bool = False


def from_environment(environ: dict[str, str] | None = None) -> Settings:
    env = os.environ if environ is None else environ
    return Settings(
        sync_threads=int(env.get("KUBETRAIN_SYNC_THREADS", Settings.sync_threads)),
        error_retry_seconds=float(env.get("KUBETRAIN_ERROR_RETRY_SECONDS", Settings.error_retry_seconds)),
        max_retry_seconds=float(env.get("KUBETRAIN_MAX_RETRY_SECONDS", Settings.max_retry_seconds)),
        metrics_port=int(env.get("KUBETRAIN_METRICS_PORT", Settings.metrics_port)),
        lease_namespace=env.get("KUBETRAIN_LEASE_NAMESPACE", ""),
        lease_name=env.get("KUBETRAIN_LEASE_NAME", ""),
        pod_name=env.get("KUBETRAIN_POD_NAME", ""),
        pod_uid=env.get("KUBETRAIN_POD_UID", ""),
        entrypoints_image=env.get("KUBETRAIN_ENTRYPOINTS_IMAGE") or ENTRYPOINTS_IMAGE,
        namespaces=tuple(name.strip() for name in env.get("KUBETRAIN_NAMESPACES", "").split(",") if name.strip()),
        kueue=env.get("KUBETRAIN_KUEUE", "").lower() == "true",
    )
