"""A DistributedTraining checked as the API server checks it on create, from the CRD alone (kubetrain.schema): its
defaults applied, then its OpenAPI schema (jsonschema) and list types, then its CEL rules (cel-python), in the API
server's words. Transition rules (those reading oldSelf) only judge updates, so they are skipped here."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any

import celpy
import jsonschema

from kubetrain.schema import crd_schema


@dataclass(frozen=True)
class Violation:
    """One rule the body breaks: `field` is its path (spec.command[0]), `message` the API server's words for it."""

    field: str
    message: str


@dataclass(frozen=True)
class _CelRule:
    program: Any  # celpy's compiled program
    message: str
    field_path: str  # the rule's fieldPath (".slotsPerWorker"), "" for the node itself


def defaulted(body: Mapping[str, Any]) -> dict[str, Any]:
    """`body` with the schema's defaults filled in, as the API server stores it."""
    result = copy.deepcopy(dict(body))
    _fill(result, crd_schema())
    return result


def violations(body: Mapping[str, Any]) -> list[Violation]:
    """What the API server refuses in `body` (already defaulted), schema first, then CEL rules; empty when none."""
    judged = {key: value for key, value in body.items() if key != "status"}  # status is the operator's to write
    found = list(dict.fromkeys(violation for error in _validator().iter_errors(judged)
                               for violation in _schema_violations(error)))
    found = found or list(_duplicates(judged, crd_schema(), ""))
    if found:
        return sorted(found, key=lambda v: v.field)
    return [violation for path, rules in _cel_rules() for where, node in _nodes(body, path, "")
            for violation in _judge(rules, where, node)]


def _fill(value: Any, schema: Mapping[str, Any]) -> None:
    if isinstance(value, dict):
        for key, sub in (schema.get("properties") or {}).items():
            if key not in value and "default" in sub:
                value[key] = copy.deepcopy(sub["default"])
            if key in value:
                _fill(value[key], sub)
        extra = schema.get("additionalProperties")
        if isinstance(extra, Mapping):
            for item in value.values():
                _fill(item, extra)
    elif isinstance(value, list) and "items" in schema:
        for item in value:
            _fill(item, schema["items"])


@cache
def _validator() -> jsonschema.protocols.Validator:
    schema = _as_json_schema(crd_schema())
    validator_class = jsonschema.validators.validator_for(schema, default=jsonschema.Draft4Validator)
    return validator_class(schema)


def _as_json_schema(schema: Mapping[str, Any]) -> dict[str, Any]:
    """The CRD's OpenAPI schema in JSON Schema terms: `nullable: true` allows null; the x-kubernetes-* keys are
    left out."""
    result: dict[str, Any] = {}
    for key, value in schema.items():
        if key in ("properties", "definitions"):
            result[key] = {name: _as_json_schema(sub) for name, sub in value.items()}
        elif key in ("items", "additionalProperties", "not") and isinstance(value, Mapping):
            result[key] = _as_json_schema(value)
        elif key in ("anyOf", "allOf", "oneOf"):
            result[key] = [_as_json_schema(sub) for sub in value]
        elif not key.startswith("x-kubernetes-") and key not in ("description", "default", "nullable"):
            result[key] = value
    if schema.get("nullable") and "type" in result:
        result["type"] = [result["type"], "null"]
    return result


def _where(path: Iterable[Any]) -> str:
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


def _shown(value: Any) -> str:
    """A value as the API server quotes it: strings in double quotes with escapes, booleans in lower case."""
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    return str(value).lower() if isinstance(value, bool) else str(value)


def _schema_violations(error: jsonschema.ValidationError) -> list[Violation]:
    """The API server's words for one schema error (apiextensions' validation of a custom resource)."""
    return [_schema_violation(error)] if error.validator != "required" else [
        Violation(f"{_where(error.absolute_path)}.{name}".lstrip("."), "Required value")
        for name in error.validator_value if name not in error.instance]  # every missing name, deduplicated above


