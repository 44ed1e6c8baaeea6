"""Which checkpoint a job resumes from under spec.checkpoint.resume, and what it says: the job re-created under the
same name finds the old job's checkpoints and resumes them only when told to, never silently."""

from __future__ import annotations

import os

import pytest

from trainlib.checkpoints import CheckpointManager
from trainlib.resume_policy import Written, decide

OLD = Written("/ckpt/ml/cifar/ckpt-000007.h5", 7, "2026-11-20T10:00:00Z", "uid-old")
OWN = Written("/ckpt/ml/cifar/ckpt-000003.h5", 3, "2026-11-21T10:00:00Z", "uid-new")


@pytest.mark.parametrize(("latest", "policy", "resumes", "set_aside"), [
    (None, "Always", None, False),
    (None, "SameJob", None, False),
    (OLD, "Always", OLD, False),  # what a re-created job did before, now said aloud
    (OLD, "SameJob", None, True),  # a re-created job starts fresh
    (OWN, "SameJob", OWN, False),  # a restart of the same job resumes
    (OWN, "Never", None, True),
    (Written("/ckpt/x.h5", 2, "", ""), "SameJob", None, True),  # written before checkpoints recorded a uid
])
def test_the_decision(latest: Written | None, policy: str, resumes: Written | None, set_aside: bool) -> None:
    decision = decide(latest, policy, "uid-new")
    assert (decision.resume, decision.set_aside) == (resumes, set_aside)


def test_the_messages_name_the_checkpoint_its_time_and_its_writer() -> None:
    assert decide(OLD, "Always", "uid-new").message == (
        "resumed from epoch 7 of checkpoint /ckpt/ml/cifar/ckpt-000007.h5 written at 2026-11-20T10:00:00Z by "
        "another job (uid uid-old)")
    assert "by this job (uid uid-new)" in decide(OWN, "Always", "uid-new").message
    assert decide(OLD, "SameJob", "uid-new").message == (
        "not resuming from /ckpt/ml/cifar/ckpt-000007.h5 (epoch 7): spec.checkpoint.resume is SameJob and another "
        "job (uid uid-old) wrote it; starting at epoch 1")


def test_an_unknown_policy_is_refused() -> None:
    with pytest.raises(ValueError, match="KUBETRAIN_CHECKPOINT_RESUME='sometimes' must be one of Always, SameJob"):
        decide(OLD, "sometimes", "uid-new")


def test_checkpoints_record_their_job_and_a_fresh_start_keeps_the_old_ones_aside(tmp_path) -> None:
    old = CheckpointManager(str(tmp_path), keep=2, job_uid="uid-old")
    for epoch in (6, 7):
        old.save(epoch, {"model": []}, {"loss": 1.0})
    latest = old.latest()
    assert latest is not None and (latest.epoch, latest.job_uid) == (7, "uid-old") and latest.saved_at

    new = CheckpointManager(str(tmp_path), keep=2, job_uid="uid-new")
    moved = new.set_aside()
    assert moved is not None and os.path.basename(moved).startswith("superseded-")
    assert sorted(os.listdir(moved)) == [f"ckpt-00000{e}.{x}" for e in (6, 7) for x in ("h5", "json")]
    assert new.latest() is None
    new.save(1, {"model": []}, {"loss": 2.0})  # the fresh run's first checkpoint is the latest, and is kept
    assert [(c.epoch, c.job_uid) for c in new.checkpoints()] == [(1, "uid-new")]
    assert new.set_aside() is not None and CheckpointManager(str(tmp_path)).set_aside() is None
