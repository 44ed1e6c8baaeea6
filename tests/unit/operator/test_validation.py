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


@pytest.mark.parametrize(("data", "checkpoint", "field", "message"), [
    ({"claimName": "shared"}, {"claimName": "shared"}, "spec.checkpoint.claimName",
     "a pod cannot mount one PersistentVolumeClaim as two volumes"),
    ({"mountPath": "/data/"}, {"mountPath": "/data"}, "spec.checkpoint.mountPath",
     "checkpoint.mountPath must differ from data.mountPath"),
    ({"mountPath": "/data"}, {"mountPath": "/data/ckpt"}, "spec.checkpoint.mountPath",
     "must not be inside data.mountPath while data.readOnly is true"),
    ({"mountPath": "/ckpt/team-a"}, {"mountPath": "/ckpt/"}, "spec.data.mountPath",
     "data.mountPath must not be inside checkpoint.mountPath"),
    ({"mountPath": "/ckpt/x", "readOnly": False}, {"mountPath": "/ckpt"}, "spec.data.mountPath",
     "data.mountPath must not be inside checkpoint.mountPath"),
    ({"mountPath": "/home/"}, {}, "spec.data.mountPath", "data.mountPath must not be /home while data.readOnly"),
])
def test_volumes_the_pods_cannot_mount_together_are_refused(data, checkpoint, field, message) -> None:
    found = refused(data=data, checkpoint=checkpoint)
    assert any(where == field and message in said for where, said in found), found
    assert len(found) == 1, f"one rule speaks for each mistake: {found}"


@pytest.mark.parametrize(("data", "checkpoint"), [
    ({"mountPath": "/data", "readOnly": False}, {"mountPath": "/data/ckpt"}),  # a writable volume holds mount points
    ({"mountPath": "/data"}, {"mountPath": "/data2"}),  # a sibling whose name starts alike is not inside
    ({"mountPath": "/home", "readOnly": False}, {}),
    ({"mountPath": "/data"}, {"mountPath": "/home"}),  # the checkpoint volume is writable
    ({"mountPath": "/home/data"}, {}),
    ({"claimName": "data"}, {"claimName": "checkpoints"}),
])
def test_volumes_that_mount_together_are_accepted(data, checkpoint) -> None:
    assert refused(data=data, checkpoint=checkpoint) == []


def test_a_pod_template_metadata_field_other_than_labels_and_annotations_is_unknown_to_the_schema() -> None:
    from kubetrain.schema import unknown_fields

    body = training(podTemplate={"metadata": {"namespace": "kube-system", "labels": {"a": "b"}},
                                 "spec": {"serviceAccountName": "any", "hostNetwork": True}})
    assert unknown_fields(body) == ["spec.podTemplate.metadata.namespace: unknown field, the API server refuses it; "
                                    "known here: annotations, labels"]
