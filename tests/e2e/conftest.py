"""Fixtures of the kind tests (the harness: tests/support/kind_cluster.py, kind_jobs.py, kind_manifests.py).

- `kind` (module): a new kind cluster with kubetrain's images loaded, deleted at the end unless KUBETRAIN_E2E_KEEP=1;
  every test is skipped, with the reason, where Docker or kind cannot run.
- `installed` (module): the same cluster once `helm install` has made the operator Ready.
- `volumes` (module): the namespace of the tests' jobs with the claims of the data and checkpoint volumes.
- `digits` (module): where scikit-learn's digits are on the data volume, written there by a Job.
- `jobs` (function): the DistributedTrainings this test creates (`kind_jobs.Jobs`), in the installed cluster.

When a test fails, its report ends with each of its jobs' status, events and pods' logs and the operator's log; the
whole cluster (nodes, pods, events, DistributedTrainings, every container's log) is dumped into the artifacts
directory, which the report names.
"""

from __future__ import annotations

from collections.abc import Generator, Iterator

import pytest

from tests.support.kind_cluster import JOB_IMAGE, KindCluster, missing_prerequisite, running, settings_from_environment
from tests.support.kind_jobs import Jobs, PhaseRecorder
from tests.support.kind_manifests import DIGITS, prepare_digits

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
def installed(kind: KindCluster) -> KindCluster:
    kind.install_operator()
    return kind


@pytest.fixture(scope="module")
def volumes(kind: KindCluster) -> KindCluster:
    kind.create_volumes()
    return kind


@pytest.fixture(scope="module")
def phase_recorder(volumes: KindCluster) -> Iterator[PhaseRecorder]:
    recorder = PhaseRecorder(volumes, volumes.settings.artifacts / "phases.txt").start()
    yield recorder
    recorder.stop()


@pytest.fixture(scope="module")
def digits(volumes: KindCluster) -> str:
    volumes.run_job(prepare_digits(JOB_IMAGE))
    return DIGITS


@pytest.fixture
def jobs(installed: KindCluster, phase_recorder: PhaseRecorder) -> Jobs:
    return Jobs(installed, phase_recorder)


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
