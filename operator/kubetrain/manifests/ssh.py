"""The per-job SSH Secret: key pair, authorized_keys and the client config the launcher uses."""

from __future__ import annotations

from typing import Any

from kubetrain.api import Job
from kubetrain.contract import ROLE_CONFIG, SSH_PORT, ssh_secret_name
from kubetrain.keys import SshKeyPair
from kubetrain.manifests.names import metadata

# A silent peer (its node gone) ends the ssh session after ServerAliveInterval x 3: an elastic job notices sooner.
KEEPALIVE_SECONDS = 30
ELASTIC_KEEPALIVE_SECONDS = 5


def ssh_client_config(job: Job) -> str:
    keepalive = ELASTIC_KEEPALIVE_SECONDS if job.spec.elastic else KEEPALIVE_SECONDS
    return f"""Host *
  Port {SSH_PORT}
  IdentityFile ~/.ssh/id_ed25519
  IdentitiesOnly yes
  StrictHostKeyChecking no
  UserKnownHostsFile /dev/null
  LogLevel ERROR
  ConnectTimeout 5
  ServerAliveInterval {keepalive}
"""


def build_ssh_secret(job: Job, keys: SshKeyPair) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "Opaque",
        "metadata": metadata(job, ssh_secret_name(job.name), ROLE_CONFIG),
        "stringData": {
            "id_ed25519": keys.private_key,
            "id_ed25519.pub": keys.public_key,
            "authorized_keys": keys.public_key,
            "ssh_config": ssh_client_config(job),
        },
    }
