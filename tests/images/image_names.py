"""The names images/build.sh gives kubetrain's images: kubetrain/<images/ directory, _ as ->:<chart appVersion>."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PROGRAMS = ("cifar_mixup", "ucluster", "mnist", "higgs")
IMAGES = ("base", "operator", "entrypoints", *PROGRAMS)
TAG = next(
    line.split(":", 1)[1].strip().strip('"')
    for line in (REPO / "charts" / "kubetrain" / "Chart.yaml").read_text().splitlines()
    if line.startswith("appVersion:")
)


def image_name(directory: str) -> str:
    return f"kubetrain/{directory.replace('_', '-')}:{TAG}"
