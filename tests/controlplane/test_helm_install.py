"""`helm install` of charts/kubetrain into the real control plane, then the operator run with the chart's
ServiceAccount token (not admin) exactly as the chart's Deployment runs it: the RBAC is enough to drive a job to
Succeeded, `kubectl auth can-i` shows what the operator and each job's ServiceAccount cannot do, and a watched
namespace the operator may not list holds back no other.

kwok plays the Deployment's pod (no container really runs), so the operator itself runs here as a subprocess.
"""

from __future__ import annotations

import re
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from kubetrain.kueue import QUEUE_LABEL
from kubetrain.reasons import WATCH_REFUSED
from tests.support.chart_operator import (
    CRD_NAME,
    ChartOperator,
    helm,
    install,
    make_namespace,
    run_job_to_success,
    service_account_user,
    start_operator,
)
from tests.support.cluster import ControlPlane, wait_until
from tests.support.operator_harness import create, events, training, wait_for_status


def can_i(plane: ControlPlane, user: str, verb: str, resource: str, namespace: str | None = None,
          subresource: str | None = None) -> bool:
    """`kubectl auth can-i --as=<user>` (admin impersonating): True for yes, False for no."""
    scope = [f"--namespace={namespace}"] if namespace else ["--all-namespaces"]
    extra = [f"--subresource={subresource}"] if subresource else []
    result = subprocess.run([str(plane.kubectl_path), f"--kubeconfig={plane.kubeconfig}", "auth", "can-i", verb,
                             resource, f"--as={user}", *scope, *extra], capture_output=True, text=True, timeout=60)
    answer = result.stdout.strip()
    assert answer in ("yes", "no"), f"kubectl auth can-i {verb} {resource}: {result.stdout}{result.stderr}"
    return answer == "yes"


@pytest.fixture
def other_namespaces(control_plane: ControlPlane) -> Iterator[list[str]]:
    """Names of the extra namespaces a test makes with `make_namespace`; deleted afterwards."""
    made: list[str] = []
    yield made
    for name in made:
        control_plane.kubectl("delete", "namespace", name, "--wait=false", "--ignore-not-found")


# kopf's optional observers: it lists/watches namespaces (namespaced mode) and CRDs (to notice new resources), and
# when refused it retries, then carries on with the namespaces it was given and the API discovery it already did.
KOPF_OPTIONAL = re.compile(
    r"GET https://[^ ]+/(api/v1/namespaces|apis/apiextensions\.k8s\.io/v1/customresourcedefinitions)[? ]"
    r"|Not enough permissions to (list namespaces|watch for (resources|namespaces))")


# A line about another test's job (`<namespace>/<job>` outside this test's namespaces): a cluster-wide operator on
# the shared control plane sees the jobs other tests leave in namespaces being deleted, whose writes are refused.
JOB_IN_NAMESPACE = re.compile(r'(?:"message": "|\bon )([a-z0-9][a-z0-9-]*)/[a-z0-9][a-z0-9.-]*: ')


def assert_no_forbidden_calls(operator: ChartOperator, namespaces: tuple[str, ...] = ()) -> None:
    """Nothing the operator does for a job is refused; only kopf's optional cluster observers may be. With
    `namespaces`, lines about jobs in other namespaces are another test's."""

    def elsewhere(line: str) -> bool:
        named = {match.group(1) for match in JOB_IN_NAMESPACE.finditer(line)}
        return bool(namespaces) and bool(named) and not named & set(namespaces)

    refused = [line for line in operator.log_text().splitlines()
               if re.search(r"\b403\b|[Ff]orbidden", line) and not KOPF_OPTIONAL.search(line) and not elsewhere(line)]
    assert not refused, "\n".join(refused[:20])


