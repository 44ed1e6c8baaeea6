"""The ConfigMap `<name>-attempt-<N>-log`: the end of a failed attempt's launcher output, kept after its pods are gone.

The operator asks the API server for the launcher pod's last TAIL_LINES lines, at most READ_BYTES of them. It keeps
their last KEEP_BYTES, from a line's start, gzip-compressed in binaryData (logs shrink about tenfold in etcd). An
annotation says what was cut, or why nothing could be read. The operator's watch leaves the copies out
(kubetrain.children): they cost its memory nothing. The copies of the newest KEPT_ATTEMPTS attempts stay
(`pushed_out`). `read_attempt_log` reads a copy back, for `kubetrain logs` and the Python client."""

from __future__ import annotations

import base64
import gzip
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from kubetrain.api import Job
from kubetrain.contract import LABEL_ATTEMPT, ROLE_ATTEMPT_LOG, attempt_log_name
from kubetrain.manifests.names import metadata

KIB = 1024
MIB = 1024 * KIB
TAIL_LINES = 5000  # the lines of the log asked for
READ_BYTES = 4 * MIB  # the most the API server sends of them
KEEP_BYTES = 512 * KIB  # the most text kept: under the 1 MiB a ConfigMap holds, even if gzip gains nothing
KEPT_ATTEMPTS = 5  # the copies of the newest attempts are kept, older ones deleted
LOG_KEY = "log.gz"
NOTE_ANNOTATION = "kubetrain.dev/log-note"
POD_ANNOTATION = "kubetrain.dev/launcher-pod"


@dataclass(frozen=True)
class Tail:
    """The text kept of a launcher's log, and what its reader should know of it ("" when nothing was cut)."""

    text: str
    note: str = ""


def size(count: int) -> str:
    """`512 KiB`, `4 MiB`, `1.5 MiB`."""
    if count < KIB:
        return f"{count} bytes"
    if count < MIB:
        return f"{count / KIB:.0f} KiB"
    return f"{count / MIB:.1f}".removesuffix(".0") + " MiB"


def tail_of(raw: bytes, lines_asked: int, read_bytes: int = READ_BYTES, keep_bytes: int = KEEP_BYTES) -> Tail:
    """What is kept of `raw`, the answer to a request for the log's last `lines_asked` lines capped at `read_bytes`:
    its last `keep_bytes` as UTF-8 (invalid bytes replaced), from the first line that starts within them."""
    encoded = raw.decode("utf-8", errors="replace").encode()
    notes = []
    start = 0
    if len(encoded) > keep_bytes:
        start = len(encoded) - keep_bytes
        newline = encoded.find(b"\n", start - 1)
        if 0 <= newline < len(encoded) - 1:
            start = newline + 1
        while start < len(encoded) and encoded[start] & 0xC0 == 0x80:  # never from the middle of a character
            start += 1
    kept = encoded[start:].decode()
    if start:
        notes.append(f"the start of the launcher's log was cut: this copy keeps its last {size(len(kept.encode()))} "
                     f"({kept.count(chr(10))} lines)")
    elif raw.count(b"\n") >= lines_asked:
        notes.append(f"only the launcher's last {lines_asked} lines were read: any before them are not in this copy")
    if len(raw) >= read_bytes:
        notes.append(f"reading stopped after {size(read_bytes)} of its last {lines_asked} lines: the end of the log "
                     "is missing")
    return Tail(kept, "; ".join(notes))


def fewer_lines(raw: bytes, keep_bytes: int = KEEP_BYTES) -> int:
    """The lines to ask for again when an answer stopped at the byte cap: as many as fit in `keep_bytes` at the
    average length of the lines it brought (at least one)."""
    return max(1, raw.count(b"\n") * keep_bytes // max(len(raw), 1))


def unreadable(pod: str, reason: str) -> Tail:
    return Tail("", f"the log of launcher pod {pod} could not be read: {reason}")


def no_launcher_pod(attempt: int) -> Tail:
    return Tail("", f"no launcher pod of attempt {attempt} was left to read: it was deleted before the attempt ended "
                    "(with its node, or by hand)")


def pushed_out(attempts: Iterable[int], keep: int = KEPT_ATTEMPTS) -> list[int]:
    """The attempts whose copies go: all but the newest `keep`."""
    return sorted(set(attempts))[:-keep] if keep else sorted(set(attempts))


def build_attempt_log(job: Job, attempt: int, pod: str | None, tail: Tail) -> dict[str, Any]:
    """The copy of attempt `attempt`'s launcher output; `pod` is the launcher pod it was read from (None: none was
    left). Immutable: it is written once, and goes with the job or when newer attempts' copies push it out."""
    meta = metadata(job, attempt_log_name(job.name, attempt), ROLE_ATTEMPT_LOG, **{LABEL_ATTEMPT: str(attempt)})
    annotations = {POD_ANNOTATION: pod} if pod else {}
    if tail.note:
        annotations[NOTE_ANNOTATION] = tail.note
    if annotations:
        meta["annotations"] = annotations
    packed = base64.b64encode(gzip.compress(tail.text.encode(), mtime=0)).decode()
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "immutable": True,
            "binaryData": {LOG_KEY: packed}}


def read_attempt_log(configmap: Mapping[str, Any]) -> Tail:
    """The text and note of a copy, as the API server returns it."""
    packed = (configmap.get("binaryData") or {}).get(LOG_KEY)
    text = gzip.decompress(base64.b64decode(packed)).decode(errors="replace") if packed else ""
    annotations = (configmap.get("metadata") or {}).get("annotations") or {}
    return Tail(text, str(annotations.get(NOTE_ANNOTATION, "")))
