"""Every documented DistributedTraining (the job files, every YAML example of the documentation: READMEs, docs/ and
CHANGELOG.md, fragments placed into a small job as documented.py says, the inline and prose examples) is what a user
would feed `kubetrain render` and `kubetrain run --local`: the local parser accepts it and render prints every object
the operator would create for it, each one something the API server can take. A misspelled field, which the API
server refuses, is refused here too, naming it. (The API server's side of the same examples:
tests/controlplane/test_documented_yaml.py.)"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubetrain.children import WATCHED_KINDS
from kubetrain.cli import main
from kubetrain.local import load_job
from tests.support.documented import (
    PROSE_EXAMPLES,
    Example,
    Misspelling,
    ProseExample,
    checked_jobs,
    misspellings,
    other_kinds,
    prose_quote_present,
)

# YAML documents of the documentation that are not kubetrain objects, by (file, heading, kind): why they are not
# checked.
NOT_CHECKED_YAML = {
    ("docs/mpi-operator.md", "mpi-operator", "MPIJob"):
        "Kubeflow mpi-operator's MPIJob, shown for comparison: kubetrain does not parse it, and the control-plane "
        "tier's API server has no MPIJob CRD to judge it (only the bench installs one, from its mpi-operator build)",
    **{("docs/kueue.md", "Wait for quota: Kueue", kind):
       "Kueue's own object: tests/controlplane/test_operator_kueue.py sends it to the API server of the Kueue control "
       "plane (server-side dry run), which has its CRDs"
       for kind in ("ResourceFlavor", "ClusterQueue", "LocalQueue")},
}
# What docs/gang-scheduling.md says each scheduler's PodGroup is and how a worker joins it.
GANG = {
    "Coscheduling": {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "label": "scheduling.x-k8s.io/pod-group",
                     "schedulerName": "scheduler-plugins-scheduler"},
    "Volcano": {"apiVersion": "scheduling.volcano.sh/v1beta1", "annotation": "scheduling.k8s.io/group-name",
                "schedulerName": "volcano"},
}
JOBS = checked_jobs()


def job_file(example: Example, tmp_path: Path) -> Path:
    """The file a user would pass: the job file itself, or the documented example written out."""
    if example.path is not None:
        return example.path
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(example.body, sort_keys=False), encoding="utf-8")
    return path


def kubetrain(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """`kubetrain <argv>` as the command line runs it (kubetrain.cli.main), with its exit code, stdout and stderr."""
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def pod_specs(objects: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    specs = {f"Pod/{o['metadata']['name']}": o["spec"] for o in objects if o["kind"] == "Pod"}
    specs.update({f"Job/{o['metadata']['name']}": o["spec"]["template"]["spec"] for o in objects if o["kind"] == "Job"})
    return specs


def test_every_documented_yaml_document_is_a_distributed_training_a_fragment_or_listed() -> None:
    found = {(document.file, document.heading, str(document.kind)): document for document in other_kinds()}
    unlisted = {key: document.id for key, document in found.items() if key not in NOT_CHECKED_YAML}
    assert not unlisted, f"documented YAML of another kind, neither checked nor listed in NOT_CHECKED_YAML: {unlisted}"
    stale = set(NOT_CHECKED_YAML) - set(found)
    assert not stale, f"NOT_CHECKED_YAML lists YAML no document shows any more: {stale}"


@pytest.mark.parametrize("prose", PROSE_EXAMPLES, ids=lambda prose: prose.quote[:40])
def test_prose_examples_still_quote_their_document(prose: ProseExample) -> None:
    assert prose_quote_present(prose), f"{prose.file} no longer says {prose.quote!r}: update PROSE_EXAMPLES"


def test_the_documentation_shows_at_least_the_examples_this_tier_was_written_for() -> None:
    # guards the extraction itself: were it to miss the documents' blocks, every test above would check nothing
    kinds = Counter("job file" if e.path else "object" if "kind" in e.written else "fragment" for e in JOBS)
    assert kinds["job file"] >= 6 and kinds["object"] >= 3 and kinds["fragment"] >= 6, kinds
    assert sum(1 for e in JOBS if e.gang) >= 2, "docs/gang-scheduling.md's two fragments"
    files = {e.id.split(":", 1)[0] for e in JOBS if not e.path}
    assert {"README.md", "docs/reference.md", "docs/gpus.md", "docs/private-registries.md", "docs/elastic.md",
            "docs/restarts.md", "docs/own-image.md", "docs/benchmarks.md"} <= files, files


@pytest.mark.parametrize("example", JOBS, ids=lambda example: example.id)
def test_render_prints_every_child_the_operator_creates(example: Example, tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    path = job_file(example, tmp_path)
    job = load_job(path)  # the local parser, as `kubetrain render` and `kubetrain run --local` use it
    code, out, err = kubetrain(capsys, "render", str(path))
    assert code == 0 and not err, f"kubetrain render {example.source} exited {code}: {err}"
    objects = [doc for doc in yaml.safe_load_all(out) if doc]
    expected = Counter({child.kind: 1 for child in WATCHED_KINDS})
    expected["Pod"] = job.spec.workers
    if example.gang:
        expected["PodGroup"] = 1  # docs/gang-scheduling.md: with scheduling.gang the operator creates the PodGroup
    if job.spec.elastic:
        expected["Service"] = 2  # docs/elastic.md: an elastic job's <name>-ready as well, with the EndpointSlice the
    else:                        # operator writes for it
        del expected["EndpointSlice"]
    assert Counter(o["kind"] for o in objects) == expected, [f"{o['kind']}/{o['metadata']['name']}" for o in objects]
    for name, spec in pod_specs(objects).items():
        containers = [*spec.get("initContainers", []), *spec["containers"]]
        names = [container.get("name") for container in containers]
        assert len(set(names)) == len(names), f"{name}: containers of one name twice: {names}"
        without_image = [container.get("name") for container in containers if not container.get("image")]
        assert not without_image, f"{name}: containers without an image (the API server refuses them): " \
                                  f"{without_image}"


@pytest.mark.parametrize("example", [e for e in JOBS if e.gang], ids=lambda example: example.id)
def test_render_of_a_gang_job_shows_its_pod_group_with_every_worker_and_not_the_launcher(
        example: Example, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    gang = dict(example.gang or {})
    promised = GANG[gang["scheduler"]]
    code, out, err = kubetrain(capsys, "render", str(job_file(example, tmp_path)))
    assert code == 0, err
    objects = [doc for doc in yaml.safe_load_all(out) if doc]
    groups = [o for o in objects if o["kind"] == "PodGroup"]
    assert [(g["apiVersion"], g["metadata"]["name"]) for g in groups] == [
        (promised["apiVersion"], f"{example.name}-workers")], "docs/gang-scheduling.md: the PodGroup is named " \
                                                              "<name>-workers"
    workers = example.body["spec"].get("workers", 1)  # docs/reference.md: workers defaults to 1
    assert groups[0]["spec"]["minMember"] == gang.get("minAvailable", workers)
    if "queue" in gang:
        assert groups[0]["spec"]["queue"] == gang["queue"]
    for name, spec in pod_specs(objects).items():
        pod = next(o for o in objects if f"{o['kind']}/{o['metadata']['name']}" == name)
        metadata = pod["metadata"] if pod["kind"] == "Pod" else pod["spec"]["template"]["metadata"]
        member = {**metadata.get("labels", {}), **metadata.get("annotations", {})}.get(
            promised.get("label") or promised["annotation"])
        if pod["kind"] == "Pod":
            assert member == f"{example.name}-workers" and spec["schedulerName"] == promised["schedulerName"], name
        else:
            assert member is None and "schedulerName" not in spec, "the launcher is not a member of the gang"


@pytest.mark.parametrize("case", misspellings(), ids=lambda case: case.id)
def test_render_refuses_a_misspelled_field_naming_it(case: Misspelling, tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    # docs/run-locally.md: "A job.yaml the operator would reject fails here too, naming the field." The API server
    # refuses an unknown field (tests/controlplane/test_documented_yaml.py shows it for these very files).
    path = tmp_path / case.job_file.name
    path.write_text(yaml.safe_dump(case.body, sort_keys=False), encoding="utf-8")
    code, out, err = kubetrain(capsys, "render", str(path))
    assert code == 2 and not out, f"kubetrain render accepted {case.field} (exit {code})"
    assert case.field in err, err


def test_run_local_refuses_a_misspelled_field_before_starting_anything(tmp_path: Path,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    [case] = [case for case in misspellings() if case.field == "spec.wrkers"]
    path = tmp_path / case.job_file.name
    path.write_text(yaml.safe_dump(case.body, sort_keys=False), encoding="utf-8")
    (tmp_path / "empty").mkdir()  # if the typo slipped through, the program stops at once for want of data
    code, _, err = kubetrain(capsys, "run", str(path), "--local", "--data-dir", str(tmp_path / "empty"),
                             "--checkpoint-dir", str(tmp_path / "runs"))
    assert code == 2 and "spec.wrkers" in err, err
    assert "running" not in err and not (tmp_path / "runs").exists(), "the run started despite the typo"
