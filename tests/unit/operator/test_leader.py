"""Who leads: the Lease decision each replica makes from what it has seen, by its own clock; a round the API server
cannot answer is lost, never the election."""

from __future__ import annotations

import pytest
import urllib3
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from kubetrain.runtime.leader import Elector, Timing, next_spec, owned_by_pod

T = Timing(lease_seconds=8)
NOW = "2026-11-22T12:00:00.000000Z"
HELD = {"holderIdentity": "a", "leaseDurationSeconds": 8, "acquireTime": "2026-11-22T11:00:00.000000Z",
        "renewTime": "2026-11-22T11:59:58.000000Z", "leaseTransitions": 3}


def test_no_lease_or_a_released_one_is_taken_at_once() -> None:
    assert next_spec(None, "b", 0.0, NOW, T) == {"holderIdentity": "b", "leaseDurationSeconds": 8,
                                                "acquireTime": NOW, "renewTime": NOW, "leaseTransitions": 0}
    released = {**HELD, "holderIdentity": None, "leaseDurationSeconds": 1}
    taken = next_spec(released, "b", 0.0, NOW, T)
    assert taken is not None and taken["holderIdentity"] == "b" and taken["leaseTransitions"] == 3


def test_another_holders_lease_is_respected_until_it_stayed_unchanged_for_its_duration() -> None:
    assert next_spec(HELD, "b", 7.9, NOW, T) is None
    taken = next_spec(HELD, "b", 8.0, NOW, T)
    assert taken is not None
    assert (taken["holderIdentity"], taken["acquireTime"], taken["leaseTransitions"]) == ("b", NOW, 4)


def test_the_holder_renews_keeping_its_acquire_time() -> None:
    renewed = next_spec(HELD, "a", 0.0, NOW, T)
    assert renewed is not None
    assert (renewed["acquireTime"], renewed["renewTime"], renewed["leaseTransitions"]) == (HELD["acquireTime"], NOW, 3)


def test_the_lease_is_owned_by_the_operators_pod_so_it_goes_with_the_operator() -> None:
    assert owned_by_pod("kubetrain-7548fb88dc-bq5x5", "0b6e") == [
        {"apiVersion": "v1", "kind": "Pod", "name": "kubetrain-7548fb88dc-bq5x5", "uid": "0b6e"}]
    assert owned_by_pod("", "") == []  # `kopf run` on a laptop: no Pod to own it


class FlakyLeases:
    """CoordinationV1Api's Lease calls, failing as a stopped API server makes them fail until `up` is set."""

    def __init__(self, error: Exception) -> None:
        self.error = error
        self.up = False
        self.lease: dict | None = None
        self.timeouts: list[object] = []

    def _answer(self, timeout: object) -> None:
        self.timeouts.append(timeout)
        if not self.up:
            raise self.error

    def read_namespaced_lease(self, name: str, namespace: str, _request_timeout: object = None) -> dict:
        self._answer(_request_timeout)
        if self.lease is None:
            raise ApiException(status=404, reason="Not Found")
        return self.lease

    def create_namespaced_lease(self, namespace: str, body: dict, _request_timeout: object = None) -> None:
        self._answer(_request_timeout)
        self.lease = {**body, "metadata": {**body["metadata"], "resourceVersion": "1"}}

    replace_namespaced_lease = None  # not reached: the lease is created once

    class api_client:  # noqa: N801  (the attribute CoordinationV1Api has)
        @staticmethod
        def sanitize_for_serialization(lease: dict) -> dict:
            return lease


@pytest.mark.parametrize("error", [
    urllib3.exceptions.MaxRetryError(None, "/apis/coordination.k8s.io", reason=ConnectionRefusedError(111, "refused")),
    urllib3.exceptions.ProtocolError("Connection aborted.", ConnectionResetError(104, "reset by peer")),
    urllib3.exceptions.ReadTimeoutError(None, "/apis/coordination.k8s.io", "read timed out"),
], ids=["refused", "reset", "timeout"])
def test_a_lease_call_the_api_server_cannot_answer_is_one_lost_round_never_the_end_of_the_election(
    error: Exception, caplog: pytest.LogCaptureFixture
) -> None:
    elector = Elector(client.ApiClient(), "kubetrain-system", "kubetrain", "me", Timing(retry_seconds=0.5))
    leases = FlakyLeases(error)
    elector.api = leases  # type: ignore[assignment]
    assert elector.try_lead() is False
    assert "lease kubetrain-system/kubetrain" in caplog.text and type(error).__name__ in caplog.text
    leases.up = True
    assert elector.try_lead() is True and leases.lease is not None
    assert set(leases.timeouts) == {(0.5, 5.0)}, "every Lease call has a (connect, read) timeout"
