"""The docs tier: every documented path taken literally, without a cluster. The documentation is every README.md, the
pages of docs/ and CHANGELOG.md (tests/support/documented.py): its YAML and the job files parsed and rendered, each
job's spec.command through its program's entry point, every `python -m` module's --help, the command lines that can
run here, and every link between its files. Every test in this directory is marked `docs`; the API server's side of
the YAML examples is tests/controlplane/test_documented_yaml.py."""

from __future__ import annotations

from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if HERE in Path(item.path).resolve().parents:
            item.add_marker(pytest.mark.docs)
