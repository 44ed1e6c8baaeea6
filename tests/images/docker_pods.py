"""Run the operator's pod objects as Docker containers, doing what kubelet does for them.

One user-defined Docker network per job stands in for the cluster network: each container gets the pod's hostname
and, as a network alias, the DNS name the operator's hostfile uses (`<name>-worker-<i>.<name>.<ns>.svc`), which
Docker's embedded DNS resolves like cluster DNS does. A pod's init containers run first, each to its end, sharing the
pod's emptyDir folders with the main container (the entrypoints the main container runs come from one). Volumes are
host folders laid out as kubelet lays them out (tests/support/pod_emulator.prepare_volume) and bind-mounted; the
container's user, groups, read-only root filesystem, dropped capabilities and no-new-privileges come from the pod's
securityContext. There is no API server here, so progress reporting is switched off (the kind tier covers it).
"""

from __future__ import annotations

import secrets
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kubetrain.api import Job, parse_job
from kubetrain.keys import generate_job_keys
from kubetrain.manifests.hosts import build_hosts_configmap
from kubetrain.manifests.launcher import build_launcher_job
from kubetrain.manifests.names import worker_hostname
from kubetrain.manifests.pods import build_worker_pod
from kubetrain.manifests.ssh import build_ssh_secret
from tests.support.pod_emulator import prepare_volume

NO_API_SERVER = {"KUBETRAIN_REPORT_STATUS": "0"}


