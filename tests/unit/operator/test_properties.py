"""Property-based: every DistributedTraining the CRD schema accepts either parses and builds objects the API server
would accept (DNS-1123 names, valid labels, integer GPU limits, one hostfile line per worker, unique mount paths) or
raises one SpecError that names a field. Bodies are generated within the schema (types, ranges, enums, patterns and the
CEL rules of charts/kubetrain/crds), including the free-form parts: podTemplate, nodeSelector, env values."""

from __future__ import annotations

import re
from typing import Any

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from kubetrain.api import SpecError, parse_job
from kubetrain.keys import JobKeys, SshKeyPair
from kubetrain.manifests.hosts import build_hosts_configmap
from kubetrain.manifests.launcher import build_launcher_job
from kubetrain.manifests.pods import build_worker_pod
from kubetrain.manifests.service import build_service
from kubetrain.manifests.ssh import build_ssh_secret

DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
LABEL_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
ENV_NAME = re.compile(r"^[-._a-zA-Z][-._a-zA-Z0-9]*$")
QUANTITY = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)([KMGTPE]i|[numkMGTPE]|[eE][+-]?\d+)?$")
FIELD = re.compile(r"^(kind|metadata\.name|spec)([.\[]|$)")
PAIR = SshKeyPair(private_key="-----BEGIN OPENSSH PRIVATE KEY-----\nx\n-----END OPENSSH PRIVATE KEY-----\n",
                  public_key="ssh-ed25519 AAAA kubetrain\n")
KEYS = JobKeys(client=PAIR, host=PAIR)

# ---------------------------------------------------------------------------------------------------------------------
# Strategies: what the CRD schema lets through


def names() -> st.SearchStrategy[str]:
    """metadata.name under the CRD's CEL rules: ^[a-z]([-a-z0-9]*[a-z0-9])?$, at most 52 characters."""
    return st.from_regex(r"\A[a-z]([-a-z0-9]{0,50}[a-z0-9])?\Z")


namespaces = st.from_regex(r"\A[a-z]([-a-z0-9]{0,20}[a-z0-9])?\Z")
text = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=40)
keyish = st.one_of(st.from_regex(r"\A[a-z][a-z0-9.-]{0,20}(/[a-z][a-z0-9_.-]{0,20})?\Z"), text)
quantities = st.one_of(st.integers(0, 64),
                       st.from_regex(r"\A\+?(\d{1,4}(\.\d{0,3})?|\.\d{1,3})(m)?\Z"),  # the CRD's cpu pattern
                       st.from_regex(r"\A\+?(\d{1,4}(\.\d{0,3})?|\.\d{1,3})(([KMGTPE]i)|[kMGTPE]|[eE]\+?\d)?\Z"))
mount_paths = st.one_of(st.sampled_from(["/data", "/checkpoints", "/data/", "/tmp", "/home/kubetrain", "/dev/shm",
                                         "/etc/kubetrain/ssh", "/mnt/x", "//"]),
                        st.from_regex(r"\A/[a-z0-9/._-]{1,20}\Z"))
env_entries = st.lists(
    st.fixed_dictionaries({"name": st.from_regex(r"\A[A-Za-z_][A-Za-z0-9_]{0,15}\Z")},
                          optional={"value": text, "valueFrom": st.just({"fieldRef": {"fieldPath": "metadata.name"}})}),
    max_size=4, unique_by=lambda entry: entry["name"])


