"""Malformed DistributedTrainings against the real API server and the running operator: each is refused by the API
server with a message naming the field, or set Failed (reason InvalidSpec) with the field named; the operator stays up
and does not reconcile a bad object over and over. Hostile but valid strings reach the pods byte for byte."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest

from tests.reliability.bad_inputs import CORPUS, HOSTILE_COMMAND, HOSTILE_ENV, BadInput, valid_body
from tests.reliability.fault_harness import MeteredOperator, new_namespace
from tests.reliability.figures import FIGURES
from tests.support.cluster import ControlPlane, KubectlError
from tests.support.operator_harness import children, create, live_pods, wait_for_pods, wait_for_status

pytestmark = pytest.mark.controlplane

SETTLE_SECONDS = 45.0  # every accepted bad object should be Failed well within this
QUIET_WINDOW_SECONDS = 20.0
# In the quiet window a bad object may be looked at again once (a late watch event), never on a retry loop:
# the operator retries a failing sync every 5 s, which would show as 4 passes in 20 s.
MAX_PASSES_IN_WINDOW = 2
LAUNCHER_ENTRYPOINT = "/opt/kubetrain/entrypoints/launcher"


@dataclass
class Outcome:
    case: BadInput
    name: str
    refused: str | None = None  # the API server's message
    status: dict = field(default_factory=dict)
    retries_in_window: int = 0


@dataclass
class CorpusRun:
    outcomes: dict[str, Outcome]
    operator: MeteredOperator
    passes_before_window: int
    passes_in_window: int
    accepted: int


@pytest.fixture(scope="module")
def corpus_run(crd: ControlPlane) -> Iterator[CorpusRun]:
    """Create the whole corpus in one namespace watched by one operator; wait until it settles, then watch the
    operator's reconcile count while nothing changes."""
    namespace = new_namespace(crd, "bad-input")
    operator = MeteredOperator(crd, namespace).start()
    try:
        operator.wait_serving()
        outcomes: dict[str, Outcome] = {}
        for index, case in enumerate(CORPUS):
            body = case.body(f"bad-{index:02d}")
            outcome = Outcome(case, body["metadata"]["name"])
            try:
                create(crd, namespace, body)
            except KubectlError as error:
                outcome.refused = error.stderr.strip()
            outcomes[case.id] = outcome
        accepted = [o for o in outcomes.values() if o.refused is None]

        deadline = time.monotonic() + SETTLE_SECONDS
        while time.monotonic() < deadline:
            listing = json.loads(crd.kubectl("get", "dtr", "--namespace", namespace, "--output=json"))
            statuses = {item["metadata"]["name"]: item.get("status") or {} for item in listing["items"]}
            for outcome in accepted:
                outcome.status = statuses.get(outcome.name, {})
            if all(o.status.get("phase") == "Failed" for o in accepted) or not operator.alive():
                break
            time.sleep(1.0)
        time.sleep(3.0)  # the status writes' own watch events come back once

        before = operator.reconciles()
        log_offset = len(operator.log_text())
        time.sleep(QUIET_WINDOW_SECONDS)
        in_window = operator.reconciles() - before
        window_log = operator.log_text()[log_offset:]
        for outcome in accepted:
            outcome.retries_in_window = len(re.findall(rf"sync of {namespace}/{outcome.name} failed", window_log))
        yield CorpusRun(outcomes, operator, before, in_window, len(accepted))
    finally:
        operator.stop()
        print(f"operator log ({operator.log_path}):\n{operator.log_tail(150)}")
        crd.kubectl("delete", "namespace", namespace, "--wait=false", "--ignore-not-found")


def test_corpus_is_large_enough() -> None:
    assert len(CORPUS) >= 30
    assert len({case.id for case in CORPUS}) == len(CORPUS)


