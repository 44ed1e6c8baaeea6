"""The Helm chart as `helm lint` and `helm template` see it: what a user installs with default and namespaced values,
and the values the chart refuses. Golden manifests regenerate with KUBETRAIN_UPDATE_GOLDEN=1 after an intended change.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes.utils.quantity import parse_quantity

from kubetrain.children import CHILD_KINDS
from kubetrain.contract import GROUP, PLURAL
from kubetrain.controller import watched
from kubetrain.settings import Settings, from_environment
from tests.support.chart import CHART, REPO, helm_binary

GOLDEN = Path(__file__).parent / "chart_golden"
RELEASE, RELEASE_NAMESPACE = "kubetrain", "kubetrain-system"
NAMESPACED = ("--set", "watch.namespaces={team-a,team-b}")
RBAC_KINDS = {"ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding", "ValidatingAdmissionPolicy",
              "ValidatingAdmissionPolicyBinding"}


def helm(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(helm_binary()), *args], capture_output=True, text=True, timeout=60)


def render_text(*args: str) -> str:
    result = helm("template", RELEASE, str(CHART), "--namespace", RELEASE_NAMESPACE, *args)
    assert result.returncode == 0, result.stderr
    return result.stdout


def render(*args: str) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(render_text(*args)) if doc]


def of_kind(docs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [doc for doc in docs if doc["kind"] == kind]


def operator_rbac(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rendered objects without the progress-report access of jobs' pods (templates/progress.yaml)."""
    return [doc for doc in docs if not doc["metadata"]["name"].endswith("-progress")]


def is_leader_rbac(doc: dict[str, Any]) -> bool:
    """The Role (and its binding) for the leader-election Lease in the release namespace."""
    return bool(doc["metadata"]["name"].endswith("-leader") and doc["metadata"]["namespace"] == RELEASE_NAMESPACE)


def the(docs: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    found = of_kind(docs, kind)
    assert len(found) == 1, f"expected one {kind}, found {len(found)}"
    return found[0]


def container(docs: list[dict[str, Any]]) -> dict[str, Any]:
    return the(docs, "Deployment")["spec"]["template"]["spec"]["containers"][0]


def allowed(rules: list[dict[str, Any]], group: str, resource: str, verb: str) -> bool:
    return any(group in rule["apiGroups"] and resource in rule["resources"] and verb in rule["verbs"]
               and not rule.get("resourceNames") for rule in rules)


# ---------------------------------------------------------------------------------------------------------------------
# lint and golden manifests


@pytest.mark.parametrize("values", [(), NAMESPACED], ids=["cluster-wide", "namespaced"])
def test_helm_lint_is_clean_in_strict_mode(values: tuple[str, ...]) -> None:
    result = helm("lint", "--strict", str(CHART), *values)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "[WARNING]" not in result.stdout and "[ERROR]" not in result.stdout, result.stdout


@pytest.mark.parametrize(("golden", "values"), [("default.yaml", ()), ("namespaced.yaml", NAMESPACED)])
def test_rendered_manifests_match_the_reviewed_golden_files(golden: str, values: tuple[str, ...]) -> None:
    rendered = render_text(*values)
    path = GOLDEN / golden
    if os.environ.get("KUBETRAIN_UPDATE_GOLDEN"):
        path.parent.mkdir(exist_ok=True)
        path.write_text(rendered)
    assert rendered == path.read_text()


# ---------------------------------------------------------------------------------------------------------------------
# scope: cluster-wide by default, only the listed namespaces otherwise


def test_default_install_watches_every_namespace_through_a_cluster_role() -> None:
    docs = operator_rbac(render())
    assert "--all-namespaces" in container(docs)["args"]
    job_roles = [d for d in of_kind(docs, "Role") + of_kind(docs, "RoleBinding") if not is_leader_rbac(d)]
    assert not job_roles, "cluster-wide rights only, besides the Lease in the operator's namespace"
    binding = the(docs, "ClusterRoleBinding")
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                                  "name": the(docs, "ClusterRole")["metadata"]["name"]}
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": the(docs, "ServiceAccount")["metadata"]["name"],
                                    "namespace": RELEASE_NAMESPACE}]


