"""The public ATLAS Higgs Machine Learning Challenge 2014 CSV format (training.csv).

Columns: `EventId`, 30 features (13 derived `DER_*`, 17 primitive `PRI_*`), `Weight`, `Label` (`s` signal, `b`
background). Undefined values (e.g. jet quantities in events without jets) are -999.0. The CERN Open Data release adds
`KaggleSet` and `KaggleWeight`, which the converter ignores.
"""

from __future__ import annotations

EVENT_ID = "EventId"
WEIGHT = "Weight"
LABEL = "Label"
MISSING_VALUE = -999.0
FEATURE_PREFIXES = ("DER_", "PRI_")

DERIVED_FEATURES = (
    "DER_mass_MMC",
    "DER_mass_transverse_met_lep",
    "DER_mass_vis",
    "DER_pt_h",
    "DER_deltaeta_jet_jet",
    "DER_mass_jet_jet",
    "DER_prodeta_jet_jet",
    "DER_deltar_tau_lep",
    "DER_pt_tot",
    "DER_sum_pt",
    "DER_pt_ratio_lep_tau",
    "DER_met_phi_centrality",
    "DER_lep_eta_centrality",
)
PRIMITIVE_FEATURES = (
    "PRI_tau_pt",
    "PRI_tau_eta",
    "PRI_tau_phi",
    "PRI_lep_pt",
    "PRI_lep_eta",
    "PRI_lep_phi",
    "PRI_met",
    "PRI_met_phi",
    "PRI_met_sumet",
    "PRI_jet_num",
    "PRI_jet_leading_pt",
    "PRI_jet_leading_eta",
    "PRI_jet_leading_phi",
    "PRI_jet_subleading_pt",
    "PRI_jet_subleading_eta",
    "PRI_jet_subleading_phi",
    "PRI_jet_all_pt",
)
FEATURES = DERIVED_FEATURES + PRIMITIVE_FEATURES
CSV_COLUMNS = (EVENT_ID, *FEATURES, WEIGHT, LABEL)

# Label indices: the notebook's StringIndexer orders labels by frequency, and background is the more frequent one.
LABEL_INDEX = {"b": 0, "s": 1}
LABEL_NAMES = ("b", "s")