@st.composite
def bodies(draw: st.DrawFn) -> dict[str, Any]:
    gpus = draw(st.none() | st.integers(0, 64))
    spec: dict[str, Any] = {
        "image": draw(st.text(min_size=1, max_size=30)),
        "command": draw(st.lists(st.text(min_size=1, max_size=30), min_size=1, max_size=6)),
        "workers": draw(st.integers(1, 1000)),
    }
    resources: dict[str, Any] = {}
    if gpus is not None:
        resources["gpusPerWorker"] = gpus
    for key in ("cpu", "memory"):
        if draw(st.booleans()):
            resources[key] = draw(quantities)
    spec["resources"] = resources
    if draw(st.booleans()):  # CEL: slotsPerWorker <= gpusPerWorker unless there are no GPUs
        top = gpus if gpus else 64
        spec["slotsPerWorker"] = draw(st.integers(1, top))
    data_mount = draw(mount_paths)
    checkpoint_mount = draw(mount_paths.filter(lambda path: path != data_mount))  # CEL: the two differ
    spec["data"] = {"mountPath": data_mount, "readOnly": draw(st.booleans())}
    spec["checkpoint"] = {"mountPath": checkpoint_mount}
    for volume in ("data", "checkpoint"):
        if draw(st.booleans()):
            spec[volume]["claimName"] = draw(st.text(min_size=1, max_size=20))
    if draw(st.booleans()):
        spec["env"] = [e for e in draw(env_entries) if not e["name"].startswith("KUBETRAIN_")]
    if draw(st.booleans()):
        spec["imagePullPolicy"] = draw(st.sampled_from(["Always", "IfNotPresent", "Never"]))
    spec["launcher"] = {"waitForWorkersSeconds": draw(st.integers(1, 86400))}
    spec["runPolicy"] = {
        "backoffLimit": draw(st.integers(0, 100)),
        "activeDeadlineSeconds": draw(st.none() | st.integers(1, 10**6)),
        "ttlSecondsAfterFinished": draw(st.none() | st.integers(0, 10**6)),
        "cleanPodPolicy": draw(st.sampled_from(["Running", "All", "None"])),
        "suspend": draw(st.booleans()),
    }
    scheduling: dict[str, Any] = {}
    if draw(st.booleans()):
        scheduling["nodeSelector"] = draw(st.dictionaries(keyish, text, max_size=3))
    if draw(st.booleans()):
        scheduling["priorityClassName"] = draw(st.none() | st.text(max_size=20))
    spec["scheduling"] = scheduling
    if draw(st.booleans()):  # free-form: the user's labels and annotations for every pod
        spec["podTemplate"] = {"metadata": {"labels": draw(st.dictionaries(keyish, text, max_size=3)),
                                            "annotations": draw(st.dictionaries(keyish, text, max_size=2))}}
    return {"apiVersion": "kubetrain.dev/v1alpha1", "kind": "DistributedTraining",
            "metadata": {"name": draw(names()), "namespace": draw(namespaces), "uid": "uid-1"},
            "spec": spec}


# ---------------------------------------------------------------------------------------------------------------------
# What the API server would check on the built objects


def label_problems(labels: dict[str, Any], where: str) -> list[str]:
    problems = []
    for key, value in labels.items():
        prefix, _, name = key.rpartition("/")
        if (prefix and (len(prefix) > 253 or not DNS_SUBDOMAIN.match(prefix))) or len(name) > 63 \
                or not LABEL_NAME.match(name):
            problems.append(f"{where}: label key {key!r}")
        if not isinstance(value, str) or len(value) > 63 or not LABEL_VALUE.match(value):
            problems.append(f"{where}: label {key}={value!r}")
    return problems


def object_problems(obj: dict[str, Any]) -> list[str]:
    meta = obj["metadata"]
    where = f"{obj['kind']} {meta['name']}"
    problems = label_problems(meta.get("labels") or {}, where)
    if len(meta["name"]) > 253 or not DNS_SUBDOMAIN.match(meta["name"]):
        problems.append(f"{where}: name is not a DNS-1123 subdomain")
    if obj["kind"] in ("Pod", "Service") and (len(meta["name"]) > 63 or not DNS_LABEL.match(meta["name"])):
        problems.append(f"{where}: name is not a DNS-1123 label")
    return problems


def pod_spec_problems(spec: dict[str, Any], where: str) -> list[str]:
    problems = label_problems(spec.get("nodeSelector") or {}, f"{where} nodeSelector")
    for key in ("hostname", "subdomain"):
        if key in spec and (len(spec[key]) > 63 or not DNS_LABEL.match(spec[key])):
            problems.append(f"{where}: {key} {spec[key]!r}")
    for container in spec["containers"]:
        mounts = [m["mountPath"] for m in container.get("volumeMounts", [])]
        if len(set(mounts)) != len(mounts) or not all(path.startswith("/") for path in mounts):
            problems.append(f"{where}: mount paths not unique and absolute: {mounts}")
        env_names = [e["name"] for e in container.get("env", [])]
        if len(set(env_names)) != len(env_names) or not all(ENV_NAME.match(n) for n in env_names):
            problems.append(f"{where}: env names {env_names}")
        resources = container.get("resources", {})
        for bucket in ("requests", "limits"):
            for key, value in resources.get(bucket, {}).items():
                if key == "nvidia.com/gpu":
                    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                        problems.append(f"{where}: GPU limit {value!r} is not a positive integer")
                elif not QUANTITY.match(str(value)):
                    problems.append(f"{where}: {bucket}.{key} {value!r} is not a quantity")
    return problems


