"""A kind cluster for the end-to-end tests, as a user would set one up: one control plane and worker nodes that all
mount one host directory (the PersistentVolumes live there), kubetrain's images built with Docker and loaded with
`kind load docker-image`, the chart installed with helm; kubectl and helm wrappers; a dump of everything for when a
test fails.

    settings = settings_from_environment(artifacts)
    with running(settings) as cluster:
        cluster.install_operator()
        cluster.kubectl("get", "pods", "--all-namespaces")

The environment chooses (default in brackets):
  KUBETRAIN_KIND_CLUSTER [kubetrain-e2e]  the cluster's name; a cluster of that name is deleted first
  KUBETRAIN_KIND_NODE_IMAGE               the node image [the one tests/e2e/kind-node/build.sh made here, with its
                                          kind; else kind's default]
  KUBETRAIN_KIND_CNI [default]            default: kind's own CNI; plain: tests/e2e/kind-node/cni.sh (node images
                                          without kindnetd, as the one built here)
  KUBETRAIN_KIND_WORKERS [1]              worker nodes besides the control plane
  KUBETRAIN_E2E_KEEP [0]                  1: keep the cluster afterwards (kubeconfig in the artifacts directory)
  KUBETRAIN_E2E_EPOCHS [6]                epochs the cifar_mixup job trains (enough to learn the digits)
  KUBETRAIN_E2E_TIMEOUT [1200]            seconds a training may take to succeed
  KUBETRAIN_E2E_ARTIFACTS [a temporary directory]  kubeconfig, the jobs as applied, the volumes, failure dumps
  KUBETRAIN_E2E_SKIP_BUILD [build the missing images]  1: use the images in Docker as they are; 0: build them all
  DOCKER, KIND, HELM, KUBECTL             the binaries [helm, kubectl and kind from ~/.cache/kubetrain/bin, else PATH]
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import yaml

from kubetrain.contract import GROUP, PLURAL
from tests.images.byo.tags import byo_image
from tests.support.cluster import KubectlError
from tests.support.kind_manifests import VOLUME_DIRECTORIES, cluster_config, shared_volume
from tests.support.programs import REPO, image_name

LOG = logging.getLogger("kubetrain.e2e")
CACHE_BIN = Path(os.environ.get("KUBETRAIN_CACHE", Path.home() / ".cache" / "kubetrain")) / "bin"
NODE_BUILD = REPO / "tests" / "e2e" / "kind-node" / "build.sh"
PLAIN_CNI = REPO / "tests" / "e2e" / "kind-node" / "cni.sh"
IMAGES_BUILD = REPO / "images" / "build.sh"
OWN_IMAGES_BUILD = REPO / "tests" / "images" / "byo" / "build.sh"
CHART = REPO / "charts" / "kubetrain"
RELEASE = "kubetrain"
SYSTEM_NAMESPACE = "kubetrain-system"
NAMESPACE = "kubetrain-e2e"  # where the tests' jobs and volumes live
CRD = f"{PLURAL}.{GROUP}"
OPERATOR_SELECTOR = f"app.kubernetes.io/instance={RELEASE}"
BUILT_IMAGES = ("base", "operator", "entrypoints", "cifar_mixup")  # images/ directories
JOB_IMAGE = image_name("cifar_mixup")
OWN_IMAGE = byo_image("mpich")  # a user's own image: not FROM kubetrain/base
LOADED_IMAGES = (image_name("operator"), image_name("entrypoints"), JOB_IMAGE, OWN_IMAGE)
T = TypeVar("T")


class HarnessError(RuntimeError):
    """A command that sets the cluster up failed; the message has its output."""


def poll(check: Callable[[], T | None], timeout: float, waiting_for: str, seen: Callable[[], str],
         interval: float = 2.0) -> T:
    """`check()`'s first value other than None; fails naming `waiting_for` and what is `seen` after `timeout` s."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value is not None:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"waited {timeout:.0f} s for {waiting_for}; {seen()}")
        time.sleep(interval)


