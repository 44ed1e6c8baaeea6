"""Every documented DistributedTraining goes to the real API server as a user would send it, and so does every object
`kubetrain render` prints for it: the job files (`kubectl create --dry-run=server -f jobs/<program>/<file>.yaml`), the
examples of the documentation (fragments placed into a small job as tests/support/documented.py says), the inline and
prose examples.
All must be accepted (server-side dry run: the CRD's schema and CEL rules, the built-in kinds' validation and
admission). A job file with a misspelled field is refused, naming the field, which is what `kubetrain render` must
then do too (tests/docs/test_yaml_examples.py).

The children are rendered by the local code (`kubetrain.cli.child_objects`, the Secret with placeholder keys) for the
job as the API server stored it (created for real, so the children's ownerReferences carry its uid). Jobs with
`scheduling.gang` go to the gang-scheduling control plane, where the PodGroup CRDs of both schedulers are installed.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import tests.support.documented as documented
from kubetrain.api import parse_job
from kubetrain.cli import PLACEHOLDER_KEYS, child_objects
from tests.support.cluster import ControlPlane, KubectlError
from tests.support.operator_harness import install_crd

pytestmark = pytest.mark.controlplane


JOBS = documented.checked_jobs()


def dry_run(plane: ControlPlane, namespace: str, *, path: Path | None = None, body: Any = None) -> list[str]:
    """`kubectl create --dry-run=server` of a file or of objects: the names the API server would create."""
    source = {"args": [f"--filename={path}"]} if path else {"args": ["--filename=-"], "input": json.dumps(body)}
    out = plane.kubectl("create", "--dry-run=server", "--namespace", namespace, "--output=name", *source["args"],
                        input=source.get("input"))
    return out.split()


def ensure_priority_classes(plane: ControlPlane, children: list[dict[str, Any]]) -> None:
    """The Priority admission plugin refuses a pod naming a PriorityClass that does not exist, dry run or not: a
    PriorityClass an example names is the cluster admin's, so it is made here (cluster-wide, like the admin's)."""
    for child in children:
        spec = child["spec"]["template"]["spec"] if child["kind"] == "Job" else child.get("spec", {})
        name = spec.get("priorityClassName") if isinstance(spec, dict) else None
        if name and not plane.exists("priorityclass", name):
            plane.apply({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name},
                         "value": 1000})


def check_accepted(plane: ControlPlane, namespace: str, example: Any) -> None:
    try:
        names = dry_run(plane, namespace, path=example.path, body=example.body)
    except KubectlError as error:
        pytest.fail(f"the API server refuses {example.source}: {error.stderr.strip()}", pytrace=False)
    assert names == [f"distributedtraining.kubetrain.dev/{example.name}"], names
    stored = json.loads(plane.kubectl("create", "--namespace", namespace, "--output=json", "--filename=-",
                                      input=json.dumps(example.body)))
    job = dataclasses.replace(parse_job({**example.body, "metadata": {**example.body["metadata"],
                                                                      "namespace": namespace}}),
                              uid=stored["metadata"]["uid"])
    children = child_objects(job, PLACEHOLDER_KEYS)
    ensure_priority_classes(plane, children)
    try:
        created = dry_run(plane, namespace, body={"apiVersion": "v1", "kind": "List", "items": children})
    except KubectlError as error:
        pytest.fail(f"the API server refuses objects `kubetrain render` prints for {example.source}: "
                    f"{error.stderr.strip()}", pytrace=False)
    assert len(created) == len(children), created


@pytest.fixture(scope="module")
def gang_crd(gang_control_plane: ControlPlane) -> ControlPlane:
    install_crd(gang_control_plane)
    return gang_control_plane


@pytest.fixture(scope="module")
def typo_namespace(crd: ControlPlane) -> Iterator[str]:
    """One namespace for the dry runs of misspelled files (nothing is created in it)."""
    name = "documented-typos"
    crd.kubectl("create", "namespace", name)
    yield name
    crd.kubectl("delete", "namespace", name, "--wait=false", "--ignore-not-found")


@pytest.mark.parametrize("example", [e for e in JOBS if not e.gang], ids=lambda example: example.id)
def test_documented_job_and_its_rendered_children_are_accepted(crd: ControlPlane, namespace: str,
                                                               example: Any) -> None:
    check_accepted(crd, namespace, example)


@pytest.mark.parametrize("example", [e for e in JOBS if e.gang], ids=lambda example: example.id)
def test_documented_gang_job_and_its_rendered_children_are_accepted(gang_crd: ControlPlane, gang_namespace: str,
                                                                    example: Any) -> None:
    check_accepted(gang_crd, gang_namespace, example)


def test_the_documents_include_job_files_documented_examples_and_gang_fragments() -> None:
    # guards the extraction: were it to find nothing, the tests above would check nothing
    assert len([e for e in JOBS if e.path]) >= 6 and len([e for e in JOBS if not e.path]) >= 5
    assert len([e for e in JOBS if e.gang]) >= 2


@pytest.mark.parametrize("case", documented.misspellings(), ids=lambda case: case.id)
def test_the_api_server_refuses_a_misspelled_field_naming_it(crd: ControlPlane, typo_namespace: str,
                                                             case: Any) -> None:
    with pytest.raises(KubectlError) as refused:
        dry_run(crd, typo_namespace, body=case.body)
    assert case.field in refused.value.stderr, refused.value.stderr
