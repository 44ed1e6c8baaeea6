"""A control plane for a session fixture: started once, a failed start fails the tests that need it (naming what
could not start), stopped at the end of the session."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.cluster import ControlPlane, ControlPlaneError


def session_plane(workdir: Path, what: str, **options: Any) -> Iterator[ControlPlane]:
    """The body of a yield fixture: `yield from session_plane(tmp_path_factory.mktemp("plane"), "the test control
    plane")`; `options` go to `ControlPlane.start`."""
    try:
        plane = ControlPlane.start(workdir, **options)
    except ControlPlaneError as error:
        pytest.fail(f"could not start {what}: {error}", pytrace=False)
    try:
        yield plane
    finally:
        plane.stop()