def test_listed_namespaces_get_a_role_each_and_no_cluster_wide_rights() -> None:
    docs = operator_rbac(render(*NAMESPACED))
    assert operator_settings(docs).namespaces == ("team-a", "team-b")
    assert not of_kind(docs, "ClusterRole") and not of_kind(docs, "ClusterRoleBinding")
    roles = [r for r in of_kind(docs, "Role") if not is_leader_rbac(r)]
    assert sorted(r["metadata"]["namespace"] for r in roles) == ["team-a", "team-b"]
    account = the(docs, "ServiceAccount")["metadata"]
    for binding in of_kind(docs, "RoleBinding"):
        assert binding["roleRef"]["kind"] == "Role"
        assert binding["subjects"] == [{"kind": "ServiceAccount", "name": account["name"],
                                        "namespace": account["namespace"]}]


def test_rbac_create_false_renders_no_rbac_objects() -> None:
    assert not [doc for doc in render("--set", "rbac.create=false") if doc["kind"] in RBAC_KINDS]
    assert not [doc for doc in render("--set", "rbac.create=false", *NAMESPACED) if doc["kind"] in RBAC_KINDS]


def test_an_existing_service_account_is_used_when_the_chart_does_not_create_one() -> None:
    docs = operator_rbac(render("--set", "serviceAccount.create=false", "--set", "serviceAccount.name=ops-operator"))
    assert not of_kind(docs, "ServiceAccount")
    assert the(docs, "Deployment")["spec"]["template"]["spec"]["serviceAccountName"] == "ops-operator"
    assert the(docs, "ClusterRoleBinding")["subjects"][0]["name"] == "ops-operator"


# ---------------------------------------------------------------------------------------------------------------------
# RBAC covers what the operator's code does (the control-plane test proves it against a real API server)


def operator_settings(docs: list[dict[str, Any]]) -> Settings:
    """The settings the operator reads from the environment the chart gives its container."""
    return from_environment({item["name"]: item["value"] for item in container(docs)["env"] if "value" in item})


@pytest.mark.parametrize("values", [(), NAMESPACED, ("--set", "kueue.enabled=true")],
                         ids=["cluster-wide", "namespaced", "kueue"])
def test_rules_allow_every_watch_and_every_child_the_operator_manages(values: tuple[str, ...]) -> None:
    docs = operator_rbac(render(*values))
    watches = watched(operator_settings(docs))
    roles = {(role["kind"], role["metadata"].get("namespace")): role for role in docs
             if role["kind"] in ("ClusterRole", "Role") and not is_leader_rbac(role)}
    for _, resource in watches:  # what the operator lists and watches, where, is what it may list and watch there
        role = roles[("Role", resource.namespace)] if resource.namespace else roles[("ClusterRole", None)]
        group = resource.api_version.rpartition("/")[0]
        for verb in ("list", "watch"):
            assert allowed(role["rules"], group, resource.plural, verb), (resource, verb)
    assert {namespace for (_, namespace) in roles} == {resource.namespace for _, resource in watches}
    for role in roles.values():
        rules = role["rules"]
        for child in CHILD_KINDS:  # the cache watches every watched kind; a pass creates, and reads back on conflict
            for verb in ("get", "create", *(("list", "watch") if child.watched else ())):
                assert allowed(rules, child.group, child.plural, verb), (child.plural, verb)
        for group, plural in (("", "pods"), ("batch", "jobs"), (GROUP, PLURAL), ("", "configmaps")):
            assert allowed(rules, group, plural, "delete"), plural
        assert allowed(rules, "", "pods/log", "get"), "a failed attempt's launcher log is copied before it goes"
        assert allowed(rules, GROUP, f"{PLURAL}/status", "patch")
        assert allowed(rules, "", "events", "create")


def progress_access(docs: list[dict[str, Any]]) -> tuple[dict[str, Any], list[dict[str, Any]], dict[str, Any]]:
    """The ClusterRole rank 0 reports progress with, its bindings, and the admission policy's binding."""
    role = next(d for d in of_kind(docs, "ClusterRole") if d["metadata"]["name"].endswith("-progress"))
    bindings = [d for d in of_kind(docs, "ClusterRoleBinding") + of_kind(docs, "RoleBinding")
                if d["roleRef"]["name"] == role["metadata"]["name"]]
    return role, bindings, the(docs, "ValidatingAdmissionPolicyBinding")


