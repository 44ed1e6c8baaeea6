"""DistributedTrainings on the kind cluster as a user drives and reads them: `kubectl apply`, the status, the phases a
job went through, the launcher's log. When a test fails, `Jobs.report` gives what the user would look at: each job's
status, its events and its pods' logs."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import yaml

from kubetrain.contract import LABEL_JOB, LABEL_ROLE, ROLE_LAUNCHER, launcher_name
from kubetrain.reasons import TERMINAL_PHASES
from tests.support.job_events import job_events
from tests.support.kind_cluster import NAMESPACE, KindCluster, poll

T = TypeVar("T")
LOG_TAIL = 100  # lines of each container's log in a failure report


def field(status: dict[str, Any], path: str) -> Any:
    """The status field at a dotted `path` ("workers.lastJoined"), None where it is missing."""
    value: Any = status
    for key in path.split("."):
        value = value.get(key) if isinstance(value, dict) else None
    return value


class PhaseRecorder:
    """Every phase change of every DistributedTraining in NAMESPACE, as `kubectl get --watch` prints it, in a file."""

    def __init__(self, cluster: KindCluster, path: Path) -> None:
        self.cluster = cluster
        self.path = path
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> PhaseRecorder:
        command = [self.cluster.settings.kubectl, "get", "distributedtrainings", "--namespace", NAMESPACE, "--watch",
                   "--output=jsonpath={.metadata.name} {.status.phase}{\"\\n\"}"]
        with self.path.open("ab") as out:
            self.process = subprocess.Popen(command, stdout=out, stderr=subprocess.DEVNULL, env=self.cluster.env())
        return self

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=30)

    def phases(self, name: str) -> list[str]:
        """The phases `name` went through, in order, repeats folded."""
        seen: list[str] = []
        for line in self.path.read_text().splitlines():
            words = line.split()
            if len(words) == 2 and words[0] == name and (not seen or seen[-1] != words[1]):
                seen.append(words[1])
        return seen


class Jobs:
    """The DistributedTrainings one test creates in NAMESPACE, and what a user reads of them."""

    def __init__(self, cluster: KindCluster, recorder: PhaseRecorder) -> None:
        self.cluster = cluster
        self.recorder = recorder
        self.timeout = cluster.settings.timeout
        self.names: list[str] = []

    def apply(self, body: dict[str, Any]) -> None:
        """`kubectl apply -f <artifacts>/<name>.yaml` of `body`."""
        name = body["metadata"]["name"]
        path = self.cluster.settings.artifacts / f"{name}.yaml"
        path.write_text(yaml.safe_dump(body, sort_keys=False))
        self.names.append(name)
        self.cluster.kubectl("apply", "--namespace", NAMESPACE, f"--filename={path}")

    def status(self, name: str) -> dict[str, Any]:
        return self.cluster.get("distributedtraining", name).get("status") or {}

    def phases(self, name: str) -> list[str]:
        """The phases the job went through, in order, once the watch has shown its current one."""
        current = self.status(name).get("phase")

        def seen() -> list[str] | None:
            phases = self.recorder.phases(name)
            return phases if phases and phases[-1] == current else None

        return poll(seen, 30, f"the watch to show {name} {current}", lambda: f"it showed {self.recorder.phases(name)}",
                    interval=0.5)

    def table(self, name: str, *options: str) -> str:
        """`kubectl get dtr <name>`: its columns, then its row."""
        return self.cluster.kubectl("get", "distributedtraining", name, "--namespace", NAMESPACE, *options)

    def pods(self, name: str, role: str | None = None) -> list[dict[str, Any]]:
        """The job's pods (of one role, if given), oldest first."""
        selector = f"{LABEL_JOB}={name}" + (f",{LABEL_ROLE}={role}" if role else "")
        found = json.loads(self.cluster.kubectl("get", "pods", "--namespace", NAMESPACE, f"--selector={selector}",
                                                "--sort-by=.metadata.creationTimestamp", "--output=json"))
        return found["items"]

    def launcher_log(self, name: str, *options: str) -> str:
        """`kubectl logs job/<name>-launcher`: the launcher pod's log (the newest pod's, after a restart)."""
        return self.cluster.kubectl("logs", f"job/{launcher_name(name)}", "--namespace", NAMESPACE, *options)

    def newest_launcher_log(self, name: str) -> tuple[str, str]:
        """The newest launcher pod's name and its log: a restarted job's new attempt."""
        pod = self.pods(name, ROLE_LAUNCHER)[-1]["metadata"]["name"]
        return pod, self.cluster.kubectl("logs", pod, "--namespace", NAMESPACE)

    def wait_for(self, name: str, waiting_for: str, check: Callable[[dict[str, Any]], T | None],
                 timeout: float | None = None) -> T:
        """`check(status)`'s first value other than None; fails at once when the job ends first."""

        def checked() -> T | None:
            status = self.status(name)
            value = check(status)
            if value is None and status.get("phase") in TERMINAL_PHASES:
                raise AssertionError(f"{name} ended {status['phase']} before {waiting_for}: "
                                     f"{status.get('reason')}: {status.get('message')}")
            return value

        return poll(checked, timeout or self.timeout, f"{name}: {waiting_for}",
                    lambda: f"phase {self.status(name).get('phase')}")

    def wait_for_phase(self, name: str, phase: str, timeout: float | None = None) -> dict[str, Any]:
        """The status once the job is in `phase`; fails at once when it ends in another phase."""
        return self.wait_for(name, f"phase {phase}", lambda status: status if status.get("phase") == phase else None,
                             timeout)

    def wait_for_status(self, name: str, path: str, prefix: str) -> str:
        """The status field at `path` once it starts with `prefix`; fails when the job ends first."""
        def starts(status: dict[str, Any]) -> str | None:
            value = field(status, path)
            return value if isinstance(value, str) and value.startswith(prefix) else None

        return self.wait_for(name, f"status.{path} to start with {prefix!r}", starts)

    def wait_for_launcher_log(self, name: str, text: str, count: int) -> None:
        """Waits until `count` lines of the launcher's log hold `text`; fails when the job ends first."""
        def enough(_: dict[str, Any]) -> bool | None:
            log = self.cluster.kubectl_result("logs", f"job/{launcher_name(name)}", "--namespace", NAMESPACE).stdout
            return True if sum(text in line for line in log.splitlines()) >= count else None

        self.wait_for(name, f"{count} launcher log line(s) with {text!r}", enough)

    def report(self) -> list[tuple[str, str]]:
        """What a user would look at for each job: its status, its events, its pods' logs."""
        return [section for name in self.names for section in
                ((f"{name}: status", self._status_yaml(name)), (f"{name}: events", self._events(name)),
                 (f"{name}: pods and logs", self._pod_logs(name)))]

    def _status_yaml(self, name: str) -> str:
        found = self.cluster.kubectl_result("get", "distributedtraining", name, "--namespace", NAMESPACE,
                                            "--output=json")
        if found.returncode != 0:
            return found.stderr
        return yaml.safe_dump({"status": json.loads(found.stdout).get("status")}, sort_keys=False)

    def _events(self, name: str) -> str:
        found = self.cluster.kubectl_result("get", "events", "--namespace", NAMESPACE, "--output=json")
        return job_events(json.loads(found.stdout)["items"] if found.returncode == 0 else [], name)

    def _pod_logs(self, name: str) -> str:
        found = self.cluster.kubectl_result("get", "pods", "--namespace", NAMESPACE, f"--selector={LABEL_JOB}={name}",
                                            "--output=json")
        pods = json.loads(found.stdout)["items"] if found.returncode == 0 else []
        return "\n".join(self._pod_log(pod) for pod in pods) or "no pods"

    def _pod_log(self, pod: dict[str, Any]) -> str:
        name = pod["metadata"]["name"]
        parts = [f"--- pod {name}: {pod['status'].get('phase')} on {pod['spec'].get('nodeName')}"]
        for container in pod["status"].get("containerStatuses") or []:
            scope = (name, "--namespace", NAMESPACE, "--container", container["name"], f"--tail={LOG_TAIL}")
            parts.append(f"--- {name}/{container['name']}: {json.dumps(container.get('state'))}, "
                         f"{container.get('restartCount', 0)} restart(s)")
            if container.get("restartCount"):
                parts.append(self.cluster.kubectl_result("logs", *scope, "--previous").stdout)
            parts.append(self.cluster.kubectl_result("logs", *scope).stdout)
        return "\n".join(parts)