def _schema_violation(error: jsonschema.ValidationError) -> Violation:
    field = _where(error.absolute_path)
    kind, limit, value = error.validator, error.validator_value, error.instance
    if kind == "enum":
        return Violation(field, f"Unsupported value: {_shown(value)}: supported values: "
                                + ", ".join(_shown(item) for item in limit))
    if kind == "maxLength":
        return Violation(field, f"Too long: may not be more than {limit} bytes")
    if kind == "maxItems":
        return Violation(field, f"Too many: {len(value)}: must have at most {limit} items")
    if kind == "type":
        expected = limit if isinstance(limit, str) else limit[0]
        return Violation(field, f'Invalid value: "{_json_type(value)}": {field} in body must be of type {expected}: '
                                f'"{_json_type(value)}"')
    words = {"minimum": "should be greater than or equal to {}", "maximum": "should be less than or equal to {}",
             "pattern": "should match '{}'", "minLength": "should be at least {} chars long",
             "minItems": "should have at least {} items"}.get(str(kind))
    if words is None:
        return Violation(field, error.message)
    shown = len(value) if kind == "minItems" else _shown(value)
    return Violation(field, f"Invalid value: {shown}: {field} in body {words.format(limit)}")


def _duplicates(value: Any, schema: Mapping[str, Any], where: str) -> Iterator[Violation]:
    """Items a list may hold once: `x-kubernetes-list-type: set` (equal items) and `map` (equal keys)."""
    if isinstance(value, list):
        kind, keys = schema.get("x-kubernetes-list-type"), schema.get("x-kubernetes-list-map-keys") or []
        seen: list[Any] = []
        for index, item in enumerate(value):
            identity = {key: item.get(key) for key in keys} if kind == "map" and isinstance(item, Mapping) else item
            if kind in ("map", "set") and identity in seen:
                yield Violation(f"{where}[{index}]", f"Duplicate value: {json.dumps(identity)}")
            seen.append(identity)
            yield from _duplicates(item, schema.get("items") or {}, f"{where}[{index}]")
    elif isinstance(value, Mapping):
        for key, sub in (schema.get("properties") or {}).items():
            if key in value:
                yield from _duplicates(value[key], sub, f"{where}.{key}" if where else key)


def _json_type(value: Any) -> str:
    for name, kind in (("boolean", bool), ("integer", int), ("number", float), ("string", str), ("array", list),
                       ("object", Mapping)):
        if isinstance(value, kind):
            return name
    return "null"


@cache
def _cel_rules() -> tuple[tuple[tuple[str, ...], tuple[_CelRule, ...]], ...]:
    """The CEL rules by the schema path of the node they guard: property names, "[]" for list items, "{}" for map
    values."""
    environment = celpy.Environment()
    rules: list[tuple[tuple[str, ...], tuple[_CelRule, ...]]] = []

    def walk(schema: Mapping[str, Any], path: tuple[str, ...]) -> None:
        here = tuple(_CelRule(environment.program(environment.compile(rule["rule"])),
                              rule.get("message") or f"failed rule: {rule['rule']}", rule.get("fieldPath", ""))
                     for rule in schema.get("x-kubernetes-validations") or [] if "oldSelf" not in rule["rule"])
        if here:
            rules.append((path, here))
        for name, sub in (schema.get("properties") or {}).items():
            if not (path == () and name == "status"):
                walk(sub, (*path, name))
        if isinstance(schema.get("items"), Mapping):
            walk(schema["items"], (*path, "[]"))
        if isinstance(schema.get("additionalProperties"), Mapping):
            walk(schema["additionalProperties"], (*path, "{}"))

    walk(crd_schema(), ())
    return tuple(rules)


def _nodes(value: Any, path: tuple[str, ...], where: str) -> Iterator[tuple[str, Any]]:
    """Each value at `path` in `value` (lists and maps fan out), with the field path the API server names."""
    if not path:
        yield where, value
        return
    step, rest = path[0], path[1:]
    if step == "[]" and isinstance(value, list):
        for index, item in enumerate(value):
            yield from _nodes(item, rest, f"{where}[{index}]")
    elif step == "{}" and isinstance(value, Mapping):
        for key, item in value.items():
            yield from _nodes(item, rest, f"{where}[{key}]")
    elif isinstance(value, Mapping) and step in value:
        yield from _nodes(value[step], rest, f"{where}.{step}" if where else step)


def _judge(rules: tuple[_CelRule, ...], where: str, node: Any) -> Iterator[Violation]:
    """The rules of one node; the value is shown as the API server shows it, by the node's type."""
    activation = {"self": celpy.json_to_cel(node)}
    for rule in rules:
        try:
            passed = bool(rule.program.evaluate(activation))
        except celpy.CELEvalError:  # a field the rule reads is missing: the API server fails the rule too
            passed = False
        if not passed and not (where or rule.field_path):  # the whole object's rules: their messages name fields
            yield Violation("", rule.message)
        elif not passed:
            field = f"{where}{rule.field_path}" if where else rule.field_path.lstrip(".")
            yield Violation(field, f'Invalid value: "{_json_type(node)}": {rule.message}')