@pytest.mark.parametrize("values", [(), NAMESPACED], ids=["cluster-wide", "namespaced"])
def test_job_pods_may_only_patch_a_status_and_the_admission_policy_judges_which(values: tuple[str, ...]) -> None:
    """RBAC cannot tell a job's pods from others' in a namespace: it lets the namespaces' ServiceAccounts patch the
    status subresource, and the policy admits a patch only from a token bound to the job's own pod (the real API
    server proves it: tests/reliability/test_security.py)."""
    docs = render(*values)
    role, bindings, policy_binding = progress_access(docs)
    assert role["rules"] == [{"apiGroups": [GROUP], "resources": [f"{PLURAL}/status"], "verbs": ["patch"]}]
    policy = the(docs, "ValidatingAdmissionPolicy")
    assert policy_binding["spec"] == {**policy_binding["spec"], "policyName": policy["metadata"]["name"],
                                      "validationActions": ["Deny"]}
    assert policy["spec"]["failurePolicy"] == "Fail"
    assert f"system:serviceaccount:{RELEASE_NAMESPACE}:{the(docs, 'ServiceAccount')['metadata']['name']}" in str(
        policy["spec"]["matchConditions"]), "the operator's own status writes are not judged by the policy"
    if values:
        assert sorted((b["metadata"]["namespace"], b["subjects"][0]["name"]) for b in bindings) == [
            ("team-a", "system:serviceaccounts:team-a"), ("team-b", "system:serviceaccounts:team-b")]
        selector = policy_binding["spec"]["matchResources"]["namespaceSelector"]["matchExpressions"][0]
        assert selector["values"] == ["team-a", "team-b"]
    else:
        assert [b["subjects"] for b in bindings] == [[{"kind": "Group", "apiGroup": "rbac.authorization.k8s.io",
                                                       "name": "system:serviceaccounts"}]]


def test_rules_grant_nothing_cluster_scoped_or_wildcard() -> None:
    for rule in the(operator_rbac(render()), "ClusterRole")["rules"]:
        assert "*" not in rule["verbs"] + rule["resources"] + rule["apiGroups"]
        assert not {"update", "deletecollection", "escalate", "bind", "impersonate"} & set(rule["verbs"])
        assert not {"nodes", "namespaces", "customresourcedefinitions", "clusterroles",
                    "clusterrolebindings"} & set(rule["resources"])
    rules = the(operator_rbac(render()), "ClusterRole")["rules"]
    assert not allowed(rules, "", "secrets", "delete") and not allowed(rules, "", "secrets", "patch")


# ---------------------------------------------------------------------------------------------------------------------
# the Deployment


