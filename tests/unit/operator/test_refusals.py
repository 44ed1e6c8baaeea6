"""What each refusal of the API server means for the job. The messages are the API server's own words (v1.34)."""

from __future__ import annotations

import pytest

from kubetrain import reasons as r
from kubetrain.refusals import classify, not_served

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
])
def test_each_refusal_gets_a_reason_a_fix_and_a_retry_verdict(code: int, message: str, reason: str,
                                                              retry: bool) -> None:
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


LIMIT_MEMORY = 'pods "t-worker-0" is forbidden: maximum memory usage per Container is 1Gi, but limit is 16Gi'
GPU_QUOTA = ('pods "t-worker-0" is forbidden: exceeded quota: gpus, requested: requests.nvidia.com/gpu=1, '
             'used: requests.nvidia.com/gpu=8, limited: requests.nvidia.com/gpu=8')
BAD_SELECTOR = 'Pod "t-worker-0" is invalid: spec.nodeSelector: Invalid value: "a b": a valid label must be ...'
BAD_LAUNCHER_ENV = ('Job.batch "t-launcher" is invalid: spec.template.spec.containers[0].env[3].name: Invalid value: '
                    '"1X": a valid environment variable name must consist of alphabetic characters')
BAD_CLAIM = ('Pod "t-worker-0" is invalid: spec.volumes[2].persistentVolumeClaim.claimName: Invalid value: "Data": '
             'a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters')


@pytest.mark.parametrize(("kind", "code", "message", "field"), [
    ("Pod", 403, PRIORITY, "spec.scheduling.priorityClassName"),
    ("Pod", 403, PSA, "spec.podTemplate.spec.securityContext"),
    ("Pod", 403, QUOTA, "spec.workers"),
    ("Pod", 403, GPU_QUOTA, "spec.resources.gpusPerWorker"),
    ("Pod", 403, MUST_LIMIT, "spec.resources.cpu"),
    ("Pod", 403, LIMIT, "spec.resources.cpu"),
    ("Pod", 403, LIMIT_MEMORY, "spec.resources.memory"),
    ("Pod", 422, INVALID, "spec.image"),
    ("Pod", 422, BAD_SELECTOR, "spec.scheduling.nodeSelector"),
    ("Job", 422, BAD_LAUNCHER_ENV, "spec.env"),
    ("Pod", 422, BAD_CLAIM, "spec.data.claimName or spec.checkpoint.claimName"),
])
def test_a_refusal_names_the_spec_field_to_change(kind: str, code: int, message: str, field: str) -> None:
    refusal = classify(code, kind, "t-worker-0", message)
    assert refusal is not None
    assert f"Change {field}: " in refusal.message or f"or change {field}: " in refusal.message, refusal.message


def test_an_install_problem_names_no_spec_field() -> None:
    for code, message in ((403, RBAC.replace("team-a", "cpu-team")), (500, WEBHOOK_DOWN)):
        refusal = classify(code, "Pod", "t-worker-0", message)
        assert refusal is not None and "Change spec" not in refusal.message and "change spec" not in refusal.message


def test_a_kind_the_cluster_does_not_serve_fails_naming_the_field_that_asked_for_it() -> None:
    refusal = not_served("scheduling.x-k8s.io/v1alpha1", "PodGroup", "t-workers")
    assert (refusal.reason, refusal.retry) == (r.KIND_NOT_SERVED, False)
    assert "does not serve PodGroup (scheduling.x-k8s.io/v1alpha1)" in refusal.message
    assert "Change spec.scheduling.gang.scheduler: Coscheduling needs scheduler-plugins" in refusal.message
