"""Leader election on a coordination.k8s.io Lease: of several operator replicas exactly one syncs jobs; the others
keep their watch-fed caches warm and take over once the leader stops renewing.

As in client-go, expiry is judged by this replica's own clock (how long the Lease has stayed unchanged since it saw
it), never by comparing another machine's timestamps; the leader steps down on its own before a standby can take
over (renew deadline < lease duration).

No error ends a round's caller: a refused or reset connection, a timeout, a conflict are logged and the next round
comes after `retry_seconds`, as in client-go (the Lease's timing, not a growing backoff, decides who leads). Every call
has a timeout, so that a round cannot hang."""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Timing:
    lease_seconds: int = 8  # a standby takes over this long after it last saw the leader renew
    renew_deadline_seconds: float = 5.0  # a leader that could not renew for this long stops syncing
    retry_seconds: float = 2.0  # how often each replica tries to acquire or renew


def next_spec(spec: Mapping[str, Any] | None, me: str, unchanged_for: float, now: str, timing: Timing
              ) -> dict[str, Any] | None:
    """The Lease spec `me` writes to lead (acquire or renew); None while another holder's lease runs (it changed
    less than its leaseDurationSeconds ago, as seen from here). `now` is an RFC 3339 MicroTime."""
    spec = spec or {}
    holder = spec.get("holderIdentity") or None
    duration = float(spec.get("leaseDurationSeconds") or timing.lease_seconds)
    if holder not in (None, me) and unchanged_for < duration:
        return None
    transitions = int(spec.get("leaseTransitions") or 0)
    return {
        "holderIdentity": me,
        "leaseDurationSeconds": timing.lease_seconds,
        "acquireTime": spec.get("acquireTime") if holder == me else now,
        "renewTime": now,
        "leaseTransitions": transitions if holder in (None, me) else transitions + 1,
    }


def owned_by_pod(pod_name: str, pod_uid: str) -> list[dict[str, Any]]:
    """The Lease's ownerReferences: the holder's own Pod, so that the Lease goes when the operator is uninstalled (even
    if it could not delete it itself: Helm removes its RBAC while the Pod is still stopping). Empty outside a Pod."""
    if not (pod_name and pod_uid):
        return []
    return [{"apiVersion": "v1", "kind": "Pod", "name": pod_name, "uid": pod_uid}]


def micro_now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class Elector:
    """One replica's view of the Lease; `try_lead()` is one round (blocking API calls: run it in a thread)."""

    def __init__(self, api_client: client.ApiClient, namespace: str, name: str, me: str,
                 timing: Timing = Timing(), owners: list[dict[str, Any]] | None = None) -> None:
        self.api = client.CoordinationV1Api(api_client)
        self.namespace, self.name, self.me, self.timing = namespace, name, me, timing
        self.owners = owners or []  # ownerReferences the holder writes on the Lease (see owned_by_pod)
        self._seen: tuple[str | None, str | None] = (None, None)  # (holder, renewTime) last seen
        self._seen_at = time.monotonic()
        self._renewed_at: float | None = None  # when this replica last wrote the Lease as its holder

    def try_lead(self) -> bool:
        """Acquire or renew; True while this replica may sync (renewed within the renew deadline). Never raises."""
        try:
            self._round()
        except ApiException as error:  # a conflict (another replica won the race) or an error status
            log.info("lease %s/%s: %s", self.namespace, self.name, error.reason)
        except Exception as error:  # the API server away: refused, reset, timed out (urllib3's errors)
            log.warning("lease %s/%s: %s: %s", self.namespace, self.name, type(error).__name__, error)
        return self.leading()

    @property
    def _timeout(self) -> tuple[float, float]:
        """(connect, read) seconds of each Lease call: a round ends well within the renew deadline."""
        return (self.timing.retry_seconds, self.timing.renew_deadline_seconds)

    def leading(self) -> bool:
        return self._renewed_at is not None and time.monotonic() - self._renewed_at < self.timing.renew_deadline_seconds

    def release(self) -> None:
        """On a clean shutdown: delete the Lease this replica holds (only that version of it), so that a standby takes
        over at once by creating a new one, and nothing is left behind once the operator is uninstalled."""
        if not self.leading():
            return
        self._renewed_at = None
        try:
            lease = self._read()
            if lease is not None and lease["spec"].get("holderIdentity") == self.me:
                held = client.V1Preconditions(resource_version=lease["metadata"]["resourceVersion"])
                self.api.delete_namespaced_lease(self.name, self.namespace, _request_timeout=self._timeout,
                                                 body=client.V1DeleteOptions(preconditions=held))
        except Exception as error:  # the standby then takes over when the Lease expires
            log.warning("could not release lease %s/%s: %s", self.namespace, self.name, error)

    def _read(self) -> dict[str, Any] | None:
        try:
            lease = self.api.read_namespaced_lease(self.name, self.namespace, _request_timeout=self._timeout)
        except ApiException as error:
            if error.status == 404:
                return None
            raise
        body: dict[str, Any] = self.api.api_client.sanitize_for_serialization(lease)
        body.setdefault("spec", {})
        return body

    def _write(self, lease: dict[str, Any], create: bool) -> None:
        """Create, or replace at the resourceVersion read: the write fails if another replica wrote first."""
        if create:
            self.api.create_namespaced_lease(self.namespace, lease,  # type: ignore[arg-type]  # dicts are accepted
                                             _request_timeout=self._timeout)
        else:
            self.api.replace_namespaced_lease(self.name, self.namespace, lease,  # type: ignore[arg-type]
                                              _request_timeout=self._timeout)

    def _round(self) -> None:
        lease = self._read()
        spec = lease["spec"] if lease is not None else None
        seen = (spec.get("holderIdentity"), spec.get("renewTime")) if spec else (None, None)
        if seen != self._seen:
            self._seen, self._seen_at = seen, time.monotonic()
        wanted = next_spec(spec, self.me, time.monotonic() - self._seen_at, micro_now(), self.timing)
        if wanted is None:
            if self._renewed_at is not None:
                log.warning("lease %s/%s is held by %s: standing by", self.namespace, self.name, seen[0])
            self._renewed_at = None
            return
        if lease is None:
            lease = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                     "metadata": {"name": self.name, "namespace": self.namespace}}
        metadata = {**lease["metadata"], "ownerReferences": self.owners} if self.owners else lease["metadata"]
        self._write({**lease, "metadata": metadata, "spec": wanted}, create="resourceVersion" not in lease["metadata"])
        if self._renewed_at is None:
            log.info("lease %s/%s acquired by %s: syncing jobs", self.namespace, self.name, self.me)
        self._renewed_at = time.monotonic()
        self._seen, self._seen_at = (self.me, wanted["renewTime"]), self._renewed_at
