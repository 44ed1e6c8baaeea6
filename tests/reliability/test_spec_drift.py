"""One set of spec rules, the CRD's, read twice: by the API server (Go: its OpenAPI validation and cel-go) and by the
local check (`kubetrain.api.check`: jsonschema and cel-python). Each corpus case and each valid spec goes through both;
they must reach the same verdict with the same message, except where the table below says why only the parser (which
runs after the check) can see it."""

from __future__ import annotations

import json

import pytest

from kubetrain.api import SpecError, parse_job
from kubetrain.validation import defaulted
from tests.reliability.bad_inputs import CORPUS, HOSTILE_COMMAND, HOSTILE_ENV, BadInput, valid_body
from tests.support.cluster import ControlPlane, KubectlError

# Cases the schema cannot decide, and why: the operator fails them as InvalidSpec instead (test_bad_input).
PARSER_ONLY = {
    "template-label-value": "label values have a grammar the schema leaves to the pod's validation",
    "node-selector-key": "label keys have a prefix/name grammar the schema leaves to the pod's validation",
    "env-value-from-empty": "valueFrom sources are free-form objects in the schema",
}
VALID = {
    "plain": valid_body("ok"),
    "registry-port-digest": {**valid_body("ok"), "spec": {**valid_body("ok")["spec"], "image":
                             "registry.example.com:5000/team/cifar_mixup:1.0@sha256:" + "a" * 64}},
    "volumes-and-priority": {**valid_body("ok"), "spec": {**valid_body("ok")["spec"],
                             "data": {"claimName": "hdf5.data-1", "mountPath": "/data/"},
                             "checkpoint": {"claimName": "ckpt", "mountPath": "/opt/checkpoints"},
                             "scheduling": {"priorityClassName": "high-priority"}}},
    "one-pod-own-image-as-root": {**valid_body("ok"), "spec": {**valid_body("ok")["spec"], "workers": 0,
                                  "launcher": {"runAsWorker": True}, "mpi": {"implementation": "IntelMPI"},
                                  "runAsUser": 0}},
    "writable-data-holds-the-checkpoints": {**valid_body("ok"), "spec": {**valid_body("ok")["spec"],
                                            "data": {"mountPath": "/work", "readOnly": False},
                                            "checkpoint": {"mountPath": "/work/checkpoints"}}},
    "checkpoints-on-home-and-data-beside": {**valid_body("ok"), "spec": {**valid_body("ok")["spec"],
                                            "data": {"claimName": "data", "mountPath": "/data2"},
                                            "checkpoint": {"claimName": "ckpt", "mountPath": "/home"}}},
    "template-labels-annotations-and-spec": {**valid_body("ok"), "spec": {**valid_body("ok")["spec"], "podTemplate": {
        "metadata": {"labels": {"team": "ml"}, "annotations": {"note": "any text: 'quoted'"}},
        "spec": {"serviceAccountName": "trainer",
                 "containers": [{"name": "worker", "env": [{"name": "A", "value": "1"}]}]}}}},
    "elastic": {**valid_body("ok"), "spec": {**valid_body("ok")["spec"], "elastic": {"maxWorkers": 4},
                "scheduling": {"gang": {"scheduler": "Volcano"}}}},
    "hostile-but-valid": {**valid_body("ok"), "spec": {**valid_body("ok")["spec"], "command": HOSTILE_COMMAND,
                                                        "env": HOSTILE_ENV}},
}


def server_verdict(plane: ControlPlane, namespace: str, body: dict) -> tuple[str | None, dict]:
    """(the API server's refusal or None, the object as it would store it: defaults applied)."""
    try:
        stored = plane.kubectl("create", "--dry-run=server", "--namespace", namespace, "--output=json",
                               "--filename=-", input=json.dumps(body))
    except KubectlError as error:
        return error.stderr.strip(), {}
    return None, json.loads(stored)


def local_verdict(body: dict) -> SpecError | None:
    try:
        parse_job({**body, "metadata": {"namespace": "ns", "uid": "u", **body.get("metadata", {})}})
    except SpecError as error:
        return error
    return None


@pytest.fixture(scope="module")
def drift_namespace(crd: ControlPlane) -> str:
    crd.kubectl("create", "namespace", "spec-drift")
    return "spec-drift"


@pytest.mark.parametrize("case", CORPUS, ids=[case.id for case in CORPUS])
def test_schema_and_parser_refuse_the_same_specs_naming_the_same_field(crd: ControlPlane, drift_namespace: str,
                                                                       case: BadInput) -> None:
    body = case.body("drift")
    refused, _ = server_verdict(crd, drift_namespace, body)
    if case.category == "unknown field":  # the API server's strict field validation; the parser never sees them
        assert refused is not None and case.field in refused, refused
        return
    error = local_verdict(body)
    assert error is not None and case.field in str(error), f"kubetrain accepts {case.id} or names another: {error}"
    if case.id in PARSER_ONLY:
        assert refused is None, f"{case.id} is now refused by the schema: remove it from PARSER_ONLY ({refused})"
        return
    assert refused is not None, f"only the parser refuses {case.id} ({error}): add the rule to the CRD"
    if "is invalid:" not in refused:  # refused while decoding (strict field validation), before any rule ran
        assert case.field in refused, refused
        return
    said = str(error) if not error.message.startswith("Duplicate value") else f"{error.field}: Duplicate value"
    assert said in refused, f"the API server words it otherwise:\n  kubetrain:  {said}\n  API server: {refused}"


@pytest.mark.parametrize("name", sorted(VALID))
def test_schema_and_parser_accept_the_same_valid_specs(crd: ControlPlane, drift_namespace: str, name: str) -> None:
    refused, stored = server_verdict(crd, drift_namespace, VALID[name])
    assert refused is None, refused
    assert local_verdict(VALID[name]) is None
    assert local_verdict(stored) is None, "the parser accepts what the API server stores (defaults applied)"
    assert defaulted(VALID[name])["spec"] == stored["spec"], "the local defaults differ from the API server's"
