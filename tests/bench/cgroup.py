"""A memory cgroup for one process, as a container runtime makes one from a pod's memory limit: the kernel kills the
process (OOM) when it goes over. cgroup v2 (memory.max) or v1 (memory.limit_in_bytes), whichever this machine has."""

from __future__ import annotations

import uuid
from pathlib import Path

ROOT = Path("/sys/fs/cgroup")


class MemoryCgroup:
    def __init__(self, limit_bytes: int, root: Path = ROOT) -> None:
        name = f"kubetrain-bench-{uuid.uuid4().hex[:8]}"
        if (root / "cgroup.controllers").exists() and "memory" in (root / "cgroup.controllers").read_text().split():
            self.v2, self.path = True, root / name
        elif (root / "memory" / "memory.limit_in_bytes").exists():
            self.v2, self.path = False, root / "memory" / name
        else:
            raise RuntimeError(f"no memory cgroup controller under {root} (neither v2 nor v1): cannot limit a process")
        self.path.mkdir()
        self.limit_bytes = limit_bytes
        self._write("memory.max" if self.v2 else "memory.limit_in_bytes", str(limit_bytes))
        if not self.v2 and (self.path / "memory.memsw.limit_in_bytes").exists():
            self._write("memory.memsw.limit_in_bytes", str(limit_bytes))  # no escape into swap either

    def wrap(self, command: list[str]) -> list[str]:
        """`command`, run from a shell that first moves itself into this cgroup (before anything is allocated)."""
        return ["sh", "-c", f'echo $$ > {self.path / "cgroup.procs"} && exec "$@"', "sh", *command]

    def peak_bytes(self) -> int:
        """The most memory the cgroup's processes held at once (v2 without memory.peak: now)."""
        for name in ("memory.peak", "memory.max_usage_in_bytes"):
            if (self.path / name).exists():
                return int((self.path / name).read_text())
        return int((self.path / "memory.current").read_text())

    def oom_kills(self) -> int:
        """Processes the kernel killed for going over the limit."""
        source = "memory.events" if self.v2 else "memory.oom_control"
        for line in (self.path / source).read_text().splitlines():
            key, _, value = line.partition(" ")
            if key == "oom_kill":
                return int(value)
        return 0

    def remove(self) -> None:
        """Remove the cgroup once its processes have exited."""
        if self.path.exists():
            self.path.rmdir()

    def _write(self, name: str, value: str) -> None:
        (self.path / name).write_text(value)
