"""SYNTHETIC jet data in the UCluster HDF5 layout, for tests and demos (the real LHC samples cannot be downloaded here).

These are not simulated collisions: each jet is built from a few "prongs" (2 for W- and Z-like jets, 3 for top-like
jets) at the opening angle a decay of that mass would give, with particles sprayed around each prong. The three
classes differ in mass, prong count, particle multiplicity and jet charge, so a network can learn to separate them.

Layout written (the reference's): `data` (N, points, 8) float32 particle features, zero-padded, sorted by pT;
`pid` (N,) int32 class of the pretext task = the jet's reconstructed mass bin (`num_categories` bins);
`label` (N, 3) uint8 one-hot true jet type (W, Z, top) that cluster accuracy is measured against.
Particle features: 0 delta-eta and 1 delta-phi to the jet axis, 2 log(pT / jet pT), 3 log(E / jet E), 4 log pT,
5 log E, 6 delta-R to the jet axis, 7 electric charge.

    python -m ucluster.synthetic /data/ucluster --train-jets 20000 --test-jets 5000 --files 2
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence
from dataclasses import dataclass

import h5py
import numpy as np

NUM_FEATURES = 8
JET_TYPES = ("W", "Z", "top")


@dataclass(frozen=True)
class JetType:
    mass: float  # GeV
    mass_width: float
    prongs: int
    multiplicity: float  # mean number of particles
    charge: int  # net electric charge magnitude of the jet


JET_PROPERTIES = (
    JetType(mass=80.4, mass_width=4.0, prongs=2, multiplicity=34.0, charge=1),
    JetType(mass=91.2, mass_width=4.0, prongs=2, multiplicity=40.0, charge=0),
    JetType(mass=172.8, mass_width=8.0, prongs=3, multiplicity=60.0, charge=1),
)
MASS_RANGE = (40.0, 240.0)  # GeV; the pretext classes are equal-width bins of this range (edges clipped)


def _prong_axes(rng: np.random.Generator, mass: float, jet_pt: float, fractions: np.ndarray) -> np.ndarray:
    """(prongs, 2) (eta, phi) offsets of the prong axes: opening angle ~ m / (pT sqrt(z (1 - z))), pT-balanced."""
    prongs = len(fractions)
    angle = rng.uniform(0.0, 2.0 * np.pi)
    directions = angle + 2.0 * np.pi * np.arange(prongs) / prongs + rng.normal(0.0, 0.3, prongs)
    distances = mass / (jet_pt * np.sqrt(fractions * (1.0 - fractions))) / prongs
    axes = np.stack([np.cos(directions), np.sin(directions)], axis=1) * distances[:, None]
    return axes - (fractions[:, None] * axes).sum(axis=0)  # the pT-weighted centre is the jet axis


def make_jet(rng: np.random.Generator, jet_type: int, num_points: int) -> tuple[np.ndarray, float]:
    """One jet: (num_points, 8) features (zero-padded, pT-ordered) and its reconstructed mass."""
    props = JET_PROPERTIES[jet_type]
    jet_pt = rng.uniform(500.0, 600.0)
    jet_eta = rng.uniform(-2.0, 2.0)
    mass = max(rng.normal(props.mass, props.mass_width), 20.0)
    fractions = rng.dirichlet(np.full(props.prongs, 4.0))
    axes = _prong_axes(rng, mass, jet_pt, fractions)

    count = int(np.clip(rng.poisson(props.multiplicity), props.prongs * 3, num_points))
    prong_of = rng.choice(props.prongs, size=count, p=fractions)
    prong_of[: props.prongs] = np.arange(props.prongs)  # every prong gets at least one particle
    pt = np.empty(count)
    for prong in range(props.prongs):
        members = prong_of == prong
        pt[members] = jet_pt * fractions[prong] * rng.dirichlet(np.full(members.sum(), 0.7))
    spread = 0.01 + 0.03 / np.sqrt(np.maximum(pt, 1e-3) / 10.0)  # softer particles spread wider
    eta = jet_eta + axes[prong_of, 0] + rng.normal(0.0, 1.0, count) * spread
    phi = axes[prong_of, 1] + rng.normal(0.0, 1.0, count) * spread
    pt = np.maximum(pt, 1e-3)

    energy = pt * np.cosh(eta)
    px, py, pz = pt * np.cos(phi), pt * np.sin(phi), pt * np.sinh(eta)
    jet_e, jet_px, jet_py, jet_pz = energy.sum(), px.sum(), py.sum(), pz.sum()
    reco_mass = float(np.sqrt(max(jet_e**2 - jet_px**2 - jet_py**2 - jet_pz**2, 0.0)))
    axis_eta = np.arcsinh(jet_pz / np.hypot(jet_px, jet_py))
    axis_phi = np.arctan2(jet_py, jet_px)
    reco_pt = np.hypot(jet_px, jet_py)

    charge = rng.choice([-1.0, 0.0, 1.0], size=count, p=[0.3, 0.4, 0.3])
    if props.charge:  # shift the net charge of W- and top-like jets to +-1
        sign = rng.choice([-1.0, 1.0])
        neutral = np.flatnonzero(charge == 0.0)
        if neutral.size:
            charge[neutral[0]] = sign
    delta_eta = eta - axis_eta
    delta_phi = np.mod(phi - axis_phi + np.pi, 2.0 * np.pi) - np.pi
    features = np.stack(
        [
            delta_eta,
            delta_phi,
            np.log(pt / reco_pt),
            np.log(energy / jet_e),
            np.log(pt),
            np.log(energy),
            np.hypot(delta_eta, delta_phi),
            charge,
        ],
        axis=1,
    )
    jet = np.zeros((num_points, NUM_FEATURES), dtype=np.float32)
    jet[:count] = features[np.argsort(-pt)]
    return jet, reco_mass


def mass_category(masses: np.ndarray, num_categories: int) -> np.ndarray:
    """Pretext class: index of the equal-width MASS_RANGE bin, masses outside the range clipped to the end bins."""
    low, high = MASS_RANGE
    bins = np.floor((np.asarray(masses) - low) / (high - low) * num_categories).astype(np.int64)
    return np.clip(bins, 0, num_categories - 1).astype(np.int32)


def make_jets(
    rng: np.random.Generator, count: int, num_points: int = 100, num_categories: int = 20
) -> dict[str, np.ndarray]:
    """`count` jets with balanced random types: {'data', 'pid', 'label'} in the HDF5 layout."""
    types = rng.integers(0, len(JET_TYPES), size=count)
    data = np.zeros((count, num_points, NUM_FEATURES), dtype=np.float32)
    masses = np.zeros(count)
    for index, jet_type in enumerate(types):
        data[index], masses[index] = make_jet(rng, int(jet_type), num_points)
    label = np.eye(len(JET_TYPES), dtype=np.uint8)[types]
    return {"data": data, "pid": mass_category(masses, num_categories), "label": label}


def write_file(path: str, arrays: dict[str, np.ndarray]) -> None:
    """Write one HDF5 file in the UCluster layout (with a note that it is synthetic)."""
    with h5py.File(path, "w") as handle:
        for name, values in arrays.items():
            handle.create_dataset(name, data=values, chunks=True)
        handle.attrs["synthetic"] = "kubetrain ucluster.synthetic: synthetic W/Z/top-like jets, not LHC data"
        handle.attrs["label_names"] = ",".join(JET_TYPES)


def write_split(
    out_dir: str, split: str, jets: int, files: int, rng: np.random.Generator, num_points: int, num_categories: int
) -> list[str]:
    """Write `files` HDF5 files with `jets` jets in total plus `<split>_files.txt` listing them; returns the names."""
    names = []
    per_file = np.full(files, jets // files)
    per_file[: jets % files] += 1
    for index, count in enumerate(per_file):
        name = f"{split}_{index}.h5"
        write_file(os.path.join(out_dir, name), make_jets(rng, int(count), num_points, num_categories))
        names.append(name)
    with open(os.path.join(out_dir, f"{split}_files.txt"), "w") as listing:
        listing.write("".join(f"{name}\n" for name in names))
    return names


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m ucluster.synthetic", description=__doc__.split("\n\n")[0])
    parser.add_argument("out_dir", help="directory to write train_*.h5, test_*.h5, train_files.txt, test_files.txt")
    parser.add_argument("--train-jets", type=int, default=20000, help="jets in the training split (default 20000)")
    parser.add_argument("--test-jets", type=int, default=5000, help="jets in the test split (default 5000)")
    parser.add_argument("--files", type=int, default=2, help="HDF5 files per split (default 2)")
    parser.add_argument("--num-points", type=int, default=100, help="particles per jet, zero-padded (default 100)")
    parser.add_argument("--ncat", type=int, default=20, help="pretext classes = jet-mass bins (default 20)")
    parser.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    for flag, value in (("--train-jets", args.train_jets), ("--test-jets", args.test_jets), ("--files", args.files)):
        if value < 1:
            raise SystemExit(f"ucluster.synthetic: {flag} must be at least 1, got {value}")
    if args.num_points < 9:
        raise SystemExit(f"ucluster.synthetic: --num-points must be at least 9, got {args.num_points}")
    os.makedirs(args.out_dir, exist_ok=True)
    rng = np.random.default_rng(args.seed)
    for split, jets in (("train", args.train_jets), ("test", args.test_jets)):
        names = write_split(args.out_dir, split, jets, min(args.files, jets), rng, args.num_points, args.ncat)
        print(f"ucluster.synthetic: wrote {jets} synthetic {split} jets to {len(names)} file(s) in {args.out_dir}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
