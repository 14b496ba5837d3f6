"""A real model's heads through the three theories (composes ``core`` and the science packages).

>>> import attnlab as al                                    # doctest: +SKIP
>>> diag = al.diagnose.diagnose(al.models.load("minilm"))   # weights-only diagnostics
>>> diag.layers[0]["hdi_k"], diag.layers[0]["hdi_null"]
"""

from __future__ import annotations

from attnlab.diagnose.entropy import AttentionEntropy, attention_entropy
from attnlab.diagnose.flow import FlowDefects, RadialDominance, cross_products, flow_defects, radial_dominance
from attnlab.diagnose.model import SENTENCES, SUBSPACES, Diagnosis, diagnose, ov_factors
from attnlab.diagnose.spectra import QKSpectrum, bulk_edge_ratio, energy_rank, qk_spectra

__all__ = [
    "SENTENCES",
    "SUBSPACES",
    "AttentionEntropy",
    "Diagnosis",
    "FlowDefects",
    "QKSpectrum",
    "RadialDominance",
    "attention_entropy",
    "bulk_edge_ratio",
    "cross_products",
    "diagnose",
    "energy_rank",
    "flow_defects",
    "ov_factors",
    "qk_spectra",
    "radial_dominance",
]
