"""The training programs and kubetrain's image names, found where they are defined: a program is a package under
jobs/ that ships a job.yaml (images/build.sh and the Makefile find them the same way); images are named
kubetrain/<images/ directory, _ as ->:<chart appVersion>."""

from __future__ import annotations

from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
PROGRAMS = tuple(sorted(path.parent.name for path in (REPO / "jobs").glob("*/job.yaml")))
IMAGES = ("base", "operator", "entrypoints", *PROGRAMS)
TAG = str(yaml.safe_load((REPO / "charts" / "kubetrain" / "Chart.yaml").read_text())["appVersion"])


def image_name(directory: str) -> str:
    return f"kubetrain/{directory.replace('_', '-')}:{TAG}"
