"""Time from `kubectl apply` to the first training step in kind: kubetrain beside mpi-operator v0.8.0 and the floor.

All three run the quick start's cifar_mixup job (examples/kind/cifar-mixup.yaml: its image, command, workers' CPU and
memory, data volume) in the same cluster, one job at a time, interleaved:
- kubetrain: the DistributedTraining, through the chart's operator;
- mpi-operator: the same job as an MPIJob (`mpijob()`), its controller a process on this machine against the kind API
  server, as a user of that operator would write it for this image (sshd as the image's user on port 2222, mpirun with
  that port);
- the floor: the same program started again, through the same launcher, in a kubetrain job's pods that already run
  (their ranks only sleep): ssh, Python and TensorFlow import, data, the first step, and nothing of Kubernetes.
Each pod phase is stamped when a watch sees it; the world-up and first-step times come from rank 0's `startup:` log
lines (trainlib.startup), on the same clock. A job is deleted once its first step is done.

    python -m tests.bench.first_step_kind --size full   # a kind cluster set up as the README's quick start says
"""

from __future__ import annotations

import argparse
import copy
import datetime
import json
import logging
import shlex
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import urllib3
from kubernetes import client, config, watch
from kubernetes.client.exceptions import ApiException

from kubetrain.api import parse_job
from kubetrain.contract import LABEL_ROLE
from kubetrain.manifests.launcher import LAUNCHER_RESOURCES
from kubetrain.manifests.pods import worker_resources
from kubetrain.plan.model import read_time

from . import mpi_operator
from .contenders import PeerRun
from .first_step import FLOOR, KUBETRAIN, PEER, Start, log_times, rows
from .kind_cpu import CONTROL_PLANE, CpuMeter, is_kubetrain_operator
from .latency import KUBETRAIN as KUBETRAIN_LABELS
from .latency import MPI_OPERATOR as PEER_LABELS
from .latency import Convention
from .report import Row, format_text, write_results

if TYPE_CHECKING:
    from tests.support.kind_cluster import KindCluster

LOG = logging.getLogger("kubetrain.bench.first_step")
RESULTS = Path(__file__).resolve().parent / "results"
NAMESPACE = "default"  # the quick start's volumes live there
SSH_PORT = 2222
START_TIMEOUT = 900.0
GONE_TIMEOUT = 300.0
ENTRYPOINT = "/opt/kubetrain/entrypoints/launcher"  # the launcher container's command (kubetrain.manifests)
# The MPIJob's worker: an sshd as the image's user, its host key made at start, the operator's key authorised.
PEER_SSHD = ("set -e; keys=$(mktemp -d); ssh-keygen -q -t ed25519 -N '' -f \"$keys/host\"; "
             f"exec /usr/sbin/sshd -D -e -f /dev/null -p {SSH_PORT} -h \"$keys/host\" -o PidFile=\"$keys/pid\" "
             "-o AuthorizedKeysFile=/home/kubetrain/.ssh/authorized_keys -o StrictModes=no -o UsePAM=no")
PEER_SSH_ARGS = (f"-p {SSH_PORT} -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null "
                 "-o ConnectionAttempts=10")  # mpi-operator's own rsh_args are the last option


@dataclass(frozen=True)
class Sizes:
    workers: tuple[int, ...]
    repeats: int
    warm_up: bool  # one unmeasured start of each first (images pulled, caches warm)


# medium: 2 workers only, 3 rounds (13 minutes here), to check a change before a full run
SIZES = {"small": Sizes((2,), 1, False), "medium": Sizes((2,), 3, True), "full": Sizes((2, 4), 4, True)}


def job_name(contender: str, workers: int, run: str) -> str:
    short = {KUBETRAIN: "kt", PEER: "mpi", FLOOR: "floor"}[contender]
    return f"fs-{short}-{workers}w-{run}"


def training(template: dict[str, Any], name: str, workers: int, command: Sequence[str] | None = None) -> dict[str, Any]:
    """The quick start's job named `name`, with `workers` workers and, if given, another command."""
    body = copy.deepcopy(template)
    body["metadata"] = {"name": name, "namespace": NAMESPACE}
    body["spec"]["workers"] = workers
    if command is not None:
        body["spec"]["command"] = list(command)
    return body


