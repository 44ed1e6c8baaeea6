"""Memory as data grows: peak RSS of one rank of a 2-rank job over one full pass of its block of a file and of a file
10x larger, through trainlib's pipeline, and through the naive whole-block load as a control that must grow.

Every rank holds the same amount (equal blocks), so rank 0 alone is measured, in a fresh process each time."""

from __future__ import annotations

from pathlib import Path

from . import processes
from .datasets import write_cifar_like
from .report import Row
from .stats import ratio

SECTION = "4 memory"
GROWTH = 10
FLAT = 1.10
RANKS = 2


def _peak_per_rank(data: Path, feed: str, out_dir: Path) -> int:
    out = out_dir / f"rss-{feed}-{data.stem}.json"
    processes.run("rss_pipeline", ["--data", str(data), "--rank", "0", "--size", str(RANKS), "--feed", feed,
                                   "--out", str(out)], threads=1)
    return processes.read_json(out)["peak_rss_bytes"]


def measure(workdir: Path, rows: int) -> list[Row]:
    small = write_cifar_like(workdir / "rss-1x.h5", rows, seed=3)
    large = write_cifar_like(workdir / f"rss-{GROWTH}x.h5", rows * GROWTH, seed=4)
    found = []
    for feed, name, target in (("hdf5", "trainlib pipeline", True), ("load", "control: whole block loaded", False)):
        before, after = _peak_per_rank(small, feed, workdir), _peak_per_rank(large, feed, workdir)
        growth = ratio(after, before)
        found.append(Row(
            SECTION, f"peak RSS per rank, {GROWTH}x data, {name}", growth, "x",
            target=f"<= {FLAT:.2f}" if target else "", meets=growth <= FLAT if target else None,
            detail=f"{before / 2**20:.0f} -> {after / 2**20:.0f} MiB for {rows // RANKS} -> "
                   f"{rows * GROWTH // RANKS} rows per rank",
            extra={"before_bytes": before, "after_bytes": after}))
    return found
