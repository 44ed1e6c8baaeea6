"""What the API server's refusal to create a child means for the job: which reason the user sees, the fix, and
whether waiting can clear it. Pure: kubetrain.kube passes in the HTTP status and message it received."""

from __future__ import annotations

from dataclasses import dataclass

from kubetrain import reasons


@dataclass(frozen=True)
class Refusal:
    reason: str  # status.reason and the event's reason
    message: str  # the API server's words, the object named, then the fix
    retry: bool  # True: may clear without a spec change (retried with backoff); False: the job fails


# (reason, retry, the fix), by what the refusal says. First match wins.
_QUOTA = (reasons.QUOTA_EXCEEDED, True,
          "the job waits, retrying with backoff, until the namespace's ResourceQuota has room; "
          "lower spec.resources or raise the quota")  # fmt: skip
_RBAC = (reasons.OPERATOR_FORBIDDEN, True,
         "the operator's ServiceAccount lacks this permission: `helm upgrade` the chart to restore its RBAC; "
         "retrying with backoff")  # fmt: skip
_ADMISSION = (reasons.ADMISSION_DENIED, False,
              "an admission policy of the cluster (Pod Security, LimitRange, PriorityClass, ResourceQuota rules, "
              "a policy webhook) forbids what the spec asks for: change the spec and apply it again")  # fmt: skip
_UNAVAILABLE = (reasons.ADMISSION_UNAVAILABLE, True,
                "an admission webhook of the cluster did not answer; retrying with backoff")  # fmt: skip
_INVALID = (reasons.INVALID_SPEC, False, "the spec produced an object the API server cannot store: fix the spec")


def classify(code: int, kind: str, name: str, message: str) -> Refusal | None:
    """The meaning of HTTP `code` with `message` in answer to creating `kind` `name`; None: not a refusal of the
    object (a network error, a conflict, a server fault) and the caller's usual error handling applies."""
    rule = _rule(code, message)
    if rule is None:
        return None
    reason, retry, fix = rule
    return Refusal(reason, f"the API server refused {kind} {name}: {message.strip().rstrip('.')}. {fix}", retry)


def _rule(code: int, message: str) -> tuple[str, bool, str] | None:
    if code in (400, 422):
        return _INVALID
    if code == 403:
        if "exceeded quota" in message or "status unknown for quota" in message:  # the second: quota just made
            return _QUOTA
        if "cannot create resource" in message or "cannot patch resource" in message:
            return _RBAC
        return _ADMISSION
    if code >= 500 and "failed calling webhook" in message:
        return _UNAVAILABLE
    return None
