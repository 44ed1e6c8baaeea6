"""Which checkpoint rank 0 resumes from (spec.checkpoint.resume): a pure decision, no file or TensorFlow.

A job re-created under the same name finds the old job's checkpoints in its folder. `Always` resumes from the latest
whoever wrote it, `SameJob` only from one the job itself (its uid) wrote, `Never` from none. Either way the program
says what it did, in its log and in the job's status.
"""

from __future__ import annotations

from dataclasses import dataclass

ALWAYS, SAME_JOB, NEVER = "Always", "SameJob", "Never"
POLICIES = (ALWAYS, SAME_JOB, NEVER)


@dataclass(frozen=True)
class Written:
    """A checkpoint on disk and who wrote it (its commit record's savedAt and jobUID)."""

    path: str
    epoch: int
    written_at: str
    job_uid: str


@dataclass(frozen=True)
class Decision:
    resume: Written | None  # what to restore; None: start at epoch 1
    set_aside: bool  # move the checkpoints found aside, so the fresh run's own are the latest
    message: str  # one line for the log


def decide(latest: Written | None, policy: str, job_uid: str) -> Decision:
    """Resume from `latest` (the newest complete checkpoint, or None) or start fresh, under `policy` for the job with
    `job_uid`."""
    if policy not in POLICIES:
        raise ValueError(f"KUBETRAIN_CHECKPOINT_RESUME={policy!r} must be one of {', '.join(POLICIES)}")
    if latest is None:
        return Decision(None, False, "no checkpoint: starting at epoch 1")
    if policy == ALWAYS or (policy == SAME_JOB and latest.job_uid == job_uid):
        return Decision(latest, False, describe(latest, job_uid))
    why = ("spec.checkpoint.resume is Never" if policy == NEVER else
           f"spec.checkpoint.resume is SameJob and {writer(latest, job_uid)} wrote it")
    return Decision(None, True, f"not resuming from {latest.path} (epoch {latest.epoch}): {why}; starting at epoch 1")


def writer(checkpoint: Written, job_uid: str) -> str:
    """Who wrote `checkpoint`, as the job with `job_uid` sees it."""
    if not checkpoint.job_uid:
        return "a job that recorded no uid"
    if checkpoint.job_uid == job_uid:
        return f"this job (uid {job_uid})"
    return f"another job (uid {checkpoint.job_uid})"


def describe(checkpoint: Written, job_uid: str) -> str:
    """'resumed from epoch N of checkpoint X written at T by ...'."""
    return (f"resumed from epoch {checkpoint.epoch} of checkpoint {checkpoint.path} written at "
            f"{checkpoint.written_at or 'an unknown time'} by {writer(checkpoint, job_uid)}")