def test_namespaced_install_runs_jobs_with_only_the_listed_namespaces_rights(
    control_plane: ControlPlane, namespace: str, other_namespaces: list[str], tmp_path: Path
) -> None:
    team = make_namespace(control_plane, other_namespaces, "team")
    other = make_namespace(control_plane, other_namespaces, "other")
    deployment, pod = install(control_plane, "kubetrain", namespace, f"--set=watch.namespaces={{{team}}}")
    env = {item["name"]: item.get("value") for item in deployment["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["KUBETRAIN_NAMESPACES"] == team
    assert control_plane.get("role", "kubetrain", team)["rules"]
    assert control_plane.get("rolebinding", "kubetrain", team)["subjects"][0]["namespace"] == namespace
    assert control_plane.get("service", "kubetrain-metrics", namespace)["spec"]["ports"][0]["port"] == 9090

    operator = start_operator(control_plane, deployment, pod, namespace, tmp_path)
    try:
        final = run_job_to_success(control_plane, operator, team, "helm-demo")
        lease = control_plane.get("lease", "kubetrain", namespace)
        assert lease["metadata"]["ownerReferences"] == [
            {"apiVersion": "v1", "kind": "Pod", "name": pod["metadata"]["name"], "uid": pod["metadata"]["uid"]}
        ], "the Lease goes with the operator's pod (helm uninstall leaves none)"
        assert final["workers"]["total"] == 2
        status, metrics = operator.get(operator.metrics_port, "/metrics")
        assert status == 200 and 'kubetrain_job_transitions_total{phase="Succeeded"} 1.0' in metrics
        assert_no_forbidden_calls(operator)

        # A job's pods run as the namespace's default account: RBAC lets it patch a status (the chart's admission
        # policy then admits only the job's own pods: tests/reliability/test_security.py) and nothing else.
        job_account = service_account_user(team, "default")
        assert can_i(control_plane, job_account, "patch", "distributedtrainings.kubetrain.dev/helm-demo", team,
                     subresource="status")
        assert not can_i(control_plane, job_account, "get", "distributedtrainings.kubetrain.dev/helm-demo", team,
                         subresource="status")
        assert not can_i(control_plane, job_account, "patch", "distributedtrainings.kubetrain.dev/helm-demo", team)
        assert not can_i(control_plane, job_account, "get", "secrets", team)
        assert not can_i(control_plane, job_account, "create", "pods", team)
        elsewhere = service_account_user(other, "default")
        assert not can_i(control_plane, elsewhere, "patch", "distributedtrainings.kubetrain.dev", other,
                         subresource="status"), "only the watched namespaces' accounts may report progress"
        assert control_plane.get("validatingadmissionpolicybinding", "kubetrain-progress")["spec"]["policyName"] == (
            "kubetrain-progress")
    finally:
        operator.stop()
        print(f"operator log:\n{operator.log_tail(200)}")

    user = service_account_user(namespace, "kubetrain")
    assert can_i(control_plane, user, "create", "pods", team)
    assert can_i(control_plane, user, "patch", "distributedtrainings.kubetrain.dev", team, subresource="status")
    for verb, resource, where in [
        ("get", "secrets", other), ("list", "secrets", other), ("create", "pods", other),
        ("list", "distributedtrainings.kubetrain.dev", other), ("get", "secrets", namespace),
        ("list", "distributedtrainings.kubetrain.dev", None), ("list", "pods", None),
        ("delete", "nodes", None), ("get", "nodes", None), ("list", "namespaces", None),
        ("patch", f"customresourcedefinitions.apiextensions.k8s.io/{CRD_NAME}", None),
        ("create", "clusterrolebindings", None), ("create", "clusterroles", None),
        ("delete", "secrets", team), ("update", "secrets", team), ("patch", "deployments.apps", team),
        ("escalate", "roles", team), ("bind", "roles", team),
    ]:
        assert not can_i(control_plane, user, verb, resource, where), f"the operator can {verb} {resource} in {where}"
    assert not can_i(control_plane, user, "create", "pods", team, subresource="exec"), "the operator can exec"


def watch_refused(metrics: str) -> dict[tuple[str, str], float]:
    """kubetrain_watch_refused from a /metrics page: {(resource, namespace): value}."""
    return {(sample.labels["resource"], sample.labels["namespace"]): sample.value
            for family in text_string_to_metric_families(metrics) if family.name == "kubetrain_watch_refused"
            for sample in family.samples}


def test_a_watched_namespace_the_operator_may_not_list_holds_back_no_other_namespace(
    control_plane: ControlPlane, namespace: str, other_namespaces: list[str], tmp_path: Path
) -> None:
    """watch.namespaces names a namespace deleted since (its Role and RoleBinding went with it), and kueue.enabled is
    set in a cluster without Kueue. A job in the other namespace runs all the same. The operator's log, its
    kubetrain_watch_refused metric and its /healthz body name each refused list; the job that asked for a Kueue queue
    has an event saying what it goes without; the liveness endpoint stays 200 (a restart would not mend RBAC)."""
    team = make_namespace(control_plane, other_namespaces, "team")
    gone = make_namespace(control_plane, other_namespaces, "gone")
    release = f"kt-{uuid.uuid4().hex[:6]}"
    deployment, pod = install(control_plane, release, namespace, f"--set=watch.namespaces={{{team},{gone}}}",
                              "--set=kueue.enabled=true")
    try:
        control_plane.kubectl("delete", "namespace", gone, "--timeout=120s")
        operator = start_operator(control_plane, deployment, pod, namespace, tmp_path)
        try:
            body = training("queued", resources={"gpusPerWorker": 0})
            body["metadata"]["labels"] = {QUEUE_LABEL: "team-queue"}
            create(control_plane, team, body)
            running = wait_for_status(control_plane, team, "queued", operator, phase="Running", timeout=120)
            assert running["workers"]["ready"] == 2

            log = operator.log_text()
            assert f"cannot list distributedtrainings.kubetrain.dev in namespace {gone} (403 Forbidden)" in log, log
            assert f"cannot list workloads.kueue.x-k8s.io in namespace {team} (404 Not Found)" in log, log
            refused = watch_refused(operator.get(operator.metrics_port, "/metrics")[1])
            assert refused[("pods", gone)] == 1 and refused[("distributedtrainings.kubetrain.dev", gone)] == 1
            assert refused[("workloads.kueue.x-k8s.io", team)] == 1
            assert ("pods", team) not in refused, refused
            health, text = operator.get(operator.health_port, "/healthz")
            assert health == 200 and f"pods in {gone}: 403 Forbidden" in text, text
            warnings = wait_until(lambda: [e for e in events(control_plane, team, "queued")
                                           if e["reason"] == WATCH_REFUSED] or None,
                                  message="the WatchRefused event on the queued job")
            assert len(warnings) == 1 and warnings[0]["type"] == "Warning", warnings
            assert "cannot list workloads.kueue.x-k8s.io (404 Not Found): this job runs" in warnings[0]["message"]
            assert "Install Kueue" in warnings[0]["message"]
        finally:
            operator.stop()
            print(f"operator log:\n{operator.log_tail(200)}")
    finally:
        helm(control_plane, "uninstall", release, f"--namespace={namespace}")


def test_cluster_wide_install_runs_jobs_in_any_namespace_and_nothing_more(
    control_plane: ControlPlane, namespace: str, other_namespaces: list[str], tmp_path: Path
) -> None:
    release = f"kt-{uuid.uuid4().hex[:6]}"
    deployment, pod = install(control_plane, release, namespace)
    try:
        args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
        assert "--all-namespaces" in args
        fullname = f"{release}-kubetrain"
        binding = control_plane.get("clusterrolebinding", fullname)
        assert binding["subjects"] == [{"kind": "ServiceAccount", "name": fullname, "namespace": namespace}]

        jobs = make_namespace(control_plane, other_namespaces, "jobs")
        wait_until(lambda: control_plane.kubectl("get", "serviceaccount", "default", f"--namespace={jobs}",
                                                 "--ignore-not-found", "--output=name").strip(),
                   message=f"ServiceAccount {jobs}/default")
        operator = start_operator(control_plane, deployment, pod, namespace, tmp_path)
        try:
            run_job_to_success(control_plane, operator, jobs, "cluster-demo")
            assert_no_forbidden_calls(operator, (jobs, namespace))
        finally:
            operator.stop()
            print(f"operator log:\n{operator.log_tail(200)}")

        user = service_account_user(namespace, fullname)
        assert can_i(control_plane, user, "list", "distributedtrainings.kubetrain.dev", None)
        assert can_i(control_plane, user, "create", "pods", "any-namespace")
        for verb, resource, where in [
            ("delete", "nodes", None), ("get", "nodes", None), ("create", "namespaces", None),
            ("delete", "namespaces", None), ("list", "customresourcedefinitions.apiextensions.k8s.io", None),
            ("update", f"customresourcedefinitions.apiextensions.k8s.io/{CRD_NAME}", None),
            ("delete", f"customresourcedefinitions.apiextensions.k8s.io/{CRD_NAME}", None),
            ("create", "clusterroles", None), ("create", "clusterrolebindings", None),
            ("delete", "secrets", "any-namespace"), ("patch", "deployments.apps", "any-namespace"),
            ("impersonate", "serviceaccounts", "any-namespace"),
        ]:
            assert not can_i(control_plane, user, verb, resource, where), f"the operator can {verb} {resource}"
        assert not can_i(control_plane, user, "create", "pods", "any-namespace", subresource="exec")
    finally:
        helm(control_plane, "uninstall", release, f"--namespace={namespace}")
    for kind, name in (("clusterrole", f"{release}-kubetrain"), ("clusterrole", f"{release}-kubetrain-progress"),
                       ("validatingadmissionpolicy", f"{release}-kubetrain-progress")):
        assert not control_plane.kubectl("get", kind, name, "--ignore-not-found").strip(), f"{kind} {name} left"
