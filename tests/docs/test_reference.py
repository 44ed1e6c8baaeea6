"""docs/reference.md against the CRD, the one place the spec's fields are written: its table names every field of
the spec, and every field it names is one the CRD has."""

from __future__ import annotations

import re
from typing import Any

from tests.support.documented import crd_spec_schema, table_after


def documented_fields() -> set[str]:
    """The field paths of the reference table's first column: `a.b`, `.c` means a.b and a.c."""
    fields = set()
    for cells in table_after("docs/reference.md", "The DistributedTraining resource", "| field |"):
        parent = ""
        for name in re.findall(r"`([^`]+)`", cells[0]):
            if name.startswith("."):
                name = parent + name
            parent = name.rsplit(".", 1)[0] if "." in name else ""
            fields.add(name)
    return fields


def schema_fields(schema: dict[str, Any], prefix: str = "") -> set[str]:
    found = set()
    for key, value in (schema.get("properties") or {}).items():
        found.add(prefix + key)
        found |= schema_fields(value, f"{prefix}{key}.")
    return found


def test_the_reference_names_every_field_of_the_spec() -> None:
    documented, known = documented_fields(), schema_fields(crd_spec_schema())
    assert documented, "docs/reference.md's field table is gone"
    top = {field.split(".")[0] for field in documented}
    missing = sorted(set(crd_spec_schema()["properties"]) - top)
    assert not missing, f"spec fields of the CRD that docs/reference.md's table does not name: {missing}"
    spec = crd_spec_schema()["properties"]
    parents = {field.split(".")[0] for field in documented if "." in field}  # objects documented field by field
    missing = sorted(f"{parent}.{key}" for parent in parents for key in spec[parent].get("properties", {})
                     if f"{parent}.{key}" not in documented)
    assert not missing, f"fields of the CRD that docs/reference.md's table does not name: {missing}"
    unknown = sorted(documented - known)
    assert not unknown, f"docs/reference.md's table names fields the CRD does not have: {unknown}"