@pytest.mark.parametrize("case", CORPUS, ids=[case.id for case in CORPUS])
def test_bad_input_is_refused_naming_the_field(corpus_run: CorpusRun, case: BadInput) -> None:
    outcome = corpus_run.outcomes[case.id]
    if outcome.refused is not None:
        clean = case.field in outcome.refused
        FIGURES.bad_input(f"{case.category} (API server)", clean, f"{case.id}: {outcome.refused[:200]}")
        assert clean, f"the API server refused {case.id} without naming {case.field}: {outcome.refused}"
        return
    status = outcome.status
    hot = outcome.retries_in_window > MAX_PASSES_IN_WINDOW
    clean = (status.get("phase") == "Failed" and status.get("reason") == "InvalidSpec"
             and case.field in status.get("message", "") and not hot)
    FIGURES.bad_input(f"{case.category} (operator)", clean,
                      f"{case.id}: phase {status.get('phase')} reason {status.get('reason')}, "
                      f"{outcome.retries_in_window} failed syncs in {QUIET_WINDOW_SECONDS:.0f}s")
    FIGURES.count("hot-looping bad objects", int(hot))
    assert status.get("phase") == "Failed" and status.get("reason") == "InvalidSpec", (
        f"{case.id} was accepted by the API server but not failed as InvalidSpec: {status}; operator log:\n"
        + "\n".join(line for line in corpus_run.operator.log_text().splitlines() if outcome.name in line)[-3000:])
    assert case.field in status["message"], f"{case.id}: message does not name {case.field}: {status['message']}"
    assert not hot, f"{case.id}: {outcome.retries_in_window} failed syncs in {QUIET_WINDOW_SECONDS:.0f}s of quiet"


def test_operator_neither_crashes_nor_hot_loops_on_bad_input(corpus_run: CorpusRun) -> None:
    operator = corpus_run.operator
    alive = operator.alive() and operator.starts == 1
    FIGURES.count("operator crashes", 0 if alive else 1)
    assert alive, f"the operator died on bad input:\n{operator.log_tail()}"
    failed_syncs = re.findall(r"sync of \S+ failed", operator.log_text())
    assert not failed_syncs, f"bad input made {len(failed_syncs)} reconcile passes fail: {sorted(set(failed_syncs))}"
    # each accepted bad object costs a few passes (create event, own status write, event echoes), not a loop
    assert corpus_run.passes_before_window <= 6 * corpus_run.accepted + 10, corpus_run.passes_before_window
    assert corpus_run.passes_in_window <= MAX_PASSES_IN_WINDOW * corpus_run.accepted / 4 + 2, (
        f"{corpus_run.passes_in_window} reconcile passes over {corpus_run.accepted} settled bad objects in "
        f"{QUIET_WINDOW_SECONDS:.0f}s of quiet")


def test_hostile_strings_reach_the_pods_verbatim(crd: ControlPlane, namespace: str) -> None:
    """Shell metacharacters, newlines, quotes and long values are data, never code: the launcher's command is
    [entrypoint, *spec.command] exactly (no shell in between) and every container sees the env values unchanged."""
    operator = MeteredOperator(crd, namespace).start()
    try:
        body = valid_body("hostile")
        body["spec"]["command"] = HOSTILE_COMMAND
        body["spec"]["env"] = HOSTILE_ENV
        create(crd, namespace, body)
        workers = wait_for_pods(crd, namespace, "hostile", 2, timeout=180)
        wait_for_status(crd, namespace, "hostile", operator, phase="Running", timeout=180)
        launcher_job = children(crd, namespace, "hostile", "jobs")[0]
        container = launcher_job["spec"]["template"]["spec"]["containers"][0]
        assert container["command"] == [LAUNCHER_ENTRYPOINT, *HOSTILE_COMMAND]
        assert "args" not in container, "nothing is appended behind the user's command"
        launcher_pod = live_pods(crd, namespace, "hostile", "launcher")[0]
        assert launcher_pod["spec"]["containers"][0]["command"] == [LAUNCHER_ENTRYPOINT, *HOSTILE_COMMAND]
        for pod in [*workers, launcher_pod]:
            env = {e["name"]: e.get("value", "") for e in pod["spec"]["containers"][0]["env"]}
            for entry in HOSTILE_ENV:
                assert env[entry["name"]] == entry["value"], f"{pod['metadata']['name']}: {entry['name']} changed"
            forwarded = env["KUBETRAIN_FORWARD_ENV"].split(" ")
            assert all(re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name) for name in forwarded), forwarded
        hostfile = crd.get("configmap", "hostile-hosts", namespace)["data"]["hostfile"]
        assert hostfile == "".join(f"hostile-worker-{i}.hostile.{namespace}.svc slots=1\n" for i in range(2))
        FIGURES.bad_input("hostile but valid strings (kept verbatim)", True)
    except AssertionError:
        FIGURES.bad_input("hostile but valid strings (kept verbatim)", False, "changed on the way to the pod")
        raise
    finally:
        operator.stop()