def docker(*args: str, check: bool = True, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(["docker", *args], capture_output=True, text=True, timeout=timeout)
    if check and result.returncode != 0:
        raise RuntimeError(f"docker {' '.join(args)} failed ({result.returncode}): {result.stderr.strip()}")
    return result


@dataclass
class Container:
    """A started container: its Docker name and the pod it runs."""

    name: str
    pod: str

    def logs(self) -> str:
        result = docker("logs", self.name, check=False)
        return result.stdout + result.stderr

    def running(self) -> bool:
        return docker("inspect", "--format", "{{.State.Running}}", self.name).stdout.strip() == "true"

    def wait(self, timeout: float) -> int:
        return int(docker("wait", self.name, timeout=timeout).stdout.strip())

    def wait_for_log(self, pattern: str, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while pattern not in self.logs():
            assert self.running(), f"{self.pod} exited:\n{self.logs()}"
            assert time.monotonic() < deadline, f"{self.pod} never logged {pattern!r}:\n{self.logs()}"
            time.sleep(0.5)

    def kill(self) -> None:
        """SIGKILL to every process in the container, as when its node is lost."""
        docker("kill", self.name)


class DockerKubelet:
    """Starts pods built by kubetrain's builders as containers on one Docker network."""

    def __init__(self, root: Path, objects: Sequence[Mapping[str, Any]], claims: Mapping[str, Path]) -> None:
        self.id = secrets.token_hex(3)
        self.network = f"kubetrain-test-{self.id}"
        self.root = root
        self.objects = {(o["kind"], o["metadata"]["name"]): o for o in objects}
        self.claims = dict(claims)
        self.containers: list[Container] = []
        docker("network", "create", self.network)

    def start(self, pod: Mapping[str, Any], *, aliases: Sequence[str] = (), command: Sequence[str] | None = None,
              extra_env: Mapping[str, str] | None = None, dns: str | None = None) -> Container:
        """Start `pod` (a Pod, or a batch Job's pod template): its init containers one after the other, each to a
        successful end, then its first container; `command` replaces that container's command. `dns`: a DNS server
        for the names Docker's embedded DNS does not know."""
        spec = pod["spec"]["template"]["spec"] if pod["kind"] == "Job" else pod["spec"]
        name = f"{pod['metadata']['name']}-{self.id}-{len(self.containers)}"
        pod_dir = self.root / name
        volumes = {v["name"]: self._volume(v, pod_dir, spec) for v in spec.get("volumes", [])}
        for index, init in enumerate(spec.get("initContainers", [])):
            args = self._run_args(f"{name}-init-{index}", spec, init, volumes)
            argv = [*init["command"], *init.get("args", [])]
            result = docker("run", *args, "--entrypoint", argv[0], init["image"], *argv[1:], check=False, timeout=120)
            docker("rm", f"{name}-init-{index}", check=False)
            assert result.returncode == 0, f"init container {init['name']} failed: {result.stderr}"
        container = spec["containers"][0]
        args = ["--detach", *self._run_args(name, spec, container, volumes)]
        args += ["--hostname", spec.get("hostname", pod["metadata"]["name"])]
        args += [f"--network-alias={alias}" for alias in aliases]
        args += ["--dns", dns] if dns else []
        env = {entry["name"]: entry["value"] for entry in container.get("env", []) if "value" in entry}
        env.update({**NO_API_SERVER, **(extra_env or {})})
        for key, value in env.items():
            args += ["--env", f"{key}={value}"]
        argv = list(command if command is not None else [*container.get("command", []), *container.get("args", [])])
        docker("run", *args, "--entrypoint", argv[0], container["image"], *argv[1:])
        started = Container(name, pod["metadata"]["name"])
        self.containers.append(started)
        return started

    def _volume(self, volume: Mapping[str, Any], pod_dir: Path, spec: Mapping[str, Any]) -> Path | None:
        """The host folder backing a pod volume (None for a memory-backed emptyDir: a tmpfs per container)."""
        if volume.get("emptyDir", {}).get("medium") == "Memory":
            return None
        fs_group = spec.get("securityContext", {}).get("fsGroup")
        return prepare_volume(volume, pod_dir / volume["name"], self.objects, self.claims, fs_group)

    def _run_args(self, name: str, spec: Mapping[str, Any], container: Mapping[str, Any],
                  volumes: Mapping[str, Path | None]) -> list[str]:
        """`docker run` options for one container of a pod: network, user, security, mounts."""
        security = spec.get("securityContext", {})
        fs_group = security.get("fsGroup")
        args = ["--name", name, "--network", self.network]
        args += ["--user", f"{security.get('runAsUser', 0)}:{security.get('runAsGroup', 0)}"]
        args += ["--group-add", str(fs_group)] if fs_group is not None else []
        args += _container_security(container.get("securityContext", {}))
        sources = {v["name"]: v for v in spec.get("volumes", [])}
        for mount in container.get("volumeMounts", []):
            folder = volumes[mount["name"]]
            if folder is None:
                args += ["--tmpfs", f"{mount['mountPath']}:mode=1777"]
                continue
            source = sources[mount["name"]]
            read_only = mount.get("readOnly") or "secret" in source or "configMap" in source
            args += ["--volume", f"{folder}:{mount['mountPath']}{':ro' if read_only else ''}"]
        return args

    def close(self) -> None:
        names = [c.name for c in self.containers]
        if names:
            docker("rm", "--force", "--volumes", *names, check=False)
        docker("network", "rm", self.network, check=False)


def _container_security(context: Mapping[str, Any]) -> list[str]:
    args = ["--read-only"] if context.get("readOnlyRootFilesystem") else []
    args += [f"--cap-drop={cap}" for cap in context.get("capabilities", {}).get("drop", [])]
    args += [f"--cap-add={cap}" for cap in context.get("capabilities", {}).get("add", [])]
    if context.get("allowPrivilegeEscalation") is False:
        args += ["--security-opt", "no-new-privileges"]
    return args


@dataclass
class DockerJob:
    """One DistributedTraining on Docker: its Secret and hostfile from the operator's builders, claims as folders."""

    job: Job
    kubelet: DockerKubelet
    data_dir: Path
    checkpoint_root: Path
    workers: dict[int, Container] = field(default_factory=dict)

    @property
    def checkpoint_dir(self) -> Path:
        return self.checkpoint_root / self.job.namespace / self.job.name

    def start_worker(self, index: int, command: Sequence[str] | None = None) -> Container:
        pod = build_worker_pod(self.job, index)
        self.workers[index] = self.kubelet.start(pod, aliases=[worker_hostname(self.job, index)], command=command)
        return self.workers[index]

    def start_launcher(self, extra_env: Mapping[str, str] | None = None, dns: str | None = None) -> Container:
        return self.kubelet.start(build_launcher_job(self.job), extra_env=extra_env, dns=dns)


def deploy(root: Path, body: Mapping[str, Any]) -> DockerJob:
    """Lay out a DistributedTraining body on Docker: claims `data` and `checkpoints` are folders under `root`."""
    job = parse_job(body)
    objects = [build_ssh_secret(job, generate_job_keys(job.name)), build_hosts_configmap(job)]
    claims = {"data": root / "data", "checkpoints": root / "checkpoints"}
    for folder in claims.values():
        folder.mkdir(parents=True, exist_ok=True)
        folder.chmod(0o777)
    return DockerJob(job, DockerKubelet(root / "pods", objects, claims), claims["data"], claims["checkpoints"])