# ---------------------------------------------------------------------------------------------------------------------


def minimal(**spec: Any) -> dict[str, Any]:
    return {"kind": "DistributedTraining", "metadata": {"name": "job", "namespace": "ml", "uid": "uid-1"},
            "spec": {"image": "img", "command": ["python", "train.py"], **spec}}


# Found by this property (each is accepted by the CRD schema, then refused by the API server when the operator
# creates the pods, so the job hangs in Pending while the operator retries every few seconds):
@example(minimal(scheduling={"nodeSelector": {"disk": "fast ssd"}}))  # nodeSelector values must be label values
@example(minimal(podTemplate={"metadata": {"labels": {"team": "ml ops"}}}))  # so must the template's labels
@example(minimal(checkpoint={"mountPath": "/tmp"}))  # kubetrain mounts /tmp itself: duplicate mountPath
@example(minimal(data={"mountPath": "//"}))  # "//" matches the CRD's ^/.+ and becomes "" after rstrip("/")
@settings(max_examples=300, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(bodies())
def test_any_schema_valid_spec_builds_valid_objects_or_names_the_field(body: dict[str, Any]) -> None:
    try:
        job = parse_job(body)
    except SpecError as error:
        assert FIELD.match(error.field), f"SpecError without a field path: {error.field!r}"
        assert str(error).startswith(error.field) and error.message
        return
    spec = job.spec
    last = spec.workers - 1
    workers = [build_worker_pod(job, index) for index in sorted({0, last})]
    launcher = build_launcher_job(job)
    objects = [*workers, launcher, build_hosts_configmap(job), build_service(job), build_ssh_secret(job, KEYS)]
    problems = [p for obj in objects for p in object_problems(obj)]
    template = launcher["spec"]["template"]
    problems += label_problems(template["metadata"]["labels"], "launcher pod template")
    problems += pod_spec_problems(template["spec"], "launcher pod")
    for pod in workers:
        problems += pod_spec_problems(pod["spec"], pod["metadata"]["name"])
    assert not problems, problems

    for pod in workers:
        gpu = pod["spec"]["containers"][0].get("resources", {}).get("limits", {}).get("nvidia.com/gpu")
        assert gpu == (spec.resources.gpus_per_worker or None)
    assert "nvidia.com/gpu" not in str(template["spec"]["containers"][0].get("resources"))
    assert template["spec"]["containers"][0]["command"][1:] == list(body["spec"]["command"])
    hostfile = build_hosts_configmap(job)["data"]["hostfile"].splitlines()
    assert len(hostfile) == spec.workers
    assert hostfile[last] == f"{job.name}-worker-{last}.{job.name}.{job.namespace}.svc slots={spec.slots_per_worker}"


def test_the_generator_reaches_both_outcomes() -> None:
    """The property is not vacuous: the generated bodies include specs that parse and specs that are refused."""
    outcomes: set[str] = set()

    @settings(max_examples=200, deadline=None, database=None)
    @given(bodies())
    def collect(body: dict[str, Any]) -> None:
        try:
            parse_job(body)
            outcomes.add("parsed")
        except SpecError:
            outcomes.add("refused")

    collect()
    assert outcomes == {"parsed", "refused"}


def test_checks_catch_what_the_api_server_refuses() -> None:
    assert label_problems({"team": "ml ops"}, "x") and label_problems({"bad key!": "v"}, "x")
    assert not label_problems({"app.kubernetes.io/name": "kubetrain", "empty": ""}, "x")
    assert pod_spec_problems({"containers": [{"volumeMounts": [{"mountPath": "/tmp"}, {"mountPath": "/tmp"}]}]}, "x")
    assert pod_spec_problems({"containers": [{"resources": {"limits": {"nvidia.com/gpu": "1"}}}]}, "x")
    assert pod_spec_problems({"containers": [{"volumeMounts": [{"mountPath": ""}]}]}, "x")
    assert not QUANTITY.match("1.2.3") and QUANTITY.match("500m") and QUANTITY.match("16Gi")
