"""What each refusal of the API server means for the job. The messages are the API server's own words (v1.34)."""

from __future__ import annotations

import pytest

from kubetrain import reasons as r
from kubetrain.refusals import classify

QUOTA = 'pods "t-worker-1" is forbidden: exceeded quota: two-pods, requested: pods=1, used: pods=2, limited: pods=2'
RBAC = ('pods is forbidden: User "system:serviceaccount:kubetrain-system:kubetrain" cannot create resource "pods" in '
        'API group "" in the namespace "team-a"')
QUOTA_NEW = 'pods "t-worker-0" is forbidden: status unknown for quota: two-pods, resources: pods'
PRIORITY = 'pods "t-worker-0" is forbidden: no PriorityClass with name urgent was found'
LIMIT = 'pods "t-worker-0" is forbidden: maximum cpu usage per Container is 1, but limit is 2'
PSA = 'pods "t-worker-0" is forbidden: violates PodSecurity "restricted:latest": runAsNonRoot != true'
MUST_LIMIT = 'pods "t-worker-0" is forbidden: failed quota: q: must specify limits.cpu for: worker'
WEBHOOK_DOWN = ('Internal error occurred: failed calling webhook "validate.kyverno.svc": failed to call webhook: '
                'Post "https://kyverno-svc.kyverno.svc:443/validate": dial tcp: connection refused')
INVALID = 'Pod "t-worker-0" is invalid: spec.containers[0].image: Required value'


@pytest.mark.parametrize(("code", "message", "reason", "retry"), [
    (403, QUOTA, r.QUOTA_EXCEEDED, True),
    (403, QUOTA_NEW, r.QUOTA_EXCEEDED, True),
    (403, RBAC, r.OPERATOR_FORBIDDEN, True),
    (500, WEBHOOK_DOWN, r.ADMISSION_UNAVAILABLE, True),
    (403, PRIORITY, r.ADMISSION_DENIED, False),
    (403, LIMIT, r.ADMISSION_DENIED, False),
    (403, PSA, r.ADMISSION_DENIED, False),
    (403, MUST_LIMIT, r.ADMISSION_DENIED, False),
    (422, INVALID, r.INVALID_SPEC, False),
])  # fmt: skip
def test_each_refusal_gets_a_reason_a_fix_and_a_retry_verdict(code: int, message: str, reason: str,
                                                              retry: bool) -> None:  # fmt: skip
    refusal = classify(code, "Pod", "t-worker-0", message)
    assert refusal is not None
    assert (refusal.reason, refusal.retry) == (reason, retry)
    assert refusal.message.startswith("the API server refused Pod t-worker-0: ")
    assert message.rstrip(".") in refusal.message, "the API server's own words reach the user"
    assert ("retrying with backoff" in refusal.message) == retry, "the fix says whether the job waits"
    assert reason in r.WAITING_REFUSALS or not retry


@pytest.mark.parametrize(("code", "message"), [(409, "already exists"), (500, "etcdserver: request timed out"),
                                               (429, "too many requests"), (404, "namespaces not found")])
def test_what_is_not_a_refusal_of_the_object_is_left_to_the_usual_retry(code: int, message: str) -> None:
    assert classify(code, "Pod", "t-worker-0", message) is None
