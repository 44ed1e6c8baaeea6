"""What the API server's refusal to create a child means for the job: which reason the user sees, the spec field to
change and the fix, and whether waiting can clear it. Pure: kubetrain.kube passes in the HTTP status and message it
received."""

from __future__ import annotations

import re
from dataclasses import dataclass

from kubetrain import reasons
from kubetrain.children import COSCHEDULING_POD_GROUP, VOLCANO_POD_GROUP


@dataclass(frozen=True)
class Refusal:
    reason: str  # status.reason and the event's reason
    message: str  # the API server's words, the object named, the spec field to change, then the fix
    retry: bool  # True: may clear without a spec change (retried with backoff); False: the job fails


# (reason, retry, the fix; the fix when the refusal points at a spec field), by what the refusal says.
_QUOTA = (reasons.QUOTA_EXCEEDED, True,
          "the job waits, retrying with backoff, until the namespace's ResourceQuota has room; "
          "lower spec.resources or raise the quota",
          "the job waits, retrying with backoff, until the namespace's ResourceQuota has room, or change "
          "{field}: {change}")
_RBAC = (reasons.OPERATOR_FORBIDDEN, True,
         "the operator's ServiceAccount lacks this permission: `helm upgrade` the chart to restore its RBAC; "
         "retrying with backoff", "")
_ADMISSION = (reasons.ADMISSION_DENIED, False,
              "an admission policy of the cluster (Pod Security, LimitRange, PriorityClass, ResourceQuota rules, "
              "a policy webhook) forbids what the spec asks for: change the spec and apply it again",
              "change {field}: {change}; then apply the job again")
_UNAVAILABLE = (reasons.ADMISSION_UNAVAILABLE, True,
                "an admission webhook of the cluster did not answer; retrying with backoff", "")
_INVALID = (reasons.INVALID_SPEC, False, "the spec produced an object the API server cannot store: fix the spec",
            "change {field}: {change}; then apply the job again")

# The spec field behind the words of a refusal, and what to change there. First match wins.
_WORDS = (
    (r"no PriorityClass with name", "spec.scheduling.priorityClassName",
     "name a PriorityClass that exists (kubectl get priorityclasses), or leave it out"),
    (r"violates PodSecurity", "spec.podTemplate.spec.securityContext",
     "meet the namespace's Pod Security level, or run the job in a namespace whose level allows the pods"),
    (r"requested: pods=", "spec.workers", "the quota counts pods, one per worker"),
    (r"must specify[^;]*limits\.cpu", "spec.resources.cpu", "the namespace's quota asks every pod for a cpu limit"),
    (r"must specify[^;]*limits\.memory", "spec.resources.memory",
     "the namespace's quota asks every pod for a memory limit"),
    (r"nvidia\.com/gpu", "spec.resources.gpusPerWorker", "ask for GPUs within the namespace's quota or limits"),
    (r"(requests|limits)\.cpu|cpu usage per", "spec.resources.cpu",
     "ask for cpu within the namespace's quota or LimitRange"),
    (r"(requests|limits)\.memory|memory usage per", "spec.resources.memory",
     "ask for memory within the namespace's quota or LimitRange"),
)
# A field of a refused pod (or of the launcher Job's pod template) and the spec field it comes from. First match wins.
_POD_FIELDS = (
    (r"spec\.priorityClassName", "spec.scheduling.priorityClassName"),
    (r"spec\.nodeSelector", "spec.scheduling.nodeSelector"),
    (r"spec\.tolerations", "spec.scheduling.tolerations"),
    (r"spec\.containers\[0\]\.image\b", "spec.image"),
    (r"spec\.containers\[0\]\.imagePullPolicy", "spec.imagePullPolicy"),
    (r"spec\.containers\[0\]\.(command|args)", "spec.command"),
    (r"spec\.containers\[0\]\.env", "spec.env"),
    (r"spec\.containers\[0\]\.resources", "spec.resources"),
    (r"spec\.volumes\[\d+\]\.persistentVolumeClaim", "spec.data.claimName or spec.checkpoint.claimName"),
    (r"metadata\.(labels|annotations)", "spec.podTemplate.metadata"),
    (r"(spec|metadata)\.", "spec.podTemplate"),
)
_OBJECT_FIELD = re.compile(r"((?:metadata|spec)(?:\.\w+|\[[^\]]*\])*): ")
# The kinds only some clusters serve, and the spec field that asks for them.
_OPTIONAL_KINDS = {
    (COSCHEDULING_POD_GROUP.api_version, COSCHEDULING_POD_GROUP.kind): (
        "spec.scheduling.gang.scheduler", "Coscheduling needs scheduler-plugins (its PodGroup CRD and scheduler)"),
    (VOLCANO_POD_GROUP.api_version, VOLCANO_POD_GROUP.kind): (
        "spec.scheduling.gang.scheduler", "Volcano needs Volcano (its CRDs and scheduler)"),
}


def classify(code: int, kind: str, name: str, message: str) -> Refusal | None:
    """The meaning of HTTP `code` with `message` in answer to creating `kind` `name`; None: not a refusal of the
    object (a network error, a conflict, a server fault) and the caller's usual error handling applies."""
    rule = _rule(code, message)
    if rule is None:
        return None
    reason, retry, fix, field_fix = rule
    words = message.strip().rstrip(".")
    field = spec_field(kind, words) if field_fix else None
    if field is not None:
        fix = field_fix.format(field=field[0], change=field[1])
    return Refusal(reason, f"the API server refused {kind} {name}: {words}. {fix[0].upper()}{fix[1:]}", retry)


def spec_field(kind: str, message: str) -> tuple[str, str] | None:
    """(the spec field a refusal of `kind` points at, what to change there), or None where it names none."""
    for words, field, change in _WORDS:
        if re.search(words, message):
            return field, change
    if kind not in ("Pod", "Job"):
        return None
    for path in _OBJECT_FIELD.findall(message):
        path = path.removeprefix("spec.template.")  # the launcher Job's pod template
        for pattern, field in _POD_FIELDS:
            if re.match(pattern, path):
                return field, f"the pod's {path} comes from it"
    return None


def not_served(api_version: str, kind: str, name: str) -> Refusal:
    """The cluster does not serve `kind` at all: no wait makes it appear, so the job fails, naming what asked for it."""
    field, needs = _OPTIONAL_KINDS.get((api_version, kind), ("spec", f"install what serves {kind}"))
    return Refusal(reasons.KIND_NOT_SERVED,
                   f"the cluster does not serve {kind} ({api_version}), so {kind} {name} cannot be created. "
                   f"Change {field}: {needs}; install it and create the job again, or choose another", False)


def sync_failed(error: BaseException) -> Refusal:
    """A pass that failed in a way the operator does not know: the job waits under SyncFailed and it retries."""
    words = " ".join(str(error).split()) or "no message"
    return Refusal(reasons.SYNC_FAILED,
                   f"the operator could not reconcile the job: {type(error).__name__}: {words[:500]}. Retrying with "
                   "backoff; the operator's log has the details", True)


def _rule(code: int, message: str) -> tuple[str, bool, str, str] | None:
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
