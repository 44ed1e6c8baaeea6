"""The CRD's OpenAPI schema (charts/kubetrain/crds, packaged as kubetrain/crd.yaml): which fields a
DistributedTraining may have. The local commands use it to refuse a field the API server would refuse as unknown."""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from functools import cache
from importlib import resources
from typing import Any

import yaml

from kubetrain.contract import VERSION

# Fields every object has; the CRD's schema leaves them to the API server.
_OBJECT_FIELDS = ("apiVersion", "kind", "metadata")


@cache
def crd_schema() -> Mapping[str, Any]:
    """The openAPIV3Schema of the served version, read once from the packaged CRD."""
    text = resources.files("kubetrain").joinpath("crd.yaml").read_text(encoding="utf-8")
    crd = yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))  # libyaml: 0.37 -> 0.06 CPU s
    version = next(v for v in crd["spec"]["versions"] if v["name"] == VERSION)
    return version["schema"]["openAPIV3Schema"]  # type: ignore[no-any-return]


def unknown_fields(body: Mapping[str, Any]) -> list[str]:
    """Each field of `body` that the schema does not know, as `path: unknown field ...` with the fields it knows."""
    return [f"{where}: {message}" for where, message in unknown_field_paths(body)]


def unknown_field_paths(body: Mapping[str, Any]) -> list[tuple[str, str]]:
    """Each field of `body` that the schema does not know, as (path, what to say about it)."""
    found: list[tuple[str, str]] = []
    _walk(body, crd_schema(), "", found, top=True)
    return found


def _walk(value: Any, schema: Mapping[str, Any], path: str, found: list[tuple[str, str]], top: bool = False) -> None:
    if isinstance(value, list) and "items" in schema:
        for index, item in enumerate(value):
            _walk(item, schema["items"], f"{path}[{index}]", found)
        return
    if not isinstance(value, Mapping) or schema.get("x-kubernetes-preserve-unknown-fields"):
        return
    if "additionalProperties" in schema:
        for key, item in value.items():
            _walk(item, schema["additionalProperties"], f"{path}[{key!r}]", found)
        return
    known = schema.get("properties") or {}
    for key, item in value.items():
        where = f"{path}.{key}" if path else str(key)
        if key in known:
            if not (top and key == "metadata"):
                _walk(item, known[key], where, found)
        elif not (top and key in _OBJECT_FIELDS):
            found.append((where, f"unknown field, the API server refuses it{_suggestion(str(key), known)}"))


def _suggestion(key: str, known: Mapping[str, Any]) -> str:
    close = difflib.get_close_matches(key, list(known), n=1)
    if close:
        return f"; did you mean {close[0]}?"
    return f"; known here: {', '.join(sorted(known))}"