def tool(name: str, environ: Mapping[str, str]) -> str:
    """The binary `name`: $NAME if set, else .ci/setup's copy in the kubetrain cache, else `name` on PATH."""
    cached = CACHE_BIN / name
    return environ.get(name.upper(), str(cached) if os.access(cached, os.X_OK) else name)


def docker_has(docker: str, image: str) -> bool:
    return subprocess.run([docker, "image", "inspect", image], capture_output=True).returncode == 0


@dataclass(frozen=True)
class Settings:
    """What the environment chooses: see the module's docstring."""

    cluster: str
    node_image: str
    cni: str
    worker_nodes: int
    keep: bool
    epochs: int
    timeout: float
    artifacts: Path
    skip_build: str
    docker: str
    kind: str
    helm: str
    kubectl: str


def local_node(docker: str) -> dict[str, str]:
    """kind, the node image and the CNI tests/e2e/kind-node/build.sh made on this machine, when both exist."""
    printed = subprocess.run(["bash", str(NODE_BUILD), "--print-env"], capture_output=True, text=True, check=True)
    built = dict(line.split("=", 1) for line in printed.stdout.split())
    usable = os.access(built["KIND"], os.X_OK) and docker_has(docker, built["KUBETRAIN_KIND_NODE_IMAGE"])
    return built if usable else {}


def settings_from_environment(artifacts: Path, environ: Mapping[str, str] = os.environ) -> Settings:
    """The settings of this run; `artifacts` unless KUBETRAIN_E2E_ARTIFACTS names another directory."""
    docker = environ.get("DOCKER", "docker")
    found = dict(environ)
    if "KUBETRAIN_KIND_NODE_IMAGE" not in environ and shutil.which(docker):
        found.update(local_node(docker))
    return Settings(
        cluster=found.get("KUBETRAIN_KIND_CLUSTER", "kubetrain-e2e"),
        node_image=found.get("KUBETRAIN_KIND_NODE_IMAGE", ""),
        cni=found.get("KUBETRAIN_KIND_CNI", "default"),
        worker_nodes=int(found.get("KUBETRAIN_KIND_WORKERS", "1")),
        keep=found.get("KUBETRAIN_E2E_KEEP", "0") == "1",
        epochs=int(found.get("KUBETRAIN_E2E_EPOCHS", "6")),
        timeout=float(found.get("KUBETRAIN_E2E_TIMEOUT", "1200")),
        artifacts=Path(found.get("KUBETRAIN_E2E_ARTIFACTS", artifacts)),
        skip_build=found.get("KUBETRAIN_E2E_SKIP_BUILD", ""),
        docker=docker,
        kind=tool("kind", found),
        helm=tool("helm", found),
        kubectl=tool("kubectl", found),
    )


def missing_prerequisite(settings: Settings) -> str | None:
    """Why a kind cluster cannot run here, or None when Docker and kind both work."""
    if shutil.which(settings.docker) is None:
        return f"Docker is not installed ({settings.docker} not on PATH)"
    info = subprocess.run([settings.docker, "info"], capture_output=True, text=True, timeout=60)
    if info.returncode != 0:
        reason = (info.stderr.strip().splitlines() or ["no output"])[-1]
        return f"the Docker engine is not reachable (docker info: {reason}); .ci/docker-engine starts one"
    if shutil.which(settings.kind) is None:
        return f"kind is not installed ({settings.kind} not on PATH); tests/e2e/kind-node/build.sh builds it"
    version = subprocess.run([settings.kind, "version"], capture_output=True, text=True, timeout=60)
    if version.returncode != 0:
        return f"kind does not run (kind version: {version.stderr.strip()})"
    return None


def build_images(settings: Settings) -> None:
    """The images the cluster loads, built by images/build.sh and tests/images/byo/build.sh: the missing ones, all of
    them with KUBETRAIN_E2E_SKIP_BUILD=0, none with 1."""
    if settings.skip_build == "1":
        wanted: Sequence[str] = ()
    elif settings.skip_build == "0":
        wanted = BUILT_IMAGES
    else:
        wanted = [name for name in BUILT_IMAGES if not docker_has(settings.docker, image_name(name))]
    if wanted:
        LOG.info("building %s with images/build.sh", ", ".join(wanted))
        run([str(IMAGES_BUILD), *wanted], timeout=3 * 3600)
    if not docker_has(settings.docker, OWN_IMAGE):
        LOG.info("building %s (a user's own image) with tests/images/byo/build.sh", OWN_IMAGE)
        run([str(OWN_IMAGES_BUILD)], timeout=3600)


