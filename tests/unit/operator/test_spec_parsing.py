"""Spec parsing: defaults in one place, and every bad field named with its fix."""

from __future__ import annotations

from typing import Any

import pytest
from dtr_bodies import training

from kubetrain.api import SpecError, check, parse_job


def test_defaults_fill_everything_a_user_leaves_out() -> None:
    job = parse_job({"metadata": {"name": "tiny"}, "spec": {"image": "img", "command": ["python", "train.py"]}})
    spec = job.spec
    assert job.namespace == "default"
    assert (spec.workers, spec.slots_per_worker, spec.num_processes) == (1, 1, 1)
    assert spec.resources.gpus_per_worker == 0
    assert (spec.data.mount_path, spec.data.read_only, spec.data.claim_name) == ("/data", True, None)
    assert spec.checkpoint.mount_path == "/checkpoints"
    assert spec.wait_for_workers_seconds == 300
    policy = spec.run_policy
    assert (policy.backoff_limit, policy.clean_pod_policy, policy.suspend) == (3, "Running", False)
    assert policy.active_deadline_seconds is None and policy.ttl_seconds_after_finished is None


def test_slots_default_to_gpus_per_worker() -> None:
    job = parse_job(training(workers=3, resources={"gpusPerWorker": 4}))
    assert job.spec.slots_per_worker == 4
    assert job.spec.num_processes == 12


BAD: list[tuple[str, dict[str, Any], str]] = [
    ("missing image", {"image": None}, "spec.image"),
    ("empty image", {"image": "  "}, "spec.image"),
    ("missing command", {"command": None}, "spec.command"),
    ("command not a list", {"command": "python train.py"}, "spec.command"),
    ("zero workers", {"workers": 0}, "spec.workers"),
    ("negative workers", {"workers": -2}, "spec.workers"),
    ("workers as string", {"workers": "2"}, "spec.workers"),
    ("gpus not an integer", {"resources": {"gpusPerWorker": 1.5}}, "spec.resources.gpusPerWorker"),
    ("gpus as bool", {"resources": {"gpusPerWorker": True}}, "spec.resources.gpusPerWorker"),
    ("slots above 64", {"slotsPerWorker": 65, "resources": {}}, "spec.slotsPerWorker"),
    ("more slots than GPUs", {"slotsPerWorker": 2, "resources": {"gpusPerWorker": 1}}, "spec.slotsPerWorker"),
    ("bad cpu quantity", {"resources": {"cpu": "four"}}, "spec.resources.cpu"),
    ("unknown cleanPodPolicy", {"runPolicy": {"cleanPodPolicy": "Sometimes"}}, "spec.runPolicy.cleanPodPolicy"),
    ("negative backoff", {"runPolicy": {"backoffLimit": -1}}, "spec.runPolicy.backoffLimit"),
    ("zero deadline", {"runPolicy": {"activeDeadlineSeconds": 0}}, "spec.runPolicy.activeDeadlineSeconds"),
    ("suspend as string", {"runPolicy": {"suspend": "yes"}}, "spec.runPolicy.suspend"),
    ("relative mount", {"data": {"mountPath": "data"}}, "spec.data.mountPath"),
    ("same mounts", {"checkpoint": {"mountPath": "/data"}}, "spec.checkpoint.mountPath"),
    ("reserved env", {"env": [{"name": "KUBETRAIN_JOB_NAME", "value": "x"}]}, "spec.env[0].name"),
    ("value and valueFrom", {"env": [{"name": "A", "value": "1", "valueFrom": {"fieldRef": {"fieldPath": "x"}}}]},
     "spec.env[0].valueFrom"),
    ("env number", {"env": [{"name": "EPOCHS", "value": 3}]}, "spec.env[0].value"),
    ("duplicate env", {"env": [{"name": "A", "value": "1"}, {"name": "A", "value": "2"}]}, "spec.env[1]"),
    ("wait zero", {"launcher": {"waitForWorkersSeconds": 0}}, "spec.launcher.waitForWorkersSeconds"),
    ("tolerations not a list", {"scheduling": {"tolerations": {"key": "gpu"}}}, "spec.scheduling.tolerations"),
    ("podTemplate not an object", {"podTemplate": ["x"]}, "spec.podTemplate"),
]


