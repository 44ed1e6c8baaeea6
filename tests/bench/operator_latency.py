"""Operator latency and scale on the real control plane: N DistributedTrainings created at once, then how long until
every child exists and until the launcher Job exists (kwok marks the worker pods Ready as soon as they are bound),
p50/p99 over jobs, and the API requests each job costs.

Per round (N jobs): a fresh namespace, the real operator started for it, one warm-up job run to its launcher (imports,
connections and watches are then warm, and every watch of the observer has seen traffic), then `repeats` times: N
creates from N threads at once, wait until every job has its launcher and the operator has gone quiet (no reconcile
pass for 2 s: the follow-up passes count too), scrape /metrics.
"""

from __future__ import annotations

import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import kopf
from kubernetes import client, config

from . import prometheus
from .controlplane_access import (
    OPERATOR_FLOW_SCHEMA,
    ControlPlane,
    OperatorRun,
    install_crd,
    operator_kubeconfig,
    scrape_apiserver,
    training,
    wait_until,
)
from .latency import JobLatency, job_latency
from .observer import Observer
from .report import Row
from .stats import percentile

GROUP, VERSION, PLURAL = "kubetrain.dev", "v1alpha1", "distributedtrainings"
SECTION = "1 operator"
SLO_SECONDS = 1.0  # Kubernetes' API call latency SLO: 1 s p99 for mutating calls on single objects
SETTLE_SECONDS = 2.0
IDLE_SECONDS = 5.0


@dataclass(frozen=True)
class RoundResult:
    jobs: int
    latencies: list[JobLatency]
    operator_requests_per_job: float
    all_requests_per_job: float
    syncs_per_job: float
    mean_sync_seconds: float


def _api_factory(kubeconfig: Path):  # noqa: ANN202 - returns a client factory
    def make() -> client.ApiClient:
        return config.new_client_from_config(config_file=str(kubeconfig))

    return make


def _operator_requests(samples: list[prometheus.Sample]) -> float:
    return prometheus.total(samples, "apiserver_flowcontrol_dispatched_requests_total",
                            lambda labels: labels.get("flow_schema") == OPERATOR_FLOW_SCHEMA)


def _all_requests(samples: list[prometheus.Sample]) -> float:
    return prometheus.total(samples, "apiserver_request_total")


def _syncs(samples: list[prometheus.Sample]) -> tuple[float, float]:
    return (prometheus.total(samples, "kubetrain_reconcile_duration_seconds_count"),
            prometheus.total(samples, "kubetrain_reconcile_duration_seconds_sum"))


def _create(api: client.ApiClient, namespace: str, name: str) -> float:
    """Create one training; returns the monotonic time just before the request left."""
    custom = client.CustomObjectsApi(api)
    submitted = time.monotonic()
    custom.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, training(name))
    return submitted


def _wait_launched(observer: Observer, names: list[str], operator: OperatorRun, timeout: float) -> None:
    def all_launched() -> bool:
        if operator.process.poll() is not None:
            raise RuntimeError(f"the operator exited; log {operator.log}:\n{operator.tail()}")
        return len(observer.launched(names)) == len(names)

    try:
        wait_until(all_launched, timeout, interval=0.1, message=f"launcher Jobs of {len(names)} trainings")
    except TimeoutError as error:
        raise RuntimeError(f"{error}\noperator log {operator.log}:\n{operator.tail()}") from None


def _wait_quiet(operator: OperatorRun, timeout: float = 60.0) -> None:
    """Until the operator's reconcile count stops moving for SETTLE_SECONDS."""
    deadline = time.monotonic() + timeout
    last, since = _syncs(operator.metrics())[0], time.monotonic()
    while time.monotonic() < deadline:
        time.sleep(0.25)
        count = _syncs(operator.metrics())[0]
        if count != last:
            last, since = count, time.monotonic()
        elif time.monotonic() - since >= SETTLE_SECONDS:
            return


