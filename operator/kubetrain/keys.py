"""Fresh SSH key material for one job (never shared between jobs)."""

from __future__ import annotations

from dataclasses import dataclass

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey


@dataclass(frozen=True)
class SshKeyPair:
    private_key: str  # OpenSSH PEM
    public_key: str  # one authorized_keys line


def generate_ssh_keypair(comment: str = "kubetrain") -> SshKeyPair:
    """Generate a new ed25519 key pair in OpenSSH formats."""
    key = Ed25519PrivateKey.generate()
    private = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH, serialization.NoEncryption()
    ).decode()
    public = key.public_key().public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH).decode()
    return SshKeyPair(private_key=private, public_key=f"{public} {comment}\n")
