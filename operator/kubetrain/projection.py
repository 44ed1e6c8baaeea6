"""What the operator keeps of an object it watches: the fields its decisions read, nothing else.

A shape names the keys to keep: `True` keeps a value whole, a nested shape keeps those keys of a mapping, or of each
mapping in a list. Everything else (managedFields, pod specs, a Secret's key material) never enters the cache.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Union

Shape = Mapping[str, Union[bool, "Shape"]]

# What every cached object keeps of its metadata: identity, ownership, the job's labels, its lifecycle.
METADATA: Shape = {
    "name": True, "namespace": True, "uid": True, "resourceVersion": True, "generation": True,
    "creationTimestamp": True, "deletionTimestamp": True, "labels": True, "ownerReferences": True,
}


def project(shape: Shape, obj: Any) -> Any:
    """The parts of `obj` that `shape` names (a copy: the cache never shares structure with a watch event)."""
    if isinstance(obj, list):
        return [project(shape, item) for item in obj]
    if not isinstance(obj, Mapping):
        return obj
    kept: dict[str, Any] = {}
    for key, sub in shape.items():
        if key not in obj:
            continue
        value = obj[key]
        kept[key] = _whole(value) if sub is True else project(sub, value)  # type: ignore[arg-type]
    return kept


def _whole(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {key: _whole(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_whole(item) for item in value]
    return value
