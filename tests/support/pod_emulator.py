"""Run the containers of the operator's pod objects on netns hosts, doing what kubelet does for them.

- Secret and ConfigMap volumes are written the way kubelet's atomic writer lays them out (`..data` symlink to a
  timestamped folder, one symlink per key) with the volume's defaultMode; with an fsGroup the files belong to that group
  and are group-readable, as kubelet makes them.
- emptyDir volumes are fresh folders; PersistentVolumeClaims map to folders the test shares between pods.
- There is no mount namespace per container: a path under a mountPath in the container's env or command is rewritten
  to the folder backing that mount, and /opt/kubetrain/entrypoints/ points at images/entrypoints/ (what the pod's
  init container copies; init containers are not run here). The job's data and checkpoint paths are rewritten in
  every pod, also in the launcher that does not mount them: it forwards them to the ranks (`mpirun -x`), which in a
  cluster is harmless because every pod sees the same path.
- The container's terminationMessagePath is a file in the pod's folder (kubelet mounts one there), read back by
  `Container.termination_message()`; a path in the env that names it is rewritten like a mount's.
- The container runs as the pod's runAsUser/runAsGroup with fsGroup as a supplementary group, unless the test asks for
  root (the Python environment here lives under /root, which uid 1000 cannot read).
"""

from __future__ import annotations

import base64
import os
import re
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kubetrain.contract import ENTRYPOINTS
from tests.support.netns_hosts import Host, Network

REPO = Path(__file__).resolve().parents[2]
ENTRYPOINTS_SOURCE = REPO / "images" / "entrypoints"
# The image's PATH: the Python environment first (here: the one running the tests), then the system's.
IMAGE_PATH = f"{Path(sys.executable).parent}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


@dataclass
class Container:
    """A started container: its process, log file and the folders backing its mounts."""

    name: str
    host: Host
    process: Any
    log_path: Path
    mounts: dict[str, Path] = field(default_factory=dict)
    termination_log: Path | None = None

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def termination_message(self) -> str:
        """What the container wrote to its terminationMessagePath (kubelet keeps at most 4096 bytes of it)."""
        if self.termination_log is None or not self.termination_log.exists():
            return ""
        return self.termination_log.read_bytes()[:4096].decode(errors="replace")

    def wait(self, timeout: float) -> int:
        return self.process.wait(timeout=timeout)

    def wait_for_log(self, pattern: str, timeout: float = 20) -> None:
        """Until the log matches `pattern`; fails if the container exits first or time runs out."""
        deadline = time.monotonic() + timeout
        while not re.search(pattern, self.log()):
            assert self.process.poll() is None, f"{self.name} exited:\n{self.log()}"
            assert time.monotonic() < deadline, f"{self.name} never logged {pattern!r}:\n{self.log()}"
            time.sleep(0.1)