def mpijob(body: dict[str, Any]) -> dict[str, Any]:
    """The MPIJob of DistributedTraining `body`: its image, command, worker resources, launcher resources and data
    volume, the launcher created once every worker is Ready. Rank 0 checkpoints into its pod's /tmp (the first step
    comes before any checkpoint)."""
    job = parse_job(body)
    spec = body["spec"]
    data = spec["data"]
    ranks = job.spec.workers * job.spec.slots_per_worker
    volume = {"name": "data", "persistentVolumeClaim": {"claimName": data["claimName"], "readOnly": True}}
    mount = {"name": "data", "mountPath": data["mountPath"], "readOnly": True}
    container = {"image": spec["image"], "imagePullPolicy": "IfNotPresent"}
    launcher = ["mpirun", "-np", str(ranks), "--bind-to", "none", "--map-by", "slot", "--tag-output",
                "--mca", "plm_rsh_args", PEER_SSH_ARGS, "-x", "PATH", *spec["command"],
                "--checkpoint-dir", "/tmp/checkpoints"]
    return {
        "apiVersion": "kubeflow.org/v2beta1",
        "kind": "MPIJob",
        "metadata": {"name": body["metadata"]["name"], "namespace": NAMESPACE},
        "spec": {
            "slotsPerWorker": job.spec.slots_per_worker,
            "sshAuthMountPath": "/home/kubetrain/.ssh",
            "launcherCreationPolicy": "WaitForWorkersReady",
            "runPolicy": {"cleanPodPolicy": "Running", "backoffLimit": 0},
            "mpiReplicaSpecs": {
                "Launcher": {"replicas": 1, "template": {"spec": {"containers": [
                    {**container, "name": "launcher", "command": launcher, "resources": LAUNCHER_RESOURCES}]}}},
                "Worker": {"replicas": job.spec.workers, "template": {"spec": {
                    "containers": [{**container, "name": "worker", "command": ["bash", "-c", PEER_SSHD],
                                    "resources": worker_resources(job), "volumeMounts": [mount]}],
                    "volumes": [volume]}}},
            },
        },
    }


@dataclass
class PodTimes:
    role: str
    seen: float
    scheduled: float | None = None
    running: float | None = None
    ready: float | None = None


@dataclass
class PodWatch:
    """Every pod of the namespace, stamped on arrival with when it was first seen, scheduled, running and Ready."""

    make_client: Callable[[], client.ApiClient]
    pods: dict[tuple[str, str], PodTimes] = field(default_factory=dict)  # (job, pod) -> times
    lock: threading.Lock = field(default_factory=threading.Lock)
    stopped: threading.Event = field(default_factory=threading.Event)

    def start(self) -> PodWatch:
        threading.Thread(target=self._watch, name="first-step-pods", daemon=True).start()
        return self

    def _watch(self) -> None:
        core = client.CoreV1Api(self.make_client())
        version = None
        while not self.stopped.is_set():
            try:
                for event in watch.Watch().stream(core.list_namespaced_pod, NAMESPACE, deserialize=False,
                                                  timeout_seconds=60, resource_version=version):
                    now = time.monotonic()
                    pod = event["object"]
                    version = pod["metadata"].get("resourceVersion", version)
                    if event["type"] in ("ADDED", "MODIFIED"):
                        self._record(pod, now)
            except (ApiException, KeyError, urllib3.exceptions.HTTPError):
                version = None  # 410 Gone or a dropped connection: list again; first stamps are kept
                self.stopped.wait(0.2)

    def _record(self, pod: dict[str, Any], now: float) -> None:
        labels = pod["metadata"].get("labels") or {}
        convention: Convention = KUBETRAIN_LABELS if LABEL_ROLE in labels else PEER_LABELS
        job = convention.job_of(labels)
        if job is None:
            return
        status = pod.get("status") or {}
        ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or [])
        with self.lock:
            times = self.pods.setdefault((job, pod["metadata"]["name"]),
                                         PodTimes(labels.get(convention.role_key, ""), now))
            if times.scheduled is None and (pod.get("spec") or {}).get("nodeName"):
                times.scheduled = now
            if times.running is None and status.get("phase") == "Running":
                times.running = now
            if times.ready is None and ready:
                times.ready = now

    def of(self, job: str) -> list[PodTimes]:
        with self.lock:
            return [copy.copy(times) for (owner, _), times in self.pods.items() if owner == job]

    def launcher_pod(self, job: str) -> str | None:
        with self.lock:
            return next((pod for (owner, pod), times in self.pods.items()
                         if owner == job and times.role == "launcher"), None)


