"""SYNTHETIC events in the Higgs challenge CSV format, for tests and demos (the real file cannot be downloaded here).

Same columns, order, -999.0 convention and number formatting as the challenge's training.csv, but the physics is a toy:
tau, lepton, missing energy and up to three jets with simple spectra; signal events (about a third) have a
DER_mass_MMC peak near 125 GeV, harder taus and more forward jet pairs, background a Z-like peak near 91 GeV on a broad
continuum. Kinematic DER_* columns are computed from the PRI_* ones the way their names say, so they are consistent.

    python -m higgs.synthetic /data/higgs/training.csv --events 20000
"""

from __future__ import annotations

import argparse
import csv
import os
from collections.abc import Sequence

import numpy as np

from higgs.columns import CSV_COLUMNS, MISSING_VALUE

SIGNAL_FRACTION = 0.34  # about the challenge's share of signal events


def _visible_mass(pt1, eta1, phi1, pt2, eta2, phi2):
    return np.sqrt(np.maximum(2.0 * pt1 * pt2 * (np.cosh(eta1 - eta2) - np.cos(phi1 - phi2)), 0.0))


def _wrap(phi):
    return np.mod(phi + np.pi, 2.0 * np.pi) - np.pi


def make_events(rng: np.random.Generator, count: int) -> dict[str, np.ndarray]:
    """Columns of `count` synthetic events (float arrays; Label as 's'/'b' strings)."""
    signal = rng.random(count) < SIGNAL_FRACTION
    n = count

    def angle():
        return rng.uniform(-np.pi, np.pi, n)

    tau_pt = 20.0 + rng.exponential(np.where(signal, 32.0, 18.0))
    tau_eta, tau_phi = rng.uniform(-2.5, 2.5, n), angle()
    lep_pt = 20.0 + rng.exponential(np.where(signal, 22.0, 16.0))
    lep_eta, lep_phi = rng.uniform(-2.5, 2.5, n), angle()
    met, met_phi = rng.exponential(np.where(signal, 35.0, 25.0)), angle()
    jet_num = np.where(signal, rng.choice(4, n, p=[0.30, 0.30, 0.28, 0.12]),
                       rng.choice(4, n, p=[0.45, 0.32, 0.16, 0.07]))
    lead_pt, lead_eta, lead_phi = 30.0 + rng.exponential(60.0, n), rng.uniform(-4.5, 4.5, n), angle()
    gap = np.where(signal, rng.normal(3.5, 1.2, n), rng.normal(1.5, 1.0, n))  # VBF-like signal: forward jet pairs
    sub_pt = 30.0 + rng.exponential(30.0, n)
    sub_eta, sub_phi = np.clip(lead_eta - np.sign(lead_eta + 1e-9) * np.abs(gap), -4.5, 4.5), angle()
    third_pt = np.where(jet_num > 2, 30.0 + rng.exponential(20.0, n), 0.0)
    jet_all_pt = np.where(jet_num > 0, lead_pt, 0.0) + np.where(jet_num > 1, sub_pt, 0.0) + third_pt

    mmc = np.where(signal, rng.normal(125.0, 14.0, n),
                   np.where(rng.random(n) < 0.5, rng.normal(91.0, 12.0, n), 60.0 + rng.exponential(70.0, n)))
    mmc = np.where(rng.random(n) < np.where(signal, 0.05, 0.2), MISSING_VALUE, np.maximum(mmc, 10.0))

    px = tau_pt * np.cos(tau_phi) + lep_pt * np.cos(lep_phi) + met * np.cos(met_phi)
    py = tau_pt * np.sin(tau_phi) + lep_pt * np.sin(lep_phi) + met * np.sin(met_phi)
    two_jets = jet_num >= 2
    delta_eta_jj = np.abs(lead_eta - sub_eta)
    mass_jj = _visible_mass(lead_pt, lead_eta, lead_phi, sub_pt, sub_eta, sub_phi)
    jets_px = np.where(jet_num > 0, lead_pt * np.cos(lead_phi), 0.0) + np.where(two_jets, sub_pt * np.cos(sub_phi), 0)
    jets_py = np.where(jet_num > 0, lead_pt * np.sin(lead_phi), 0.0) + np.where(two_jets, sub_pt * np.sin(sub_phi), 0)
    centre = (lead_eta + sub_eta) / 2.0
    lep_centrality = np.exp(-4.0 / np.maximum(delta_eta_jj, 1e-3) ** 2 * (lep_eta - centre) ** 2)

    def when(condition, values):
        return np.where(condition, values, MISSING_VALUE)

    columns = {
        "EventId": 100000 + np.arange(n),
        "DER_mass_MMC": mmc,
        "DER_mass_transverse_met_lep": np.sqrt(2.0 * lep_pt * met * (1.0 - np.cos(lep_phi - met_phi))),
        "DER_mass_vis": _visible_mass(tau_pt, tau_eta, tau_phi, lep_pt, lep_eta, lep_phi),
        "DER_pt_h": np.hypot(px, py),
        "DER_deltaeta_jet_jet": when(two_jets, delta_eta_jj),
        "DER_mass_jet_jet": when(two_jets, mass_jj),
        "DER_prodeta_jet_jet": when(two_jets, lead_eta * sub_eta),
        "DER_deltar_tau_lep": np.hypot(tau_eta - lep_eta, _wrap(tau_phi - lep_phi)),
        "DER_pt_tot": np.hypot(px + jets_px, py + jets_py),
        "DER_sum_pt": tau_pt + lep_pt + jet_all_pt,
        "DER_pt_ratio_lep_tau": lep_pt / tau_pt,
        "DER_met_phi_centrality": np.sqrt(2.0) * np.cos(_wrap(met_phi - (tau_phi + lep_phi) / 2.0)),
        "DER_lep_eta_centrality": when(two_jets, lep_centrality),
        "PRI_tau_pt": tau_pt, "PRI_tau_eta": tau_eta, "PRI_tau_phi": tau_phi,
        "PRI_lep_pt": lep_pt, "PRI_lep_eta": lep_eta, "PRI_lep_phi": lep_phi,
        "PRI_met": met, "PRI_met_phi": met_phi, "PRI_met_sumet": 100.0 + rng.exponential(150.0, n) + jet_all_pt,
        "PRI_jet_num": jet_num.astype(float),
        "PRI_jet_leading_pt": when(jet_num > 0, lead_pt),
        "PRI_jet_leading_eta": when(jet_num > 0, lead_eta),
        "PRI_jet_leading_phi": when(jet_num > 0, lead_phi),
        "PRI_jet_subleading_pt": when(two_jets, sub_pt),
        "PRI_jet_subleading_eta": when(two_jets, sub_eta),
        "PRI_jet_subleading_phi": when(two_jets, sub_phi),
        "PRI_jet_all_pt": jet_all_pt,
        "Weight": np.where(signal, rng.uniform(0.001, 0.005, n), rng.uniform(0.5, 5.0, n)),
        "Label": np.where(signal, "s", "b"),
    }
    assert tuple(columns) == CSV_COLUMNS
    return columns


def _format(name: str, value) -> str:
    if name == "Label":
        return str(value)
    if name in ("EventId", "PRI_jet_num"):
        return str(int(value))
    if value == MISSING_VALUE:
        return "-999.0"
    return f"{value:.3f}" if name != "Weight" else f"{value:.9g}"


def write_csv(path: str, columns: dict[str, np.ndarray]) -> None:
    """Write the columns as the challenge's comma-separated file with a header line."""
    directory = os.path.dirname(path)
    if directory:
        os.makedirs(directory, exist_ok=True)
    rows = len(columns["EventId"])
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(CSV_COLUMNS)
        for index in range(rows):
            writer.writerow([_format(name, columns[name][index]) for name in CSV_COLUMNS])


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m higgs.synthetic", description=__doc__.split("\n\n")[0])
    parser.add_argument("csv", help="CSV file to write")
    parser.add_argument("--events", type=int, default=20000, help="number of events (default 20000)")
    parser.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.events < 1:
        raise SystemExit(f"higgs.synthetic: --events must be at least 1, got {args.events}")
    write_csv(args.csv, make_events(np.random.default_rng(args.seed), args.events))
    print(f"higgs.synthetic: wrote {args.events} synthetic events to {args.csv}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
