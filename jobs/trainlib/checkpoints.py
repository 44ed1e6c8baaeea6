"""Rank-0 checkpoints on disk: atomic writes, keep the last K, find the latest complete one.

A checkpoint for epoch E (E epochs completed) is two files in the checkpoint directory:

- `ckpt-00000E.h5`: the state, as HDF5 datasets `state/<group>/<index>` (each with its variable name in attribute
  `name`), e.g. group `model` (all model weights, including batch-norm statistics) and group `optimizer` (the
  optimizer's iteration counter and slot variables), plus attributes `epoch` and `metrics`.
- `ckpt-00000E.json`: the commit record: epoch, metrics, the state file's size and sha256, who wrote it (host, pid,
  and the DistributedTraining's uid, KUBETRAIN_JOB_UID) and when.

Each file is written to a temporary name in the same directory, flushed and fsynced, renamed into place, and the
directory is fsynced. The commit record is written last, so a process killed at any point (even kill -9) leaves either
a complete checkpoint or one without a commit record, which `latest()` ignores (and later saves clean up).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import socket
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import h5py
import numpy as np

from trainlib.metrics import finite_metrics

FORMAT = "kubetrain-checkpoint/1"
JOB_UID_ENV = "KUBETRAIN_JOB_UID"
SET_ASIDE_PREFIX = "superseded-"
_STATE = re.compile(r"^ckpt-(\d+)\.h5$")
_RECORD = re.compile(r"^ckpt-(\d+)\.json$")
_TEMPORARY = re.compile(r"^\.ckpt-\d+\.(h5|json)\.\d+\.tmp$")

log = logging.getLogger(__name__)

State = dict[str, list[np.ndarray]]


@dataclass(frozen=True)
class Checkpoint:
    """A complete checkpoint: `epoch` epochs were done when it was written."""

    path: str
    epoch: int
    metrics: dict[str, float] = field(default_factory=dict)
    saved_at: str = ""  # UTC, RFC 3339
    job_uid: str = ""  # the uid of the DistributedTraining that wrote it ("" outside one)


def _fsync_directory(directory: str) -> None:
    handle = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(handle)
    finally:
        os.close(handle)


def _fsync_file(path: str) -> None:
    with open(path, "rb+") as handle:
        handle.flush()
        os.fsync(handle.fileno())


def _sha256(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def state_digest(arrays: Iterable[np.ndarray]) -> str:
    """A short fingerprint of a list of arrays (used to show that every rank holds the same weights)."""
    digest = hashlib.sha256()
    for array in arrays:
        digest.update(np.ascontiguousarray(array).tobytes())
    return digest.hexdigest()[:16]


class CheckpointManager:
    """Saves and finds checkpoints in one directory. Only rank 0 should call `save`."""

    def __init__(self, directory: str, keep: int = 3, job_uid: str | None = None) -> None:
        """`job_uid`: recorded with every checkpoint; by default KUBETRAIN_JOB_UID (set by the operator)."""
        if keep < 1:
            raise ValueError(f"keep must be at least 1, got {keep}")
        self.directory = directory
        self.keep = keep
        self.job_uid = os.environ.get(JOB_UID_ENV, "") if job_uid is None else job_uid

    def state_path(self, epoch: int) -> str:
        return os.path.join(self.directory, f"ckpt-{epoch:06d}.h5")

    def record_path(self, epoch: int) -> str:
        return os.path.join(self.directory, f"ckpt-{epoch:06d}.json")

    def _temporary(self, final: str) -> str:
        return os.path.join(self.directory, f".{os.path.basename(final)}.{os.getpid()}.tmp")

    def save(self, epoch: int, state: Mapping[str, Sequence[np.ndarray]], metrics: Mapping[str, object],
             names: Mapping[str, Sequence[str]] | None = None, rank: int = 0) -> Checkpoint:
        """Write the checkpoint for `epoch` atomically, then keep only the newest `keep` complete ones."""
        os.makedirs(self.directory, exist_ok=True)
        clean_metrics = finite_metrics(metrics)
        state_path = self.state_path(epoch)
        temporary = self._temporary(state_path)
        with h5py.File(temporary, "w") as handle:
            handle.attrs["format"] = FORMAT
            handle.attrs["epoch"] = epoch
            handle.attrs["metrics"] = json.dumps(clean_metrics)
            for group_name, arrays in state.items():
                group = handle.create_group(f"state/{group_name}")
                group.attrs["count"] = len(arrays)
                group_names = (names or {}).get(group_name, [])
                for index, array in enumerate(arrays):
                    dataset = group.create_dataset(f"{index:05d}", data=np.asarray(array))
                    if index < len(group_names):
                        dataset.attrs["name"] = group_names[index]
        _fsync_file(temporary)
        os.replace(temporary, state_path)
        _fsync_directory(self.directory)
        record = {
            "format": FORMAT,
            "epoch": epoch,
            "metrics": clean_metrics,
            "state": os.path.basename(state_path),
            "size": os.path.getsize(state_path),
            "sha256": _sha256(state_path),
            "groups": {group_name: len(arrays) for group_name, arrays in state.items()},
            "savedAt": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "rank": rank,
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "jobUID": self.job_uid,
        }
        self._write_json_atomically(self.record_path(epoch), record)
        self.prune()
        return Checkpoint(path=state_path, epoch=epoch, metrics=clean_metrics, saved_at=str(record["savedAt"]),
                          job_uid=self.job_uid)

    def _write_json_atomically(self, path: str, payload: Mapping[str, object]) -> None:
        temporary = self._temporary(path)
        with open(temporary, "w", encoding="utf-8") as handle:
            json.dump(payload, handle, indent=2, sort_keys=True)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)
        _fsync_directory(self.directory)

    def _read_record(self, epoch: int) -> dict | None:
        """The commit record of `epoch` if it and its state file are complete and match, else None."""
        try:
            with open(self.record_path(epoch), encoding="utf-8") as handle:
                record = json.load(handle)
            state_path = self.state_path(epoch)
            if record.get("format") != FORMAT or record.get("epoch") != epoch:
                return None
            if os.path.getsize(state_path) != record["size"] or _sha256(state_path) != record["sha256"]:
                log.warning("checkpoint %s does not match its commit record; skipping it", state_path)
                return None
            return record
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def _epochs_on_disk(self) -> list[int]:
        if not os.path.isdir(self.directory):
            return []
        return sorted({int(match.group(1)) for name in os.listdir(self.directory)
                       if (match := _RECORD.match(name))}, reverse=True)

    def _checkpoint(self, epoch: int, record: Mapping[str, Any]) -> Checkpoint:
        return Checkpoint(self.state_path(epoch), epoch, dict(record.get("metrics", {})),
                          str(record.get("savedAt", "")), str(record.get("jobUID", "")))

    def checkpoints(self) -> list[Checkpoint]:
        """Every complete checkpoint, newest first."""
        found = []
        for epoch in self._epochs_on_disk():
            record = self._read_record(epoch)
            if record is not None:
                found.append(self._checkpoint(epoch, record))
        return found

    def latest(self) -> Checkpoint | None:
        """The newest complete checkpoint, or None when there is none (a fresh start)."""
        for epoch in self._epochs_on_disk():
            record = self._read_record(epoch)
            if record is not None:
                return self._checkpoint(epoch, record)
        return None

    def set_aside(self) -> str | None:
        """Move every checkpoint file into a new `superseded-<UTC time>` folder beside them, so a fresh run's own
        checkpoints are the latest and the old ones are kept; returns that folder (None: nothing to move)."""
        if not os.path.isdir(self.directory):
            return None
        names = [name for name in os.listdir(self.directory) if _STATE.match(name) or _RECORD.match(name)]
        if not names:
            return None
        target = os.path.join(self.directory, SET_ASIDE_PREFIX + time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()))
        os.makedirs(target, exist_ok=True)
        for name in names:
            os.replace(os.path.join(self.directory, name), os.path.join(target, name))
        _fsync_directory(self.directory)
        return target

    def load(self, checkpoint: Checkpoint) -> tuple[State, dict[str, list[str]]]:
        """The state arrays of `checkpoint` per group, and the variable names recorded with them."""
        state: State = {}
        names: dict[str, list[str]] = {}
        with h5py.File(checkpoint.path, "r") as handle:
            for group_name, group in handle["state"].items():
                keys = sorted(group.keys())
                state[group_name] = [group[key][()] for key in keys]
                names[group_name] = [str(group[key].attrs.get("name", key)) for key in keys]
        return state, names

    def prune(self) -> None:
        """Delete all but the newest `keep` complete checkpoints, plus leftovers of interrupted saves."""
        if not os.path.isdir(self.directory):
            return
        complete = [checkpoint.epoch for checkpoint in self.checkpoints()]
        keep = set(complete[: self.keep])
        newest = complete[0] if complete else None
        for name in os.listdir(self.directory):
            path = os.path.join(self.directory, name)
            match = _STATE.match(name) or _RECORD.match(name)
            if match:
                epoch = int(match.group(1))
                # An uncommitted state file newer than the newest commit may be a save in progress: leave it.
                stale = epoch not in keep and (epoch in complete or (newest is not None and epoch < newest))
                if stale:
                    os.remove(path)
            elif _TEMPORARY.match(name) and not name.endswith(f".{os.getpid()}.tmp"):
                os.remove(path)
