"""Fixtures of the kind tests (the harness: tests/support/kind_cluster.py, kind_jobs.py, kind_manifests.py).

- `kind` (module): the settings' cluster, not yet created, with the tests' images built; everything removed at the end
  unless KUBETRAIN_E2E_KEEP=1; every test is skipped, with the reason, where Docker or kind cannot run.
- `quick_start` (module): the README's kind quick start, run as written (the commands and their output), with every
  phase of the cluster's DistributedTrainings recorded from `helm install` on.
- `installed` (module): that cluster, its pods free to use every node.
- `jobs` (function): the DistributedTrainings this test creates (`kind_jobs.Jobs`), in the installed cluster.

When a test fails, its report ends with each of its jobs' status, events and pods' logs and the operator's log; the
whole cluster (nodes, pods, events, DistributedTrainings, every container's log) is dumped into the artifacts
directory, which the report names.
"""

from __future__ import annotations

from collections.abc import Generator, Iterator
from dataclasses import dataclass

import pytest

from tests.support.documented import REPO, section_commands
from tests.support.kind_cluster import KindCluster, missing_prerequisite, running, settings_from_environment
from tests.support.kind_jobs import Jobs, PhaseRecorder

QUICK_START = "Quick start on kind"  # the README's heading


@dataclass(frozen=True)
class QuickStart:
    """What the quick start's commands printed (by command line) and the phases its cluster's jobs went through."""

    outputs: dict[str, str]
    recorder: PhaseRecorder


DUMPED = pytest.StashKey[set[int]]()


@pytest.fixture(scope="module")
def kind(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KindCluster]:
    settings = settings_from_environment(tmp_path_factory.mktemp("kind"))
    reason = missing_prerequisite(settings)
    if reason:
        pytest.skip(f"kind end-to-end tests not run: {reason}")
    with running(settings) as cluster:
        yield cluster


@pytest.fixture(scope="module")
def quick_start(kind: KindCluster) -> Iterator[QuickStart]:
    recorder = PhaseRecorder(kind, kind.settings.artifacts / "phases.txt")

    def after(command: str) -> None:
        if command.startswith("helm install"):  # the CRD exists from here on
            recorder.start()

    try:
        outputs = kind.run_documented(section_commands(REPO / "README.md", QUICK_START), after,
                                      timeout=3 * 3600)
        yield QuickStart(outputs, recorder)
    finally:
        recorder.stop()


@pytest.fixture(scope="module")
def installed(quick_start: QuickStart, kind: KindCluster) -> KindCluster:
    kind.use_every_node()
    return kind


@pytest.fixture
def jobs(installed: KindCluster, quick_start: QuickStart) -> Jobs:
    return Jobs(installed, quick_start.recorder)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item,
                              call: pytest.CallInfo[None]) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    if report.failed and call.excinfo is not None:
        report.sections.extend(failure_sections(item, call.excinfo.value))
    return report


def failure_sections(item: pytest.Item, error: BaseException) -> list[tuple[str, str]]:
    """What a user would look at after this failure, and where the whole cluster's dump is (one per error: a
    module fixture's error fails every test that needs it)."""
    fixtures = getattr(item, "funcargs", {})
    cluster, jobs = fixtures.get("kind"), fixtures.get("jobs")
    if not isinstance(cluster, KindCluster):
        return []
    sections = jobs.report() if isinstance(jobs, Jobs) else []
    sections.append(("operator log", cluster.operator_log()))
    dumped = item.config.stash.setdefault(DUMPED, set())
    if id(error) not in dumped:
        dumped.add(id(error))
        dump = cluster.settings.artifacts / f"dump-{item.name}.txt"
        cluster.dump(dump)
        sections.append(("cluster dump", f"nodes, pods, events, DistributedTrainings, every container's log: {dump}"))
    return sections
