"""Who leads: the Lease decision each replica makes from what it has seen, by its own clock."""

from __future__ import annotations

from kubetrain.runtime.leader import Timing, next_spec, owned_by_pod

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