def test_operator_runs_hardened_and_replicas_elect_one_leader_through_a_lease() -> None:
    docs = render("--set", "replicas=2")
    spec = the(docs, "Deployment")["spec"]
    assert spec["replicas"] == 2 and spec["strategy"]["rollingUpdate"] == {"maxUnavailable": 0, "maxSurge": 1}
    env = {e["name"]: e for e in container(docs)["env"]}
    assert env["KUBETRAIN_LEASE_NAMESPACE"]["valueFrom"] == {"fieldRef": {"fieldPath": "metadata.namespace"}}
    leader = [d for d in of_kind(docs, "Role") if d["metadata"]["name"].endswith("-leader")]
    assert [d["metadata"]["namespace"] for d in leader] == ["kubetrain-system"]
    assert leader[0]["rules"] == [{"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
                                   "verbs": ["get", "create", "update", "delete"]}]
    pod = spec["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    security = container(docs)["securityContext"]
    assert security["readOnlyRootFilesystem"] is True
    assert security["allowPrivilegeEscalation"] is False
    assert security["capabilities"] == {"drop": ["ALL"]}
    assert {"name": "tmp", "mountPath": "/tmp"} in container(docs)["volumeMounts"], "a writable /tmp for the client"
    assert container(docs)["resources"]["limits"]["memory"]


def test_the_default_memory_limit_holds_1000_jobs_with_30_percent_headroom_by_the_benchmark() -> None:
    """tests/bench ran the operator with 1,000 jobs in a memory cgroup at this chart's default limit: it stayed up,
    launched every job, and peaked 30% or more below the limit."""
    results = json.loads((REPO / "tests" / "bench" / "results" / "operator-vs-mpi-operator.json").read_text())
    [row] = [row for row in results["rows"]
             if row["name"].startswith("kubetrain under the chart's default memory limit")]
    limit = parse_quantity(container(render())["resources"]["limits"]["memory"]) / 2**20
    assert row["extra"]["limit_mib"] == limit, "the benchmark ran under another limit: run it again"
    assert row["extra"]["jobs"] >= 1000 and row["extra"]["oom_kills"] == 0 and row["meets"], row
    assert row["value"] * 1.3 <= limit, f"peak {row['value']:.0f} MiB leaves less than 30% of {limit:.0f} MiB"


def test_probes_call_the_health_endpoint_kopf_is_told_to_serve() -> None:
    """kopf hosts the operator process: its command line, logging and /healthz."""
    main = container(render("--set", "operator.healthPort=8181"))
    assert "--liveness=http://0.0.0.0:8181/healthz" in main["args"]
    ports = {port["name"]: port["containerPort"] for port in main["ports"]}
    assert ports["health"] == 8181
    for probe in ("livenessProbe", "readinessProbe"):
        assert main[probe]["httpGet"] == {"path": "/healthz", "port": "health"}


def test_operator_command_and_settings_reach_the_container() -> None:
    main = container(render("--set", "operator.syncThreads=4", "--set", "operator.errorRetrySeconds=2.5",
                            "--set", "operator.verbosity=debug", "--set", "operator.logFormat=plain"))
    assert main["command"] == ["kopf", "run", "--standalone", "-m", "kubetrain.reconcile"]
    assert "--all-namespaces" in main["args"]  # kopf watches nothing itself; KUBETRAIN_NAMESPACES says what to watch
    env = {item["name"]: item.get("value") for item in main["env"]}
    assert env["KUBETRAIN_SYNC_THREADS"] == "4" and env["KUBETRAIN_ERROR_RETRY_SECONDS"] == "2.5"
    assert "--debug" in main["args"] and "--log-format=plain" in main["args"]


@pytest.mark.parametrize("values", [(), NAMESPACED], ids=["cluster-wide", "namespaced"])
def test_kueue_enabled_lets_the_operator_watch_workloads_and_tells_it_to(values: tuple[str, ...]) -> None:
    for enabled in (False, True):
        docs = operator_rbac(render(*values, "--set", f"kueue.enabled={str(enabled).lower()}"))
        env = {item["name"]: item.get("value") for item in container(docs)["env"]}
        assert env.get("KUBETRAIN_KUEUE") == ("true" if enabled else None)
        for role in of_kind(docs, "ClusterRole") + [r for r in of_kind(docs, "Role") if not is_leader_rbac(r)]:
            for verb in ("list", "watch"):
                assert allowed(role["rules"], "kueue.x-k8s.io", "workloads", verb) == enabled, (role, verb)
            assert not allowed(role["rules"], "kueue.x-k8s.io", "workloads", "patch")  # read only


def test_metrics_port_is_served_exposed_and_selected_by_the_service() -> None:
    docs = render("--set", "metrics.port=9191")
    main = container(docs)
    assert {item["name"]: item.get("value") for item in main["env"]}["KUBETRAIN_METRICS_PORT"] == "9191"
    assert {"name": "metrics", "containerPort": 9191, "protocol": "TCP"} in main["ports"]
    service = the(docs, "Service")
    assert service["spec"]["ports"][0]["targetPort"] == "metrics"
    pod_labels = the(docs, "Deployment")["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= pod_labels.items()
    assert not of_kind(docs, "ServiceMonitor"), "the ServiceMonitor is off by default"


def test_metrics_disabled_means_no_service_and_no_endpoint() -> None:
    docs = render("--set", "metrics.enabled=false")
    assert not of_kind(docs, "Service")
    assert {item["name"]: item.get("value") for item in container(docs)["env"]}["KUBETRAIN_METRICS_PORT"] == "0"


def test_service_monitor_scrapes_the_metrics_service_when_enabled() -> None:
    docs = render("--set", "metrics.serviceMonitor.enabled=true", "--set", "metrics.serviceMonitor.labels.release=prom")
    monitor = the(docs, "ServiceMonitor")
    assert monitor["metadata"]["labels"]["release"] == "prom"
    assert monitor["spec"]["selector"]["matchLabels"].items() <= the(docs, "Service")["metadata"]["labels"].items()
    assert monitor["spec"]["endpoints"][0]["port"] == "metrics"


# ---------------------------------------------------------------------------------------------------------------------
# values the chart refuses, each with a message naming the value


@pytest.mark.parametrize(
    ("values", "message"),
    [
        (("--set", "replicas=0"), "'/replicas': minimum: got 0, want 1"),
        (("--set", "image.pullPolicy=Sometimes"), "'/image/pullPolicy': value must be one of"),
        (("--set", "watch.namespaces=team-a"), "'/watch/namespaces': got string, want array"),
        (("--set", "watch.namespaces={Team_A}"), "'/watch/namespaces/0': 'Team_A' does not match pattern"),
        (("--set", "watch.namespaces={team-*}"), "'/watch/namespaces/0': 'team-*' does not match pattern"),
        (("--set", "watch.scope=cluster"), "'/watch': additional properties 'scope' not allowed"),
        (("--set", "watch.namespaces={a,a}"), "'/watch/namespaces': items at 0 and 1 are equal"),
        (("--set", "replicaCount=2"), "additional properties 'replicaCount' not allowed"),
        (("--set", "metrics.port=70000"), "'/metrics/port': maximum"),
        (("--set", "rbac.create=yes"), "'/rbac/create': got string, want boolean"),
        (("--set", "operator.logFormat=xml"), "'/operator/logFormat': value must be one of"),
        (("--set", "operator.verbosity=loud"), "'/operator/verbosity': value must be one of"),
        (("--set", "operator.syncThreads=0"), "'/operator/syncThreads': minimum"),
        (("--set", "operator.errorRetrySeconds=0"), "'/operator/errorRetrySeconds': 'anyOf' failed"),
        (("--set", "metrics.serviceMonitor.interval=often"), "'/metrics/serviceMonitor/interval'"),
        (("--set", "metrics.serviceMonitor.enabled=true", "--set", "metrics.enabled=false"),
         "metrics.serviceMonitor.enabled needs metrics.enabled=true"),
        (("--set", "serviceAccount.create=false"), "serviceAccount.name: name the existing ServiceAccount"),
    ],
)
def test_bad_values_fail_with_a_message_naming_the_value(values: tuple[str, ...], message: str) -> None:
    result = helm("template", RELEASE, str(CHART), *values)
    assert result.returncode != 0, f"helm accepted {values}"
    assert message in result.stderr, result.stderr


# The first Kubernetes minor that serves each CRD schema feature the chart's CRD may use (Kubernetes' changelogs:
# CEL rules beta in 1.25, messageExpression 1.27, fieldPath and reason 1.28 (kubernetes/kubernetes#118041),
# optionalOldSelf 1.30). A feature missing here fails the test until its version is added.
CRD_FEATURE_SINCE = {"x-kubernetes-validations": 25, "rule": 25, "message": 25, "messageExpression": 27,
                     "fieldPath": 28, "reason": 28, "optionalOldSelf": 30}
# The same for the chart's templates: ValidatingAdmissionPolicy v1 and the pod name in a pod's ServiceAccount token
# (ServiceAccountTokenPodNodeInfo, on by default) both from 1.30.
TEMPLATE_KIND_SINCE = {"ValidatingAdmissionPolicy": 30, "ValidatingAdmissionPolicyBinding": 30}


def crd_features(schema: Any) -> set[str]:
    """The CEL features a CRD schema uses: the validations extension and the keys of each rule."""
    found: set[str] = set()
    if isinstance(schema, dict):
        for key, value in schema.items():
            if key == "x-kubernetes-validations":
                found.add(key)
                found.update(name for rule in value for name in rule)
            found |= crd_features(value)
    elif isinstance(schema, list):
        for item in schema:
            found |= crd_features(item)
    return found


def test_the_chart_asks_for_the_first_kubernetes_that_serves_every_feature_it_uses() -> None:
    """A real API server of every older minor is not built here (each is a Kubernetes build of its own); the CRD's
    features and the templates' kinds are checked against the versions that introduced them, and the chart refuses
    older clusters."""
    crd = yaml.safe_load((CHART / "crds" / "distributedtrainings.kubetrain.dev.yaml").read_text())
    features = crd_features(crd["spec"]["versions"])
    assert features <= set(CRD_FEATURE_SINCE), f"add the Kubernetes version of {features - set(CRD_FEATURE_SINCE)}"
    kinds = {doc["kind"] for doc in render()} & set(TEMPLATE_KIND_SINCE)
    minor = max([CRD_FEATURE_SINCE[feature] for feature in features] + [TEMPLATE_KIND_SINCE[kind] for kind in kinds])
    refused = helm("template", RELEASE, str(CHART), "--kube-version", f"1.{minor - 1}.0")
    assert refused.returncode != 0
    assert f"chart requires kubeVersion: >=1.{minor}.0-0" in refused.stderr, refused.stderr
    assert helm("template", RELEASE, str(CHART), "--kube-version", f"1.{minor}.0").returncode == 0
    assert f"Kubernetes 1.{minor} or later" in (REPO / "README.md").read_text()


def documented_rules(heading_table: list[list[str]]) -> set[tuple[str, str, str]]:
    """(API group, resource, verb) of each row of a documented RBAC table: `| group, group | resources | verbs |`."""
    rules = set()
    for group_cell, resource_cell, verb_cell, *_ in heading_table:
        for group in (part.strip().strip('"') for part in group_cell.split(",")):
            for resource in (part.strip() for part in resource_cell.split(",")):
                rules |= {(group, resource, verb.strip()) for verb in verb_cell.split(",")}
    return rules


def rendered_rules(rules: list[dict[str, Any]]) -> set[tuple[str, str, str]]:
    return {(group, resource, verb) for rule in rules for group in rule["apiGroups"] for resource in rule["resources"]
            for verb in rule["verbs"]}


def test_the_documented_rbac_tables_are_the_charts_rules() -> None:
    """docs/install.md "What the operator may do" says the operator has these rights and no other: the first table
    is the ClusterRole (or each watched namespace's Role) with Kueue on, the second the leader's Role."""
    from tests.support.documented import table_after

    operator_table = table_after("docs/install.md", "What the operator may do", "The chart gives the operator")
    leader_table = table_after("docs/install.md", "What the operator may do", "Besides, a Role in the release")
    docs = operator_rbac(render("--set", "kueue.enabled=true"))
    cluster_role = the(docs, "ClusterRole")
    leader = [doc for doc in of_kind(docs, "Role") if is_leader_rbac(doc)]
    assert len(leader) == 1 and len(of_kind(docs, "Role")) == 1, "a Role the documentation does not describe"
    assert documented_rules(operator_table) == rendered_rules(cluster_role["rules"])
    assert documented_rules(leader_table) == rendered_rules(leader[0]["rules"])
    namespaced = [doc for doc in of_kind(operator_rbac(render(*NAMESPACED, "--set", "kueue.enabled=true")), "Role")
                  if not is_leader_rbac(doc)]
    assert namespaced and all(rendered_rules(role["rules"]) == documented_rules(operator_table) for role in namespaced)


def test_the_memory_sizing_rule_is_the_same_in_values_yaml_and_the_benchmarks() -> None:
    """The rule is written twice: where a user sets the limit (values.yaml) and beside its measurements."""
    rule = ("90 MiB plus 6 MiB per 100 jobs of 2 workers, divided by 0.7 for headroom", "about 7,000 such jobs")
    values = " ".join(line.lstrip("# ") for line in (CHART / "values.yaml").read_text().splitlines())
    benchmarks = (REPO / "docs" / "benchmarks.md").read_text()
    for words in rule:
        assert " ".join(words.split()) in " ".join(values.split()), f"values.yaml no longer says {words!r}"
        assert " ".join(words.split()) in " ".join(benchmarks.split()), \
            f"docs/benchmarks.md no longer says {words!r}"
    limit = float(parse_quantity(container(render())["resources"]["limits"]["memory"])) / 2**20
    assert int((limit * 0.7 - 90) / 6 * 100) // 1000 == 7, "the default limit no longer holds about 7,000 jobs"
