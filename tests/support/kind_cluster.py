"""A kind cluster for the end-to-end tests, set up as the README's kind quick start says, by running its commands as
written from the repository's root: the cluster of examples/kind/cluster.yaml (two nodes sharing ./kubetrain-volumes),
a local registry at localhost:5001, kubetrain's images built and pushed there, the chart, the volumes, a job, its
curve. kubectl and helm wrappers; a dump of everything for when a test fails.

    settings = settings_from_environment(artifacts)
    with running(settings) as cluster:
        cluster.run_documented(section_commands(README, "Quick start on kind"))
        cluster.kubectl("get", "pods", "--all-namespaces")

What this machine changes, and nothing else: the cluster's name (KIND_CLUSTER_NAME, which kind and registry.sh read),
its kubeconfig (KUBECONFIG, in the artifacts directory), the binaries (first on PATH), the registry's image
(REGISTRY_IMAGE: tests/e2e/registry, Debian's build of the same registry, where registry:2 cannot be pulled), where
the registry keeps its images (REGISTRY_DATA: ~/.cache/kubetrain/kind-registry, so a warm run pushes only the layers
that changed) and, when
the node image is the one built here, `kind create cluster` gets `--image` and a copy of the config without kind's
default CNI, which that image lacks (tests/e2e/kind-node/cni.sh sets up the pod network instead). The harness owns
the cluster of its name, the `kind-registry` container, ./kubetrain-volumes and ./history.png: it removes them before
and after (KUBETRAIN_E2E_KEEP=1 keeps them afterwards).

The environment chooses (default in brackets):
  KUBETRAIN_KIND_CLUSTER [kubetrain-e2e]  the cluster's name; a cluster of that name is deleted first
  KUBETRAIN_KIND_NODE_IMAGE               the node image [the one tests/e2e/kind-node/build.sh made here, with its
                                          kind; else kind's default]
  KUBETRAIN_KIND_CNI [default]            default: kind's own CNI; plain: tests/e2e/kind-node/cni.sh (node images
                                          without kindnetd, as the one built here)
  KUBETRAIN_E2E_KEEP [0]                  1: keep the cluster afterwards (kubeconfig in the artifacts directory)
  KUBETRAIN_E2E_EPOCHS [6]                epochs the scenarios' cifar_mixup jobs train (enough to learn the digits)
  KUBETRAIN_E2E_TIMEOUT [1200]            seconds a training may take to succeed
  KUBETRAIN_E2E_ARTIFACTS [a temporary directory]  kubeconfig, the jobs as applied, the commands' output, dumps
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
from tests.support.kind_manifests import cluster_config, job_image
from tests.support.programs import REPO

LOG = logging.getLogger("kubetrain.e2e")
CACHE = Path(os.environ.get("KUBETRAIN_CACHE", Path.home() / ".cache" / "kubetrain"))
CACHE_BIN = CACHE / "bin"
REGISTRY_DATA = CACHE / "kind-registry"  # the registry's images, kept between runs as the other builds are
NODE_BUILD = REPO / "tests" / "e2e" / "kind-node" / "build.sh"
PLAIN_CNI = REPO / "tests" / "e2e" / "kind-node" / "cni.sh"
OWN_IMAGES_BUILD = REPO / "tests" / "images" / "byo" / "build.sh"
REGISTRY_BUILD = REPO / "tests" / "e2e" / "registry" / "build.sh"
CHART = REPO / "charts" / "kubetrain"
RELEASE = "kubetrain"
SYSTEM_NAMESPACE = "kubetrain-system"
NAMESPACE = "default"  # where the quick start's volumes and jobs live, and the tests' jobs
CRD = f"{PLURAL}.{GROUP}"
OPERATOR_SELECTOR = f"app.kubernetes.io/instance={RELEASE}"
JOB_IMAGE = job_image()  # examples/kind/cifar-mixup.yaml's: pushed by the quick start
REGISTRY = JOB_IMAGE.split("/", 1)[0]  # localhost:5001 (examples/kind/registry.sh)
REGISTRY_CONTAINER = "kind-registry"
OWN_IMAGE = byo_image("mpich")  # a user's own image: not FROM kubetrain/base; pushed to REGISTRY by the harness
VOLUMES = REPO / "kubetrain-volumes"  # examples/kind/cluster.yaml's ./kubetrain-volumes, from the repository's root
CURVE = REPO / "history.png"  # where the quick start's `kubectl cp` puts the curve
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
    keep: bool
    epochs: int
    timeout: float
    artifacts: Path
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
        keep=found.get("KUBETRAIN_E2E_KEEP", "0") == "1",
        epochs=int(found.get("KUBETRAIN_E2E_EPOCHS", "6")),
        timeout=float(found.get("KUBETRAIN_E2E_TIMEOUT", "1200")),
        artifacts=Path(found.get("KUBETRAIN_E2E_ARTIFACTS", artifacts)),
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


def build_test_images(settings: Settings) -> str:
    """The images only the tests need: a user's own image (tests/images/byo/build.sh, when missing) and the
    registry's (tests/e2e/registry/build.sh). Returns the registry's image. kubetrain's images are the quick start's
    to build."""
    if not docker_has(settings.docker, OWN_IMAGE):
        LOG.info("building %s (a user's own image) with tests/images/byo/build.sh", OWN_IMAGE)
        run([str(OWN_IMAGES_BUILD)], timeout=3600)
    return run([str(REGISTRY_BUILD)], timeout=1800).strip().splitlines()[-1]


def run(command: Sequence[str], timeout: float, env: Mapping[str, str] | None = None,
        input: str | None = None, cwd: Path | None = None) -> str:
    """Runs `command` and returns its stdout; raises HarnessError with its output when it fails."""
    result = subprocess.run(list(command), capture_output=True, text=True, timeout=timeout, env=env, input=input,
                            cwd=cwd)
    if result.returncode != 0:
        output = (result.stdout + result.stderr)[-6000:]
        raise HarnessError(f"{' '.join(command)} exited {result.returncode}:\n{output}")
    return result.stdout


class KindCluster:
    """A kind cluster named by the settings, driven as its admin (the kubeconfig in the artifacts directory)."""

    def __init__(self, settings: Settings, registry_image: str = "") -> None:
        self.settings = settings
        self.kubeconfig = settings.artifacts / "kubeconfig"
        self.registry_image = registry_image
        self.bin = settings.artifacts / "bin"  # kind, helm, kubectl and docker as the settings name them
        self.bin.mkdir(parents=True, exist_ok=True)
        for name, binary in (("kind", settings.kind), ("helm", settings.helm), ("kubectl", settings.kubectl),
                             ("docker", settings.docker)):
            link, found = self.bin / name, shutil.which(binary)
            if found and not link.exists():
                link.symlink_to(found)

    def env(self) -> dict[str, str]:
        """The environment of the tools and of the quick start's commands: this cluster's name and kubeconfig, the
        registry's image and data, the binaries first on PATH (and named for cni.sh and registry.sh)."""
        s = self.settings
        return {**os.environ, "KUBECONFIG": str(self.kubeconfig), "KIND_CLUSTER_NAME": s.cluster,
                "PATH": f"{self.bin}{os.pathsep}{os.environ.get('PATH', '')}", "DOCKER": s.docker, "KIND": s.kind,
                "KUBECTL": s.kubectl, "REGISTRY_DATA": str(REGISTRY_DATA),
                **({"REGISTRY_IMAGE": self.registry_image} if self.registry_image else {})}

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

    def run_documented(self, commands: Sequence[str], after: Callable[[str], None] = lambda command: None,
                       timeout: float = 3600) -> dict[str, str]:
        """Runs each command line with bash from the repository's root, as a user pastes them, and returns each one's
        output; raises HarnessError naming the first that fails. `kind create cluster` runs as this machine needs
        (see the module's docstring). `after(command)` runs after each command."""
        outputs: dict[str, str] = {}
        for command in commands:
            LOG.info("$ %s", command)
            started = time.monotonic()
            if command.startswith("kind create cluster"):
                outputs[command] = self._create(command)
            else:
                outputs[command] = run(["bash", "-c", command], timeout, env=self.env(), cwd=REPO)
            seconds = time.monotonic() - started
            LOG.info("done in %.0f s", seconds)
            with (self.settings.artifacts / "commands.log").open("a") as log:
                log.write(f"$ {command}   # {seconds:.0f} s\n{outputs[command]}\n")
            after(command)
        return outputs

    def _create(self, command: str) -> str:
        """The quick start's `kind create cluster --config examples/kind/cluster.yaml`, with this machine's node image
        and pod network when it built its own; then every node Ready."""
        s = self.settings
        words = command.split()
        if s.cni == "plain":
            config = s.artifacts / "kind.yaml"
            config.write_text(yaml.safe_dump(cluster_config(plain_cni=True)))
            words[words.index("--config") + 1] = str(config)
        if s.node_image:
            words += ["--image", s.node_image]
        LOG.info("creating kind cluster %s from %s", s.cluster, " ".join(words[3:]))
        output = run(words, 600, env=self.env(), cwd=REPO)
        if s.cni == "plain":
            output += run([str(PLAIN_CNI), s.cluster], 300, env=self.env())
        self.kubectl("wait", "--for=condition=Ready", "nodes", "--all", "--timeout=300s", timeout=320)
        return output

    def use_every_node(self) -> None:
        """Lets the tests' pods run on the control plane's node too (as on a one-node cluster), so that a job's pods
        spread over both nodes."""
        self.kubectl_result("taint", "nodes", "--all", "node-role.kubernetes.io/control-plane:NoSchedule-")

    def push(self, image: str) -> str:
        """`image` of the local engine, tagged and pushed to the quick start's registry; returns its new name."""
        pushed = f"{REGISTRY}/{image}"
        run([self.settings.docker, "tag", image, pushed], 60)
        run([self.settings.docker, "push", pushed], 1800)
        return pushed

    def delete(self) -> None:
        """The cluster, the registry container, ./kubetrain-volumes and ./history.png, where they exist."""
        s = self.settings
        started = time.monotonic()
        if s.cluster in run([s.kind, "get", "clusters"], 60).split():
            run([s.kind, "delete", "cluster", "--name", s.cluster], 300, env=self.env())
            LOG.info("kind delete cluster %s: %.0f s", s.cluster, time.monotonic() - started)
        started = time.monotonic()
        if subprocess.run([s.docker, "rm", "--force", REGISTRY_CONTAINER], capture_output=True,
                          timeout=300).returncode == 0:
            LOG.info("docker rm %s: %.0f s", REGISTRY_CONTAINER, time.monotonic() - started)
        shutil.rmtree(VOLUMES, ignore_errors=True)
        if VOLUMES.exists():
            LOG.warning("could not remove all of %s (files of the pods' user, uid 1000)", VOLUMES)
        CURVE.unlink(missing_ok=True)

    def crd_established(self) -> bool:
        found = self.kubectl_result("get", "crd", CRD, "--output=json")
        if found.returncode != 0:
            return False
        conditions = (json.loads(found.stdout).get("status") or {}).get("conditions") or []
        return any(c.get("type") == "Established" and c.get("status") == "True" for c in conditions)

    def operator_pods(self) -> list[dict[str, Any]]:
        """The operator's pods, but those being deleted (a rollout's old ones)."""
        pods = json.loads(self.kubectl("get", "pods", f"--selector={OPERATOR_SELECTOR}", "--namespace",
                                       SYSTEM_NAMESPACE, "--output=json"))["items"]
        return [pod for pod in pods if not pod["metadata"].get("deletionTimestamp")]

    def operator_pods_ready(self) -> bool:
        pods = self.operator_pods()
        return bool(pods) and all(condition.get("status") == "True" for pod in pods
                                  for condition in pod["status"].get("conditions") or []
                                  if condition.get("type") == "Ready")

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
    """The tests' images built and whatever an earlier run left removed; the cluster is the caller's to create
    (run_documented). Everything is removed at the end unless the settings keep it."""
    settings.artifacts.mkdir(parents=True, exist_ok=True)
    LOG.info("artifacts in %s", settings.artifacts)
    cluster = KindCluster(settings, build_test_images(settings))
    cluster.delete()
    try:
        yield cluster
    finally:
        if settings.keep:
            LOG.info("keeping cluster %s (KUBECONFIG=%s)", settings.cluster, cluster.kubeconfig)
        else:
            cluster.delete()