@pytest.mark.parametrize(("case", "overrides", "field"), BAD, ids=[case for case, _, _ in BAD])
def test_bad_spec_names_the_field(case: str, overrides: dict[str, Any], field: str) -> None:
    body = training()
    for key, value in overrides.items():
        if value is None:
            body["spec"].pop(key)
        else:
            body["spec"][key] = value
    with pytest.raises(SpecError) as error:
        parse_job(body)
    assert error.value.field == field
    assert str(error.value).startswith(field + ": ")


def longest_name() -> int:
    """The longest metadata.name the CRD's rules let through."""
    def passes(length: int) -> bool:
        body = training()
        body["metadata"]["name"] = "a" * length
        try:
            check(body)
        except SpecError:
            return False
        return True
    return max(length for length in range(1, 80) if passes(length))


@pytest.mark.parametrize("name", ["a" * 80, "Upper", "9starts-with-digit", "dots.in.name", ""])
def test_names_that_cannot_become_pod_hostnames_are_rejected(name: str) -> None:
    body = training()
    body["metadata"]["name"] = name
    with pytest.raises(SpecError, match="metadata.name"):
        parse_job(body)


def test_longest_allowed_name_gives_valid_hostnames_with_the_most_workers() -> None:
    most = next(n for n in range(1000, 100000) if check_workers(n) is not None)  - 1
    job = parse_job({**training(workers=most, resources={}), "metadata": {"name": "a" * longest_name()}})
    assert len(f"{job.name}-worker-{job.spec.workers - 1}") <= 63


def check_workers(workers: int) -> SpecError | None:
    try:
        check(training(workers=workers))
    except SpecError as error:
        return error
    return None


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        (
            {"scheduling": {"tolerations": [{"key": "gpu", "operator": "Sometimes"}]}},
            "spec.scheduling.tolerations[0].operator",
        ),
        (
            {"scheduling": {"tolerations": [{"key": "gpu", "operator": "Exists", "value": "x"}]}},
            "spec.scheduling.tolerations[0].value",
        ),
        ({"scheduling": {"tolerations": [{"key": "gpu", "effect": "Never"}]}}, "spec.scheduling.tolerations[0].effect"),
        ({"env": [{"name": "TOKEN", "valueFrom": {"secretKeyRef": {}}}]}, "spec.env[0].valueFrom.secretKeyRef.name"),
        ({"env": [{"name": "TOKEN", "valueFrom": {}}]}, "spec.env[0].valueFrom"),
        ({"scheduling": {"nodeSelector": {"disk": "fast ssd"}}}, "spec.scheduling.nodeSelector.disk"),
        ({"podTemplate": {"metadata": {"labels": {"bad key!": "x"}}}}, "spec.podTemplate.metadata.labels['bad key!']"),
        ({"checkpoint": {"mountPath": "/tmp/ckpt"}}, "spec.checkpoint.mountPath"),
        ({"podTemplate": {"spec": {"containers": [{"env": []}]}}}, "spec.podTemplate.spec.containers[0].name"),
        ({"podTemplate": {"spec": {"containers": [{"name": "wroker", "env": []}]}}},
         "spec.podTemplate.spec.containers[0].image"),
        ({"podTemplate": {"spec": {"initContainers": [{"name": "worker", "image": "busybox"}]}}},
         "spec.podTemplate.spec.initContainers[0].name"),
        ({"data": {"mountPath": "//"}}, "spec.data.mountPath"),
        # an API server with an older CRD stores these: the parser still refuses them
        ({"podTemplate": {"metadata": {"namespace": "kube-system"}}}, "spec.podTemplate.metadata.namespace"),
        ({"podTemplate": {"metadata": {"ownerReferences": []}}}, "spec.podTemplate.metadata.ownerReferences"),
        ({"podTemplate": {"metadata": {"generateName": "x-"}}}, "spec.podTemplate.metadata.generateName"),
        ({"podTemplate": {"kind": "Secret"}}, "spec.podTemplate.kind"),
    ],
)
def test_what_the_api_server_would_refuse_in_a_pod_is_refused_here_first(overrides: dict[str, Any], field: str) -> None:
    with pytest.raises(SpecError) as error:
        parse_job(training(**overrides))
    assert error.value.field == field


def test_valid_tolerations_and_value_from_pass() -> None:
    job = parse_job(
        training(
            scheduling={
                "tolerations": [
                    {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
                    {"key": "spot", "value": "true", "effect": "NoExecute", "tolerationSeconds": 60},
                ]
            },
            env=[{"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}],
        )
    )
    assert len(job.spec.scheduling.tolerations) == 2 and job.spec.env[0]["valueFrom"]