def phases(pods: Sequence[PodTimes], workers: int, applied: float) -> dict[str, float]:
    """Seconds after `applied` at which the last of `workers` workers was scheduled, running and Ready, and the
    launcher pod was created and running (phases not reached are left out)."""
    found: dict[str, float] = {}
    members = [pod for pod in pods if pod.role == "worker"]
    for phase, stamp in (("workers scheduled", "scheduled"), ("workers running", "running"),
                         ("workers Ready", "ready")):
        stamps = [getattr(pod, stamp) for pod in members]
        if len(stamps) >= workers and None not in stamps:
            found[phase] = max(stamps) - applied
    launcher = next((pod for pod in pods if pod.role == "launcher"), None)
    if launcher is not None:
        found["launcher created"] = launcher.seen - applied
        if launcher.running is not None:
            found["launcher running"] = launcher.running - applied
    return found


def log_phases(log: str, applied_wall: float) -> dict[str, float]:
    return {phase: moment.timestamp() - applied_wall for phase, moment in log_times(log).items()}


class FirstStepBench:
    """Starts jobs in a kind cluster where the quick start ran (the chart's operator, the volumes, the image)."""

    def __init__(self, cluster: KindCluster, template: dict[str, Any], workdir: Path) -> None:
        self.kubectl = cluster.kubectl
        self.kubectl_result = cluster.kubectl_result
        self.kubectl_binary = cluster.settings.kubectl
        self.env = cluster.env()
        self.kubeconfig = cluster.kubeconfig
        self.docker, self.cluster_name = cluster.settings.docker, cluster.settings.cluster
        self.template = template
        self.workdir = workdir
        self.make_client = lambda: config.new_client_from_config(config_file=str(self.kubeconfig))
        self.core = client.CoreV1Api(self.make_client())
        self.watch = PodWatch(self.make_client).start()
        self.peer: PeerRun | None = None
        self.peer_starts = 0

    def start_peer(self) -> None:
        """mpi-operator's CRD and its controller, as a process against the cluster's API server."""
        mpi_operator.install(self.kubectl)
        self._run_peer()

    def _run_peer(self) -> None:
        """The controller's process (a log of its own each time), once it has started its workers."""
        log = self.workdir / f"mpi-operator-{self.peer_starts}.log"
        self.peer_starts += 1
        self.peer = PeerRun(self.env, self.kubeconfig, NAMESPACE, log, mpi_operator.TUNED)
        self.peer.wait_serving()

    def _keep_peer_running(self) -> bool:
        """Start the controller again if it has exited, as its Deployment would (under load it can lose its lease,
        and then it exits); True if it had to."""
        if self.peer is None or self.peer.process.poll() is None:
            return False
        LOG.warning("mpi-operator exited %s (see %s): starting it again", self.peer.process.returncode, self.peer.log)
        self.peer.stop()  # its lock on the health port
        self._run_peer()
        return True

    def stop(self) -> None:
        self.watch.stopped.set()
        if self.peer is not None:
            self.peer.stop()

    def _log(self, pod: str, container: str | None = None) -> str:
        try:
            return str(self.core.read_namespaced_pod_log(pod, NAMESPACE, container=container))
        except ApiException:
            return ""  # not started yet

    def _first_step_log(self, name: str, deadline: float, tend: Callable[[], object] = lambda: None) -> str:
        """The launcher's log once it holds rank 0's first-step line; `tend()` runs every second meanwhile."""
        pod, text = None, ""
        while time.monotonic() < deadline:
            tend()
            pod = self.watch.launcher_pod(name)
            text = self._log(pod) if pod else ""
            if "first step" in log_times(text):
                return text
            if "Traceback (most recent call last)" in text or "non-zero" in text:
                raise RuntimeError(f"{name} failed before its first step:\n{text[-3000:]}")
            time.sleep(1)
        raise RuntimeError(f"{name}: no first step within {START_TIMEOUT:.0f} s; launcher {pod}:\n{text[-3000:]}")

    def _delete(self, kind: str, name: str) -> None:
        """The job, then its pods, without waiting for their grace period; returns once none is left."""
        self.kubectl("delete", kind, name, "--namespace", NAMESPACE, "--wait=false", "--ignore-not-found")
        labels = KUBETRAIN_LABELS if kind == "distributedtraining" else PEER_LABELS
        selector = f"{labels.job_keys[0]}={name}"
        deadline = time.monotonic() + GONE_TIMEOUT
        while names := self.kubectl("get", "pods", "--namespace", NAMESPACE, f"--selector={selector}",
                                    "--output=name").split():
            if time.monotonic() > deadline:
                raise RuntimeError(f"pods of {kind} {name} still there after {GONE_TIMEOUT:.0f} s: {names}")
            self.kubectl("delete", *names, "--namespace", NAMESPACE, "--grace-period=1", "--wait=false",
                         "--ignore-not-found")
            time.sleep(2)

    def start(self, contender: str, workers: int, run: str) -> Start:
        """One job applied and followed to its first step, then deleted."""
        name = job_name(contender, workers, run)
        body = training(self.template, name, workers)
        manifest, kind = (body, "distributedtraining") if contender == KUBETRAIN else (mpijob(body), "mpijob")
        restarts = 0

        def tend() -> None:
            nonlocal restarts
            if contender == PEER and self._keep_peer_running():
                restarts += 1

        tend()
        meter = self._meter(contender)
        meter.start()
        applied, applied_wall = time.monotonic(), time.time()
        self.kubectl("apply", "--filename=-", input=json.dumps(manifest))
        try:
            log = self._first_step_log(name, applied + START_TIMEOUT, tend)
            cpu = meter.stop()
            seconds = {**phases(self.watch.of(name), workers, applied), **log_phases(log, applied_wall)}
            (self.workdir / f"{name}.log").write_text(log)
            reported = self._reported(name, applied_wall) if contender == KUBETRAIN else {}
        finally:
            self._delete(kind, name)
        LOG.info("%s: %s", name, ", ".join(f"{phase} {value:.1f}" for phase, value in seconds.items()))
        return Start(contender, workers, seconds, reported, restarts, cpu)

    def _meter(self, contender: str) -> CpuMeter:
        """The API server's and etcd's CPU, and the contender's controller's: the chart's operator in its pod, or the
        peer's process here."""
        if contender == KUBETRAIN:
            return CpuMeter(self.docker, self.cluster_name, {**CONTROL_PLANE, "controller": is_kubetrain_operator})
        peer = [self.peer.process.pid] if self.peer is not None else []
        return CpuMeter(self.docker, self.cluster_name, CONTROL_PLANE, {"controller": peer})

    def _reported(self, name: str, applied_wall: float, timeout: float = 30.0) -> dict[str, float]:
        """The job's status.startup once it has its first step (rank 0 sends it just after), as seconds after
        `applied_wall`; what it has after `timeout` seconds otherwise."""
        deadline = time.monotonic() + timeout
        while True:
            body = json.loads(self.kubectl("get", "distributedtraining", name, "--namespace", NAMESPACE,
                                           "--output=json"))
            timeline = (body.get("status") or {}).get("startup") or {}
            found = {phase["name"]: moment.replace(tzinfo=datetime.timezone.utc).timestamp() - applied_wall
                     for phase in timeline.get("phases") or [] if (moment := read_time(phase.get("at"))) is not None}
            if "FirstStep" in found or time.monotonic() > deadline:
                return found
            time.sleep(1)

    def floors(self, workers: int, repeats: int) -> list[Start]:
        """The program started `repeats` times again in a kubetrain job's running pods (their ranks sleep), through
        the launcher's own entrypoint, each run in a checkpoint folder of its own and stopped after its first step."""
        name = job_name(FLOOR, workers, "pods")
        self.kubectl("apply", "--filename=-", input=json.dumps(training(self.template, name, workers,
                                                                        ["sleep", "3600"])))
        found = []
        try:
            deadline = time.monotonic() + START_TIMEOUT
            while not (pod := self.watch.launcher_pod(name)) or "all hosts ready" not in self._log(pod):
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{name}: its launcher never had every host ready")
                time.sleep(1)
            found = [Start(FLOOR, workers, self._floor(pod, f"{name}-{run}")) for run in range(repeats)]
        finally:
            self._delete("distributedtraining", name)
        return found

    def _floor(self, pod: str, run: str) -> dict[str, float]:
        """One start of the program in launcher pod `pod`, through `kubectl exec`; its phases' seconds. The run has a
        HOME of its own: the entrypoint rewrites the ssh files in HOME, and the pod's own mpirun, still starting its
        ssh sessions, could read a half-written key, fail, and end the container with the run in it (exit 137)."""
        folder = f"/tmp/{run}"  # its checkpoints, and what names its mpirun for pkill
        argv = ["env", f"HOME={folder}-home", ENTRYPOINT, *self.template["spec"]["command"], "--checkpoint-dir", folder]
        log_path = self.workdir / f"{run}.log"
        exec_argv = [self.kubectl_binary, "exec", pod, "--namespace", NAMESPACE, "--container=launcher", "--", *argv]
        with log_path.open("w") as log:
            started_wall = time.time()
            process = subprocess.Popen(exec_argv, stdout=log, stderr=subprocess.STDOUT, env=self.env)
        try:
            deadline = time.monotonic() + START_TIMEOUT
            while "first step" not in (seconds := log_phases(log_path.read_text(errors="replace"), started_wall)):
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"the floor's run {shlex.join(argv)} ended (exit {process.poll()}) before "
                                       f"its first step:\n{log_path.read_text(errors='replace')[-3000:]}")
                time.sleep(0.5)
        finally:
            self.kubectl_result("exec", pod, "--namespace", NAMESPACE, "--container=launcher", "--",
                                "pkill", "-f", folder)
            try:
                process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        LOG.info("%s: %s", run, ", ".join(f"{phase} {value:.1f}" for phase, value in seconds.items()))
        return seconds

    def pull_everywhere(self) -> None:
        """The job's image and the operator's entrypoints image on every node (one pod per node, run to its end),
        so that no measured start waits for a pull."""
        deployment = json.loads(self.kubectl("get", "deployments", "--all-namespaces", "--selector",
                                             "app.kubernetes.io/name=kubetrain", "--output=json"))
        images = [(self.template["spec"]["image"], ["true"])]
        images += [(env["value"], ["/bin/busybox", "true"]) for item in deployment["items"]
                   for container in item["spec"]["template"]["spec"]["containers"]
                   for env in container.get("env") or [] if env["name"] == "KUBETRAIN_ENTRYPOINTS_IMAGE"]
        nodes = self.kubectl("get", "nodes", "--output=jsonpath={.items[*].metadata.name}").split()
        names = [f"fs-pull-{index}" for index in range(len(nodes))]
        pods = [{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": pod, "namespace": NAMESPACE},
                 "spec": {"nodeName": node, "restartPolicy": "Never", "containers": [
                     {"name": f"image-{index}", "image": image, "imagePullPolicy": "IfNotPresent",
                      "command": command} for index, (image, command) in enumerate(images)]}}
                for pod, node in zip(names, nodes, strict=True)]
        self.kubectl("apply", "--filename=-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": pods}))
        try:
            self.kubectl("wait", "--for=jsonpath={.status.phase}=Succeeded", "--namespace", NAMESPACE,
                         *(f"pod/{pod}" for pod in names), "--timeout=900s", timeout=920)
        finally:
            self.kubectl("delete", "pod", *names, "--namespace", NAMESPACE, "--wait=false", "--ignore-not-found")

    def measure(self, sizes: Sizes) -> list[Start]:
        """Warm-up starts if asked, then `repeats` rounds of kubetrain and mpi-operator interleaved, for each
        worker count, then the floors."""
        self.start_peer()
        self.pull_everywhere()
        starts: list[Start] = []
        if sizes.warm_up:
            for contender in (KUBETRAIN, PEER):
                self.start(contender, min(sizes.workers), "warm")
        for run in range(sizes.repeats):
            for workers in sizes.workers:
                order = (KUBETRAIN, PEER) if run % 2 == 0 else (PEER, KUBETRAIN)
                starts += [self.start(contender, workers, str(run)) for contender in order]
        for workers in sizes.workers:
            starts += self.floors(workers, sizes.repeats)
        return starts


