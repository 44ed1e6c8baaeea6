"""Fresh SSH key material for one job (never shared between jobs): the launcher's client key and the workers' host
key."""

from __future__ import annotations

from dataclasses import dataclass

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey


@dataclass(frozen=True)
class SshKeyPair:
    private_key: str  # OpenSSH PEM
    public_key: str  # one authorized_keys line


@dataclass(frozen=True)
class JobKeys:
    """The launcher logs in with `client`; every worker's sshd presents `host`, which the launcher pins."""

    client: SshKeyPair
    host: SshKeyPair


def generate_ssh_keypair(comment: str = "kubetrain") -> SshKeyPair:
    """Generate a new ed25519 key pair in OpenSSH formats."""
    key = Ed25519PrivateKey.generate()
    private = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH, serialization.NoEncryption()
    ).decode()
    public = key.public_key().public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH).decode()
    return SshKeyPair(private_key=private, public_key=f"{public} {comment}\n")


def generate_job_keys(name: str = "kubetrain") -> JobKeys:
    """A client key pair and a host key pair for job `name`."""
    return JobKeys(client=generate_ssh_keypair(f"kubetrain-{name}"),
                   host=generate_ssh_keypair(f"kubetrain-{name}-host"))
