"""`--strategy multiworker` checks TF_CONFIG before TensorFlow starts: who is chief, which rank, how many workers."""

from __future__ import annotations

import json

import pytest

from mnist.cli import parse, parse_tf_config
from trainlib.errors import TrainingInputError


def tf_config(cluster: dict, task_type: str, index: int) -> dict[str, str]:
    return {"TF_CONFIG": json.dumps({"cluster": cluster, "task": {"type": task_type, "index": index}})}


@pytest.mark.parametrize(("cluster", "task", "expected"), [
    ({"worker": ["a:1", "b:1"]}, ("worker", 0), (True, 0, 2)),
    ({"worker": ["a:1", "b:1"]}, ("worker", 1), (False, 1, 2)),
    ({"chief": ["c:1"], "worker": ["a:1", "b:1"]}, ("chief", 0), (True, 0, 3)),
    ({"chief": ["c:1"], "worker": ["a:1", "b:1"]}, ("worker", 0), (False, 1, 3)),
])
def test_chief_rank_and_size(cluster, task, expected):
    assert parse_tf_config(tf_config(cluster, *task)) == expected


@pytest.mark.parametrize(("environ", "message"), [
    ({}, "--strategy multiworker needs TF_CONFIG describing the cluster, e.g. {"),
    ({"TF_CONFIG": "{oops"}, "TF_CONFIG is not valid (JSONDecodeError"),
    ({"TF_CONFIG": json.dumps({"cluster": {"worker": ["a:1"]}})}, "TF_CONFIG is not valid (KeyError: 'task')"),
    (tf_config({"worker": ["a:1"]}, "worker", 3), "TF_CONFIG task worker:3 is not in its cluster"),
])
def test_bad_tf_config_is_an_input_error(environ, message):
    with pytest.raises(TrainingInputError) as raised:
        parse_tf_config(environ)
    assert str(raised.value).startswith(message)


def test_an_epoch_takes_one_batch_per_replica_per_step():
    from mnist.strategies import steps_per_epoch

    assert steps_per_epoch(60_000, 256, 1) == 234  # one device: the article's single-device steps
    assert steps_per_epoch(60_000, 256, 4) == 58  # 4 GPUs: a global batch of 1,024
    assert steps_per_epoch(100, 64, 2) == 0  # fewer rows than one global batch: refused by the caller


def test_replicas_without_the_mirrored_strategy_is_refused_before_any_file_is_read(tmp_path):
    with pytest.raises(TrainingInputError, match="--replicas is for --strategy mirrored, not horovod; add --strategy"):
        parse(["--data-dir", str(tmp_path / "missing"), "--replicas", "2"])
