"""The gang schedulers of the control-plane tier: what they are called, how a pod joins a gang, and where
build-gang-schedulers.sh put them.

Two real schedulers, each started beside the default kube-scheduler by `ControlPlane.start(...,
gang_schedulers=...)` and each answering only pods whose `spec.schedulerName` names it:

- `COSCHEDULING`: scheduler-plugins' kube-scheduler, one profile `scheduler-plugins-scheduler` with the Coscheduling
  plugin, and scheduler-plugins' controller, which keeps PodGroup status (and so wakes the scheduler when a gang
  finishes). A gang is a `scheduling.x-k8s.io/v1alpha1` PodGroup; a pod joins it with the label
  `scheduling.x-k8s.io/pod-group: <group>`.
- `VOLCANO`: Volcano's vc-scheduler, scheduler name `volcano`. A gang is a `scheduling.volcano.sh/v1beta1` PodGroup in
  a Queue (the scheduler creates `default`); a pod joins it with the annotation `scheduling.k8s.io/group-name: <group>`.

The builders here are pure: they return manifests and configuration files as dicts and strings.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parents[1] / "controlplane"  # where its build script is
BUILD_SCRIPT = HERE / "build-gang-schedulers.sh"

COSCHEDULING = "coscheduling"
VOLCANO = "volcano"
GANG_SCHEDULERS = (COSCHEDULING, VOLCANO)
BINARIES = {COSCHEDULING: ("scheduler-plugins-controller", "scheduler-plugins"), VOLCANO: ("vc-scheduler",)}
CRDS = {
    COSCHEDULING: ("scheduling.x-k8s.io_podgroups.yaml", "scheduling.x-k8s.io_elasticquotas.yaml"),
    VOLCANO: ("scheduling.volcano.sh_podgroups.yaml", "scheduling.volcano.sh_queues.yaml"),
}

COSCHEDULING_SCHEDULER_NAME = "scheduler-plugins-scheduler"
COSCHEDULING_POD_GROUP_API = "scheduling.x-k8s.io/v1alpha1"
COSCHEDULING_POD_GROUP_LABEL = "scheduling.x-k8s.io/pod-group"
# How long a gang's first pods hold their reservations while the rest are placed (scheduler-plugins' default: 60 s).
# podGroupBackoffSeconds keeps its default, 0: with a backoff, a gang turned away while another gang's pods were
# finishing one by one failed PreFilter ("failed recently") on the last of those events, and Coscheduling retries only
# on Pod adds and PodGroup changes, so it waited for the scheduler's 5-minute flush of unschedulable pods.
COSCHEDULING_PERMIT_WAITING_SECONDS = 10

VOLCANO_SCHEDULER_NAME = "volcano"
VOLCANO_POD_GROUP_API = "scheduling.volcano.sh/v1beta1"
VOLCANO_GROUP_ANNOTATION = "scheduling.k8s.io/group-name"
VOLCANO_DEFAULT_QUEUE = "default"
# Volcano's own default configuration (pkg/scheduler/util.go DefaultSchedulerConf), written out so a reader sees it:
# `enqueue` admits a PodGroup, `allocate` places a whole gang or nothing (the gang plugin), `backfill` the rest.
VOLCANO_SCHEDULER_CONF = """\
actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
- plugins:
  - name: overcommit
  - name: drf
  - name: predicates
  - name: proportion
  - name: nodeorder
"""
# ResourceTopology (on by default) watches Volcano's Numatopology CRD, which nothing here uses.
VOLCANO_FEATURE_GATES = "ResourceTopology=false"


def scheduler_name(scheduler: str) -> str:
    """The `spec.schedulerName` a pod sets to be placed by `scheduler` (COSCHEDULING or VOLCANO)."""
    return {COSCHEDULING: COSCHEDULING_SCHEDULER_NAME, VOLCANO: VOLCANO_SCHEDULER_NAME}[check_scheduler(scheduler)]


def check_scheduler(scheduler: str) -> str:
    if scheduler not in GANG_SCHEDULERS:
        raise ValueError(f"unknown gang scheduler {scheduler!r}; choose one of {', '.join(GANG_SCHEDULERS)}")
    return scheduler


def pod_group_manifest(scheduler: str, name: str, min_member: int,
                       min_resources: dict[str, str] | None = None) -> dict[str, Any]:
    """The PodGroup of `scheduler` that holds back its pods until `min_member` of them can be placed at once."""
    spec: dict[str, Any] = {"minMember": min_member}
    if min_resources:
        spec["minResources"] = min_resources
    if check_scheduler(scheduler) == COSCHEDULING:
        return {"apiVersion": COSCHEDULING_POD_GROUP_API, "kind": "PodGroup", "metadata": {"name": name},
                "spec": spec}
    return {"apiVersion": VOLCANO_POD_GROUP_API, "kind": "PodGroup", "metadata": {"name": name},
            "spec": {**spec, "queue": VOLCANO_DEFAULT_QUEUE}}


def join_pod_group(scheduler: str, pod: dict[str, Any], group: str) -> dict[str, Any]:
    """A copy of `pod` that `scheduler` places as a member of PodGroup `group`."""
    metadata = dict(pod.get("metadata", {}))
    if check_scheduler(scheduler) == COSCHEDULING:
        metadata["labels"] = {**metadata.get("labels", {}), COSCHEDULING_POD_GROUP_LABEL: group}
    else:
        metadata["annotations"] = {**metadata.get("annotations", {}), VOLCANO_GROUP_ANNOTATION: group}
    return {**pod, "metadata": metadata, "spec": {**pod["spec"], "schedulerName": scheduler_name(scheduler)}}


def coscheduling_config(kubeconfig: Path) -> dict[str, Any]:
    """scheduler-plugins' KubeSchedulerConfiguration: one profile, Coscheduling at every extension point it has and
    as the only queue sort (so a gang's pods are taken one after another)."""
    return {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "leaderElection": {"leaderElect": False},
        "clientConnection": {"kubeconfig": str(kubeconfig)},
        "profiles": [{
            "schedulerName": COSCHEDULING_SCHEDULER_NAME,
            "plugins": {
                "multiPoint": {"enabled": [{"name": "Coscheduling"}]},
                "queueSort": {"enabled": [{"name": "Coscheduling"}], "disabled": [{"name": "*"}]},
            },
            "pluginConfig": [{"name": "Coscheduling",
                              "args": {"permitWaitingTimeSeconds": COSCHEDULING_PERMIT_WAITING_SECONDS}}],
        }],
    }


def build_dir() -> Path:
    """Where build-gang-schedulers.sh put `bin/` and `crds/` (KUBETRAIN_GANG_SCHEDULERS_DIR overrides)."""
    override = os.environ.get("KUBETRAIN_GANG_SCHEDULERS_DIR")
    if override:
        return Path(override)
    result = subprocess.run([str(BUILD_SCRIPT), "--print-bin-dir"], capture_output=True, text=True, check=True)
    return Path(result.stdout.strip()).parent


def missing_files(directory: Path, scheduler: str) -> list[str]:
    """The files of `scheduler` that build-gang-schedulers.sh has not (yet) put into `directory`."""
    wanted = [*(f"bin/{binary}" for binary in BINARIES[scheduler]), *(f"crds/{crd}" for crd in CRDS[scheduler])]
    return [path for path in wanted if not (directory / path).is_file()]