class OperatorBench:
    """One control plane for every round; `round(jobs, repeats)` measures N jobs created at once."""

    def __init__(self, workdir: Path, nodes: int, gpus_per_node: int) -> None:
        self.workdir = workdir
        self.plane = ControlPlane.start(workdir / "controlplane",
                                        nodes=[(f"kwok-gpu-{i}", gpus_per_node) for i in range(nodes)])
        install_crd(self.plane)
        self.operator_config = operator_kubeconfig(self.plane, workdir / "operator.kubeconfig")
        self.make_client = _api_factory(self.plane.kubeconfig)
        self.background_per_second: float | None = None

    def stop(self) -> None:
        self.plane.stop()

    def _namespace(self, jobs: int) -> str:
        name = f"bench-{jobs}-{uuid.uuid4().hex[:6]}"
        self.plane.kubectl("create", "namespace", name)
        wait_until(lambda: self.plane.kubectl("get", "serviceaccount", "default", "--namespace", name,
                                              "--ignore-not-found", "--output=name").strip(),
                   message=f"ServiceAccount {name}/default")
        return name

    def _background_rate(self) -> float:
        """API requests per second with the operator idle (kwok heartbeats, controllers, our watches)."""
        before = _all_requests(scrape_apiserver(self.plane))
        start = time.monotonic()
        time.sleep(IDLE_SECONDS)
        after = _all_requests(scrape_apiserver(self.plane))
        return max(0.0, (after - before - 1) / (time.monotonic() - start))  # the first scrape itself is 1 request

    def round(self, jobs: int, repeats: int) -> RoundResult:
        namespace = self._namespace(jobs)
        observer = Observer(self.make_client, namespace).start()
        operator = OperatorRun(self.plane, self.operator_config, namespace, self.workdir / f"operator-{namespace}.log")
        api = self.make_client()
        try:
            operator.wait_serving()
            _create(api, namespace, "warmup")
            _wait_launched(observer, ["warmup"], operator, timeout=180)
            _wait_quiet(operator)
            if self.background_per_second is None:
                self.background_per_second = self._background_rate()
            latencies: list[JobLatency] = []
            operator_requests = all_requests = syncs = sync_seconds = 0.0
            pool = ThreadPoolExecutor(max_workers=min(jobs, 16))
            for repeat in range(repeats):
                names = [f"job-{repeat}-{index}" for index in range(jobs)]
                api_before, operator_before = scrape_apiserver(self.plane), operator.metrics()
                started = time.monotonic()
                submitted = dict(zip(names, pool.map(lambda n: _create(api, namespace, n), names), strict=True))
                _wait_launched(observer, names, operator, timeout=120 + 5 * jobs)
                _wait_quiet(operator)
                api_after, operator_after = scrape_apiserver(self.plane), operator.metrics()
                elapsed = time.monotonic() - started
                with observer.lock:
                    latencies += [job_latency(observer.observation, name, submitted[name]) for name in names]
                operator_requests += _operator_requests(api_after) - _operator_requests(api_before)
                all_requests += (_all_requests(api_after) - _all_requests(api_before)
                                 - self.background_per_second * elapsed)
                (count_after, sum_after), (count_before, sum_before) = _syncs(operator_after), _syncs(operator_before)
                syncs += count_after - count_before
                sync_seconds += sum_after - sum_before
            pool.shutdown()
        finally:
            observer.stop()
            operator.stop()
            self.plane.kubectl("delete", "namespace", namespace, "--wait=false")
        total_jobs = jobs * repeats
        return RoundResult(jobs=jobs, latencies=latencies, operator_requests_per_job=operator_requests / total_jobs,
                           all_requests_per_job=all_requests / total_jobs, syncs_per_job=syncs / total_jobs,
                           mean_sync_seconds=sync_seconds / syncs if syncs else 0.0)


def rows(result: RoundResult) -> list[Row]:
    """Three rows per round: create -> children, create -> launcher, API requests per job."""
    children = [latency.to_children for latency in result.latencies]
    launcher = [latency.to_launcher for latency in result.latencies]
    ready = [latency.ready_to_launcher for latency in result.latencies]
    window = kopf.OperatorSettings().batching.batch_window
    plural = "job" if result.jobs == 1 else "jobs"
    p99_children = percentile(children, 99)
    return [
        Row(SECTION, f"create -> all children, {result.jobs} {plural} at once (p99)", p99_children, "s",
            target=f"< {SLO_SECONDS:g} s", meets=p99_children < SLO_SECONDS,
            detail=f"p50 {percentile(children, 50):.3f} s over {len(children)} jobs, "
                   f"{result.latencies[0].children} children each; API call SLO 1 s p99; "
                   f"kopf batch window {window:g} s",
            extra={"p50": percentile(children, 50), "samples": children}),
        Row(SECTION, f"create -> launcher Job, workers Ready in kwok, {result.jobs} {plural} (p99)",
            percentile(launcher, 99), "s",
            detail=f"p50 {percentile(launcher, 50):.3f} s; last worker Ready -> launcher p50 "
                   f"{percentile(ready, 50):.3f} s, p99 {percentile(ready, 99):.3f} s",
            extra={"p50": percentile(launcher, 50), "samples": launcher, "ready_to_launcher": ready}),
        Row(SECTION, f"operator API requests per job, {result.jobs} {plural}", result.operator_requests_per_job,
            "requests",
            detail=f"all clients {result.all_requests_per_job:.0f}/job (idle rate subtracted); "
                   f"{result.syncs_per_job:.1f} reconcile passes/job, mean pass "
                   f"{1000 * result.mean_sync_seconds:.0f} ms",
            extra={"all_clients_per_job": result.all_requests_per_job, "syncs_per_job": result.syncs_per_job,
                   "mean_sync_seconds": result.mean_sync_seconds}),
    ]


def measure(workdir: Path, job_counts: list[int], repeats_for_one: int, nodes: int, gpus_per_node: int) -> list[Row]:
    bench = OperatorBench(workdir, nodes, gpus_per_node)
    try:
        found: list[Row] = []
        for jobs in job_counts:
            found += rows(bench.round(jobs, repeats_for_one if jobs == 1 else 1))
        return found
    finally:
        bench.stop()
