"""What a failed attempt does to the job, by cause: `spec.runPolicy.podFailurePolicy`, after Kubernetes Job's.

Rules are tried in order and the first that matches decides: `FailJob` fails the job at once, `Ignore` restarts it
without counting toward backoffLimit, `Count` restarts it counting (what happens when no rule matches). A rule matches
on the exit code of the failed pod's container (`onExitCodes`, optionally only the launcher's or a worker's) or on
conditions of the failed pod (`onPodConditions`, e.g. DisruptionTarget: evicted, preempted, its node drained or lost).
Without a podFailurePolicy the defaults apply: disruptions are ignored, and the launcher's exit code 2 (bad
configuration: kubetrain's launcher and the programs' bad-input exit) fails the job. Pure decisions, no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass

FAIL_JOB, IGNORE, COUNT = "FailJob", "Ignore", "Count"
ACTIONS = (FAIL_JOB, IGNORE, COUNT)
ROLES = ("Launcher", "Worker")
BAD_CONFIGURATION_EXIT = 2
DISRUPTION_TARGET = "DisruptionTarget"


@dataclass(frozen=True)
class ExitCodes:
    """`onExitCodes`: the failed container's exit code is (operator In) or is not (NotIn) one of `values`."""

    operator: str
    values: frozenset[int]
    role: str | None = None  # "Launcher" or "Worker"; None: either

    def matches(self, role: str | None, exit_code: int | None) -> bool:
        if exit_code is None or (self.role is not None and self.role != role):
            return False
        return (exit_code in self.values) == (self.operator == "In")


@dataclass(frozen=True)
class Rule:
    action: str
    on_exit_codes: ExitCodes | None = None
    on_pod_conditions: tuple[tuple[str, str], ...] = ()  # (type, status) pairs; any one matches

    def describe(self, index: int) -> str:
        if self.on_exit_codes is not None:
            codes = self.on_exit_codes
            who = f"{codes.role.lower()} " if codes.role else ""
            values = ",".join(str(value) for value in sorted(codes.values))
            return f"podFailurePolicy rule {index} ({self.action} on {who}exit code {codes.operator} [{values}])"
        conditions = ", ".join(f"{kind}={state}" for kind, state in self.on_pod_conditions)
        return f"podFailurePolicy rule {index} ({self.action} on pod condition {conditions})"


DEFAULT_RULES = (
    Rule(IGNORE, on_pod_conditions=((DISRUPTION_TARGET, "True"),)),
    Rule(FAIL_JOB, on_exit_codes=ExitCodes("In", frozenset({BAD_CONFIGURATION_EXIT}), "Launcher")),
)


@dataclass(frozen=True)
class Cause:
    """What the policy looks at in a failure: the failed pod's role, its container's exit code, its conditions."""

    role: str | None = None  # "Launcher" or "Worker"
    exit_code: int | None = None
    conditions: frozenset[tuple[str, str]] = frozenset()


@dataclass(frozen=True)
class Decision:
    action: str
    rule: str | None  # the rule that matched, described; None when none did (Count)


def decide(cause: Cause, rules: tuple[Rule, ...]) -> Decision:
    """The first matching rule's action, else Count."""
    for index, rule in enumerate(rules):
        if rule.on_exit_codes is not None and rule.on_exit_codes.matches(cause.role, cause.exit_code):
            return Decision(rule.action, rule.describe(index))
        if any(condition in cause.conditions for condition in rule.on_pod_conditions):
            return Decision(rule.action, rule.describe(index))
    return Decision(COUNT, None)
