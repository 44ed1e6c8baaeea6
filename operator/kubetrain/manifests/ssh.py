"""The per-job SSH Secret, and which of its keys each pod mounts.

The launcher holds the client's private key, the client config and known_hosts; a worker holds authorized_keys and
the job's host key. So a training program on a worker cannot log in anywhere, and the launcher accepts no sshd but
one holding the job's host key."""

from __future__ import annotations

from typing import Any

from kubetrain.api import Job
from kubetrain.contract import ROLE_CONFIG, SSH_PORT, service_name, ssh_secret_name, worker_name
from kubetrain.keys import JobKeys
from kubetrain.manifests.names import metadata

# A silent peer (its node gone) ends the ssh session after ServerAliveInterval x 3: an elastic job notices sooner.
KEEPALIVE_SECONDS = 30
ELASTIC_KEEPALIVE_SECONDS = 5

CLIENT_KEY = "id_ed25519"
HOST_KEY = "ssh_host_ed25519_key"
# What each pod of the job mounts from the Secret.
LAUNCHER_KEYS = (CLIENT_KEY, "ssh_config", "known_hosts")
WORKER_KEYS = ("authorized_keys", HOST_KEY)


def ssh_client_config(job: Job) -> str:
    """The launcher's ssh options. Its entrypoint turns `~/.ssh/` into the folder it copies the Secret's files to."""
    keepalive = ELASTIC_KEEPALIVE_SECONDS if job.spec.elastic else KEEPALIVE_SECONDS
    return f"""Host *
  Port {SSH_PORT}
  IdentityFile ~/.ssh/{CLIENT_KEY}
  IdentitiesOnly yes
  StrictHostKeyChecking yes
  UserKnownHostsFile ~/.ssh/known_hosts
  CheckHostIP no
  LogLevel ERROR
  ConnectTimeout 5
  ServerAliveInterval {keepalive}
"""


def known_hosts(job: Job, host_public_key: str) -> str:
    """The job's host key for every name a worker is reached by: its full DNS name, and the short one Open MPI 5
    uses. Port 2222 is part of the name ssh looks up."""
    key = " ".join(host_public_key.split()[:2])
    any_worker = worker_name(job.name, 0)[:-1] + "*"  # the index as a wildcard
    patterns = [f"[{any_worker}]:{SSH_PORT}",
                f"[*.{service_name(job.name)}.{job.namespace}.svc]:{SSH_PORT}"]
    return f"{','.join(patterns)} {key}\n"


def build_ssh_secret(job: Job, keys: JobKeys) -> dict[str, Any]:
    """The client key pair, the host key, the launcher's known_hosts and the ssh config that checks it."""
    host = keys.host
    return {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": metadata(job, ssh_secret_name(job.name), ROLE_CONFIG),
            "stringData": {CLIENT_KEY: keys.client.private_key, f"{CLIENT_KEY}.pub": keys.client.public_key,
                           "authorized_keys": keys.client.public_key, "ssh_config": ssh_client_config(job),
                           HOST_KEY: host.private_key, f"{HOST_KEY}.pub": host.public_key,
                           "known_hosts": known_hosts(job, host.public_key)}}


def ssh_volume(job: Job, keys: tuple[str, ...]) -> dict[str, Any]:
    """The Secret as a pod volume holding only `keys` (LAUNCHER_KEYS or WORKER_KEYS), 0400.

    Optional, so a key missing from the Secret is left out instead of keeping the pod from starting: a Secret an older
    operator wrote has no host key and no known_hosts. Its workers then make a fresh host key and its launcher's
    config checks none, as before; the operator may not patch Secrets, so such a job stays unpinned until re-created.
    """
    return {"name": "ssh", "secret": {"secretName": ssh_secret_name(job.name), "defaultMode": 0o400, "optional": True,
                                      "items": [{"key": key, "path": key} for key in keys]}}
