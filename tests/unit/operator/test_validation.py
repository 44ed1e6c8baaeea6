"""The CRD checks a spec locally as the API server does on create: its defaults, its schema, its CEL rules, worded as
the API server words them (kubetrain.validation)."""

from __future__ import annotations

import pytest
from dtr_bodies import training

from kubetrain.validation import defaulted, violations


def refused(**spec) -> list[tuple[str, str]]:
    return [(v.field, v.message) for v in violations(defaulted(training(**spec)))]


def test_a_valid_spec_passes_and_gets_the_crds_defaults() -> None:
    body = defaulted(training())
    assert violations(body) == []
    spec = body["spec"]
    assert spec["data"]["mountPath"] == "/data" and spec["checkpoint"]["mountPath"] == "/checkpoints"
    assert spec["checkpoint"]["resume"] == "Always"
    assert spec["runPolicy"] == {"backoffLimit": 3, "cleanPodPolicy": "Running", "suspend": False}
    assert spec["mpi"] == {"implementation": "OpenMPI"} and spec["runAsUser"] == 1000
    assert "elastic" not in spec, "a default inside an optional object only applies when the object is there"
    assert defaulted(training(elastic={"maxWorkers": 4}))["spec"]["elastic"] == {"maxWorkers": 4, "minWorkers": 1}


@pytest.mark.parametrize(("spec", "field", "message"), [
    ({"workers": -1}, "spec.workers", "Invalid value: -1: spec.workers in body should be greater than or equal to 0"),
    ({"workers": 1001}, "spec.workers", "should be less than or equal to 1000"),
    ({"workers": "two"}, "spec.workers", 'Invalid value: "string": spec.workers in body must be of type integer'),
    ({"image": "Team/Cifar"}, "spec.image", "Invalid value: \"Team/Cifar\": spec.image in body should match '^"),
    ({"command": []}, "spec.command", "spec.command in body should have at least 1 items"),
    ({"command": ["x" * 4097]}, "spec.command[0]", "Too long: may not be more than 4096 bytes"),
    ({"mpi": {"implementation": "LAM"}}, "spec.mpi.implementation",
     'Unsupported value: "LAM": supported values: "OpenMPI", "IntelMPI", "MPICH"'),
    ({"elastic": {}}, "spec.elastic.maxWorkers", "Required value"),
    ({"slotsPerWorker": 2}, "spec.slotsPerWorker", "slotsPerWorker must not exceed resources.gpusPerWorker"),
    ({"data": {"mountPath": "/opt"}}, "spec.data.mountPath", "would hide what the image itself needs"),
    ({"checkpoint": {"mountPath": "/tmp/ckpt"}}, "spec.checkpoint.mountPath", "is where kubetrain mounts its own"),
    ({"checkpoint": {"resume": "Latest"}}, "spec.checkpoint.resume",
     'Unsupported value: "Latest": supported values: "Always", "SameJob", "Never"'),
    ({"env": [{"name": "A", "value": "1"}, {"name": "B", "valueFrom": {}}]}, "spec.env[1].valueFrom",
     'Invalid value: "object": needs exactly one of fieldRef'),
    ({"runPolicy": {"podFailurePolicy": {"rules": [{"action": "Count", "onPodConditions": [{"type": "X"}]},
                                                   {"action": "FailJob", "onExitCodes": {"operator": "In",
                                                                                         "values": [0]}}]}}},
     "spec.runPolicy.podFailurePolicy.rules[1].onExitCodes.values", "must not contain 0 with operator In"),
])
def test_each_kind_of_rule_names_the_field_in_the_api_servers_words(spec, field, message) -> None:
    found = refused(**spec)
    assert any(where == field and message in said for where, said in found), found


def test_a_rule_that_compares_with_the_old_object_does_not_judge_a_new_one() -> None:
    # "has(self.elastic) || self.workers == oldSelf.workers": on create there is no old object
    assert refused(workers=3) == []


def test_the_name_rules_of_the_whole_object_apply() -> None:
    body = training()
    body["metadata"]["name"] = "a" * 53
    assert [(v.field, v.message) for v in violations(defaulted(body))] == [
        ("", "metadata.name must be at most 52 characters: worker hostnames <name>-worker-<index> must fit a "
             "63-character DNS label")]


def test_every_missing_required_field_is_named() -> None:
    body = training()
    del body["spec"]["image"], body["spec"]["command"]
    assert [(v.field, v.message) for v in violations(defaulted(body))] == [
        ("spec.command", "Required value"), ("spec.image", "Required value")]