def run(command: Sequence[str], timeout: float, env: Mapping[str, str] | None = None,
        input: str | None = None) -> str:
    """Runs `command` and returns its stdout; raises HarnessError with its output when it fails."""
    result = subprocess.run(list(command), capture_output=True, text=True, timeout=timeout, env=env, input=input)
    if result.returncode != 0:
        output = (result.stdout + result.stderr)[-6000:]
        raise HarnessError(f"{' '.join(command)} exited {result.returncode}:\n{output}")
    return result.stdout


class KindCluster:
    """A kind cluster named by the settings, driven as its admin (the kubeconfig in the artifacts directory)."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.kubeconfig = settings.artifacts / "kubeconfig"
        self.volumes = settings.artifacts / "volumes"

    def env(self) -> dict[str, str]:
        """The environment of the tools: this cluster's kubeconfig, and the binaries cni.sh calls."""
        s = self.settings
        return {**os.environ, "KUBECONFIG": str(self.kubeconfig), "DOCKER": s.docker, "KIND": s.kind,
                "KUBECTL": s.kubectl}

    def kubectl_result(self, *args: str, input: str | None = None,
                       timeout: float = 120) -> subprocess.CompletedProcess[str]:
        command = [self.settings.kubectl, *args]
        return subprocess.run(command, input=input, capture_output=True, text=True, timeout=timeout, env=self.env())

    def kubectl(self, *args: str, input: str | None = None, timeout: float = 120) -> str:
        """kubectl's stdout; raises KubectlError when it fails."""
        result = self.kubectl_result(*args, input=input, timeout=timeout)
        if result.returncode != 0:
            raise KubectlError(args, result.returncode, result.stderr)
        return result.stdout

    def helm(self, *args: str, timeout: float = 300) -> str:
        return run([self.settings.helm, *args], timeout, env=self.env())

    def get(self, kind: str, name: str, namespace: str = NAMESPACE) -> dict[str, Any]:
        return json.loads(self.kubectl("get", kind, name, "--namespace", namespace, "--output=json"))

    def apply(self, *manifests: dict[str, Any], namespace: str = NAMESPACE) -> str:
        documents = {"apiVersion": "v1", "kind": "List", "items": list(manifests)}
        return self.kubectl("apply", "--namespace", namespace, "--filename=-", input=json.dumps(documents))

    def create(self) -> None:
        """A new cluster (one of the same name is deleted first), its nodes Ready and schedulable, DNS running."""
        s = self.settings
        if s.cluster in run([s.kind, "get", "clusters"], 60).split():
            LOG.info("deleting the existing kind cluster %s", s.cluster)
            self.delete()
        for directory in VOLUME_DIRECTORIES.values():
            (self.volumes / directory).mkdir(parents=True, exist_ok=True)
            (self.volumes / directory).chmod(0o777)  # hostPath volumes ignore fsGroup; the images run as uid 1000
        config = s.artifacts / "kind.yaml"
        config.write_text(yaml.safe_dump(cluster_config(self.volumes, s.worker_nodes, s.cni == "plain")))
        command = [s.kind, "create", "cluster", "--name", s.cluster, "--kubeconfig", str(self.kubeconfig),
                   "--config", str(config), *(["--image", s.node_image] if s.node_image else [])]
        LOG.info("creating kind cluster %s: 1 control plane + %d worker(s), image %s", s.cluster, s.worker_nodes,
                 s.node_image or "of kind by default")
        if s.cni == "plain":
            run(command, 600, env=self.env())
            run([str(PLAIN_CNI), s.cluster], 300, env=self.env())
        else:
            run([*command, "--wait", "180s"], 600, env=self.env())
        self.kubectl("wait", "--for=condition=Ready", "nodes", "--all", "--timeout=300s", timeout=320)
        # Training pods may use every node, the control plane's too (as on a one-node cluster).
        self.kubectl_result("taint", "nodes", "--all", "node-role.kubernetes.io/control-plane:NoSchedule-")
        self.kubectl("rollout", "status", "deployment/coredns", "--namespace", "kube-system", "--timeout=300s",
                     timeout=320)

    def load_images(self) -> None:
        LOG.info("loading %s into %s", ", ".join(LOADED_IMAGES), self.settings.cluster)
        run([self.settings.kind, "load", "docker-image", "--name", self.settings.cluster, *LOADED_IMAGES], 1800,
            env=self.env())

    def delete(self) -> None:
        run([self.settings.kind, "delete", "cluster", "--name", self.settings.cluster], 300, env=self.env())

    def install_operator(self) -> None:
        """`helm install` of the chart with the loaded operator image; returns once the operator pod is Ready."""
        LOG.info("helm install %s into %s", RELEASE, SYSTEM_NAMESPACE)
        self.helm("install", RELEASE, str(CHART), "--namespace", SYSTEM_NAMESPACE, "--create-namespace",
                  "--set", "image.pullPolicy=IfNotPresent")
        poll(lambda: self.crd_established() or None, 60, f"the CRD {CRD} to be Established",
             lambda: self.kubectl_result("get", "crd", CRD, "--output=yaml").stdout, interval=1.0)
        self.kubectl("rollout", "status", f"deployment/{RELEASE}", "--namespace", SYSTEM_NAMESPACE,
                     "--timeout=300s", timeout=320)
        self.kubectl("wait", "--for=condition=Ready", "pod", f"--selector={OPERATOR_SELECTOR}",
                     "--namespace", SYSTEM_NAMESPACE, "--timeout=120s", timeout=140)

    def crd_established(self) -> bool:
        found = self.kubectl_result("get", "crd", CRD, "--output=json")
        if found.returncode != 0:
            return False
        conditions = (json.loads(found.stdout).get("status") or {}).get("conditions") or []
        return any(c.get("type") == "Established" and c.get("status") == "True" for c in conditions)

    def operator_pods_ready(self) -> bool:
        pods = json.loads(self.kubectl("get", "pods", f"--selector={OPERATOR_SELECTOR}", "--namespace",
                                       SYSTEM_NAMESPACE, "--output=json"))["items"]
        return bool(pods) and all(condition.get("status") == "True" for pod in pods
                                  for condition in pod["status"].get("conditions") or []
                                  if condition.get("type") == "Ready")

    def create_volumes(self) -> None:
        """The namespace NAMESPACE and the claims of the data and checkpoint volumes in it."""
        LOG.info("creating namespace %s and the claims %s", NAMESPACE, ", ".join(VOLUME_DIRECTORIES))
        self.kubectl("create", "namespace", NAMESPACE)
        self.apply(*(manifest for claim in VOLUME_DIRECTORIES for manifest in shared_volume(NAMESPACE, claim)))

    def run_job(self, manifest: dict[str, Any], timeout: float = 600) -> str:
        """Runs a batch Job of one pod in NAMESPACE to its end and returns its log; fails with the log if it fails."""
        name = manifest["metadata"]["name"]
        self.apply(manifest)

        def log() -> str:
            return self.kubectl_result("logs", f"job/{name}", "--namespace", NAMESPACE).stdout

        def succeeded() -> bool | None:
            status = self.get("job", name).get("status") or {}
            if status.get("failed", 0) >= 1:
                raise AssertionError(f"Job {name} failed; its log:\n{log()}")
            return True if status.get("succeeded", 0) >= 1 else None

        poll(succeeded, timeout, f"Job {name} to succeed", lambda: f"its log:\n{log()}", interval=3.0)
        return self.kubectl("logs", f"job/{name}", "--namespace", NAMESPACE)

    def operator_log(self, lines: int = 60) -> str:
        """The last lines of the operator's log, without its health probes' requests."""
        found = self.kubectl_result("logs", f"deployment/{RELEASE}", "--namespace", SYSTEM_NAMESPACE, "--tail=1000")
        kept = [line for line in found.stdout.splitlines() if "GET /healthz" not in line]
        return "\n".join(kept[-lines:]) + found.stderr

    def release_leftovers(self) -> list[str]:
        """What is left of the release: anything in its namespace but what every namespace has, and any cluster role,
        binding, admission policy or webhook configuration named kubetrain."""
        kinds = [kind for kind in self.kubectl("api-resources", "--verbs=list", "--namespaced", "--output=name").split()
                 if not kind.startswith("events")]
        found = self.kubectl_result("get", ",".join(kinds), "--namespace", SYSTEM_NAMESPACE, "--output=name").stdout
        cluster_wide = self.kubectl("get", "clusterroles,clusterrolebindings,validatingwebhookconfigurations,"
                                    "mutatingwebhookconfigurations,validatingadmissionpolicies,"
                                    "validatingadmissionpolicybindings", "--output=name")
        every_namespace = {"configmap/kube-root-ca.crt", "serviceaccount/default"}
        return [name for name in found.split() if name not in every_namespace] + \
            [name for name in cluster_wide.split() if "kubetrain" in name]

    def dump(self, path: Path) -> None:
        """Nodes, pods, events, DistributedTrainings and every container's log, written to `path`."""
        path.write_text(self.dump_text())
        LOG.info("cluster state dumped to %s", path)

    def dump_text(self) -> str:
        parts = [self._section("nodes", "get", "nodes", "--output=wide"),
                 self._section("pods", "get", "pods", "--all-namespaces", "--output=wide")]
        for namespace in (SYSTEM_NAMESPACE, NAMESPACE):
            scope = ("--namespace", namespace)
            parts += [
                self._section(f"namespace {namespace}: objects", "get", "distributedtrainings,pods,jobs,services,pvc",
                              *scope, "--output=wide"),
                self._section(f"namespace {namespace}: events", "get", "events", *scope, "--sort-by=.lastTimestamp"),
                self._section(f"namespace {namespace}: DistributedTrainings", "describe", "distributedtrainings",
                              *scope),
                self._section(f"namespace {namespace}: pods", "describe", "pods", *scope),
                *(self._logs(namespace, pod, container) for pod, container in self._containers(namespace)),
            ]
        return "\n".join(parts)

    def _section(self, title: str, *args: str) -> str:
        result = self.kubectl_result(*args)
        return f"===== {title}\n{result.stdout}{result.stderr}"

    def _containers(self, namespace: str) -> list[tuple[str, str]]:
        found = self.kubectl_result("get", "pods", "--namespace", namespace, "--output=json")
        pods = json.loads(found.stdout)["items"] if found.returncode == 0 else []
        return [(pod["metadata"]["name"], container["name"]) for pod in pods for container in pod["spec"]["containers"]]

    def _logs(self, namespace: str, pod: str, container: str) -> str:
        scope = ("--namespace", namespace, "--container", container)
        current = self.kubectl_result("logs", pod, *scope, "--tail=300")
        previous = self.kubectl_result("logs", pod, *scope, "--previous", "--tail=100")
        return (f"===== logs {namespace}/{pod}/{container}\n{current.stdout}{current.stderr}"
                + (previous.stdout if previous.returncode == 0 else ""))


@contextmanager
def running(settings: Settings) -> Iterator[KindCluster]:
    """A new cluster with the images loaded; deleted at the end unless the settings keep it. A failed start leaves a
    dump in the artifacts directory when the cluster answers."""
    settings.artifacts.mkdir(parents=True, exist_ok=True)
    cluster = KindCluster(settings)
    LOG.info("artifacts in %s", settings.artifacts)
    started = False
    try:
        build_images(settings)
        cluster.create()
        cluster.load_images()
        started = True
        yield cluster
    finally:
        if not started and cluster.kubeconfig.exists():
            cluster.dump(settings.artifacts / "dump-start.txt")
        _stop(cluster)


def _stop(cluster: KindCluster) -> None:
    if cluster.settings.keep:
        LOG.info("keeping cluster %s (KUBECONFIG=%s)", cluster.settings.cluster, cluster.kubeconfig)
        return
    cluster.delete()
    shutil.rmtree(cluster.volumes, ignore_errors=True)