def bench_rows(bench: FirstStepBench, sizes: Sizes) -> list[Row]:
    try:
        return rows(bench.measure(sizes))
    finally:
        bench.stop()


def main(argv: Sequence[str] | None = None) -> int:
    from tests.bench.run import load_average
    from tests.support.documented import REPO, section_commands
    from tests.support.kind_cluster import missing_prerequisite, running, settings_from_environment
    from tests.support.kind_manifests import QUICK_START_JOB

    parser = argparse.ArgumentParser(prog="python -m tests.bench.first_step_kind", description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", choices=sorted(SIZES), default="full")
    parser.add_argument("--results", type=Path, default=RESULTS, help=f"output directory (default: {RESULTS})")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    artifacts = Path(tempfile.mkdtemp(prefix="kubetrain-first-step-"))
    settings = settings_from_environment(artifacts)
    reason = missing_prerequisite(settings)
    if reason:
        print(f"cannot run: {reason}", file=sys.stderr)
        return 2
    started, load_at_start = time.monotonic(), load_average()
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                            cwd=REPO).stdout.strip()
    with running(settings) as cluster:
        cluster.run_documented(section_commands(REPO / "README.md", "Quick start on kind"))
        cluster.use_every_node()
        bench = FirstStepBench(cluster, QUICK_START_JOB, artifacts)
        found = bench_rows(bench, SIZES[args.size])
    meta = {"size": args.size, "command": f"python -m tests.bench.first_step_kind --size {args.size}",
            "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "commit": commit, "load average at start": load_at_start, "load average at end": load_average(),
            "seconds": f"{time.monotonic() - started:.0f}", "artifacts": str(artifacts)}
    json_path, markdown_path = write_results(args.results, found, meta)
    print(format_text(found))
    print(f"\nwrote {json_path} and {markdown_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
