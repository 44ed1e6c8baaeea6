"""Prometheus metrics of the operator: job transitions, reconcile latency, and watches the API server refuses."""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram, start_http_server

JOB_TRANSITIONS = Counter(
    "kubetrain_job_transitions_total",
    "DistributedTraining phase transitions (Pending=created, Restarting=restarted, Succeeded, Failed, ...)",
    ["phase"],
)
SYNC_SECONDS = Histogram(
    "kubetrain_reconcile_duration_seconds",
    "Time of one reconcile pass of one DistributedTraining (API round trips included)",
    buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
)
SYNC_ERRORS = Counter("kubetrain_reconcile_errors_total", "Reconcile passes that raised and were retried")
WATCH_REFUSED = Gauge(
    "kubetrain_watch_refused",
    "1 while the API server refuses the operator's list of this resource in this namespace ('' for all): 403 "
    "Forbidden (RBAC) or 404 (the API is not served). The jobs there wait; see docs/troubleshooting.md",
    ["resource", "namespace"],
)


def record_transition(old_phase: str | None, new_phase: str | None) -> None:
    if new_phase and new_phase != old_phase:
        JOB_TRANSITIONS.labels(phase=new_phase).inc()


def serve_metrics(port: int) -> None:
    """Serve /metrics on all interfaces in a background thread."""
    start_http_server(port)
