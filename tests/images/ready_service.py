"""An elastic job's Ready-only headless Service (`<name>-ready.<ns>.svc`) on Docker.

Docker cannot add a network alias to a running container, so the Service's name comes from a small DNS server
(ready_dns.py) in a container on the job's network. It probes each worker's sshd as kubelet's readiness probe does
and answers the name with the Ready workers' IPs. The launcher gets it as its DNS server (`docker run --dns`); Docker's
embedded DNS still answers the workers' own names and sends it only the names it does not know.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from docker_pods import Container, DockerJob, docker

from kubetrain.contract import SSH_PORT
from kubetrain.manifests.names import worker_hostname

SERVER = Path(__file__).resolve().parent / "ready_dns.py"
# Shorter than the worker pods' readinessProbe period (2 s, operator/kubetrain/manifests/pods.py). Kubernetes drops a
# lost pod from the Service at once, while a probe notices it only at its next round. Docker may give the replacement
# the lost container's IP, and a slow probe could miss the gap between the two.
PROBE_SECONDS = 0.5


@dataclass
class ReadyService:
    """The DNS server's container and its IP, which the launcher uses as its DNS server."""

    container: Container
    ip: str

    def ready_times(self, worker: str) -> list[float]:
        """Each time the worker (its DNS name) became Ready, on the containers' clock, oldest first."""
        return [float(time) for time in re.findall(rf"^ready {re.escape(worker)} \S+ at (\S+)$",
                                                   self.container.logs(), re.MULTILINE)]


def start_ready_service(job: DockerJob, image: str) -> ReadyService:
    """Serve the job's Ready-only Service name; `image` needs python3 (kubetrain/base)."""
    spec = job.job.spec
    assert spec.elastic is not None
    service = f"{job.job.name}-ready.{job.job.namespace}.svc"
    workers = [worker_hostname(job.job, index) for index in range(spec.elastic.max_workers)]
    name = f"{job.job.name}-ready-dns-{job.kubelet.id}"
    docker("run", "--detach", "--name", name, "--network", job.kubelet.network, "--user", "0",
           "--volume", f"{SERVER}:/ready_dns.py:ro", "--entrypoint", "python", image,
           "/ready_dns.py", service, str(SSH_PORT), str(PROBE_SECONDS), *workers)
    container = Container(name, "ready-dns")
    job.kubelet.containers.append(container)  # removed with the job's containers
    container.wait_for_log("serving")
    ip = docker("inspect", "--format", "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}", name).stdout
    return ReadyService(container, ip.strip())
