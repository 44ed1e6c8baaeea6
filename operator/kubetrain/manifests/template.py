"""Merge the user's spec.podTemplate (the escape hatch) into a pod template kubetrain built."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from kubetrain.contract import CONTAINER_NAMES

# Lists whose entries are matched by name (ours first, the user's fields merged in); other lists are appended.
_KEYED_LISTS = {"containers", "initContainers", "volumes", "env", "volumeMounts", "ports"}


def merge_pod_template(base: Mapping[str, Any], overlay: Mapping[str, Any]) -> dict[str, Any]:
    """Deep-merge `overlay` ({metadata, spec}) into `base`.

    The overlay's metadata adds labels and annotations only, and kubetrain's own labels win. The rest of the
    metadata (namespace, name, generateName, ownerReferences, finalizers) is the base's, whatever the overlay says:
    a pod stays in its job's namespace, under its name, owned by its job. A container named for a role (worker,
    launcher) changes that role's container and is left out of the other pods; a container of any other name (a
    sidecar) is added to every pod."""
    merged = _merge(copy.deepcopy(dict(base)), {"spec": overlay.get("spec") or {}})
    base_meta = base.get("metadata") or {}
    extra = overlay.get("metadata") or {}
    meta = merged.setdefault("metadata", {})
    labels = {**(extra.get("labels") or {}), **(base_meta.get("labels") or {})}
    annotations = {**(base_meta.get("annotations") or {}), **(extra.get("annotations") or {})}
    for key, value in (("labels", labels), ("annotations", annotations)):
        if value:
            meta[key] = copy.deepcopy(value)
    return merged


def _merge(base: dict[str, Any], overlay: Mapping[str, Any]) -> dict[str, Any]:
    for key, value in overlay.items():
        current = base.get(key)
        if isinstance(current, dict) and isinstance(value, Mapping):
            base[key] = _merge(current, value)
        elif isinstance(current, list) and isinstance(value, list):
            base[key] = _merge_list(key, current, value)
        else:
            base[key] = copy.deepcopy(value)
    return base


def _merge_list(key: str, current: list[Any], extra: list[Any]) -> list[Any]:
    if key not in _KEYED_LISTS:
        return [*current, *copy.deepcopy(extra)]
    result = list(current)
    positions = {item.get("name"): i for i, item in enumerate(result) if isinstance(item, dict)}
    for item in extra:
        name = item.get("name") if isinstance(item, Mapping) else None
        if name in positions:
            result[positions[name]] = _merge(result[positions[name]], item)
        elif key == "containers" and name in CONTAINER_NAMES:
            continue  # the main container of another role's pod
        else:
            result.append(copy.deepcopy(item))
    return result