class Kubelet:
    """Starts pods built by kubetrain's builders on hosts of a `Network`."""

    def __init__(self, network: Network, root: Path, objects: Sequence[Mapping[str, Any]], claims: Mapping[str, Path],
                 job_paths: Mapping[str, Path], *, as_pod_user: bool) -> None:
        self.network = network
        self.root = root
        self.objects = {(o["kind"], o["metadata"]["name"]): o for o in objects}
        self.claims = dict(claims)
        self.job_paths = dict(job_paths)
        self.as_pod_user = as_pod_user
        self.containers: list[Container] = []
        self._starts = 0

    def start(self, host: Host, pod: Mapping[str, Any], extra_env: Mapping[str, str] | None = None) -> Container:
        """Start the first container of `pod` (a Pod, or a batch Job's pod template) on `host`."""
        self._starts += 1
        spec = pod["spec"]["template"]["spec"] if pod["kind"] == "Job" else pod["spec"]
        container = spec["containers"][0]
        pod_dir = self.root / f"{pod['metadata']['name']}-{self._starts}"
        pod_dir.mkdir(parents=True)
        security = spec.get("securityContext", {})
        fs_group = security.get("fsGroup") if self.as_pod_user else None
        volumes = {
            v["name"]: prepare_volume(v, pod_dir / "volumes" / v["name"], self.objects, self.claims, fs_group)
            for v in spec["volumes"]
        }
        mounts = {**self.job_paths, **{m["mountPath"]: volumes[m["name"]] for m in container.get("volumeMounts", [])}}
        mounts[ENTRYPOINTS] = ENTRYPOINTS_SOURCE
        termination_log = None
        if "terminationMessagePath" in container:
            termination_log = pod_dir / "termination-log"
            termination_log.touch()
            termination_log.chmod(0o666)  # any uid the container runs as
            mounts[container["terminationMessagePath"]] = termination_log

        env = {"PATH": IMAGE_PATH, "LANG": "C.UTF-8"}
        for entry in container.get("env", []):
            if "valueFrom" in entry:
                env[entry["name"]] = self.value_from(entry, pod["metadata"]["name"], host)
                continue
            env[entry["name"]] = rewrite(entry.get("value", ""), mounts)
        env.update(extra_env or {})
        argv = [rewrite(part, mounts) for part in [*container.get("command", []), *container.get("args", [])]]
        user: dict[str, Any] = {}
        if self.as_pod_user:
            uid = security.get("runAsUser", 0)
            user = {"uid": uid, "gid": security.get("runAsGroup", 0), "groups": [fs_group] if fs_group else []}
        log_path = pod_dir / "log"
        with open(log_path, "w") as log:
            process = self.network.spawn(host, argv, env, log, cwd=str(pod_dir), **user)
        started = Container(pod["metadata"]["name"], host, process, log_path, mounts, termination_log)
        self.containers.append(started)
        return started


    def value_from(self, entry: Mapping[str, Any], pod_name: str, host: Host) -> str:
        """What kubelet resolves for an env entry's valueFrom: a few fieldRefs of the pod, or a Secret's key."""
        source = entry["valueFrom"]
        if "secretKeyRef" in source:
            ref = source["secretKeyRef"]
            secret = self.objects[("Secret", ref["name"])]
            if ref["key"] in secret.get("stringData", {}):
                return str(secret["stringData"][ref["key"]])
            return base64.b64decode(secret["data"][ref["key"]]).decode()
        fields = {"metadata.name": pod_name, "spec.nodeName": host.namespace, "status.podIP": host.address}
        path = source.get("fieldRef", {}).get("fieldPath")
        if path not in fields:
            raise ValueError(f"{entry['name']}: valueFrom {source} is not emulated")
        return fields[path]


def prepare_volume(volume: Mapping[str, Any], path: Path, objects: Mapping[tuple[str, str], Mapping[str, Any]],
                   claims: Mapping[str, Path], fs_group: int | None) -> Path:
    """The host folder backing a pod volume, laid out as kubelet lays it out: a claim's shared folder, a fresh
    world-writable emptyDir, or a Secret's / ConfigMap's files from `objects` (keyed by (kind, name))."""
    if "persistentVolumeClaim" in volume:
        return claims[volume["persistentVolumeClaim"]["claimName"]]
    if "emptyDir" in volume:
        path.mkdir(parents=True)
        path.chmod(0o777)
        return path
    if "secret" in volume:
        source = volume["secret"]
        secret = objects[("Secret", source["secretName"])]
        files = {k: base64.b64decode(v).decode() for k, v in secret.get("data", {}).items()}
        files.update(secret.get("stringData", {}))
        if "items" in source:  # only the listed keys, as kubelet projects them
            files = {item["path"]: files[item["key"]] for item in source["items"] if item["key"] in files}
        return write_atomic_volume(path, files, source.get("defaultMode", 0o644), fs_group)
    if "configMap" in volume:
        source = volume["configMap"]
        config = objects[("ConfigMap", source["name"])]
        return write_atomic_volume(path, config["data"], source.get("defaultMode", 0o644), fs_group)
    raise ValueError(f"volume {volume['name']}: kind not emulated")


def rewrite(value: str, mounts: Mapping[str, Path]) -> str:
    """A container path under a mount, as the path of the folder backing it (longest mountPath wins)."""
    for mount_path in sorted(mounts, key=len, reverse=True):
        if value == mount_path or value.startswith(mount_path.rstrip("/") + "/"):
            return str(mounts[mount_path]) + value[len(mount_path.rstrip("/")) :]
    return value


def write_atomic_volume(path: Path, files: Mapping[str, str], mode: int, fs_group: int | None) -> Path:
    """kubelet's layout: <path>/..<stamp>/<key> files, <path>/..data -> that folder, <path>/<key> -> ..data/<key>."""
    stamp = time.strftime("..%Y_%m_%d_%H_%M_%S.") + str(time.monotonic_ns() % 10**9)
    payload = path / stamp
    payload.mkdir(parents=True)
    if fs_group is not None:
        mode |= 0o440  # kubelet makes read-only volume files group-readable for the fsGroup
    for key, text in files.items():
        (payload / key).write_text(text)
        os.chown(payload / key, 0, fs_group or 0)
        (payload / key).chmod(mode)
        (path / key).symlink_to(Path("..data") / key)
    (path / "..data").symlink_to(stamp)
    for folder in (path, payload):
        folder.chmod(0o755)
    return path
