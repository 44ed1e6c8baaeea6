"""Hosts made of Linux network namespaces: one bridge, one namespace per host, each with its own address and name.

Every process a test starts runs inside a host's namespace (and its own UTS namespace, so `hostname` differs per
host). `Network.close()` kills every process left in each namespace, then removes the namespaces, their
/etc/netns/<ns> files and the bridge; it is safe to call after any failure, and twice.
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

SUBNET = "10.231.0"
ETC_NETNS = Path("/etc/netns")


def ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", *args], capture_output=True, text=True, check=check)


def forward_between_hosts(action: str, bridge: str) -> None:
    """Insert (-I) or delete (-D) our own rule accepting traffic between the hosts on `bridge`: a running Docker
    engine sets the FORWARD policy to DROP, and bridged traffic passes FORWARD once it has loaded br_netfilter."""
    if shutil.which("iptables"):
        rule = ["FORWARD", "-i", bridge, "-o", bridge, "-j", "ACCEPT"]
        subprocess.run(["iptables", "-w", action, *rule], capture_output=True, check=action == "-I")


@dataclass
class Host:
    hostname: str  # short name, as `hostname` prints it inside
    names: tuple[str, ...]  # every name that resolves to it (FQDN first)
    namespace: str
    address: str
    veth: str


class Network:
    """A bridge `ktb<id>` joining namespaces `kt<id>-<n>`; `id` is unique to this test run."""

    def __init__(self) -> None:
        self.id = secrets.token_hex(3)
        self.bridge = f"ktb{self.id}"
        self.hosts: list[Host] = []
        self.extra_names: dict[str, tuple[str, ...]] = {}
        self._created_etc_netns = not ETC_NETNS.exists()
        self._hidden: set[str] = set()
        ip("link", "add", "name", self.bridge, "type", "bridge")
        ip("link", "set", self.bridge, "up")
        forward_between_hosts("-I", self.bridge)

    def add_host(self, hostname: str, *names: str) -> Host:
        index = len(self.hosts) + 1
        host = Host(hostname, (*names, hostname), f"kt{self.id}-{index}", f"{SUBNET}.{index}", f"ktv{self.id}{index}")
        self.hosts.append(host)
        ip("netns", "add", host.namespace)
        ip("link", "add", host.veth, "type", "veth", "peer", "name", "eth0", "netns", host.namespace)
        ip("link", "set", host.veth, "master", self.bridge, "up")
        ip("-n", host.namespace, "addr", "add", f"{host.address}/24", "dev", "eth0")
        ip("-n", host.namespace, "link", "set", "eth0", "up")
        ip("-n", host.namespace, "link", "set", "lo", "up")
        (ETC_NETNS / host.namespace).mkdir(parents=True, exist_ok=True)
        self.write_hosts_files()
        return host

    def hide(self, host: Host) -> None:
        """Stop resolving `host`'s names everywhere (like a pod whose DNS record does not exist yet)."""
        self._hidden.add(host.namespace)
        self.write_hosts_files()

    def reveal(self, host: Host) -> None:
        self._hidden.discard(host.namespace)
        self.write_hosts_files()

    def write_hosts_files(self) -> None:
        """/etc/netns/<ns>/hosts, which `ip netns exec` mounts over /etc/hosts; rewritten in place so running
        processes see changes (the bind mount pins the inode)."""
        lines = ["127.0.0.1 localhost"]
        lines += [f"{h.address} {' '.join(h.names)}" for h in self.hosts if h.namespace not in self._hidden]
        text = "\n".join(lines) + "\n"
        for host in self.hosts:
            path = ETC_NETNS / host.namespace / "hosts"
            with open(path, "a+", encoding="utf-8") as handle:
                handle.seek(0)
                handle.truncate()
                handle.write(text)

    def install_passwd(self, entries: Sequence[str], writable_by_root_group: bool = False) -> None:
        """Per-host /etc/passwd and /etc/group: this machine's, minus uids the entries redefine, plus the entries
        (`name:x:uid:gid:gecos:home:shell`), the way the image defines its user."""
        uids = {entry.split(":")[2] for entry in entries}
        base = [line for line in Path("/etc/passwd").read_text().splitlines() if line.split(":")[2] not in uids]
        passwd = "\n".join([*base, *entries]) + "\n"
        gids = {entry.split(":")[3]: entry.split(":")[0] for entry in entries}
        group_lines = [line for line in Path("/etc/group").read_text().splitlines() if line.split(":")[2] not in gids]
        group = "\n".join([*group_lines, *(f"{name}:x:{gid}:" for gid, name in gids.items() if gid != "0")]) + "\n"
        for host in self.hosts:
            (ETC_NETNS / host.namespace / "passwd").write_text(passwd)
            (ETC_NETNS / host.namespace / "group").write_text(group)
            os.chmod(ETC_NETNS / host.namespace / "passwd", 0o664 if writable_by_root_group else 0o644)

    def spawn(
        self,
        host: Host,
        argv: Sequence[str],
        env: Mapping[str, str],
        log: IO[str],
        *,
        uid: int | None = None,
        gid: int | None = None,
        groups: Sequence[int] = (),
        cwd: str | None = None,
    ) -> subprocess.Popen[str]:
        """Run argv on `host` (its network, /etc/hosts, hostname), optionally as uid/gid with supplementary groups."""
        drop: list[str] = []
        if uid is not None:
            drop = ["setpriv", f"--reuid={uid}", f"--regid={gid if gid is not None else uid}"]
            drop += [f"--groups={','.join(map(str, groups))}"] if groups else ["--clear-groups"]
        command = ["ip", "netns", "exec", host.namespace, "unshare", "--uts", "--",
                   "sh", "-c", 'hostname "$0" && exec "$@"', host.hostname, *drop, *argv]
        return subprocess.Popen(command, env=dict(env), stdout=log, stderr=subprocess.STDOUT, text=True, cwd=cwd,
                                start_new_session=True)

    def pids(self, host: Host) -> list[int]:
        result = ip("netns", "pids", host.namespace, check=False)
        return [int(pid) for pid in result.stdout.split()]

    def kill_host(self, host: Host, timeout: float = 10.0) -> None:
        """Kill every process in `host`'s namespace (like a node losing the pod); waits until none is left."""
        deadline = time.monotonic() + timeout
        while pids := self.pids(host):
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"processes {pids} in {host.namespace} survive SIGKILL")
            time.sleep(0.05)

    def close(self) -> None:
        errors = []
        for host in self.hosts:
            try:
                self.kill_host(host)
            except (RuntimeError, OSError) as error:
                errors.append(str(error))
            ip("netns", "del", host.namespace, check=False)
            ip("link", "del", host.veth, check=False)
            shutil.rmtree(ETC_NETNS / host.namespace, ignore_errors=True)
        self.hosts = []
        forward_between_hosts("-D", self.bridge)
        ip("link", "del", self.bridge, check=False)
        if self._created_etc_netns:
            try:
                ETC_NETNS.rmdir()
            except OSError:
                pass  # another test run is using it
        if errors:
            raise RuntimeError("; ".join(errors))
