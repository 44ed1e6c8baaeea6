"""Host discovery of an elastic kubetrain job: horovodrun's --host-discovery-script, run by lib/launcher.sh.

Prints the `host:slots` lines of KUBETRAIN_ELASTIC_HOSTS whose host is Ready now. A worker is Ready when the IP its
name resolves to is among the IPs of KUBETRAIN_READY_SERVICE: a headless Service that lists only Ready workers (their
sshd accepts) among the pods the operator created. It has no selector; the operator writes its EndpointSlice, so a pod
someone else makes with the job's labels is never among them. The launcher's own line (launcher.runAsWorker) is
always printed.
Exit 0 with no output when no worker is Ready: the Service's name does not exist then (NXDOMAIN).
Exit 1 on DNS trouble: Horovod then keeps its previous host list. Exit 2 on a bad configuration.
Horovod runs this every second, so it stays cheap: standard library only, one lookup per host.
"""

from __future__ import annotations

import os
import socket
import sys
from collections.abc import Callable, Iterable

# getaddrinfo's answers for a name that does not exist, or has no address: not Ready, not trouble.
NO_SUCH_NAME = {socket.EAI_NONAME, getattr(socket, "EAI_NODATA", socket.EAI_NONAME)}


class DnsTrouble(Exception):
    """A lookup failed for another reason than "no such name" (no answer, server failure)."""


def parse_hosts(text: str) -> list[tuple[str, str]]:
    """(host, line) for every `host:slots` line; blank lines and comments are skipped."""
    hosts = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        host, separator, slots = line.partition(":")
        if not separator or not slots.isdigit():
            raise ValueError(f"not a host:slots line: {line!r}")
        hosts.append((host, line))
    return hosts


def is_own(host: str, own_hostname: str) -> bool:
    """The line of this pod: the launcher's bare hostname (launcher.runAsWorker)."""
    return host.split(".")[0] == own_hostname.split(".")[0]


def ready_lines(hosts: Iterable[tuple[str, str]], own_hostname: str, ready_ips: set[str],
                resolve: Callable[[str], set[str]]) -> list[str]:
    """The lines to print, in file order: this pod's, then each worker whose address is a Ready one."""
    chosen = []
    for host, line in hosts:
        if is_own(host, own_hostname) or (ready_ips and resolve(host) & ready_ips):
            chosen.append(line)
    return chosen


def addresses(name: str) -> set[str]:
    """The IPv4 addresses `name` resolves to; empty when the name does not exist."""
    try:
        return {info[4][0] for info in socket.getaddrinfo(name, None, socket.AF_INET, socket.SOCK_STREAM)}
    except socket.gaierror as error:
        if error.errno in NO_SUCH_NAME:
            return set()
        raise DnsTrouble(f"cannot resolve {name}: {error}") from error


def main() -> int:
    hosts_file = os.environ.get("KUBETRAIN_ELASTIC_HOSTS", "")
    service = os.environ.get("KUBETRAIN_READY_SERVICE", "")
    if not hosts_file or not service:
        print("kubetrain discovery: error: KUBETRAIN_ELASTIC_HOSTS and KUBETRAIN_READY_SERVICE must be set",
              file=sys.stderr)
        return 2
    try:
        with open(hosts_file) as file:
            hosts = parse_hosts(file.read())
    except (OSError, ValueError) as error:
        print(f"kubetrain discovery: error: {hosts_file}: {error}", file=sys.stderr)
        return 2
    try:
        lines = ready_lines(hosts, socket.gethostname(), addresses(service), addresses)
    except DnsTrouble as error:
        print(f"kubetrain discovery: {error}; Horovod keeps the hosts it had", file=sys.stderr)
        return 1
    sys.stdout.write("".join(line + "\n" for line in lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
